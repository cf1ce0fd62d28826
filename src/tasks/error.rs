//! [`TaskError`]: why a built-in task failed, as a diagnostic naming the file
//! and the fix. Each task layer's own error converts into it.

use miette::Diagnostic;
use thiserror::Error;

use crate::analysis::AnalysisError;
use crate::trace::TraceError;

#[derive(Debug, Error, Diagnostic)]
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
}
