//! The task layer's error: what can go wrong while a built-in task runs.
//! Every variant names the node or file at fault and says how to fix it.

use std::path::PathBuf;

use crate::analysis::AnalysisError;
use crate::trace::TraceError;

/// Why a built-in task failed.
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
}
