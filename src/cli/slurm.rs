//! `build --executor slurm`: the cluster executor and its lane, set up from
//! `vitgraph.ron`, the stages' settings and the command line.

use std::collections::HashMap;
use std::sync::Arc;

use super::args::BuildArgs;
use super::{usage, Failure};
use crate::config::WorkspaceFile;
use crate::config::DEFAULT_MAX_JOBS;
use crate::engine::plan::EnvProbe;
use crate::engine::schedule::{Lane, Pool};
use crate::exit;
use crate::graph::Graph;
use crate::slurm::executor::{Config, SlurmExecutor};
use crate::slurm::probe::{self, ClusterEnv};
use crate::store::{DriverLock, LiveJob, Store};
use crate::workspace::Workspace;

/// The cluster lane of a build, its executor, the environment its nodes are
/// judged with, and the driver lock it holds.
pub(super) struct ClusterRun<'a> {
    /// The cluster's lane (taken by the builder), and each node's lane.
    pub lane: Option<Lane>,
    pub lane_of: Vec<usize>,
    pub executor: SlurmExecutor,
    pub env: ClusterEnv<'a>,
    _lock: DriverLock,
}

pub(super) fn cluster<'a>(
    ws: &Workspace,
    graph: &Graph,
    selection: &[crate::graph::NodeIdx],
    store: &Arc<Store>,
    args: &BuildArgs,
    file: &WorkspaceFile,
    host: &'a dyn EnvProbe,
) -> Result<ClusterRun<'a>, Failure> {
    if !crate::slurm::cmd::available("sbatch") {
        return Err(usage(
            "`--executor slurm` submits jobs with `sbatch`, which is not on PATH",
            "run vitgraph where SLURM's commands are (a login node), or install them (Debian: `slurm-client`)",
        ));
    }
    let flags = args.slurm.settings();
    if let Some((field, message, help)) = flags.problem() {
        return Err(usage(format!("`--{field}`: {message}"), help));
    }
    let lock =
        match store.journal().lock_driver()? {
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
    let name = crate::slurm::job_name(&ws.root);
    // The compute nodes' environment, for the keys of the nodes that
    // measure hardware there: probed once per kind of job, then kept.
    // Only the nodes this build needs are probed for; a failed probe fails
    // the nodes that need it, not the build.
    let placed = crate::slurm::placed(graph);
    let wanted = probe::hardware_nodes(graph, &placed, &stages, Some(selection));
    let failed = probe::ensure(store, &exe, &name, &wanted)
        .map_err(|m| Failure::Report(miette::miette!("{m}"), exit::NODE_FAILED))?;
    let env = ClusterEnv::new(host, Some(store), &wanted)?.failed(failed);
    let executor = SlurmExecutor::new(Config {
        store: store.clone(),
        exe,
        stages,
        detach: args.detach,
        name,
        ctl: Arc::new(crate::slurm::cmd::Real),
    });
    // Jobs a driver that ended left behind (the lock says none runs now):
    // the finished ones are recorded before planning, the others adopted.
    let left = store.reader().live_jobs()?;
    if !left.is_empty() {
        let c = crate::slurm::collect::collect_finished(store, &left)?;
        note_collected(&c, args.json);
    }
    let mut live: HashMap<String, LiveJob> = HashMap::new();
    for job in store.reader().live_jobs()? {
        live.insert(job.node_id.clone(), job);
    }
    // The cluster's lane is the second one; a node runs there when it is placed there.
    let lane_of = placed.iter().map(|&p| usize::from(p)).collect();
    Ok(ClusterRun {
        lane: Some(Lane {
            executor: Arc::new(executor.clone()),
            pool: Pool::Count(slots),
            live,
        }),
        lane_of,
        executor,
        env,
        _lock: lock,
    })
}

/// The environment `status`, `explain` and `build -n` judge a cluster
/// workspace with: the stored probes of the compute nodes (none is run).
pub(super) fn stored_env<'a>(
    graph: &Graph,
    file: &WorkspaceFile,
    flags: &super::args::SlurmFlags,
    host: &'a dyn EnvProbe,
    store: Option<&Store>,
) -> Result<ClusterEnv<'a>, Failure> {
    let stages = crate::slurm::stage_settings(graph, &file.slurm, &flags.settings());
    let placed = crate::slurm::placed(graph);
    let wanted = probe::hardware_nodes(graph, &placed, &stages, None);
    Ok(ClusterEnv::new(host, store, &wanted)?)
}

/// Says what was recorded of jobs that finished while no driver waited.
pub(super) fn note_collected(c: &crate::slurm::collect::Collected, quiet: bool) {
    if quiet || (c.recorded.is_empty() && c.failed.is_empty()) {
        return;
    }
    eprintln!(
        "recorded {} cluster job(s) that finished while no vitgraph waited for them ({} failed)",
        c.recorded.len() + c.failed.len(),
        c.failed.len()
    );
}

/// With `VITGRAPH_TIMINGS`: how many SLURM commands the build ran.
pub(super) fn report_calls(e: &SlurmExecutor) {
    if std::env::var_os("VITGRAPH_TIMINGS").is_some() {
        let [sbatch, squeue, sacct, scancel, scontrol] = e.calls();
        eprintln!("slurm calls: sbatch {sbatch}, squeue {squeue}, sacct {sacct}, scancel {scancel}, scontrol {scontrol}");
    }
}

/// A cluster job of the workspace still queued or running, as `status`
/// shows it.
#[derive(serde::Serialize)]
pub(super) struct JobStatus {
    node: String,
    job_id: Option<String>,
    /// SLURM's state (`PENDING`, `RUNNING`…), when `squeue` answered.
    state: Option<String>,
    submitted_at_ms: Option<i64>,
}

/// `status`'s view of the cluster: records the jobs that finished (when no
/// driver runs), then lists those still queued or running.
pub(super) fn jobs_for_status(ws: &Workspace, quiet: bool) -> Result<Vec<JobStatus>, Failure> {
    let Some(store) = Store::open_existing(&ws.root)? else {
        return Ok(Vec::new());
    };
    let mut live = store.reader().live_jobs()?;
    if live.is_empty() {
        return Ok(Vec::new());
    }
    if !store.is_read_only() {
        // While a driver runs, it records its jobs itself.
        if let Ok(Ok(_lock)) = store.journal().lock_driver() {
            let c = crate::slurm::collect::collect_finished(&store, &live)?;
            note_collected(&c, quiet);
            live = store.reader().live_jobs()?;
        }
    }
    let states = if crate::slurm::cmd::available("squeue") {
        let calls = crate::slurm::cmd::Calls::default();
        crate::slurm::cmd::run(
            &calls,
            "squeue",
            &crate::slurm::cmd::squeue_args(),
            std::time::Duration::from_secs(30),
        )
        .ok()
        .filter(|o| o.ok)
        .map(|o| crate::slurm::cmd::parse_squeue(&o.stdout))
    } else {
        None
    };
    Ok(live
        .into_iter()
        .map(|l| {
            let rec: Option<crate::slurm::executor::JobRecord> = l.job.parse();
            let job_id = rec.as_ref().and_then(|r| r.job_id.clone());
            let state = match (&states, &job_id) {
                (Some(s), Some(id)) => Some(
                    s.get(id)
                        .map_or_else(|| "GONE".to_string(), |q| q.state.clone()),
                ),
                _ => None,
            };
            JobStatus {
                node: l.node_id,
                job_id,
                state,
                submitted_at_ms: rec.and_then(|r| r.submitted_at_ms),
            }
        })
        .collect())
}

/// The cluster jobs section of `status`.
pub(super) fn print_jobs(jobs: &[JobStatus]) {
    if jobs.is_empty() {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    println!(
        "on the cluster ({} jobs; `vitgraph build --executor slurm` collects them):",
        jobs.len()
    );
    for j in jobs {
        let age = j
            .submitted_at_ms
            .map(|t| format!("submitted {} ago", ago((now - t).max(0) / 1000)))
            .unwrap_or_else(|| "submission not confirmed".into());
        println!(
            "  {}  SLURM job {}  {}  {age}",
            j.node,
            j.job_id.as_deref().unwrap_or("?"),
            j.state.as_deref().unwrap_or("state unknown"),
        );
    }
}

fn ago(s: i64) -> String {
    match s {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{:.1} h", s as f64 / 3600.0),
    }
}
