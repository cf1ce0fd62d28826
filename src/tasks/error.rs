//! [`TaskError`]: why a built-in task failed, as a diagnostic naming the file
//! or field and the fix: a `Vit` or `OpBench` spec that is wrong, a tool it
//! needs that is missing, libtorch failing while it runs; the trace and
//! analysis layers' own errors convert into it.

use std::path::PathBuf;

use crate::analysis::AnalysisError;
use crate::trace::TraceError;

/// A built-in task's failure. Messages name the thing in backticks; `help`
/// says what to do next.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum TaskError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Trace(#[from] TraceError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Analysis(#[from] AnalysisError),

    /// A field of the spec has a value the task cannot run with.
    #[error("invalid `{kind}` spec: {message}")]
    #[diagnostic(
        code(vitgraph::task::invalid_spec),
        help("fix the field named above in the pipeline file")
    )]
    InvalidSpec { kind: &'static str, message: String },

    /// The binary was built without libtorch.
    #[error("`{kind}` needs libtorch, but this vitgraph was built without the `torch` feature")]
    #[diagnostic(
        code(vitgraph::task::no_torch),
        help("run `scripts/setup-libtorch.sh`, then `cargo build --release --features torch`")
    )]
    TorchNotBuilt { kind: &'static str },

    /// Something the spec asks for is not on this machine (a GPU, numactl, nsys, CUPTI).
    #[error("`{what}` is not available: {message}")]
    #[diagnostic(code(vitgraph::task::unavailable), help("{help}"))]
    Unavailable {
        what: String,
        message: String,
        help: String,
    },

    /// libtorch raised an error while the task ran.
    #[error("libtorch failed while {during}: {message}")]
    #[diagnostic(code(vitgraph::task::torch))]
    Torch { during: String, message: String },

    /// Recording CUDA activity through CUPTI failed.
    #[error("CUPTI tracing failed: {message}")]
    #[diagnostic(code(vitgraph::task::cupti))]
    Cupti { message: String },

    /// An output file could not be written.
    #[error("cannot write `{}`: {source}", path.display())]
    #[diagnostic(
        code(vitgraph::task::io),
        help("check that the output directory is writable and the disk is not full")
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl TaskError {
    /// Whether the failure may go away on a retry (out of memory, a busy
    /// device), so the engine must not record it as a result.
    pub fn is_transient(&self) -> bool {
        match self {
            TaskError::Torch { message, .. } => {
                let message = message.to_ascii_lowercase();
                message.contains("out of memory") || message.contains("busy or unavailable")
            }
            _ => false,
        }
    }

    pub(crate) fn unavailable(what: &str, message: impl Into<String>, help: &str) -> Self {
        TaskError::Unavailable {
            what: what.to_owned(),
            message: message.into(),
            help: help.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_is_transient_and_a_bad_spec_is_not() {
        let oom = TaskError::Torch {
            during: "forward".into(),
            message: "CUDA out of memory. Tried to allocate 2.00 GiB".into(),
        };
        assert!(oom.is_transient());
        let bad = TaskError::InvalidSpec {
            kind: "Vit",
            message: "`batch` must be at least 1".into(),
        };
        assert!(!bad.is_transient());
        assert_eq!(
            bad.to_string(),
            "invalid `Vit` spec: `batch` must be at least 1"
        );
    }
}
