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

impl ExportFormat {
    /// The format the file's first bytes show: a SQLite database, or JSON
    /// (plain or gzipped); a file that is neither is a report when its name
    /// says so (an `.nsys-rep` has no documented signature).
    pub fn from_content(path: &Path) -> Result<ExportFormat, TraceError> {
        use std::io::Read;
        let mut head = Vec::with_capacity(64);
        std::fs::File::open(path)
            .and_then(|f| f.take(64).read_to_end(&mut head))
            .map_err(|e| TraceError::io(path, e))?;
        if head.starts_with(b"SQLite format 3\0") {
            return Ok(ExportFormat::Sqlite);
        }
        let json = |bytes: &[u8]| {
            bytes
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b == b'{' || b == b'[')
        };
        if head.starts_with(&[0x1f, 0x8b]) {
            let mut inner = Vec::with_capacity(64);
            let opened = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
            let _ = flate2::read::MultiGzDecoder::new(opened)
                .take(64)
                .read_to_end(&mut inner);
            if json(&inner) {
                return Ok(ExportFormat::Kineto);
            }
        } else if json(&head) {
            return Ok(ExportFormat::Kineto);
        }
        match ExportFormat::from_path(path) {
            Some(ExportFormat::NsysRep) => Ok(ExportFormat::NsysRep),
            _ => Err(TraceError::UnknownFormat {
                path: path.to_path_buf(),
                start: describe_start(&head),
            }),
        }
    }
}

/// The first bytes of a file, as an error message shows them.
fn describe_start(head: &[u8]) -> String {
    if head.is_empty() {
        return "nothing (it is empty)".into();
    }
    let shown: String = head
        .iter()
        .take(16)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect();
    format!("`{shown}`")
}

impl ExportSpec {
    /// The format given, or else the one the content shows.
    fn format(&self, input: &Path) -> Result<ExportFormat, TraceError> {
        match self.format {
            Some(f) => Ok(f),
            None => ExportFormat::from_content(input),
        }
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
    fn the_content_decides_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b"  {\"traceEvents\": []}").unwrap();
            e.finish().unwrap()
        };
        let f = |p: &Path| ExportFormat::from_content(p).map_err(|e| e.to_string());
        // Misnamed files go by what they hold.
        assert_eq!(
            f(&put("a.json", b"SQLite format 3\0rest")),
            Ok(ExportFormat::Sqlite)
        );
        assert_eq!(
            f(&put("b.sqlite", b"\n{\"traceEvents\": []}")),
            Ok(ExportFormat::Kineto)
        );
        assert_eq!(f(&put("c.trace", &gz)), Ok(ExportFormat::Kineto));
        assert_eq!(
            f(&put("d.nsys-rep", b"\x00\x01binary")),
            Ok(ExportFormat::NsysRep)
        );
        let e = f(&put("e.txt", b"hello\x01")).unwrap_err();
        assert!(e.contains("e.txt") && e.contains("`hello\\x01`"), "{e}");
        let e = f(&put("f.json", b"")).unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

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
