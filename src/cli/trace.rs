//! `vitgraph trace …`: ad-hoc work on one trace file outside any pipeline —
//! its metrics (`summary`), the kernel diff of two (`diff`), conversion of a PyTorch-profiler JSON to a trace
//! SQLite (`import`), and a Chrome-trace JSON for ui.perfetto.dev (`perfetto`).

use std::path::{Path, PathBuf};

use crate::analysis::{self, output::metrics_json, Options};
use crate::exit;
use crate::tasks::export::ExportFormat;
use crate::trace::{kineto, perfetto, Trace, TraceError};

#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// Print the metrics of a trace (Nsight Systems SQLite or PyTorch-profiler JSON).
    Summary {
        file: PathBuf,
        /// Print exactly the `metrics.json` an `Analyze` node writes.
        #[arg(long)]
        json: bool,
        /// The NVTX range that delimits the measured window.
        #[arg(long, default_value = "measure")]
        window: String,
    },
    /// Convert a PyTorch-profiler trace (`.json`, `.json.gz`) to a trace SQLite.
    Import {
        file: PathBuf,
        /// The SQLite file to write.
        #[arg(short)]
        o: PathBuf,
    },
    /// The kernel-level diff of two traces: kernels added, removed and changed (names
    /// without template arguments), launch latency, GPU utilization, copies.
    Diff {
        a: PathBuf,
        b: PathBuf,
        /// How many of the largest changes to print.
        #[arg(long, default_value_t = 20)]
        top: usize,
        /// The NVTX range that delimits the measured window.
        #[arg(long, default_value = "measure")]
        window: String,
        /// Print the diff as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a trace as Chrome-trace JSON that ui.perfetto.dev opens.
    Perfetto {
        file: PathBuf,
        /// The JSON file to write.
        #[arg(short)]
        o: PathBuf,
    },
}

pub fn run(cmd: TraceCommand) -> miette::Result<i32> {
    match cmd {
        TraceCommand::Summary { file, json, window } => {
            let trace = load_any(&file)?;
            let opts = Options {
                window,
                ..Options::default()
            };
            let metrics = analysis::compute(&trace, &opts);
            if json {
                print!("{}", metrics_json(&metrics));
            } else {
                print!("{}", analysis::text::render(&metrics));
            }
        }
        TraceCommand::Import { file, o } => {
            let stats = kineto::import(&file, &o)?;
            let w = stats.written;
            println!(
                "{}: {} events read ({:.1} MB); wrote {} kernels, {} memcpy, {} memset, {} runtime calls, {} NVTX ranges",
                o.display(),
                stats.events,
                stats.bytes as f64 / 1e6,
                w.kernels,
                w.memcpys,
                w.memsets,
                w.runtime,
                w.nvtx
            );
        }
        TraceCommand::Diff {
            a,
            b,
            top,
            window,
            json,
        } => {
            let opts = Options {
                window,
                ..Options::default()
            };
            let (ma, mb) = rayon::join(
                || load_any(&a).map(|t| analysis::compute(&t, &opts)),
                || load_any(&b).map(|t| analysis::compute(&t, &opts)),
            );
            let (ma, mb) = (ma?, mb?);
            let d = crate::compare::kernels::diff(
                crate::compare::kernels::Profile::of(&[&ma]),
                crate::compare::kernels::Profile::of(&[&mb]),
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
            } else {
                println!("A  {}\nB  {}", a.display(), b.display());
                print!("{}", crate::compare::kernels::text(&d, top));
            }
        }
        TraceCommand::Perfetto { file, o } => {
            let trace = load_any(&file)?;
            let n = perfetto::write(&trace, &o)?;
            println!(
                "{}: {n} events; open it at https://ui.perfetto.dev",
                o.display()
            );
        }
    }
    Ok(exit::SUCCESS)
}

/// Loads a trace SQLite, or a Kineto JSON through a temporary SQLite (the
/// kind told by the content, as `Export` tells it).
fn load_any(file: &Path) -> Result<Trace, TraceError> {
    match ExportFormat::from_content(file) {
        Ok(ExportFormat::Kineto) => {}
        // An unreadable or unknown file: the SQLite reader says what it is not.
        _ => return Trace::load(file),
    }
    let tmp = std::env::temp_dir().join(format!("vitgraph-trace-{}.sqlite", std::process::id()));
    let result = kineto::import(file, &tmp).and_then(|_| Trace::load(&tmp));
    let _ = std::fs::remove_file(&tmp);
    let mut trace = result?;
    trace.path = file.to_path_buf();
    Ok(trace)
}
