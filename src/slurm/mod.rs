//! Running nodes as SLURM jobs (`vitgraph build --executor slurm`).
//!
//! - [`stage_settings`]: the settings (`crate::config`: `vitgraph.ron`'s
//!   `Slurm(…)`, a stage's `slurm:` and `placement:`) merged with the
//!   command line's flags;
//! - [`executor`]: submits job arrays, follows them, cancels them;
//! - [`job`]: the compute node's side (`vitgraph slurm-job`), which writes
//!   only files: the outputs and a result record;
//! - [`classify`]: why a job that left no result record ended;
//! - [`collect`]: recording jobs that finished while no driver waited;
//! - [`probe`]: the compute nodes' environment, for the keys of the nodes
//!   that measure hardware there;
//! - [`cmd`]: running and reading `sbatch`, `squeue`, `sacct`, `scancel`.

pub mod classify;
pub mod cmd;
pub mod collect;
pub mod executor;
#[cfg(test)]
mod fake;
pub mod job;
pub mod probe;
mod submit;
#[cfg(test)]
mod tests;
mod watch;

use std::collections::HashMap;

use crate::config::{Placement, Slurm};
use crate::graph::Graph;
use crate::tasks::TaskSpec;

/// Where each node of `graph` runs under `--executor slurm` (true: as a
/// job): as its stage's `placement:` says, else by kind — the analysis
/// tasks (`Analyze`, `Report`, `Export`) on the driver, everything else
/// (experiments, commands) on the cluster.
pub fn placed(graph: &Graph) -> Vec<bool> {
    let by_stage: HashMap<&str, Option<Placement>> = graph
        .stages
        .iter()
        .map(|s| (s.name.as_str(), s.placement))
        .collect();
    graph
        .nodes
        .iter()
        .map(
            |n| match by_stage.get(n.stage.as_str()).copied().flatten() {
                Some(p) => p == Placement::Cluster,
                None => !matches!(
                    n.task,
                    TaskSpec::Analyze(_)
                        | TaskSpec::Report(_)
                        | TaskSpec::Export(_)
                        | TaskSpec::Notebook(_)
                ),
            },
        )
        .collect()
}

/// Each stage's settings: the workspace's, then the stage's, then `flags`.
pub fn stage_settings(graph: &Graph, workspace: &Slurm, flags: &Slurm) -> HashMap<String, Slurm> {
    graph
        .stages
        .iter()
        .map(|s| (s.name.clone(), workspace.merged(&s.slurm).merged(flags)))
        .collect()
}

/// The name of a workspace's jobs: `vg-` and 8 hex digits of its path.
pub fn job_name(root: &std::path::Path) -> String {
    let h = blake3::hash(root.as_os_str().as_encoded_bytes());
    format!("vg-{}", &h.to_hex()[..8])
}
