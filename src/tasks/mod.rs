//! The node kinds. A task gets a [`TaskContext`] (its resolved spec, its
//! upstream directories, a staging output directory, its device lease) and
//! returns an outcome; tasks never touch the store or the graph.
//!
//! `Command` runs under `sh -c` from the engine. Every built-in kind runs in a
//! child `vitgraph exec-task` process, so a crash, `numactl` or `nsys` wrapping
//! and SIGINT handling are the same for every kind.

pub mod aa_check;
pub mod analyze;
pub mod block;
pub mod command;
#[cfg(feature = "torch")]
pub mod cuda;
#[cfg(feature = "torch")]
pub mod cupti;
#[cfg(feature = "torch")]
mod cupti_calls;
#[cfg(feature = "torch")]
pub mod cupti_sqlite;
pub mod diagnostics;
pub mod error;
pub mod export;
pub mod hygiene;
pub mod import;
pub mod notebook;
pub mod nvtx;
pub mod opbench;
pub mod report;
pub(crate) mod summary;
pub mod vit;

pub use command::Together;
pub use error::TaskError;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A task as written in a pipeline file, params substituted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TaskSpec {
    Command(command::CommandSpec),
    Vit(vit::VitSpec),
    OpBench(opbench::OpBenchSpec),
    Export(export::ExportSpec),
    Analyze(analyze::AnalyzeSpec),
    Report(report::ReportSpec),
    Notebook(notebook::NotebookSpec),
    Import(import::ImportSpec),
}

/// What a task needs from the scheduler beyond a CPU slot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// GPUs handed to the task through `CUDA_VISIBLE_DEVICES`.
    #[serde(default)]
    pub gpus: u32,
    /// Run with nothing else beside it (no other GPU or CPU-heavy node).
    #[serde(default)]
    pub exclusive: bool,
}

impl TaskSpec {
    /// The kind's name, as written in pipeline files.
    pub fn kind(&self) -> &'static str {
        match self {
            TaskSpec::Command(_) => "Command",
            TaskSpec::Vit(_) => "Vit",
            TaskSpec::OpBench(_) => "OpBench",
            TaskSpec::Export(_) => "Export",
            TaskSpec::Analyze(_) => "Analyze",
            TaskSpec::Report(_) => "Report",
            TaskSpec::Notebook(_) => "Notebook",
            TaskSpec::Import(_) => "Import",
        }
    }

    /// The implementation's version: bumping it makes every node of the kind stale
    /// (`task_version_changed`).
    pub fn version(&self) -> u32 {
        match self {
            TaskSpec::Command(_) => command::VERSION,
            TaskSpec::Vit(_) => vit::VERSION,
            TaskSpec::OpBench(_) => opbench::VERSION,
            TaskSpec::Export(_) => export::VERSION,
            TaskSpec::Analyze(_) => analyze::VERSION,
            TaskSpec::Report(_) => report::VERSION,
            TaskSpec::Notebook(_) => notebook::VERSION,
            TaskSpec::Import(_) => import::VERSION,
        }
    }

    /// Workspace files whose content is part of the key (relative to the
    /// root). A `Notebook`'s is keyed by its code cells, not its bytes
    /// ([`TaskSpec::keyed_by_code`]).
    pub fn inputs(&self) -> Vec<String> {
        match self {
            TaskSpec::Command(c) => c.inputs.clone(),
            TaskSpec::Vit(_) | TaskSpec::OpBench(_) => Vec::new(),
            TaskSpec::Export(e) => e.inputs(),
            TaskSpec::Analyze(a) => a.inputs(),
            TaskSpec::Report(_) => Vec::new(),
            TaskSpec::Notebook(n) => n.inputs(),
            TaskSpec::Import(i) => i.inputs(),
        }
    }

    /// The input whose code cells, not its bytes, are part of the key (a
    /// `Notebook`'s notebook; see [`notebook::code_cells`]).
    pub fn keyed_by_code(&self) -> Option<&str> {
        match self {
            TaskSpec::Notebook(n) => Some(&n.path),
            _ => None,
        }
    }

    /// Files the task must create in its output directory.
    pub fn outputs(&self) -> Vec<String> {
        match self {
            TaskSpec::Command(c) => c.outputs.clone(),
            TaskSpec::Vit(v) => vit::outputs(v),
            TaskSpec::OpBench(_) => vec!["results.json".to_owned()],
            TaskSpec::Export(_) => vec![export::OUTPUT.to_string()],
            TaskSpec::Analyze(a) => a.outputs(),
            TaskSpec::Report(r) => r.outputs(),
            TaskSpec::Notebook(n) => n.outputs(),
            TaskSpec::Import(i) => i.outputs(),
        }
    }

    pub fn resources(&self) -> Resources {
        match self {
            TaskSpec::Command(c) => c.resources.clone(),
            TaskSpec::Vit(v) => hygiene::device_resources(&v.device),
            TaskSpec::OpBench(o) => hygiene::device_resources(&o.device),
            TaskSpec::Export(_) | TaskSpec::Analyze(_) => Resources::default(),
            TaskSpec::Report(_) | TaskSpec::Notebook(_) | TaskSpec::Import(_) => {
                Resources::default()
            }
        }
    }

    /// Checks the spec beyond its types (called at load time for every node).
    pub fn validate(&self) -> Result<(), Invalid> {
        let specific = match self {
            TaskSpec::Vit(v) => v.validate().err().map(|m| (m, "fix the field in the pipeline file; `Vit` fields are listed in the book's Experiments chapter")),
            TaskSpec::OpBench(o) => o.validate().err().map(|m| (m, "fix the field in the pipeline file; `OpBench` fields are listed in the book's Experiments chapter")),
            TaskSpec::Import(i) => i.validate().err().map(|m| (m, "fix the field in the pipeline file; `Import` is in the book's \"From Python\" chapter")),
            TaskSpec::Notebook(n) => n.validate().err().map(|m| (m, "fix the field in the pipeline file; `Notebook` fields are listed in the book's \"From Python\" chapter")),
            TaskSpec::Command(c) if c.measure && !c.outputs.iter().any(|o| o == command::RESULTS_JSON) => Some((
                format!("a `Command` with `measure: true` writes `{}`, but its `outputs` do not list it", command::RESULTS_JSON),
                "add \"results.json\" to `outputs`: it holds the measurement (its form is in the book's Repetitions chapter)",
            )),
            _ => None,
        };
        if let Some((message, help)) = specific {
            return Err(Invalid {
                message,
                help: help.into(),
            });
        }
        for out in self.outputs() {
            check_output_name(&out)?;
        }
        Ok(())
    }

    /// Key facets a task adds beyond its spec: the nsys version for an
    /// `Export` of an `.nsys-rep`; the diagnostic switches that are set
    /// (see [`diagnostics`]) for the libtorch experiments.
    pub fn tool_facets(&self) -> BTreeMap<String, String> {
        let mut f = BTreeMap::new();
        match self {
            TaskSpec::Export(e) => {
                if let Some(v) = export::key_facet(e) {
                    f.insert("nsys".to_string(), v);
                }
            }
            TaskSpec::Vit(v) => {
                f.extend(diagnostics::key_facets());
                // Traced runs changed meaning (their timing comes from
                // untraced batches since then): only they are keyed anew,
                // so untraced experiments are not run again.
                if v.trace == vit::Trace::Cupti {
                    f.insert("const.vit_cupti".to_string(), vit::CUPTI_METHOD.to_string());
                }
            }
            TaskSpec::OpBench(_) => f.extend(diagnostics::key_facets()),
            _ => {}
        }
        f
    }

    /// The software environment the task declares (a `Command`'s `env`).
    pub fn software_env(&self) -> Option<&command::SoftwareEnv> {
        match self {
            TaskSpec::Command(c) => c.env.as_ref(),
            TaskSpec::Notebook(n) => n.env.as_ref(),
            _ => None,
        }
    }

    /// Key facets of the software the task declares it runs with, probed
    /// once per process (see [`crate::host::software`]).
    pub fn software_facets(
        &self,
        root: &std::path::Path,
    ) -> Result<BTreeMap<String, String>, String> {
        match self.software_env() {
            Some(command::SoftwareEnv::Python { interpreter }) => {
                crate::host::software::python_facets(interpreter, root)
            }
            None => Ok(BTreeMap::new()),
        }
    }

    /// Whether the task measures (so a stage may `repeat` it): `Vit`,
    /// `OpBench`, and a `Command` with `measure: true`.
    pub fn measures(&self) -> bool {
        match self {
            TaskSpec::Vit(_) | TaskSpec::OpBench(_) => true,
            TaskSpec::Command(c) => c.measure,
            _ => false,
        }
    }

    /// The members of a block measured together (a stage's `together`):
    /// a measuring `Command`'s or a `Vit` or `OpBench` block's; None for every other task.
    pub fn together(&self) -> Option<&Together> {
        match self {
            TaskSpec::Command(c) => c.together.as_ref(),
            TaskSpec::Vit(v) => v.together.as_deref().map(|b| &b.block),
            TaskSpec::OpBench(o) => o.together.as_deref().map(|b| &b.block),
            _ => None,
        }
    }

    /// The A/A check's members (the first member's key, its twin's) of a
    /// block measured together with `check: true`.
    pub fn aa_members(&self) -> Option<(String, String)> {
        self.together().and_then(Together::aa)
    }

    /// The member keys of a block measured together (see [`Together`]).
    pub fn member_keys(&self) -> Option<Vec<String>> {
        self.together().map(Together::keys)
    }

    /// The files this task reads in its upstream nodes' folders, when it
    /// reads only named ones (a `Report`: each run's `results.json` and
    /// `metrics.json`); None when it may read any. What a
    /// `--results-only` bundle carries of the runs a target reads.
    pub fn reads_of_upstream(&self) -> Option<&'static [&'static str]> {
        match self {
            TaskSpec::Report(_) => Some(&["results.json", "metrics.json"]),
            _ => None,
        }
    }

    /// Whether results depend on the hardware, so the key includes the
    /// key-affecting facets of the environment fingerprint.
    pub fn measures_hardware(&self) -> bool {
        matches!(self, TaskSpec::Vit(_) | TaskSpec::OpBench(_))
            || self.resources().gpus > 0
            || self.measures()
    }

    /// The environment facets a hardware task's key holds: all of them
    /// for a task that measures on a GPU or with libtorch; for a measuring
    /// `Command` that asks for no GPU, the CPU's (a benchmark measured on
    /// one CPU model is no measurement of another) and not the GPU's,
    /// driver's, CUDA's or libtorch's, which it does not use.
    pub fn keyed_facet(&self, facet: &str) -> bool {
        match self {
            TaskSpec::Command(c) if c.resources.gpus == 0 => matches!(facet, "cpu" | "numa"),
            _ => true,
        }
    }
}

/// A spec that has the right types but is not usable.
#[derive(Debug, Clone)]
pub struct Invalid {
    pub message: String,
    pub help: String,
}

/// Everything a task may use while it runs. Paths are absolute.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskContext {
    pub root: PathBuf,
    /// The staging output directory; becomes `out/<stage>/<node>` on success.
    pub out: PathBuf,
    /// Upstream output directories by stage name (`${needs.S}`).
    pub needs: BTreeMap<String, Vec<PathBuf>>,
    /// The GPUs leased to the task (already in `CUDA_VISIBLE_DEVICES`).
    pub gpus: Vec<crate::gpu::GpuId>,
    /// The node id, for messages.
    pub node: String,
    /// The node's log: what a task keeps of a failed run goes beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    /// Upstream nodes by stage name, with their params: what a `Report` joins.
    #[serde(default)]
    pub upstream: BTreeMap<String, Vec<UpstreamNode>>,
}

/// The id param that numbers a repeated stage's repetitions.
pub const REP_PARAM: &str = "rep";

/// One upstream node as a task sees it: its id, its params (matrix cell and
/// inherited params) and its output directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamNode {
    pub id: String,
    pub params: BTreeMap<String, crate::value::Value>,
    pub dir: PathBuf,
    /// The repetition the node is (or follows), for a repeated stage: its
    /// param `rep` numbers repetitions of one configuration, which a
    /// report folds into one row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rep: Option<u32>,
    /// The members of a block measured together: the node's
    /// `results.json` holds one object per member, each a configuration
    /// of its own with the together axes' values added to `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<Together>,
    /// An A/A twin's configuration (`NAME#2` of a block with `check:
    /// true`), as a report reads a block: no row of its own, only the
    /// check of its first member.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aa_twin: bool,
}

/// A command prefix the engine runs a built-in task under (`numactl …`,
/// `nsys profile …`); `out` is the node's staging directory.
pub fn wrapper(spec: &TaskSpec, out: &std::path::Path) -> Result<Vec<String>, TaskError> {
    hygiene::command_prefix(spec, out)
}

/// Runs a built-in task in this process (`vitgraph exec-task`).
pub fn run_builtin(spec: &TaskSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    match spec {
        TaskSpec::Command(_) => Err(TaskError::NotBuiltin),
        TaskSpec::Vit(s) => vit::run(s, ctx),
        TaskSpec::OpBench(s) => opbench::run(s, ctx),
        TaskSpec::Export(s) => export::run(s, ctx),
        TaskSpec::Analyze(s) => analyze::run(s, ctx),
        TaskSpec::Report(s) => report::run(s, ctx),
        TaskSpec::Notebook(s) => notebook::run(s, ctx),
        TaskSpec::Import(s) => import::run(s, ctx),
    }
}

/// The longest file name most file systems take (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// An output name is a plain relative path inside `${out}`: no `.` or `..`
/// segments, no empty segment (`a//b`, a trailing `/`), segments no longer
/// than a file name may be, and not one of vitgraph's own scratch names.
fn check_output_name(out: &str) -> Result<(), Invalid> {
    let segments: Vec<&str> = out.split('/').collect();
    let plain: Vec<&str> = segments
        .iter()
        .copied()
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let bad = out.is_empty()
        || out.starts_with('/')
        || segments
            .iter()
            .any(|s| s.is_empty() || *s == "." || *s == "..")
        || out.contains('\0');
    if bad {
        let help = if !out.starts_with('/') && !plain.is_empty() && !plain.contains(&"..") {
            format!("write `{}`", plain.join("/"))
        } else {
            "name the file relative to the node's output directory, e.g. `results.json`".into()
        };
        return Err(Invalid {
            message: format!("output `{out}` must be a plain relative path inside `${{out}}`"),
            help,
        });
    }
    if let Some(long) = segments.iter().find(|s| s.len() > NAME_MAX) {
        return Err(Invalid {
            message: format!(
                "output `{out}` has a name of {} bytes; file systems take at most {NAME_MAX}",
                long.len()
            ),
            help: "use a shorter file name".into(),
        });
    }
    if segments[0].starts_with(".vitgraph-") {
        return Err(Invalid {
            message: format!("output `{out}`: names starting with `.vitgraph-` are vitgraph's own"),
            help: "rename the output".into(),
        });
    }
    Ok(())
}

/// Whether the task needs libtorch to run.
pub fn needs_torch(spec: &TaskSpec) -> bool {
    matches!(spec, TaskSpec::Vit(_) | TaskSpec::OpBench(_))
}

/// The executable that runs `spec` as `exec-task`: `vitgraph-torch` for
/// libtorch tasks when this build lacks libtorch and one is found, this
/// executable otherwise (which then fails the task saying how to build it).
pub fn executable_for(spec: &TaskSpec) -> std::io::Result<std::path::PathBuf> {
    if needs_torch(spec) && !cfg!(feature = "torch") {
        if let Some(exe) = crate::host::torch_exe::torch_executable() {
            return Ok(exe);
        }
    }
    std::env::current_exe()
}
