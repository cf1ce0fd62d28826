//! `build --executor slurm`: the cluster executor and its lane, set up from
//! `vitgraph.ron`, the stages' settings and the command line.

use std::collections::HashMap;
use std::sync::Arc;

use super::build::BuildArgs;
use super::{usage, Failure};
use crate::engine::schedule::Cluster;
use crate::graph::Graph;
use crate::slurm::executor::{Config, SlurmExecutor};
use crate::slurm::settings::DEFAULT_MAX_JOBS;
use crate::store::{DriverLock, LiveJob, Store};
use crate::workspace::Workspace;

/// The cluster lane of a build, its executor, and the driver lock it holds.
pub(super) struct ClusterRun {
    pub cluster: Option<Cluster>,
    pub executor: SlurmExecutor,
    _lock: DriverLock,
}

pub(super) fn cluster(
    ws: &Workspace,
    graph: &Graph,
    store: &Arc<Store>,
    args: &BuildArgs,
) -> Result<ClusterRun, Failure> {
    if !crate::slurm::cmd::available("sbatch") {
        return Err(usage(
            "`--executor slurm` submits jobs with `sbatch`, which is not on PATH",
            "run vitgraph where SLURM's commands are (a login node), or install them (Debian: `slurm-client`)",
        ));
    }
    let file = crate::pipeline::load_settings(&ws.root)?;
    let flags = args.slurm.settings();
    if let Some((field, message, help)) = flags.problem() {
        return Err(usage(format!("`--{field}`: {message}"), help));
    }
    let lock =
        match store.lock_driver()? {
            Ok(lock) => lock,
            Err(who) => return Err(usage(
                format!("another vitgraph build drives this workspace's cluster jobs ({who})"),
                "wait for it to end, or stop it (its jobs are kept: the next build adopts them)",
            )),
        };
    let stages = crate::slurm::stage_settings(graph, &file.slurm, &flags);
    let slots = stages
        .values()
        .filter_map(|s| s.max_jobs)
        .min()
        .unwrap_or(DEFAULT_MAX_JOBS) as usize;
    let exe = std::env::current_exe().map_err(|e| {
        usage(
            format!("cannot find the vitgraph executable: {e}"),
            "run vitgraph from a path the compute nodes can reach",
        )
    })?;
    let executor = SlurmExecutor::new(Config {
        store: store.clone(),
        exe,
        stages,
        detach: args.detach,
        name: crate::slurm::job_name(&ws.root),
    });
    // The latest running attempt of each node with a job left by a driver
    // that ended (the lock says none runs now).
    let mut live: HashMap<String, LiveJob> = HashMap::new();
    for job in store.live_jobs()? {
        live.insert(job.node_id.clone(), job);
    }
    Ok(ClusterRun {
        cluster: Some(Cluster {
            executor: Arc::new(executor.clone()),
            placed: crate::slurm::placed(graph),
            slots,
            live,
        }),
        executor,
        _lock: lock,
    })
}

/// With `VITGRAPH_TIMINGS`: how many SLURM commands the build ran.
pub(super) fn report_calls(e: &SlurmExecutor) {
    if std::env::var_os("VITGRAPH_TIMINGS").is_some() {
        let [sbatch, squeue, sacct, scancel, scontrol] = e.calls();
        eprintln!("slurm calls: sbatch {sbatch}, squeue {squeue}, sacct {sacct}, scancel {scancel}, scontrol {scontrol}");
    }
}
