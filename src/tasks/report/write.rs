//! Writing outputs: tables as CSV and Parquet (through [`crate::tabular`]),
//! and every file whole or not at all ([`crate::atomic`]).

use std::path::Path;

use super::cell::Cell;
use crate::tabular::{Column, Table};
use crate::tasks::TaskError;

/// Writes `bytes` to `path` through a temporary file and a rename
/// (creating the directory if needed).
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TaskError> {
    crate::atomic::write(path, bytes).map_err(|source| TaskError::WriteOutput {
        path: path.to_owned(),
        source,
    })
}

/// A table as named columns of cells, row-major.
pub(super) struct Grid<'a> {
    pub names: &'a [String],
    pub rows: Vec<&'a [Cell]>,
}

impl Grid<'_> {
    /// The table with one typed column per name.
    fn table(&self) -> Table {
        let columns = self
            .names
            .iter()
            .enumerate()
            .map(|(i, _)| typed_column(self.rows.iter().map(|r| &r[i])))
            .collect();
        Table {
            names: self.names.to_vec(),
            columns,
        }
    }

    pub(super) fn write_csv(&self, path: &Path) -> Result<(), TaskError> {
        write_atomic(path, self.table().csv().as_bytes())
    }

    pub(super) fn write_parquet(&self, path: &Path) -> Result<(), TaskError> {
        let bytes = self
            .table()
            .parquet()
            .map_err(|detail| TaskError::EncodeTable {
                path: path.to_owned(),
                detail,
            })?;
        write_atomic(path, &bytes)
    }
}

/// The narrowest column type that holds every cell: integers, floats (when
/// integers and floats mix), booleans, else text. Nulls fit every type.
fn typed_column<'c>(cells: impl Iterator<Item = &'c Cell> + Clone) -> Column {
    let present = || cells.clone().filter(|c| !c.is_null());
    let any = present().next().is_some();
    if any && present().all(|c| matches!(c, Cell::Int(_))) {
        Column::Int(
            cells
                .map(|c| match c {
                    Cell::Int(i) => Some(*i),
                    _ => None,
                })
                .collect(),
        )
    } else if any && present().all(|c| c.as_f64().is_some()) {
        Column::Float(cells.map(Cell::as_f64).collect())
    } else if any && present().all(|c| matches!(c, Cell::Bool(_))) {
        Column::Bool(
            cells
                .map(|c| match c {
                    Cell::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect(),
        )
    } else {
        Column::Text(cells.map(|c| (!c.is_null()).then(|| c.text())).collect())
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
