//! The arguments `build` and the commands that judge like it (`status`,
//! `explain`, `build -n`) share: targets, the executor, SLURM flags.

use clap::{Args, ValueEnum};

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Stages, node ids, globs ('rq1_*') or pipeline file stems; none means everything.
    pub targets: Vec<String>,
    /// CPU slots: how many CPU nodes run at once (default: the number of cores).
    #[arg(short = 'j', long = "jobs")]
    pub jobs: Option<usize>,
    /// Keep going past failures: build everything that does not depend on a failed node.
    #[arg(short = 'k', long)]
    pub keep_going: bool,
    /// Print what would run and why; run nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// With `-n`: list every node that would run, not ten per stage.
    #[arg(short = 'v', long, requires = "dry_run")]
    pub verbose: bool,
    /// Run the targeted nodes even if they are fresh.
    #[arg(long)]
    pub force: bool,
    /// Where nodes run (default: `executor:` in vitgraph.ron, else local).
    #[arg(long, value_enum)]
    pub executor: Option<Executor>,
    /// GPUs for GPU nodes: indexes, UUIDs (`GPU-…`) or MIG ids, comma-separated
    /// (default: `CUDA_VISIBLE_DEVICES`, else the GPUs `nvidia-smi -L` lists).
    #[arg(long, value_name = "IDS")]
    pub gpus: Option<String>,
    /// One JSON object per line for each event, instead of progress output.
    #[arg(long)]
    pub json: bool,
    /// With `--executor slurm`: submit the ready jobs and exit; a later `build` collects them.
    #[arg(long)]
    pub detach: bool,
    /// With `--executor slurm`: run a node again this many times when its job failed with
    /// its node (NODE_FAIL, launch failure) or was preempted.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub retries: u32,
    /// Run the repetitions of a repeated stage one configuration after another,
    /// instead of in rounds across its configurations.
    #[arg(long)]
    pub no_interleave: bool,
    /// Seed of the shuffled order of configurations within each round of repetitions.
    #[arg(long, value_name = "N", conflicts_with = "no_interleave")]
    pub interleave_seed: Option<u64>,
    /// Keep runs whose telemetry says they are invalid (throttled, intruded, warming)
    /// instead of measuring them again; for this build only.
    #[arg(long)]
    pub accept_invalid: bool,
    /// Measure here the hardware nodes whose runs were measured on another
    /// host with other facets (pulled or imported; `status` lists them as
    /// measured elsewhere), instead of keeping those runs.
    #[arg(long)]
    pub measure_here: bool,
    #[command(flatten)]
    pub slurm: SlurmFlags,
}

/// SLURM settings on the command line, over `vitgraph.ron` and each stage's `slurm:`.
#[derive(Args, Debug, Default)]
pub struct SlurmFlags {
    /// SLURM partition for the cluster's jobs.
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// SLURM account to charge.
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// SLURM quality of service.
    #[arg(long, value_name = "NAME")]
    pub qos: Option<String>,
    /// Time limit per job (`30`, `1:30:00`, `2-00:00:00`).
    #[arg(long, value_name = "LIMIT")]
    pub time: Option<String>,
    /// Memory per job (`16G`).
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// Node features the jobs need (`--constraint`).
    #[arg(long, value_name = "FEATURES")]
    pub constraint: Option<String>,
}

impl SlurmFlags {
    pub(super) fn settings(&self) -> crate::config::Slurm {
        crate::config::Slurm {
            partition: self.partition.clone(),
            account: self.account.clone(),
            qos: self.qos.clone(),
            time: self.time.clone(),
            mem: self.mem.clone(),
            constraint: self.constraint.clone(),
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Executor {
    Local,
    Slurm,
}

/// Whether nodes run on SLURM: `--executor`, else `executor:` in vitgraph.ron.
pub(super) fn is_slurm(flag: Option<Executor>, file: &crate::config::WorkspaceFile) -> bool {
    use crate::config::ExecutorKind;
    match flag {
        Some(e) => e == Executor::Slurm,
        None => file.executor == Some(ExecutorKind::Slurm),
    }
}
