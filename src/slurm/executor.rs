//! The SLURM executor: runs the nodes placed on the cluster as SLURM jobs.
//!
//! One monitor task per build does all the talking to SLURM:
//!
//! - **Submission.** The jobs handed over since the last look are grouped by
//!   their `sbatch` arguments (partition, time, memory, GPUs, …); each group
//!   goes out as one job array whose tasks read their job directory from a
//!   manifest file (`--array=0-N%K`, chunked at the cluster's
//!   `MaxArraySize`), rate-limited, transient `sbatch` errors retried with
//!   backoff. Each attempt is journaled in the store before `sbatch` (with
//!   its directory) and again after (with its job id and submit time).
//! - **Completion.** A job is finished when its result record
//!   (`cache/jobs/<attempt>/result.json`) appears; nothing else counts as
//!   success.
//! - **Liveness.** One `squeue` per look for all of this user's jobs. A job
//!   that left the queue (or reached a final state) without a result record
//!   is given a few seconds for the record to appear over the shared file
//!   system, then classified (`classify`), with `sacct` when it answers. A
//!   failed query is "unknown, keep waiting".
//! - **Interrupt.** Every job of the build is cancelled (`scancel`, batched).
//!
//! The interval between looks starts short after a submission or a
//! completion and grows while nothing happens, up to `poll_s`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

// tokio's clock: the tests run the executor on a paused one.
use tokio::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Notify};

use super::cmd::{self, Calls, SlurmCtl};
use crate::config::{Slurm, DEFAULT_POLL_S};
use crate::engine::executor::{Executor, Finished, RunFuture, WorkDir};
use crate::engine::failure::NodeFailure;
use crate::engine::run::Job;
use crate::store::{AttemptId, RawJson, Store};

/// The shortest wait between two looks at the cluster.
pub(super) const MIN_POLL: Duration = Duration::from_millis(200);
/// How long a job may be gone from the queue before its missing result
/// record is believed (a record written on a compute node can take a
/// moment to show over NFS).
pub(super) const SETTLE: Duration = Duration::from_secs(3);
/// How long jobs handed over together wait for more, to share an array.
pub(super) const GATHER: Duration = Duration::from_millis(50);
/// How long one SLURM command may take.
pub(super) const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// `sbatch` attempts for a transient error before the jobs fail.
pub(super) const SBATCH_TRIES: u32 = 9;

/// The longest wait between two `sbatch` tries (1, 2, 4, … s up to this:
/// about two minutes of outage in all).
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Job ids per `scancel`.
pub(super) const SCANCEL_BATCH: usize = 100;

/// What the executor needs to know about the build.
pub struct Config {
    pub store: Arc<Store>,
    /// The `vitgraph` the jobs run (`vitgraph slurm-job MANIFEST`).
    pub exe: PathBuf,
    /// Each stage's settings: the workspace's, the stage's, the flags'.
    pub stages: HashMap<String, Slurm>,
    /// Submit and leave the jobs running (`build --detach`).
    pub detach: bool,
    /// The jobs' name: `vg-` and a hash of the workspace's path.
    pub name: String,
    /// How SLURM's commands are run (the real ones, or a test's fake).
    pub ctl: Arc<dyn SlurmCtl>,
}

/// What the store keeps of a job (in its attempt's `job` column).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobRecord {
    pub executor: String,
    pub name: String,
    /// The array's manifest.
    pub manifest: PathBuf,
    pub index: usize,
    /// `123_4`; None between the journal entry and `sbatch`'s answer.
    pub job_id: Option<String>,
    pub submitted_at_ms: Option<i64>,
    /// SLURM's log of the job (its batch script's output).
    pub log: Option<PathBuf>,
}

pub(super) type Reply = oneshot::Sender<Result<Finished, NodeFailure>>;

pub(super) struct Queued {
    pub(super) job: Job,
    pub(super) reply: Reply,
}

/// A submitted (or adopted) job the build waits for.
pub(super) struct Flight {
    pub(super) dir: PathBuf,
    pub(super) job_id: Option<String>,
    pub(super) log: Option<PathBuf>,
    pub(super) last_state: Option<String>,
    pub(super) gone_since: Option<Instant>,
    pub(super) reply: Reply,
    /// An adopted job whose submission was never confirmed (its driver
    /// ended between the journal and `sbatch`'s answer): found in the queue
    /// by its array's comment, or submitted now if it is not there.
    pub(super) unconfirmed: Option<Unconfirmed>,
    /// For a hardware-measuring node: the probe its key was computed with.
    pub(super) probe: Option<String>,
}

pub(super) struct Unconfirmed {
    pub(super) job: Job,
    pub(super) manifest: PathBuf,
    pub(super) index: usize,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) queue: Vec<Queued>,
    pub(super) flights: Vec<Flight>,
    pub(super) last_push: Option<Instant>,
    pub(super) max_array: Option<usize>,
    pub(super) sacct_works: Option<bool>,
    pub(super) next_submit: Option<Instant>,
    pub(super) batches: u64,
    /// When `squeue` last ran: at most one per `MIN_POLL`, however often
    /// submissions and results wake the monitor.
    pub(super) last_squeue: Option<Instant>,
}

pub(super) struct Shared {
    pub(super) cfg: Config,
    pub(super) calls: Calls,
    pub(super) state: Mutex<State>,
    pub(super) wake: Notify,
    pub(super) interrupted: AtomicBool,
    pub(super) monitor: Once,
}

/// Runs jobs on SLURM (see the module docs).
#[derive(Clone)]
pub struct SlurmExecutor(pub(super) Arc<Shared>);

impl SlurmExecutor {
    pub fn new(cfg: Config) -> SlurmExecutor {
        SlurmExecutor(Arc::new(Shared {
            cfg,
            calls: Calls::default(),
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            interrupted: AtomicBool::new(false),
            monitor: Once::new(),
        }))
    }

    /// How many times each SLURM command ran: sbatch, squeue, sacct, scancel, scontrol.
    pub fn calls(&self) -> [u64; 5] {
        self.0.calls.snapshot()
    }

    /// Runs one SLURM command (blocking), counted.
    pub(super) fn command(&self, program: &str, args: &[String]) -> Result<cmd::Output, String> {
        self.0.calls.count(program);
        self.0.cfg.ctl.run(program, args, COMMAND_LIMIT)
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ensure_monitor(&self) {
        let me = self.clone();
        self.0.monitor.call_once(|| {
            tokio::spawn(me.monitor());
        });
    }

    async fn monitor(self) {
        let mut interval = MIN_POLL;
        loop {
            tokio::select! {
                _ = self.0.wake.notified() => {}
                _ = tokio::time::sleep(interval) => {}
            }
            if self.0.interrupted.load(Ordering::SeqCst) {
                self.cancel_all().await;
                return;
            }
            // Jobs handed over in one pass of the scheduler share arrays.
            let since = self.state().last_push;
            if since.is_some_and(|t| t.elapsed() < GATHER) {
                tokio::time::sleep(GATHER).await;
            }
            let submitted = self.submit_queued().await;
            let settled = self.collect().await;
            let max = Duration::from_secs_f64(self.poll_s());
            interval = if submitted + settled > 0 {
                MIN_POLL
            } else {
                (interval.mul_f64(1.5)).min(max).max(MIN_POLL)
            };
        }
    }

    fn poll_s(&self) -> f64 {
        self.0
            .cfg
            .stages
            .values()
            .filter_map(|s| s.poll_s)
            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))))
            .unwrap_or(DEFAULT_POLL_S)
    }
}

impl Executor for SlurmExecutor {
    fn run(&self, job: Job) -> RunFuture {
        self.ensure_monitor();
        let (reply, answer) = oneshot::channel();
        {
            let mut st = self.state();
            match job
                .adopt
                .as_deref()
                .and_then(|r| serde_json::from_str::<JobRecord>(r).ok())
            {
                Some(rec) => st.flights.push(Flight {
                    probe: self.probe_of(&job),
                    dir: self.0.cfg.store.journal().job_dir(AttemptId(job.attempt)),
                    unconfirmed: rec.job_id.is_none().then(|| Unconfirmed {
                        manifest: rec.manifest.clone(),
                        index: rec.index,
                        job: job.clone(),
                    }),
                    job_id: rec.job_id,
                    log: rec.log,
                    last_state: None,
                    gone_since: None,
                    reply,
                }),
                None => {
                    st.queue.push(Queued { job, reply });
                    st.last_push = Some(Instant::now());
                }
            }
        }
        self.0.wake.notify_one();
        Box::pin(async move {
            answer
                .await
                .unwrap_or_else(|_| Err(NodeFailure::interrupted()))
        })
    }

    fn interrupt(&self) {
        self.0.interrupted.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }

    fn workdir(
        &self,
        store: &Store,
        attempt: AttemptId,
        _log: &Path,
    ) -> Result<WorkDir, crate::store::StoreError> {
        let dir = store.journal().job_dir(attempt);
        Ok(WorkDir {
            staging: dir.join("out"),
            log: dir.join("task.log"),
            shared: true,
        })
    }
}

/// The `--comment` of an array: its manifest.
pub(super) fn comment(manifest: &Path) -> String {
    format!("vitgraph:{}", manifest.display())
}

pub(super) fn record(r: &JobRecord) -> RawJson {
    RawJson(serde_json::to_string(r).unwrap_or_default())
}

/// `p` quoted for `sh`.
pub(super) fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}
