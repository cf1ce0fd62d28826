//! Trace analysis: the metrics of DESIGN §6 (normative definitions; the book
//! chapter "Metrics" gives each formula) from a loaded trace, and their three
//! outputs: `metrics.json`, `kernels.parquet` and `analysis.txt`.

pub mod compute;
pub mod error;
pub mod intervals;
pub mod metrics;
pub mod output;
mod parquet_out;
pub mod text;
pub mod window;
pub mod window_out;

pub use compute::{compute, Options};
pub use error::AnalysisError;
pub use metrics::Metrics;
pub use output::{analyze_file, analyze_into, write_outputs, OUTPUTS};
