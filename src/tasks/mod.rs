//! The node kinds. A task gets a [`TaskContext`] (its resolved spec, its
//! upstream directories, a staging output directory, its device lease) and
//! returns an outcome; tasks never touch the store or the graph.
//!
//! `Command` runs under `sh -c` from the engine. Every built-in kind runs in a
//! child `vitgraph exec-task` process, so a crash, `numactl` or `nsys` wrapping
//! and SIGINT handling are the same for every kind.

pub mod analyze;
pub mod command;
#[cfg(feature = "torch")]
pub mod cuda;
#[cfg(feature = "torch")]
pub mod cupti;
#[cfg(feature = "torch")]
pub mod cupti_sqlite;
pub mod env;
pub mod error;
pub mod export;
pub mod hygiene;
pub mod nvtx;
pub mod opbench;
pub mod vit;

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
        }
    }

    /// Workspace files whose content is part of the key (relative to the root).
    pub fn inputs(&self) -> Vec<String> {
        match self {
            TaskSpec::Command(c) => c.inputs.clone(),
            TaskSpec::Vit(_) | TaskSpec::OpBench(_) => Vec::new(),
            TaskSpec::Export(e) => e.inputs(),
            TaskSpec::Analyze(a) => a.inputs(),
        }
    }

    /// Files the task must create in its output directory.
    pub fn outputs(&self) -> Vec<String> {
        match self {
            TaskSpec::Command(c) => c.outputs.clone(),
            TaskSpec::Vit(v) => vit::outputs(v),
            TaskSpec::OpBench(_) => vec!["results.json".to_owned()],
            TaskSpec::Export(_) => vec![export::OUTPUT.to_string()],
            TaskSpec::Analyze(_) => analyze::AnalyzeSpec::outputs(),
        }
    }

    pub fn resources(&self) -> Resources {
        match self {
            TaskSpec::Command(c) => c.resources.clone(),
            TaskSpec::Vit(v) => hygiene::device_resources(&v.device),
            TaskSpec::OpBench(o) => hygiene::device_resources(&o.device),
            TaskSpec::Export(_) | TaskSpec::Analyze(_) => Resources::default(),
        }
    }

    /// Whether results depend on the hardware, so the key includes the
    /// key-affecting facets of the environment fingerprint.
    pub fn measures_hardware(&self) -> bool {
        matches!(self, TaskSpec::Vit(_) | TaskSpec::OpBench(_)) || self.resources().gpus > 0
    }
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
    pub gpus: Vec<u32>,
    /// The node id, for messages.
    pub node: String,
}
