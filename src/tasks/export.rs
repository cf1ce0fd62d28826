//! `Export`: turns a profiler's output into a trace SQLite (`trace.sqlite`) in
//! the Nsight Systems export layout. An `.nsys-rep` report goes through the
//! installed `nsys export`; a PyTorch-profiler (Kineto) Chrome-trace JSON
//! (`.json`, `.json.gz`) is converted natively; a `.sqlite` is checked and copied.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::TaskError;
use super::TaskContext;
use crate::trace::{kineto, nsys, TraceError, TraceFile};

/// Bump when the conversion's output changes.
pub const VERSION: u32 = 1;

/// The one output file.
pub const OUTPUT: &str = "trace.sqlite";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportSpec {
    /// The profiler output, usually `${needs.S}/report.nsys-rep` or a Kineto `.json(.gz)`.
    pub input: String,
    /// The input's format; by default told from its name.
    #[serde(default)]
    pub format: Option<ExportFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExportFormat {
    /// An Nsight Systems report, exported with `nsys export --type sqlite`.
    NsysRep,
    /// A PyTorch-profiler Chrome-trace JSON, plain or gzipped.
    Kineto,
    /// A trace SQLite already (checked and copied).
    Sqlite,
}

impl ExportFormat {
    /// The format a file name implies, if any.
    pub fn from_path(path: &Path) -> Option<ExportFormat> {
        let name = path.file_name()?.to_string_lossy().to_lowercase();
        if name.ends_with(".nsys-rep") || name.ends_with(".qdrep") {
            Some(ExportFormat::NsysRep)
        } else if name.ends_with(".json") || name.ends_with(".json.gz") {
            Some(ExportFormat::Kineto)
        } else if name.ends_with(".sqlite") || name.ends_with(".db") {
            Some(ExportFormat::Sqlite)
        } else {
            None
        }
    }
}

impl ExportSpec {
    fn format(&self, input: &Path) -> Result<ExportFormat, TraceError> {
        self.format
            .or_else(|| ExportFormat::from_path(input))
            .ok_or_else(|| TraceError::UnknownFormat {
                path: input.to_path_buf(),
            })
    }

    /// Workspace files whose content is part of the key: the input when it is
    /// a workspace path rather than an upstream output.
    pub fn inputs(&self) -> Vec<String> {
        if self.input.starts_with("${") {
            Vec::new()
        } else {
            vec![self.input.clone()]
        }
    }
}

/// The key facet an `Export` adds beyond its spec: for `.nsys-rep` input the
/// nsys version and export flags (`nsys missing` where it is not installed);
/// `None` for formats converted by vitgraph itself (its version is the task's).
pub fn key_facet(spec: &ExportSpec) -> Option<String> {
    let format = spec
        .format
        .or_else(|| ExportFormat::from_path(Path::new(&spec.input)));
    (format == Some(ExportFormat::NsysRep)).then(nsys::key_facet)
}

/// Resolves a spec path: absolute as given, else relative to the workspace root.
pub(crate) fn resolve(root: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

pub fn run(spec: &ExportSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let input = resolve(&ctx.root, &spec.input);
    let output = ctx.out.join(OUTPUT);
    match spec.format(&input)? {
        ExportFormat::NsysRep => nsys::export_report(&input, &output)?,
        ExportFormat::Kineto => {
            kineto::import(&input, &output)?;
        }
        ExportFormat::Sqlite => copy_checked(&input, &output)?,
    }
    Ok(())
}

/// Copies a trace SQLite after checking that it reads as one.
fn copy_checked(input: &Path, output: &Path) -> Result<(), TraceError> {
    drop(TraceFile::open(input)?);
    let tmp = crate::atomic::temp_name(output);
    std::fs::copy(input, &tmp)
        .and_then(|_| std::fs::rename(&tmp, output))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            TraceError::io(output, e)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_file_name() {
        let f = |p: &str| ExportFormat::from_path(Path::new(p));
        assert_eq!(f("a/report.nsys-rep"), Some(ExportFormat::NsysRep));
        assert_eq!(f("t.pt.trace.json.gz"), Some(ExportFormat::Kineto));
        assert_eq!(f("t.JSON"), Some(ExportFormat::Kineto));
        assert_eq!(f("trace.sqlite"), Some(ExportFormat::Sqlite));
        assert_eq!(f("notes.txt"), None);
    }

    #[test]
    fn only_reports_need_the_nsys_facet() {
        let spec = |input: &str| ExportSpec {
            input: input.into(),
            format: None,
        };
        assert_eq!(key_facet(&spec("${needs.run}/trace.json")), None);
        assert!(key_facet(&spec("${needs.run}/report.nsys-rep")).is_some());
        assert_eq!(
            spec("${needs.run}/r.nsys-rep").inputs(),
            Vec::<String>::new()
        );
        assert_eq!(
            spec("data/r.json.gz").inputs(),
            vec!["data/r.json.gz".to_string()]
        );
    }
}
