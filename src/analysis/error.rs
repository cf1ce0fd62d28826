//! The errors of analysis: reading the trace, writing the outputs.

use std::path::PathBuf;

use miette::Diagnostic;
use thiserror::Error;

use crate::trace::TraceError;

#[derive(Debug, Error, Diagnostic)]
pub enum AnalysisError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Trace(#[from] TraceError),

    #[error("cannot write `{path}`")]
    #[diagnostic(
        code(analysis::write),
        help("check free disk space and write permission of the output folder")
    )]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot write parquet file `{path}`: {message}")]
    #[diagnostic(
        code(analysis::parquet),
        help("check free disk space and write permission of the output folder")
    )]
    Parquet { path: PathBuf, message: String },
}
