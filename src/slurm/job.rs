//! The compute node's side of a cluster job: `vitgraph slurm-job MANIFEST`.
//!
//! An array task finds its job directory on line `SLURM_ARRAY_TASK_ID` of
//! the manifest, runs the node's task from `job.json` the way a local build
//! does (its own process group, output into `task.log`), and ends by writing
//! `result.json` — durably, then renamed into place — which is the one sign
//! the driver takes for "finished". It never opens the state database.
//!
//! When SLURM stops the job (`scancel`, a time limit, preemption), the task
//! is terminated and no result is written: the driver learns why from SLURM.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::engine::executor::{Executor, Interrupt, Local};
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::plan::EnvProbe;
use crate::engine::run::Job;

/// The files of a job's directory.
pub const JOB_FILE: &str = "job.json";
pub const STARTED_FILE: &str = "started.json";
pub const RESULT_FILE: &str = "result.json";

/// Where and as what the job started (rewritten when SLURM requeues it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    pub job_id: Option<String>,
    pub array_job_id: Option<String>,
    pub array_task_id: Option<String>,
    pub restart_count: Option<String>,
    pub host: String,
    pub cuda_visible_devices: Option<String>,
    pub slurm_job_gpus: Option<String>,
    pub started_at_ms: i64,
}

/// How the job's task ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    #[serde(default)]
    pub failure: Option<NodeFailure>,
    pub duration_ms: u64,
    pub host: String,
    pub job_id: Option<String>,
    /// This compute node's environment record, for hardware-measuring nodes.
    #[serde(default)]
    pub env: Option<serde_json::Value>,
}

/// Runs the job of this array task; the process's exit status.
pub fn run(manifest: &Path) -> Result<i32, String> {
    let index: usize = match std::env::var("SLURM_ARRAY_TASK_ID") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("SLURM_ARRAY_TASK_ID is `{v}`, not an index"))?,
        Err(_) => 0,
    };
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("cannot read the manifest `{}`: {e}", manifest.display()))?;
    let dir = text
        .lines()
        .nth(index)
        .map(PathBuf::from)
        .ok_or_else(|| format!("the manifest `{}` has no line {index}", manifest.display()))?;
    let bytes = std::fs::read(dir.join(JOB_FILE))
        .map_err(|e| format!("cannot read `{}`: {e}", dir.join(JOB_FILE).display()))?;
    let mut job: Job = serde_json::from_slice(&bytes)
        .map_err(|e| format!("`{}` is not a job: {e}", dir.join(JOB_FILE).display()))?;
    // The GPUs are the ones SLURM gave this job.
    job.gpus = crate::gpu::visible_from_env().unwrap_or_default();
    let measures = job.task.measures_hardware();
    let host_env = crate::engine::env::HostEnv::new();
    let env = |k: &str| std::env::var(k).ok();
    let started = Started {
        job_id: env("SLURM_JOB_ID"),
        array_job_id: env("SLURM_ARRAY_JOB_ID"),
        array_task_id: env("SLURM_ARRAY_TASK_ID"),
        restart_count: env("SLURM_RESTART_COUNT"),
        host: crate::host::env::hostname(),
        cuda_visible_devices: env("CUDA_VISIBLE_DEVICES"),
        slurm_job_gpus: env("SLURM_JOB_GPUS"),
        started_at_ms: now_ms(),
    };
    let json = serde_json::to_vec_pretty(&started).unwrap_or_default();
    crate::atomic::write(&dir.join(STARTED_FILE), &json)
        .map_err(|e| format!("cannot write `{}`: {e}", dir.join(STARTED_FILE).display()))?;
    // A requeued job starts over.
    let _ = std::fs::remove_dir_all(&job.staging);
    std::fs::create_dir_all(&job.staging)
        .map_err(|e| format!("cannot create `{}`: {e}", job.staging.display()))?;
    // A node keyed with a probe of other machines than this one must not
    // record its measurement here.
    if let Some(mismatch) = job
        .record
        .as_ref()
        .and_then(|r| r.facets.as_ref())
        .and_then(|expected| differs(expected, host_env.facets()))
    {
        let outcome = Outcome {
            ok: false,
            failure: Some(NodeFailure::new(
                FailureKind::Key,
                format!("this compute node's environment differs from the probe the node's key was computed with ({mismatch}); the next build probes the compute nodes again"),
            )),
            duration_ms: 0,
            host: started.host,
            job_id: started.job_id,
            env: None,
        };
        return write_outcome(&dir, &outcome).map(|()| 1);
    }
    let t = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))?;
    let local = Arc::new(Local::new());
    let interrupt = Interrupt::new();
    let result = runtime.block_on(async {
        interrupt.on_signals();
        let run = local.run(job);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = interrupt.wait() => {
                local.interrupt();
                run.await
            }
        }
    });
    // SLURM stopped the job (a time limit, `scancel`, preemption): it
    // signals every process of the job, the task as well as this one. No
    // result: the driver asks SLURM why. The signals arrive one process at
    // a time, so a task whose shell ended with 128 + SIGTERM (or SIGKILL)
    // may end before this process hears its own: give it a moment.
    let died_of_a_signal = matches!(&result, Err(f) if matches!(f.exit_code, Some(143 | 137)));
    if died_of_a_signal && !interrupt.is_set() {
        runtime.block_on(async {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), interrupt.wait()).await;
        });
    }
    let stopped =
        matches!(&result, Err(f) if matches!(f.signal, Some(libc::SIGTERM | libc::SIGKILL)));
    if interrupt.is_set() || stopped {
        return Ok(143);
    }
    let outcome = Outcome {
        ok: result.is_ok(),
        failure: result.err(),
        duration_ms: t.elapsed().as_millis() as u64,
        host: started.host,
        job_id: started.job_id,
        env: measures.then(|| host_env.record()),
    };
    write_outcome(&dir, &outcome)?;
    Ok(if outcome.ok { 0 } else { 1 })
}

/// Writes the result record: synced, then renamed into place.
fn write_outcome(dir: &Path, outcome: &Outcome) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(outcome).unwrap_or_default();
    crate::atomic::write_durable(&dir.join(RESULT_FILE), &json)
        .map_err(|e| format!("cannot write `{}`: {e}", dir.join(RESULT_FILE).display()))
}

/// The first facet this machine has otherwise than `expected` says, as
/// `facet expected → here`.
fn differs(
    expected: &std::collections::BTreeMap<String, String>,
    here: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    here.iter().find_map(|(k, v)| {
        let e = expected.get(k)?;
        (e != v).then(|| format!("{k} {e} → {v}"))
    })
}

/// Reads a job's result record, if it was written.
pub fn read_outcome(dir: &Path) -> Option<Result<Outcome, NodeFailure>> {
    let bytes = match std::fs::read(dir.join(RESULT_FILE)) {
        Ok(b) => b,
        Err(_) => return None,
    };
    Some(serde_json::from_slice(&bytes).map_err(|e| {
        NodeFailure::new(
            FailureKind::Lost,
            format!(
                "the job's result record `{}` is damaged ({e})",
                dir.join(RESULT_FILE).display()
            ),
        )
    }))
}

use crate::clock::now_ms;
