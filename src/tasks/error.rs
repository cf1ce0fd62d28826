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
    #[error("`Command` tasks run under `sh -c`, not `exec-task`")]
    #[diagnostic(code(vitgraph::task))]
    NotBuiltin,

    #[error(transparent)]
    #[diagnostic(transparent)]
    Trace(#[from] TraceError),

    #[error(transparent)]
    #[diagnostic(transparent)]
    Analysis(#[from] AnalysisError),

    #[error("stage `{stage}` is listed in `sources` but is not among the node's `needs`")]
    #[diagnostic(
        code(vitgraph::task::source_not_needed),
        help("add `{stage}` to the stage's `needs`, or remove it from `sources`")
    )]
    SourceNotNeeded { stage: String },

    #[error("upstream node `{node}` has none of {expected} in `{dir}`")]
    #[diagnostic(
        code(vitgraph::task::upstream_file_missing),
        help("check that `{node}`'s task writes one of these files and list it in its `outputs`")
    )]
    UpstreamFileMissing {
        node: String,
        dir: PathBuf,
        expected: String,
    },

    #[error("cannot read `{path}` of upstream node `{node}`")]
    #[diagnostic(
        code(vitgraph::task::upstream_read),
        help("rebuild `{node}` (`vitgraph build --force '{node}'`)")
    )]
    UpstreamRead {
        node: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{path}` of upstream node `{node}` is not valid JSON")]
    #[diagnostic(
        code(vitgraph::task::upstream_json),
        help("the file is damaged or was written by another tool: rebuild `{node}`")
    )]
    UpstreamJson {
        node: String,
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    #[error("`{path}` of upstream node `{node}`: {detail}")]
    #[diagnostic(
        code(vitgraph::task::upstream_shape),
        help(
            "the file does not follow the documented schema; rebuild `{node}` with this vitgraph"
        )
    )]
    UpstreamShape {
        node: String,
        path: PathBuf,
        detail: String,
    },

    #[error("the report's `filter` names `{name}`, which is a param of no source node")]
    #[diagnostic(code(vitgraph::task::unknown_filter_param), help("{help}"))]
    UnknownFilterParam { name: String, help: String },

    #[error("column `{column}` is in none of the joined files")]
    #[diagnostic(code(vitgraph::task::unknown_column), help("{help}"))]
    UnknownColumn { column: String, help: String },

    #[error("`{field}` names `{name}`, which is not a column of the report table")]
    #[diagnostic(code(vitgraph::task::unknown_table_column), help("{help}"))]
    UnknownTableColumn {
        field: String,
        name: String,
        help: String,
    },

    #[error("`{field}`: {detail}")]
    #[diagnostic(code(vitgraph::task::bad_spec), help("{help}"))]
    BadSpec {
        field: String,
        detail: String,
        help: String,
    },

    #[error("cannot write `{path}`")]
    #[diagnostic(
        code(vitgraph::task::write_output),
        help("check free space and permissions of the output directory")
    )]
    WriteOutput {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot encode table `{path}`: {detail}")]
    #[diagnostic(
        code(vitgraph::task::encode_table),
        help("this is a bug in vitgraph's table writer; please report it with the report's spec")
    )]
    EncodeTable { path: PathBuf, detail: String },

    #[error("cannot draw plot `{path}`: {detail}")]
    #[diagnostic(
        code(vitgraph::task::draw_plot),
        help("check the plot's `x` and `y` columns hold finite numbers (positive ones on a log axis)")
    )]
    DrawPlot { path: PathBuf, detail: String },

    /// A notebook that did not run: a failing cell (with its line and
    /// traceback), a missing Jupyter package, a kernel that is not there.
    #[error("notebook `{path}`: {message}")]
    #[diagnostic(code(vitgraph::task::notebook), help("{help}"))]
    Notebook {
        path: String,
        message: String,
        help: String,
    },

    /// A file an `Import` names that it cannot take.
    #[error("{message}")]
    #[diagnostic(code(vitgraph::task::import), help("{help}"))]
    Import { message: String, help: String },

    /// A field of the spec has a value the task cannot run with.
    #[error("invalid `{kind}` spec: {message}")]
    #[diagnostic(
        code(vitgraph::task::invalid_spec),
        help("fix the field named above in the pipeline file")
    )]
    InvalidSpec { kind: &'static str, message: String },

    /// The binary was built without libtorch.
    #[error("`{kind}` needs libtorch, but this vitgraph was built without the `torch` feature and no `vitgraph-torch` was found beside it (or in $VITGRAPH_TORCH_EXE)")]
    #[diagnostic(
        code(vitgraph::task::no_torch),
        help("`scripts/quickstart.sh` builds both executables; by hand: `eval \"$(scripts/setup-libtorch.sh)\"`, then `cargo build --release --features torch --bin vitgraph-torch` beside `cargo build --release`")
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
