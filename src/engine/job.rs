//! One stale node, from its key lock to its record: the part of a build
//! that runs beside the scheduler for each started node.
//!
//! 1. Take the node key's lock (another vitgraph process building the same
//!    key makes this one wait, then reuse its run). The wait ends early on
//!    an interrupt, and nothing starts after one.
//! 2. Reuse a run recorded for the key meanwhile, or record an attempt and
//!    hand the job to the [`Executor`].
//! 3. On success: hash the outputs into the store, materialize them into
//!    `out/`, and queue the run with the [`Recorder`]. The node's slot is
//!    given back, and its dependents may start, as soon as its outputs are
//!    in `out/` ([`Progress::Staged`]); but a node's run is committed only
//!    after its upstream nodes' runs are, and never when one of them could
//!    not be recorded: it waits for their [`Commit`]s.
//! 4. On failure: record the attempt as failed — or as interrupted, for a
//!    transient failure, which says nothing about the node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::executor::{Executor, Interrupt, WorkDir};
use super::failure::{settle, FailureKind, NodeFailure};
use super::recorder::Recorder;
use super::run::{self, Job};
use crate::gpu::GpuId;
use crate::graph::NodeIdx;
use crate::hash::ContentHash;
use crate::store::{AttemptId, RawJson, RunRecord, Store};
use crate::tasks::{TaskSpec, UpstreamNode};

/// How often a node waiting for another process's key lock tries again.
const LOCK_RETRY: Duration = Duration::from_millis(25);

/// Whether a node's run was committed: None while it is being recorded.
pub(super) type Commit = tokio::sync::watch::Receiver<Option<bool>>;

/// What a started node reports to the scheduler.
pub(super) enum Progress {
    /// The task ended and its outputs are staged and in `out/`: the node's
    /// slot is free and its dependents may start; its run is being committed.
    Staged { idx: NodeIdx, run: RunRecord },
    /// A fresh node's stored run was restored into `out/`, or not.
    Restored {
        idx: NodeIdx,
        result: Result<RunRecord, NodeFailure>,
    },
    /// The node is done: recorded (or reused), or failed.
    Done {
        idx: NodeIdx,
        result: Result<Ran, NodeFailure>,
        started: Instant,
        record_ms: u64,
    },
}

/// An attempt whose task succeeded: its outputs wait in `work.staging`.
struct Attempted {
    attempt: AttemptId,
    work: WorkDir,
    started_at_ms: i64,
    duration_ms: i64,
}

/// A node that produced its run.
pub(super) enum Ran {
    /// Its task ran and the run was recorded.
    Built(RunRecord),
    /// A run of the same key, recorded meanwhile by `from` (another node or
    /// process), was reused.
    Reused { run: RunRecord, from: String },
}

/// Everything one started node needs, owned so it can move into a task.
pub(super) struct JobCtx {
    pub store: Arc<Store>,
    pub executor: Arc<dyn Executor>,
    pub interrupt: Interrupt,
    pub recorder: Recorder,
    pub progress: mpsc::UnboundedSender<Progress>,
    pub idx: NodeIdx,
    pub node_id: String,
    pub stage: String,
    pub task: TaskSpec,
    pub dest: PathBuf,
    pub log: PathBuf,
    pub root: PathBuf,
    pub key: ContentHash,
    pub recorded: RawJson,
    pub env: serde_json::Value,
    pub needs: BTreeMap<String, Vec<PathBuf>>,
    pub upstream: BTreeMap<String, Vec<UpstreamNode>>,
    pub gpus: Vec<GpuId>,
    /// The cores it is pinned to (see `slots`).
    pub cores: Option<Vec<usize>>,
    /// A measurement of `isolation: Gpu`.
    pub isolated: bool,
    /// The local slot the node runs in (`cpu:0`, `gpu:1`), recorded with its attempt.
    pub slot: Option<String>,
    /// `--force`: run even if the key is recorded, and replace that record.
    pub force: bool,
    /// A cluster job this node already runs as (a driver that ended left it).
    pub adopt: Option<crate::store::LiveJob>,
    /// How many times a failure of the cluster (not of the task) is retried.
    pub retries: u32,
    /// The upstream nodes whose runs are still being committed.
    pub upstream_commits: Vec<(String, Commit)>,
    /// For a hardware-measuring node: the environment facets of its key.
    pub facets: Option<std::collections::BTreeMap<String, String>>,
    /// The node's declared input files with the hashes its key was computed
    /// with: checked before the task starts and after it ends.
    pub inputs: Vec<(PathBuf, ContentHash)>,
}

impl JobCtx {
    /// Runs the node to its end and reports [`Progress::Done`].
    pub(super) async fn execute(self) {
        let started = Instant::now();
        let progress = self.progress.clone();
        let idx = self.idx;
        let (result, record_ms) = match self.locked().await {
            Ok((result, record_ms)) => (result, record_ms),
            Err(failure) => (Err(failure), 0),
        };
        let _ = progress.send(Progress::Done {
            idx,
            result,
            started,
            record_ms,
        });
    }

    async fn locked(mut self) -> Result<(Result<Ran, NodeFailure>, u64), NodeFailure> {
        let lock = self.lock().await?;
        // Nothing starts once the build is interrupted, however long the lock took.
        if self.interrupt.is_set() {
            return Err(NodeFailure::interrupted());
        }
        let existing = if self.force {
            None
        } else {
            self.store
                .reader()
                .run_for_key(&self.key)
                .map_err(|e| NodeFailure::store(&e))?
        };
        if let Some(run) = existing {
            let from = run.node_id.clone();
            let (store, dest) = (self.store.clone(), self.dest.clone());
            let (node_id, stage) = (self.node_id.clone(), self.stage.clone());
            let placed = tokio::task::spawn_blocking(move || {
                store.objects().materialize(&node_id, &stage, &run, &dest)
            })
            .await;
            match placed {
                Ok(Ok(run)) => {
                    drop(lock);
                    return Ok((Ok(Ran::Reused { run, from }), 0));
                }
                // Its stored run cannot be restored: run the task again and
                // replace that run.
                Ok(Err(e)) if e.is_damaged_object() => self.force = true,
                Ok(Err(e)) => return Err(NodeFailure::store(&e)),
                Err(e) => return Err(NodeFailure::new(FailureKind::Store, e.to_string())),
            }
        }
        let result = self.run_and_record().await;
        drop(lock);
        Ok(result)
    }

    /// The key lock, waited for while another process holds it.
    async fn lock(&self) -> Result<crate::store::KeyLock, NodeFailure> {
        loop {
            match self.store.journal().try_lock_key(&self.key) {
                Ok(Some(lock)) => return Ok(lock),
                Ok(None) => {}
                Err(e) => return Err(NodeFailure::store(&e)),
            }
            tokio::select! {
                _ = tokio::time::sleep(LOCK_RETRY) => {}
                _ = self.interrupt.wait() => return Err(NodeFailure::interrupted()),
            }
        }
    }

    async fn run_and_record(mut self) -> (Result<Ran, NodeFailure>, u64) {
        let stamps = match self.stamp_inputs() {
            Ok(stamps) => stamps,
            Err(f) => return (Err(f), 0),
        };
        let ran = match self.run_attempts().await {
            Ok(ran) => ran,
            Err(f) => return (Err(f), 0),
        };
        if let Some(changed) = self.changed_input(&stamps) {
            let _ = std::fs::remove_dir_all(&ran.work.staging);
            let f = NodeFailure::new(
                FailureKind::InputChanged,
                format!(
                    "`{changed}` changed while the task ran: its outputs may come from either version, so they were not recorded; build again"
                ),
            );
            return (Err(settle(&self.store, ran.attempt, f)), 0);
        }
        self.record(ran).await
    }

    /// Runs the task until an attempt succeeds; a failure of the cluster
    /// (not of the task) is retried with a new attempt, up to `retries`.
    async fn run_attempts(&mut self) -> Result<Attempted, NodeFailure> {
        // A cluster job of this very key, left by a driver that ended, is
        // adopted: its attempt goes on, nothing is submitted again.
        let mut adopt = self.adopt.take().filter(|live| live.key == self.key);
        let mut retried = 0;
        loop {
            let (attempt, work) = self.attempt(adopt.as_ref())?;
            let job = self.job(attempt, &work, adopt.take());
            let started_at_ms = now_ms();
            let t = Instant::now();
            let failure = match self.executor.run(job).await {
                Ok(finished) => {
                    // Measured elsewhere: the record of where.
                    if let (Some(env), true) = (finished.env, self.task.measures_hardware()) {
                        self.env = env;
                    }
                    return Ok(Attempted {
                        attempt,
                        work,
                        started_at_ms,
                        duration_ms: t.elapsed().as_millis() as i64,
                    });
                }
                // The job runs on; its attempt stays open for a later build.
                Err(f) if f.kind == FailureKind::Detached => return Err(f),
                Err(f) => f,
            };
            let _ = std::fs::remove_dir_all(&work.staging);
            let failure = self.with_log(failure);
            let retry = failure.kind.is_retried() && retried < self.retries;
            let failure = settle(&self.store, attempt, failure);
            if !retry || self.interrupt.is_set() {
                return Err(failure);
            }
            retried += 1;
        }
    }

    /// The job the executor runs for `attempt`.
    fn job(&self, attempt: AttemptId, work: &WorkDir, adopt: Option<crate::store::LiveJob>) -> Job {
        Job {
            node: self.node_id.clone(),
            stage: self.stage.clone(),
            attempt: attempt.0,
            adopt: adopt.map(|live| live.job.0),
            task: self.task.clone(),
            root: self.root.clone(),
            staging: work.staging.clone(),
            needs: self.needs.clone(),
            upstream: self.upstream.clone(),
            gpus: self.gpus.clone(),
            cores: self.cores.clone(),
            isolated: self.isolated,
            log: self.log.clone(),
            // So that any later vitgraph process can record a job that ran elsewhere.
            record: Some(run::Record {
                key: self.key,
                key_parts: self.recorded.0.clone(),
                env: self.env.clone(),
                dest: self.dest.clone(),
                replace: self.force,
                facets: self.facets.clone(),
            }),
        }
    }

    /// A failure with the end of the task's log, where the task wrote one
    /// (a job SLURM refused never ran).
    fn with_log(&self, failure: NodeFailure) -> NodeFailure {
        match failure.kind {
            FailureKind::Interrupted | FailureKind::Start | FailureKind::Unschedulable => failure,
            _ if failure.log.is_some() || !self.log.is_file() => failure,
            _ => failure.with_log(self.log.clone(), &crate::logs::excerpt(&self.log)),
        }
    }

    /// Stages the run of a successful attempt, releases the dependents, waits
    /// for the upstream runs' commits, and has the recorder commit it.
    async fn record(mut self, ran: Attempted) -> (Result<Ran, NodeFailure>, u64) {
        let store = self.store.clone();
        let Attempted {
            attempt,
            work,
            started_at_ms,
            duration_ms,
        } = ran;
        let record_start = Instant::now();
        let (idx, progress, recorder) = (self.idx, self.progress.clone(), self.recorder.clone());
        let upstream_commits = std::mem::take(&mut self.upstream_commits);
        let staging = work.staging.clone();
        let staged = tokio::task::spawn_blocking(move || {
            self.stage(attempt, &staging, started_at_ms, duration_ms)
        })
        .await;
        let (staged, materialized) = match staged {
            Ok(Ok(staged)) => staged,
            Ok(Err(failure)) => return (Err(settle(&store, attempt, failure)), ms(record_start)),
            Err(e) => {
                let f = NodeFailure::new(FailureKind::Store, e.to_string());
                return (Err(settle(&store, attempt, f)), ms(record_start));
            }
        };
        let _ = progress.send(Progress::Staged {
            idx,
            run: staged.run.clone(),
        });
        for (id, mut commit) in upstream_commits {
            let ok = commit
                .wait_for(Option::is_some)
                .await
                .map(|v| *v == Some(true))
                .unwrap_or(false);
            if !ok {
                let f = NodeFailure::new(
                    FailureKind::Upstream,
                    format!("`{id}` failed: its run could not be recorded, so this one was not"),
                );
                return (Err(settle(&store, attempt, f)), ms(record_start));
            }
        }
        let result = recorder.record(staged, materialized).await;
        if work.shared && result.is_ok() {
            // Its outputs and log are in the store now.
            let _ = std::fs::remove_dir_all(store.journal().job_dir(attempt));
        }
        (result.map(Ran::Built), ms(record_start))
    }

    /// Each declared input file's stat, once its content is checked to be the
    /// one the key was computed with (a change since the node was judged
    /// fails it at once).
    fn stamp_inputs(&self) -> Result<Vec<(PathBuf, crate::store::InputStamp)>, NodeFailure> {
        let mut stamps = Vec::with_capacity(self.inputs.len());
        for (path, hash) in &self.inputs {
            if path.is_dir() {
                continue;
            }
            match self.store.hasher().input_stamp_if(path, hash) {
                Ok(Some(stamp)) => stamps.push((path.clone(), stamp)),
                Ok(None) => {
                    return Err(NodeFailure::new(
                        FailureKind::InputChanged,
                        format!(
                            "`{}` changed after the node was judged; build again",
                            self.rel(path)
                        ),
                    ))
                }
                Err(e) => return Err(NodeFailure::store(&e)),
            }
        }
        Ok(stamps)
    }

    /// The first input whose stat moved since [`JobCtx::stamp_inputs`].
    fn changed_input(&self, stamps: &[(PathBuf, crate::store::InputStamp)]) -> Option<String> {
        stamps
            .iter()
            .find(|(path, stamp)| self.store.hasher().input_stamp(path) != *stamp)
            .map(|(path, _)| self.rel(path))
    }

    fn rel(&self, path: &std::path::Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// Begins an attempt (or goes on with an adopted one) and asks the
    /// executor where its outputs and log go.
    fn attempt(
        &mut self,
        adopt: Option<&crate::store::LiveJob>,
    ) -> Result<(AttemptId, WorkDir), NodeFailure> {
        let store = self.store.clone();
        let attempt = match adopt {
            Some(live) => live.attempt,
            None => store
                .journal()
                .begin_attempt_in(&self.node_id, &self.key, self.slot.as_deref())
                .map_err(|e| NodeFailure::store(&e))?,
        };
        let work = self
            .executor
            .workdir(&store, attempt, &self.log)
            .map_err(|e| settle(&store, attempt, NodeFailure::store(&e)))?;
        self.log = work.log.clone();
        if let Some(dir) = self.log.parent() {
            if let Err(e) = std::fs::create_dir_all(dir) {
                let f = NodeFailure::new(
                    FailureKind::Start,
                    format!("cannot create `{}`: {e}", dir.display()),
                );
                return Err(settle(&store, attempt, f));
            }
        }
        Ok((attempt, work))
    }

    /// Hashes the staged outputs into the store and materializes them
    /// (blocking); removes the staging directory on failure.
    fn stage(
        self,
        attempt: AttemptId,
        staging: &std::path::Path,
        started_at_ms: i64,
        duration_ms: i64,
    ) -> Result<(crate::store::StagedRun, crate::store::Materialized), NodeFailure> {
        let outputs = self.task.outputs();
        let finished = super::record::Finished {
            attempt,
            node_id: &self.node_id,
            stage: &self.stage,
            key: self.key,
            key_parts: self.recorded.clone(),
            outputs: &outputs,
            env: &self.env,
            started_at_ms,
            duration_ms,
            staging,
            log: &self.log,
            dest: &self.dest,
            replace: self.force,
            measures: self.task.measures(),
            members: self.task.member_keys(),
            aa: self.task.aa_members(),
        };
        super::record::stage(&self.store, finished).map_err(|e| {
            let _ = std::fs::remove_dir_all(staging);
            super::record::failure_of(&e).with_log(self.log.clone(), "")
        })
    }
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

use crate::clock::now_ms;
