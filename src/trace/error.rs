//! The errors of the trace layer: reading, writing, importing and exporting
//! trace files. Every variant names the file and says what to do.

use std::path::PathBuf;

use miette::Diagnostic;
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum TraceError {
    #[error("cannot read `{path}`: {source}")]
    #[diagnostic(code(trace::io), help("check that the file exists and is readable"))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{path}` is not a readable SQLite trace: {source}")]
    #[diagnostic(
        code(trace::not_sqlite),
        help("pass an Nsight Systems SQLite export (`nsys export --type sqlite`) or a trace written by vitgraph; a truncated copy must be exported again")
    )]
    NotSqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("`{path}` has no CUDA activity tables (no `CUPTI_ACTIVITY_KIND_*` table)")]
    #[diagnostic(
        code(trace::no_cupti),
        help("record the run with CUDA tracing (`nsys profile --trace cuda,nvtx`) and export it with `nsys export --type sqlite`")
    )]
    NoCuptiTables { path: PathBuf },

    #[error("cannot read table `{table}` of `{path}`: {source}")]
    #[diagnostic(
        code(trace::query),
        help("the table lacks a column every Nsight Systems export has; re-export the report")
    )]
    Query {
        path: PathBuf,
        table: String,
        #[source]
        source: rusqlite::Error,
    },

    #[error("table `{table}` of `{path}` has no column `{column}`")]
    #[diagnostic(
        code(trace::missing_column),
        help("the file is not an Nsight Systems export, or a damaged one; re-export the report")
    )]
    MissingColumn {
        path: PathBuf,
        table: String,
        column: String,
    },

    #[error("cannot write trace `{path}`: {source}")]
    #[diagnostic(
        code(trace::write),
        help("check free disk space and write permission of the folder")
    )]
    Write {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },

    #[error("`{path}` is not valid JSON at byte {offset}: {message}")]
    #[diagnostic(
        code(trace::json),
        help("the file is truncated or damaged; record the PyTorch profiler trace again")
    )]
    Json {
        path: PathBuf,
        offset: u64,
        message: String,
    },

    #[error("`{path}` is not a PyTorch profiler (Kineto) trace: {reason}")]
    #[diagnostic(
        code(trace::not_kineto),
        help("pass the Chrome-trace JSON written by `torch.profiler` (`export_chrome_trace` or `tensorboard_trace_handler`), optionally gzipped")
    )]
    NotKineto { path: PathBuf, reason: String },

    #[error("event {index} (`{cat}` `{name}`) of `{path}` has no `{field}`")]
    #[diagnostic(
        code(trace::missing_field),
        help("the trace was written by a profiler too old to record `{field}`, or edited by hand; record it again with a current torch.profiler")
    )]
    MissingField {
        path: PathBuf,
        index: u64,
        cat: String,
        name: String,
        field: &'static str,
    },

    #[error("`{path}` is not a trace vitgraph reads: it starts with {start}")]
    #[diagnostic(
        code(trace::unknown_format),
        help("`Export` reads an Nsight Systems report (`.nsys-rep`), an nsys SQLite export and a PyTorch-profiler JSON (`.json`, `.json.gz`); exclude other files from the stage's pattern, or give `format` explicitly")
    )]
    UnknownFormat { path: PathBuf, start: String },

    #[error("`nsys` is not installed (needed to export `{path}`)")]
    #[diagnostic(
        code(trace::nsys_missing),
        help("install Nsight Systems (e.g. `apt-get install nsight-systems-cli` from NVIDIA's repository) and put `nsys` on PATH, or record with `trace: Cupti` instead")
    )]
    NsysMissing { path: PathBuf },

    #[error("`nsys export` failed on `{path}` ({status}): {stderr}")]
    #[diagnostic(
        code(trace::nsys_failed),
        help("run the printed command by hand; a report from a newer nsys needs a newer nsys to export")
    )]
    NsysFailed {
        path: PathBuf,
        status: String,
        stderr: String,
    },
}

impl TraceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn write(path: impl Into<PathBuf>, source: rusqlite::Error) -> Self {
        TraceError::Write {
            path: path.into(),
            source,
        }
    }
}
