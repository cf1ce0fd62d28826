//! Trace files: the SQLite layout of `nsys export --type sqlite`, read from any
//! Nsight Systems export (2021–2026) and written by vitgraph's own recorders
//! and importers.
//!
//! - [`records`]: the plain record structs a recorder or importer produces;
//! - [`TraceWriter`]: writes records into a new trace file (temp file, one
//!   transaction, rename);
//! - [`TraceFile`] / [`Trace`]: open a trace and load its rows;
//! - [`kineto`]: streams a PyTorch-profiler Chrome-trace JSON into a trace;
//! - [`nsys`]: converts an `.nsys-rep` report with the installed `nsys`;
//! - [`perfetto`]: writes a trace as Chrome-trace JSON for ui.perfetto.dev.

pub mod error;
pub(crate) mod idmap;
mod json_scan;
pub mod kineto;
mod load;
pub mod nsys;
pub mod perfetto;
pub mod reader;
pub mod records;
pub mod schema;
pub mod writer;

pub use error::TraceError;
pub use reader::{Trace, TraceFile};
pub use records::{Gpu, Kernel, Memcpy, Memset, Nvtx, Runtime};
pub use writer::{TraceWriter, WriteSummary};
