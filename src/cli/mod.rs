//! The command line: argument parsing, dispatch, and the one place errors
//! become exit codes (see [`crate::exit`]).

mod args;
mod build;
mod compare;
mod elsewhere;
mod evidence;
mod exec;
mod inspect;
mod keys;
mod maintenance;
mod page;
mod page_parts;
mod reasons;
mod remote_status;
mod slurm;
mod status;
mod transfer;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::exit;
use crate::graph::Graph;
use crate::pipeline::{Override, PipelineError};
use crate::workspace::Workspace;

#[derive(Parser, Debug)]
#[command(
    name = "vitgraph",
    version,
    about = "A content-hashed, incremental build graph for GPU inference studies",
    long_about = "vitgraph runs studies declared in pipelines/*.ron: experiments, trace conversions, \
analyses and reports are nodes of a content-hashed graph; `build` runs only what is stale.\n\n\
Exit status: 0 success; 1 a node failed; 2 bad pipeline or usage; 3 `compare --fail-if` tripped; \
130 interrupted (SIGINT).",
    after_long_help = "Environment:\n  \
VITGRAPH_TORCH_EXE    the libtorch executable that runs `Vit` and `OpBench` nodes \
(default: `vitgraph-torch` beside this vitgraph)\n  \
VITGRAPH_NO_PROGRESS  plain lines instead of the progress bar on a terminal\n  \
VITGRAPH_TIMINGS      print where a command's time goes\n  \
VITGRAPH_COPY_STREAMS `0`: `Vit`'s Async flow copies on the compute stream, not on copy streams\n  \
VITGRAPH_CUPTI_API    how `trace: Cupti` records API calls: callback (default), activity, none\n  \
VITGRAPH_CUPTI_KINDS  the activity kinds `trace: Cupti` enables (kernel,memcpy,memset)\n  \
VITGRAPH_TELEMETRY    `0`: no GPU sampling during `Vit`'s timed window\n  \
VITGRAPH_TELEMETRY_AB `N`: the GPU sampler pauses in every other block of N batches (its cost)\n  \
VITGRAPH_TELEMETRY_SCRIPT  GPU readings played from a JSON file instead of NVML\n  \
VITGRAPH_GPU_WAIT_S   how long a measurement waits for other processes to leave its GPU (60)\n  \
VITGRAPH_FAKE_ENV     a JSON object of environment facets to use instead of probing the machine\n  \
VITGRAPH_SIGNING_KEY  the secret key `export` and `push` sign run records with (`vitgraph key generate`)"
)]
pub struct Cli {
    /// Run as if started in DIR (the workspace root or a folder inside it).
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Override a pipeline param or matrix axis: `-p samples=500`, `-p res=[224,512]`, or in Hydra's syntax `-p res=224,512`, `-p 'batch=range(1,9)'`.
    #[arg(short = 'p', long = "param", global = true, value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build targets (stage, node id, glob or pipeline file stem) and what they need.
    Build(args::BuildArgs),
    /// Show which nodes are stale, and why.
    Status(status::StatusArgs),
    /// Show a node's key, part by part, against its recorded run.
    Explain(status::ExplainArgs),
    /// Print the graph as dot, mermaid or json.
    Graph(inspect::GraphArgs),
    /// List stages, or the nodes of targets.
    Ls(inspect::LsArgs),
    /// Show one node: params, task, state, outputs, last run.
    Show(inspect::ShowArgs),
    /// Write the study as one self-contained HTML page (default `out/report.html`).
    Report(page::ReportArgs),
    /// Compare two sets of recorded runs (builds, baselines, environments, dates,
    /// workspaces): per configuration and metric, the ratio, its interval and a verdict.
    Compare(compare::CompareArgs),
    /// Save, list or forget named sets of runs to compare against (kept by `gc`).
    #[command(subcommand)]
    Baseline(compare::BaselineCommand),
    /// Write the runs of targets (and of what they need) and their objects into one file.
    Export(transfer::ExportArgs),
    /// Add the runs of a bundle written by `vitgraph export`, each object checked on arrival.
    Import(transfer::ImportArgs),
    /// Copy the runs of targets (and of what they need) and their objects to a remote.
    Push(transfer::PushPullArgs),
    /// Bring the runs of targets (and of what they need) from a remote, each object checked.
    Pull(transfer::PushPullArgs),
    /// List the remotes, check one, or collect what a study no longer needs on it.
    #[command(subcommand)]
    Remote(transfer::RemoteCommand),
    /// Make a key to sign exported and pushed runs with.
    #[command(subcommand)]
    Key(keys::KeyCommand),
    /// Remove store objects no recorded run refers to, and finished cluster jobs' directories.
    Gc,
    /// Re-hash the store and check the state database; report damaged or missing objects.
    Verify(maintenance::VerifyArgs),
    /// Create a workspace with an example pipeline.
    Init(maintenance::InitArgs),
    /// Work with one trace file: metrics, Kineto import, Perfetto export.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Execute one built-in task (used by the engine).
    #[command(hide = true)]
    ExecTask { job: PathBuf },
    /// Print the libtorch this executable was built against, as JSON (used by
    /// a torch-free vitgraph to key its nodes by `vitgraph-torch`'s libtorch).
    #[command(hide = true)]
    TorchInfo,
    /// Execute and record one node whose upstream is built (used by cluster executors).
    #[command(hide = true)]
    RunNode { node: String },
    /// Run one task of a SLURM job array (used by `--executor slurm` on the compute node).
    #[command(hide = true)]
    SlurmJob { manifest: PathBuf },
    /// Write this machine's environment fingerprint into FILE (a probe job of `--executor slurm`).
    #[command(hide = true)]
    EnvProbe { file: PathBuf },
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum GraphFormat {
    Dot,
    Mermaid,
    Json,
}

/// An error that ends the command, with its exit code.
pub enum Failure {
    /// Already reported (e.g. a node failed); just exit with this code.
    Code(i32),
    /// A diagnostic to print, with its exit code.
    Report(miette::Report, i32),
}

impl From<PipelineError> for Failure {
    fn from(e: PipelineError) -> Failure {
        Failure::Report(miette::Report::new(e), exit::USAGE)
    }
}

impl From<crate::graph::SelectError> for Failure {
    fn from(e: crate::graph::SelectError) -> Failure {
        Failure::Report(miette::Report::new(e), exit::USAGE)
    }
}

impl From<crate::engine::plan::JudgeError> for Failure {
    fn from(e: crate::engine::plan::JudgeError) -> Failure {
        Failure::Report(miette::Report::new(e), exit::NODE_FAILED)
    }
}

impl From<crate::store::StoreError> for Failure {
    fn from(e: crate::store::StoreError) -> Failure {
        Failure::Report(miette::Report::new(e), exit::NODE_FAILED)
    }
}

/// A usage problem (exit 2) with a hint.
pub fn usage(message: impl Into<String>, help: impl Into<String>) -> Failure {
    Failure::Report(
        miette::miette!(help = help.into(), "{}", message.into()),
        exit::USAGE,
    )
}

pub mod trace;

pub fn main() -> i32 {
    // Die quietly on a closed pipe (`vitgraph ls | head`), as command-line tools do.
    // SAFETY: resetting a signal disposition before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    // Tasks run as they would alone: a measured task's allocator is left as glibc sets it.
    if !matches!(
        cli.command,
        Command::ExecTask { .. } | Command::RunNode { .. } | Command::SlurmJob { .. }
    ) {
        limit_malloc_arenas();
    }
    install_error_hook();
    match run(cli) {
        Ok(code) => code,
        Err(Failure::Code(code)) => code,
        Err(Failure::Report(report, code)) => {
            eprintln!("{report:?}");
            code
        }
    }
}

fn install_error_hook() {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = miette::set_hook(Box::new(move |_| {
        let theme = if color {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        Box::new(miette::GraphicalReportHandler::new_themed(theme).with_width(100))
    }));
}

fn run(cli: Cli) -> Result<i32, Failure> {
    let start = cli.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    match cli.command {
        Command::Init(args) => maintenance::init(&start, args),
        Command::Key(cmd) => keys::key(cmd),
        Command::ExecTask { job } => exec::exec_task(&job),
        Command::EnvProbe { file } => crate::slurm::probe::write_probe(&file)
            .map(|()| exit::SUCCESS)
            .map_err(|m| Failure::Report(miette::miette!("{m}"), exit::NODE_FAILED)),
        Command::SlurmJob { manifest } => crate::slurm::job::run(&manifest).map_err(|m| {
            Failure::Report(
                miette::miette!(
                    help = "this job was set up by `vitgraph build --executor slurm`",
                    "{m}"
                ),
                exit::NODE_FAILED,
            )
        }),
        Command::TorchInfo => {
            let info = crate::host::torch_exe::this_build();
            println!("{}", serde_json::to_string(&info).unwrap_or_default());
            Ok(exit::SUCCESS)
        }
        Command::Trace(cmd) => {
            trace::run(cmd).map_err(|report| Failure::Report(report, exit::NODE_FAILED))
        }
        command => {
            check_fake_env()?;
            let ws = find_workspace(&start, cli.dir.is_some())?;
            let overrides = parse_overrides(&cli.params)?;
            match command {
                Command::Build(args) => build::build(&ws, &overrides, args),
                Command::Status(args) => status::status(&ws, &overrides, args),
                Command::Explain(args) => status::explain(&ws, &overrides, args),
                Command::Graph(args) => inspect::graph(&ws, &overrides, args),
                Command::Ls(args) => inspect::ls(&ws, &overrides, args),
                Command::Show(args) => inspect::show(&ws, &overrides, args),
                Command::Report(args) => page::report(&ws, &overrides, args),
                Command::Compare(args) => compare::compare(&ws, args),
                Command::Baseline(cmd) => compare::baseline(&ws, cmd),
                Command::Export(args) => transfer::export(&ws, &overrides, args),
                Command::Import(args) => transfer::import(&ws, args),
                Command::Push(args) => transfer::push(&ws, &overrides, args),
                Command::Pull(args) => transfer::pull(&ws, &overrides, args),
                Command::Remote(cmd) => transfer::remote(&ws, &overrides, cmd),
                Command::Gc => maintenance::gc(&ws),
                Command::Verify(args) => maintenance::verify(&ws, args),
                Command::RunNode { node } => exec::run_node(&ws, &overrides, &node),
                Command::Init(_)
                | Command::Key(_)
                | Command::ExecTask { .. }
                | Command::SlurmJob { .. }
                | Command::EnvProbe { .. }
                | Command::TorchInfo
                | Command::Trace(_) => {
                    unreachable!("handled above")
                }
            }
        }
    }
}

fn find_workspace(start: &std::path::Path, explicit: bool) -> Result<Workspace, Failure> {
    if explicit && start.join("pipelines").is_dir() {
        return Ok(Workspace::at(start));
    }
    Workspace::discover(start).ok_or_else(|| {
        usage(
            format!("no workspace found: neither `{}` nor any folder above it has a `pipelines/` folder", start.display()),
            "run vitgraph inside a workspace, pass `-C DIR`, or create one with `vitgraph init`",
        )
    })
}

/// `VITGRAPH_FAKE_ENV` must be a JSON object of strings when set.
fn check_fake_env() -> Result<(), Failure> {
    match std::env::var("VITGRAPH_FAKE_ENV") {
        Ok(json) if serde_json::from_str::<std::collections::BTreeMap<String, String>>(&json).is_err() => Err(usage(
            format!("`VITGRAPH_FAKE_ENV` is not a JSON object of strings: {json}"),
            "set it like VITGRAPH_FAKE_ENV='{\"gpu\":\"H100\",\"driver_major\":\"580\"}', or unset it",
        )),
        _ => Ok(()),
    }
}

fn parse_overrides(params: &[String]) -> Result<Vec<Override>, Failure> {
    params
        .iter()
        .map(|p| Override::parse(p).map_err(|m| usage(m, "write `-p KEY=VALUE`")))
        .collect()
}

/// Phase timings on stderr when `VITGRAPH_TIMINGS` is set (for profiling).
pub(crate) struct Timer {
    start: std::time::Instant,
    last: std::cell::Cell<std::time::Instant>,
    on: bool,
}

impl Timer {
    pub(crate) fn start() -> Timer {
        let now = std::time::Instant::now();
        Timer {
            start: now,
            last: std::cell::Cell::new(now),
            on: std::env::var_os("VITGRAPH_TIMINGS").is_some(),
        }
    }

    pub(crate) fn lap(&self, what: &str) {
        if self.on {
            let now = std::time::Instant::now();
            eprintln!(
                "timing: {what:<20} {:>8.1} ms (total {:.1} ms)",
                (now - self.last.get()).as_secs_f64() * 1e3,
                (now - self.start).as_secs_f64() * 1e3
            );
            self.last.set(now);
        }
    }
}

/// At most two malloc arenas for the engine's own commands. glibc gives
/// each thread that allocates its own arena, up to eight per core; memory
/// freed in one is not reused by another, so a build of 100,000 nodes whose
/// records are made on worker threads and freed on the main one held 70 MB
/// more at its peak with the default (647 against 578 MB resident). Called
/// before any thread exists.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: a malloc tuning call, made before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Loads the workspace's pipelines.
pub(crate) fn load(ws: &Workspace, overrides: &[Override]) -> Result<Graph, Failure> {
    let cached = crate::store::graph_file::read(&ws.root);
    let loaded = crate::pipeline::cache::load(&ws.root, overrides, cached.as_deref())?;
    if let Some(bytes) = &loaded.keep {
        crate::store::graph_file::write(&ws.root, bytes);
    }
    if std::env::var_os("VITGRAPH_TIMINGS").is_some() {
        let how = if loaded.from_cache { "hit" } else { "miss" };
        eprintln!("timing: graph cache {how}");
    }
    let graph = loaded.graph;
    for w in &graph.warnings {
        eprintln!("warning: {w}");
    }
    Ok(graph)
}

/// Refuses a selection that holds a node its pipeline cannot run as
/// written (`graph::Refusal`), with the error the loader would show.
pub(crate) fn refuse(
    ws: &Workspace,
    graph: &Graph,
    selection: &[crate::graph::NodeIdx],
) -> Result<(), Failure> {
    match graph.refusal(selection) {
        Some(r) => Err(crate::pipeline::refusal_error(&ws.root, r).into()),
        None => Ok(()),
    }
}

/// What the workspace's graph is made from, as the pipeline layer hashes
/// it: the no-op snapshot's token (see `engine::noop::Sources`).
pub(crate) struct PipelineSources<'a> {
    root: &'a std::path::Path,
    overrides: &'a [Override],
}

impl<'a> PipelineSources<'a> {
    pub(crate) fn new(root: &'a std::path::Path, overrides: &'a [Override]) -> Self {
        PipelineSources { root, overrides }
    }
}

impl crate::engine::noop::Sources for PipelineSources<'_> {
    fn hash_into(&self, h: &mut blake3::Hasher) -> Option<()> {
        let exe = std::env::current_exe().ok()?;
        crate::pipeline::cache::hash_sources(h, &exe, self.root, self.overrides)
    }
}
