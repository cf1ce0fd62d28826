//! Writing outputs: tables through polars (CSV, Parquet), and every file
//! through a temporary name and a rename, so a crash never leaves half a file.

use std::path::Path;

use polars::prelude::{Column, CsvWriter, DataFrame, ParquetWriter, SerWriter};

use super::cell::Cell;
use crate::tasks::TaskError;

/// Writes `bytes` to `path` by way of a hidden temporary file in the same
/// directory (creating the directory if needed).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TaskError> {
    let fail = |source| TaskError::WriteOutput {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes).map_err(fail)?;
    std::fs::rename(&temp, path).map_err(fail)
}

/// A table as named columns of cells, row-major.
pub struct Grid<'a> {
    pub names: &'a [String],
    pub rows: Vec<&'a [Cell]>,
}

impl Grid<'_> {
    /// The table as a polars frame, one typed column per name.
    fn frame(&self) -> Result<DataFrame, String> {
        let columns: Vec<Column> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| typed_column(name, self.rows.iter().map(|r| &r[i])))
            .collect();
        DataFrame::new(self.rows.len(), columns).map_err(|e| e.to_string())
    }

    pub fn write_csv(&self, path: &Path) -> Result<(), TaskError> {
        let encode = |detail: String| TaskError::EncodeTable {
            path: path.to_owned(),
            detail,
        };
        let mut frame = self.frame().map_err(encode)?;
        let mut bytes = Vec::new();
        CsvWriter::new(&mut bytes)
            .include_header(true)
            .finish(&mut frame)
            .map_err(|e| encode(e.to_string()))?;
        write_atomic(path, &bytes)
    }

    pub fn write_parquet(&self, path: &Path) -> Result<(), TaskError> {
        let encode = |detail: String| TaskError::EncodeTable {
            path: path.to_owned(),
            detail,
        };
        let mut frame = self.frame().map_err(encode)?;
        let mut bytes = Vec::new();
        ParquetWriter::new(&mut bytes)
            .finish(&mut frame)
            .map_err(|e| encode(e.to_string()))?;
        write_atomic(path, &bytes)
    }
}

/// The narrowest column type that holds every cell: integers, floats (when
/// integers and floats mix), booleans, else text. Nulls fit every type.
fn typed_column<'c>(name: &str, cells: impl Iterator<Item = &'c Cell> + Clone) -> Column {
    let present = || cells.clone().filter(|c| !c.is_null());
    let name = name.into();
    if present().all(|c| matches!(c, Cell::Int(_))) && present().next().is_some() {
        let values: Vec<Option<i64>> = cells
            .map(|c| match c {
                Cell::Int(i) => Some(*i),
                _ => None,
            })
            .collect();
        Column::new(name, values)
    } else if present().all(|c| c.as_f64().is_some()) && present().next().is_some() {
        let values: Vec<Option<f64>> = cells.map(Cell::as_f64).collect();
        Column::new(name, values)
    } else if present().all(|c| matches!(c, Cell::Bool(_))) && present().next().is_some() {
        let values: Vec<Option<bool>> = cells
            .map(|c| match c {
                Cell::Bool(b) => Some(*b),
                _ => None,
            })
            .collect();
        Column::new(name, values)
    } else {
        let values: Vec<Option<String>> = cells.map(|c| (!c.is_null()).then(|| c.text())).collect();
        Column::new(name, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_types_columns_and_leaves_nulls_empty() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["i", "x", "s", "b"].map(String::from);
        let r1 = [
            Cell::Int(1),
            Cell::Int(2),
            Cell::Str("a".into()),
            Cell::Bool(true),
        ];
        let r2 = [Cell::Null, Cell::Float(0.5), Cell::Int(3), Cell::Null];
        let grid = Grid {
            names: &names,
            rows: vec![&r1[..], &r2[..]],
        };
        let path = dir.path().join("t.csv");
        grid.write_csv(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "i,x,s,b\n1,2.0,a,true\n,0.5,3,\n");
        grid.write_parquet(&dir.path().join("t.parquet")).unwrap();
        let parquet = std::fs::read(dir.path().join("t.parquet")).unwrap();
        assert_eq!(&parquet[..4], b"PAR1");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
}
