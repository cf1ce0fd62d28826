//! Tables as files: typed columns written as CSV and as Parquet.
//!
//! The analysis writes `kernels.parquet`, a `Report` its `table.csv`,
//! `table.parquet` and `compare.csv`; both go through here. Parquet is
//! written with the `parquet` crate's column writer (no Arrow, no
//! dataframe library): these are small tables of a few typed columns.
//! Nulls are kept in both formats (an empty CSV field, a Parquet null).

use std::sync::Arc;

use parquet::basic::{ConvertedType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

/// One column's values, in row order.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<String>>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Bool(v) => v.len(),
            Column::Text(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn has_nulls(&self) -> bool {
        match self {
            Column::Int(v) => v.iter().any(Option::is_none),
            Column::Float(v) => v.iter().any(Option::is_none),
            Column::Bool(v) => v.iter().any(Option::is_none),
            Column::Text(v) => v.iter().any(Option::is_none),
        }
    }

    /// Row `i` as a CSV field (unquoted; empty for a null). Floats are
    /// written in their shortest exact form, always with a decimal point or
    /// exponent (`2.0`, `0.25`, `1e-7`), so a reader types them as floats.
    fn csv_field(&self, i: usize) -> String {
        match self {
            Column::Int(v) => v[i].map(|x| x.to_string()),
            Column::Float(v) => v[i].map(|x| format!("{x:?}")),
            Column::Bool(v) => v[i].map(|x| x.to_string()),
            Column::Text(v) => v[i].as_deref().map(inert),
        }
        .unwrap_or_default()
    }
}

/// Named columns of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }

    /// The table as CSV: a header line, then one line per row; a field is
    /// quoted when it holds a comma, a quote or a line break.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let line = |fields: Vec<String>, out: &mut String| {
            let quoted: Vec<String> = fields.into_iter().map(|f| csv_quote(&f)).collect();
            out.push_str(&quoted.join(","));
            out.push('\n');
        };
        line(self.names.iter().map(|n| inert(n)).collect(), &mut out);
        for i in 0..self.rows() {
            line(
                self.columns.iter().map(|c| c.csv_field(i)).collect(),
                &mut out,
            );
        }
        out
    }

    /// The table as a Parquet file (one row group; a column with nulls is
    /// optional, one without is required).
    pub fn parquet(&self) -> Result<Vec<u8>, String> {
        self.write_parquet().map_err(|e| e.to_string())
    }

    fn write_parquet(&self) -> parquet::errors::Result<Vec<u8>> {
        let fields = self
            .names
            .iter()
            .zip(&self.columns)
            .map(|(name, col)| {
                let (physical, converted) = match col {
                    Column::Int(_) => (PhysicalType::INT64, ConvertedType::NONE),
                    Column::Float(_) => (PhysicalType::DOUBLE, ConvertedType::NONE),
                    Column::Bool(_) => (PhysicalType::BOOLEAN, ConvertedType::NONE),
                    Column::Text(_) => (PhysicalType::BYTE_ARRAY, ConvertedType::UTF8),
                };
                let repetition = if col.has_nulls() {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                };
                Type::primitive_type_builder(name, physical)
                    .with_repetition(repetition)
                    .with_converted_type(converted)
                    .build()
                    .map(Arc::new)
            })
            .collect::<parquet::errors::Result<Vec<_>>>()?;
        let schema = Arc::new(
            Type::group_type_builder("schema")
                .with_fields(fields)
                .build()?,
        );
        let props = Arc::new(WriterProperties::builder().build());
        let mut bytes = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut bytes, schema, props)?;
        let mut group = writer.next_row_group()?;
        for col in &self.columns {
            let Some(mut w) = group.next_column()? else {
                break;
            };
            let nullable = col.has_nulls();
            match col {
                Column::Int(v) => {
                    let (values, levels) = split(v, |x| *x);
                    let levels = nullable.then_some(&levels[..]);
                    w.typed::<Int64Type>().write_batch(&values, levels, None)?;
                }
                Column::Float(v) => {
                    let (values, levels) = split(v, |x| *x);
                    let levels = nullable.then_some(&levels[..]);
                    w.typed::<DoubleType>().write_batch(&values, levels, None)?;
                }
                Column::Bool(v) => {
                    let (values, levels) = split(v, |x| *x);
                    let levels = nullable.then_some(&levels[..]);
                    w.typed::<BoolType>().write_batch(&values, levels, None)?;
                }
                Column::Text(v) => {
                    let (values, levels) = split(v, |s| ByteArray::from(s.as_str()));
                    let levels = nullable.then_some(&levels[..]);
                    w.typed::<ByteArrayType>()
                        .write_batch(&values, levels, None)?;
                }
            }
            w.close()?;
        }
        group.close()?;
        writer.close()?;
        Ok(bytes)
    }
}

/// The present values and every row's definition level (1 present, 0 null).
fn split<T, U>(v: &[Option<T>], f: impl Fn(&T) -> U) -> (Vec<U>, Vec<i16>) {
    let values = v.iter().flatten().map(f).collect();
    let levels = v.iter().map(|x| i16::from(x.is_some())).collect();
    (values, levels)
}

/// A text cell as a spreadsheet reads it as text: one that begins with
/// `=`, `+`, `-`, `@`, a tab or a carriage return (a formula to Excel,
/// LibreOffice and Google Sheets, which run `=HYPERLINK(…)` and the like)
/// gets a leading `'`, as OWASP's advice on CSV injection has it. Numbers
/// are never text cells here, so `-0.5` stays a number.
pub fn inert(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

fn csv_quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    fn table() -> Table {
        Table {
            names: ["i", "x", "s", "b"].map(String::from).to_vec(),
            columns: vec![
                Column::Int(vec![Some(1), None]),
                Column::Float(vec![Some(2.0), Some(0.5)]),
                Column::Text(vec![Some("a,\"b\"".into()), Some("3".into())]),
                Column::Bool(vec![Some(true), None]),
            ],
        }
    }

    fn read_back(t: &Table) -> SerializedFileReader<std::fs::File> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        std::fs::write(&path, t.parquet().unwrap()).unwrap();
        SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap()
    }

    #[test]
    fn csv_quotes_what_needs_it_and_leaves_nulls_empty() {
        assert_eq!(
            table().csv(),
            "i,x,s,b\n1,2.0,\"a,\"\"b\"\"\",true\n,0.5,3,\n"
        );
    }

    #[test]
    fn csv_text_that_a_spreadsheet_would_run_is_written_inert() {
        let t = Table {
            names: ["=n", "x", "s"].map(String::from).to_vec(),
            columns: vec![
                Column::Int(vec![Some(-3)]),
                Column::Float(vec![Some(-0.5)]),
                Column::Text(vec![Some("=HYPERLINK(\"http://x\",\"y\")".into())]),
            ],
        };
        assert_eq!(
            t.csv(),
            "'=n,x,s\n-3,-0.5,\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\n"
        );
        for (text, want) in [
            ("+1", "'+1"),
            ("-x", "'-x"),
            ("@a", "'@a"),
            ("\tb", "'\tb"),
            ("a=b", "a=b"),
        ] {
            assert_eq!(inert(text), want);
        }
    }

    #[test]
    fn parquet_reads_back_with_types_and_nulls() {
        let reader = read_back(&table());
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
        let rows: Vec<String> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().to_string())
            .collect();
        assert_eq!(
            rows,
            [
                r#"{i: 1, x: 2.0, s: "a,"b"", b: true}"#,
                r#"{i: null, x: 0.5, s: "3", b: null}"#
            ]
        );
        let schema = reader.metadata().file_metadata().schema_descr();
        assert_eq!(schema.column(0).name(), "i");
        assert!(
            !schema.column(1).self_type().is_optional(),
            "no nulls: required"
        );
        assert!(schema.column(0).self_type().is_optional());
    }

    #[test]
    fn column_names_may_hold_dots() {
        let t = Table {
            names: vec!["latency_ms.median".into()],
            columns: vec![Column::Float(vec![Some(1.5)])],
        };
        let reader = read_back(&t);
        let schema = reader.metadata().file_metadata().schema_descr();
        assert_eq!(schema.column(0).name(), "latency_ms.median");
    }
}
