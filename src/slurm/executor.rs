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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Notify};

use super::classify::{classify, Vanished};
use super::cmd::{self, Calls};
use super::job::{read_outcome, JOB_FILE};
use crate::config::{GpuRequest, Slurm, DEFAULT_MAX_SUBMIT_PER_S, DEFAULT_POLL_S};
use crate::engine::executor::{Executor, Finished, RunFuture};
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::run::Job;
use crate::store::{AttemptId, RawJson, Store};

/// The shortest wait between two looks at the cluster.
const MIN_POLL: Duration = Duration::from_millis(200);
/// How long a job may be gone from the queue before its missing result
/// record is believed (a record written on a compute node can take a
/// moment to show over NFS).
const SETTLE: Duration = Duration::from_secs(3);
/// How long jobs handed over together wait for more, to share an array.
const GATHER: Duration = Duration::from_millis(50);
/// How long one SLURM command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// `sbatch` attempts for a transient error before the jobs fail.
const SBATCH_TRIES: u32 = 9;

/// The longest wait between two `sbatch` tries (1, 2, 4, … s up to this:
/// about two minutes of outage in all).
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Job ids per `scancel`.
const SCANCEL_BATCH: usize = 100;

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

type Reply = oneshot::Sender<Result<Finished, NodeFailure>>;

struct Queued {
    job: Job,
    reply: Reply,
}

/// A submitted (or adopted) job the build waits for.
struct Flight {
    dir: PathBuf,
    job_id: Option<String>,
    log: Option<PathBuf>,
    last_state: Option<String>,
    gone_since: Option<Instant>,
    reply: Reply,
    /// An adopted job whose submission was never confirmed (its driver
    /// ended between the journal and `sbatch`'s answer): found in the queue
    /// by its array's comment, or submitted now if it is not there.
    unconfirmed: Option<Unconfirmed>,
    /// For a hardware-measuring node: the probe its key was computed with.
    probe: Option<String>,
}

struct Unconfirmed {
    job: Job,
    manifest: PathBuf,
    index: usize,
}

#[derive(Default)]
struct State {
    queue: Vec<Queued>,
    flights: Vec<Flight>,
    last_push: Option<Instant>,
    max_array: Option<usize>,
    sacct_works: Option<bool>,
    next_submit: Option<Instant>,
    batches: u64,
    /// When `squeue` last ran: at most one per `MIN_POLL`, however often
    /// submissions and results wake the monitor.
    last_squeue: Option<Instant>,
}

struct Shared {
    cfg: Config,
    calls: Calls,
    state: Mutex<State>,
    wake: Notify,
    interrupted: AtomicBool,
    monitor: Once,
}

/// Runs jobs on SLURM (see the module docs).
#[derive(Clone)]
pub struct SlurmExecutor(Arc<Shared>);

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

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
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

    /// Submits every queued job; how many.
    async fn submit_queued(&self) -> usize {
        let queued = std::mem::take(&mut self.state().queue);
        if queued.is_empty() {
            return 0;
        }
        let n = queued.len();
        let mut groups: BTreeMap<Vec<String>, Vec<Queued>> = BTreeMap::new();
        for q in queued {
            let args = self.sbatch_args(&q.job);
            groups.entry(args).or_default().push(q);
        }
        let max_array = self.max_array().await;
        for (args, mut jobs) in groups {
            while !jobs.is_empty() {
                let rest = jobs.split_off(jobs.len().min(max_array));
                self.submit_array(&args, jobs).await;
                jobs = rest;
            }
        }
        n
    }

    /// The cluster settings of a job's stage (the workspace's, the stage's
    /// and the command line's, merged).
    fn settings_of(&self, job: &Job) -> Slurm {
        self.0
            .cfg
            .stages
            .get(&job.stage)
            .cloned()
            .unwrap_or_default()
    }

    /// The `sbatch` arguments of a job's resources and settings (jobs with
    /// equal arguments share an array).
    fn sbatch_args(&self, job: &Job) -> Vec<String> {
        let s = self.settings_of(job);
        let mut a = Vec::new();
        let mut opt = |flag: &str, v: &Option<String>| {
            if let Some(v) = v {
                a.push(format!("--{flag}={v}"));
            }
        };
        opt("partition", &s.partition);
        opt("account", &s.account);
        opt("qos", &s.qos);
        opt("time", &s.time);
        opt("mem", &s.mem);
        opt("constraint", &s.constraint);
        if let Some(c) = s.cpus_per_task {
            a.push(format!("--cpus-per-task={c}"));
        }
        let res = job.task.resources();
        if res.gpus > 0 {
            a.push(match s.gpu_request.unwrap_or(GpuRequest::Gres) {
                GpuRequest::Gres => format!("--gres=gpu:{}", res.gpus),
                GpuRequest::Gpus => format!("--gpus={}", res.gpus),
            });
        }
        if res.exclusive && res.gpus > 0 {
            a.push("--exclusive".into());
        }
        if let Some(limit) = s.array_limit {
            // Not an sbatch flag of its own: read back in `submit_array`.
            a.push(format!("%{limit}"));
        }
        a.extend(s.extra.unwrap_or_default());
        a
    }

    /// The signature of the probe a hardware-measuring job's key used.
    fn probe_of(&self, job: &Job) -> Option<String> {
        if !job.task.measures_hardware() {
            return None;
        }
        let s = self.settings_of(job);
        let selectors = super::probe::selectors(&s, &job.task.resources());
        Some(super::probe::signature(&selectors))
    }

    async fn max_array(&self) -> usize {
        if let Some(m) = self.state().max_array {
            return m;
        }
        let calls = self.clone();
        let found = tokio::task::spawn_blocking(move || {
            let args = vec!["show".to_string(), "config".to_string()];
            cmd::run(&calls.0.calls, "scontrol", &args, COMMAND_LIMIT)
                .ok()
                .and_then(|o| cmd::parse_max_array_size(&o.stdout))
        })
        .await
        .ok()
        .flatten();
        // Indexes run from 0 to MaxArraySize - 1 (SLURM's default is 1001).
        let m = found.unwrap_or(1001).saturating_sub(1).max(1);
        self.state().max_array = Some(m);
        m
    }

    /// Submits `jobs` as one array with `args`; replies to each job whose
    /// submission failed, and keeps the others in flight.
    async fn submit_array(&self, args: &[String], jobs: Vec<Queued>) {
        let store = &self.0.cfg.store;
        let batch = {
            let mut st = self.state();
            st.batches += 1;
            st.batches
        };
        let first = jobs.first().map_or(0, |q| q.job.attempt);
        let batch_dir = store.jobs_dir().join(format!("batch-{first}-{batch}"));
        let manifest = batch_dir.join("manifest");
        let prepared = self.prepare(&jobs, &manifest);
        if let Err(f) = prepared {
            for q in jobs {
                let _ = q.reply.send(Err(f.clone()));
            }
            return;
        }
        let mut flags: Vec<String> = args
            .iter()
            .filter(|a| !a.starts_with('%'))
            .cloned()
            .collect();
        let limit = args.iter().find_map(|a| a.strip_prefix('%'));
        let array = match limit {
            Some(k) => format!("--array=0-{}%{k}", jobs.len() - 1),
            None => format!("--array=0-{}", jobs.len() - 1),
        };
        let mut sbatch = vec![
            "--parsable".to_string(),
            format!("--job-name={}", self.0.cfg.name),
            format!("--output={}", batch_dir.join("slurm-%A_%a.log").display()),
            // How a driver that never got the job id finds the array again.
            format!("--comment={}", comment(&manifest)),
            array,
        ];
        sbatch.append(&mut flags);
        sbatch.push("--wrap".into());
        sbatch.push(format!(
            "exec {} slurm-job {}",
            shell_quote(&self.0.cfg.exe),
            shell_quote(&manifest)
        ));
        match self.sbatch(sbatch.clone()).await {
            Ok(id) => self.launched(&id, &batch_dir, &manifest, jobs),
            Err(message) => {
                let f = NodeFailure::new(
                    FailureKind::Unschedulable,
                    format!(
                        "SLURM refused the job: {}\n  command: sbatch {}",
                        message.trim(),
                        sbatch.join(" ")
                    ),
                );
                for q in jobs {
                    let _ = q.reply.send(Err(f.clone()));
                }
            }
        }
    }

    /// Writes each job's `job.json` and the array's manifest, and journals
    /// the attempts (without job ids yet).
    fn prepare(&self, jobs: &[Queued], manifest: &Path) -> Result<(), NodeFailure> {
        let store = &self.0.cfg.store;
        let io = |p: &Path, e: std::io::Error| {
            NodeFailure::new(
                FailureKind::Start,
                format!("cannot write `{}`: {e}", p.display()),
            )
        };
        let mut lines = String::new();
        let mut journal = Vec::with_capacity(jobs.len());
        for (index, q) in jobs.iter().enumerate() {
            let dir = store.job_dir(AttemptId(q.job.attempt));
            let file = dir.join(JOB_FILE);
            let body = serde_json::to_vec_pretty(&q.job).unwrap_or_default();
            crate::atomic::write(&file, &body).map_err(|e| io(&file, e))?;
            lines.push_str(&dir.display().to_string());
            lines.push('\n');
            journal.push((
                AttemptId(q.job.attempt),
                record(&JobRecord {
                    executor: "slurm".into(),
                    name: self.0.cfg.name.clone(),
                    manifest: manifest.to_path_buf(),
                    index,
                    job_id: None,
                    submitted_at_ms: None,
                    log: None,
                }),
            ));
        }
        crate::atomic::write_durable(manifest, lines.as_bytes()).map_err(|e| io(manifest, e))?;
        store
            .record_jobs(&journal)
            .map_err(|e| NodeFailure::store(&e))
    }

    /// Runs `sbatch` (rate-limited; transient errors retried with backoff);
    /// the job id, or why SLURM refused.
    async fn sbatch(&self, args: Vec<String>) -> Result<String, String> {
        let mut backoff = Duration::from_secs(1);
        let mut last = String::new();
        for _ in 0..SBATCH_TRIES {
            self.rate_limit().await;
            let me = self.clone();
            let a = args.clone();
            let out = tokio::task::spawn_blocking(move || {
                cmd::run(&me.0.calls, "sbatch", &a, COMMAND_LIMIT)
            })
            .await
            .map_err(|e| e.to_string())?;
            match out {
                Ok(o) if o.ok => {
                    return cmd::parse_sbatch(&o.stdout).ok_or_else(|| {
                        format!("sbatch answered `{}`, not a job id", o.stdout.trim())
                    })
                }
                Ok(o) if !cmd::sbatch_error_is_transient(&o.stderr) => return Err(o.stderr),
                Ok(o) => last = o.stderr,
                Err(e) => last = e,
            }
            if self.0.interrupted.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        Err(format!("{} (after {SBATCH_TRIES} tries)", last.trim()))
    }

    async fn rate_limit(&self) {
        let per_s = self
            .0
            .cfg
            .stages
            .values()
            .filter_map(|s| s.max_submit_per_s)
            .fold(DEFAULT_MAX_SUBMIT_PER_S, f64::min);
        let gap = Duration::from_secs_f64(1.0 / per_s);
        let wait = {
            let mut st = self.state();
            let now = Instant::now();
            let at = st.next_submit.map_or(now, |t| t.max(now));
            st.next_submit = Some(at + gap);
            at.saturating_duration_since(now)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// An array was accepted as job `id`: journal each task's job id, then
    /// wait for it (or, detached, leave it).
    fn launched(&self, id: &str, batch_dir: &Path, manifest: &Path, jobs: Vec<Queued>) {
        let store = &self.0.cfg.store;
        let now = now_ms();
        let journal: Vec<(AttemptId, RawJson)> = jobs
            .iter()
            .enumerate()
            .map(|(index, q)| {
                let job_id = format!("{id}_{index}");
                let log = batch_dir.join(format!("slurm-{id}_{index}.log"));
                (
                    AttemptId(q.job.attempt),
                    record(&JobRecord {
                        executor: "slurm".into(),
                        name: self.0.cfg.name.clone(),
                        manifest: manifest.to_path_buf(),
                        index,
                        job_id: Some(job_id),
                        submitted_at_ms: Some(now),
                        log: Some(log),
                    }),
                )
            })
            .collect();
        let journaled = store.record_jobs(&journal);
        let mut st = self.state();
        for (index, q) in jobs.into_iter().enumerate() {
            let job_id = format!("{id}_{index}");
            if let Err(e) = &journaled {
                // Not journaled: a driver that ends now would not know the
                // job; cancel it rather than leave it unowned.
                let f = NodeFailure::store(e);
                let _ = q.reply.send(Err(f));
                let me = self.clone();
                let ids = vec![job_id];
                tokio::task::spawn_blocking(move || me.scancel(&ids));
                continue;
            }
            if self.0.cfg.detach {
                let _ = q.reply.send(Err(NodeFailure::new(
                    FailureKind::Detached,
                    format!("submitted as SLURM job {job_id}"),
                )));
                continue;
            }
            st.flights.push(Flight {
                dir: store.job_dir(AttemptId(q.job.attempt)),
                job_id: Some(job_id),
                log: Some(batch_dir.join(format!("slurm-{id}_{index}.log"))),
                last_state: None,
                gone_since: None,
                probe: self.probe_of(&q.job),
                reply: q.reply,
                unconfirmed: None,
            });
        }
    }

    /// Settles the jobs whose result records appeared, and those that
    /// vanished without one; how many.
    async fn collect(&self) -> usize {
        let mut settled = self.collect_results();
        {
            let mut st = self.state();
            if st.flights.is_empty() || st.last_squeue.is_some_and(|t| t.elapsed() < MIN_POLL) {
                return settled;
            }
            st.last_squeue = Some(Instant::now());
        }
        let me = self.clone();
        let queue = tokio::task::spawn_blocking(move || {
            cmd::run(&me.0.calls, "squeue", &cmd::squeue_args(), COMMAND_LIMIT)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .filter(|o| o.ok)
        .map(|o| cmd::parse_squeue(&o.stdout));
        if let Some(q) = &queue {
            self.confirm(q);
        }
        let now = Instant::now();
        let mut overdue = Vec::new();
        {
            let mut st = self.state();
            for f in st.flights.iter_mut() {
                let seen = match (&queue, &f.job_id) {
                    // The query failed: unknown, keep waiting.
                    (None, _) => continue,
                    (Some(q), Some(id)) => q.get(id),
                    (Some(_), None) => None,
                };
                match seen {
                    Some(q) if !cmd::is_final(&q.state) => {
                        f.last_state = Some(q.state.clone());
                        f.gone_since = None;
                    }
                    Some(q) => {
                        f.last_state = Some(q.state.clone());
                        f.gone_since.get_or_insert(now);
                    }
                    None => {
                        f.gone_since.get_or_insert(now);
                    }
                }
                if f.gone_since.is_some_and(|t| now - t >= SETTLE) {
                    overdue.push(f.dir.clone());
                }
            }
        }
        if !overdue.is_empty() {
            // A record that landed meanwhile still counts.
            settled += self.collect_results();
            settled += self.classify_vanished(&overdue).await;
        }
        settled
    }

    /// Finds in the queue the jobs of adopted attempts whose submission was
    /// never confirmed (by their array's comment), and journals their ids.
    fn confirm(&self, queue: &HashMap<String, cmd::Queued>) {
        let mut journal = Vec::new();
        let mut st = self.state();
        for f in st.flights.iter_mut() {
            let Some(u) = &f.unconfirmed else { continue };
            let wanted = comment(&u.manifest);
            let suffix = format!("_{}", u.index);
            let Some(found) = queue
                .values()
                .find(|q| q.comment == wanted && q.id.ends_with(&suffix))
            else {
                continue;
            };
            let array = found.id.trim_end_matches(&suffix).to_string();
            let log = u
                .manifest
                .with_file_name(format!("slurm-{array}_{}.log", u.index));
            journal.push((
                AttemptId(u.job.attempt),
                record(&JobRecord {
                    executor: "slurm".into(),
                    name: self.0.cfg.name.clone(),
                    manifest: u.manifest.clone(),
                    index: u.index,
                    job_id: Some(found.id.clone()),
                    submitted_at_ms: None,
                    log: Some(log.clone()),
                }),
            ));
            f.job_id = Some(found.id.clone());
            f.log = Some(log);
            f.unconfirmed = None;
        }
        drop(st);
        if !journal.is_empty() {
            let _ = self.0.cfg.store.record_jobs(&journal);
        }
    }

    /// Replies to every flight whose result record exists.
    fn collect_results(&self) -> usize {
        let mut st = self.state();
        let mut n = 0;
        let mut i = 0;
        while i < st.flights.len() {
            match read_outcome(&st.flights[i].dir) {
                Some(outcome) => {
                    let f = st.flights.swap_remove(i);
                    let id = f.job_id.as_deref().unwrap_or("(id not recorded)");
                    if let (Ok(o), Some(sig)) = (&outcome, &f.probe) {
                        if o.failure
                            .as_ref()
                            .is_some_and(|x| x.kind == FailureKind::Key)
                        {
                            // The probe no longer matches its nodes.
                            let _ = self.0.cfg.store.forget_env_probe(sig);
                        }
                    }
                    let result = match outcome {
                        Ok(o) if o.ok => Ok(Finished { env: o.env }),
                        Ok(o) => {
                            let mut failure = o.failure.unwrap_or_else(|| {
                                NodeFailure::new(
                                    FailureKind::Lost,
                                    "the job failed without saying why",
                                )
                            });
                            failure.message =
                                format!("SLURM job {id} on `{}`: {}", o.host, failure.message);
                            Err(failure)
                        }
                        Err(damaged) => Err(damaged),
                    };
                    let _ = f.reply.send(result);
                    n += 1;
                }
                None => i += 1,
            }
        }
        n
    }

    /// Classifies the flights in `dirs` (gone without a record), asking
    /// `sacct` once for all of them when it answers.
    async fn classify_vanished(&self, dirs: &[PathBuf]) -> usize {
        let ids: Vec<String> = {
            let st = self.state();
            st.flights
                .iter()
                .filter(|f| dirs.contains(&f.dir))
                .filter_map(|f| f.job_id.clone())
                .collect()
        };
        let accounted = self.sacct(&ids).await;
        let mut st = self.state();
        let mut n = 0;
        let mut i = 0;
        while i < st.flights.len() {
            if !dirs.contains(&st.flights[i].dir) {
                i += 1;
                continue;
            }
            let f = st.flights.swap_remove(i);
            if let Some(u) = f.unconfirmed {
                // Never submitted after all (or long gone without a trace):
                // submit it now, under its attempt.
                st.queue.push(Queued {
                    job: Job {
                        adopt: None,
                        ..u.job
                    },
                    reply: f.reply,
                });
                st.last_push = Some(Instant::now());
                n += 1;
                continue;
            }
            let id = f.job_id.clone().unwrap_or_else(|| "(not recorded)".into());
            let failure = classify(&Vanished {
                job_id: &id,
                squeue_state: f.last_state.as_deref(),
                sacct: accounted.get(&id),
                log: f.log.as_deref(),
                cancelled_by_us: false,
            });
            let _ = f.reply.send(Err(failure));
            n += 1;
        }
        n
    }

    /// `sacct` rows for `ids`; empty when accounting is off or fails.
    async fn sacct(&self, ids: &[String]) -> HashMap<String, cmd::Accounted> {
        if ids.is_empty() || self.state().sacct_works == Some(false) || !cmd::available("sacct") {
            return HashMap::new();
        }
        let me = self.clone();
        let args = cmd::sacct_args(ids);
        let out = tokio::task::spawn_blocking(move || {
            cmd::run(&me.0.calls, "sacct", &args, COMMAND_LIMIT)
        })
        .await
        .ok()
        .and_then(Result::ok);
        match out {
            Some(o) if o.ok => cmd::parse_sacct(&o.stdout),
            Some(o) => {
                // "Slurm accounting storage is disabled": stop asking.
                if o.stderr.contains("disabled") || o.stdout.contains("disabled") {
                    self.state().sacct_works = Some(false);
                }
                HashMap::new()
            }
            None => HashMap::new(),
        }
    }

    /// Cancels every job of the build and replies "interrupted" to all.
    async fn cancel_all(&self) {
        let (queued, flights) = {
            let mut st = self.state();
            (
                std::mem::take(&mut st.queue),
                std::mem::take(&mut st.flights),
            )
        };
        let ids: Vec<String> = flights.iter().filter_map(|f| f.job_id.clone()).collect();
        if !ids.is_empty() {
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || me.scancel(&ids)).await;
        }
        for q in queued {
            let _ = q.reply.send(Err(NodeFailure::interrupted()));
        }
        for f in flights {
            let _ = f.reply.send(Err(NodeFailure::interrupted()));
        }
    }

    fn scancel(&self, ids: &[String]) {
        for chunk in ids.chunks(SCANCEL_BATCH) {
            let _ = cmd::run(&self.0.calls, "scancel", chunk, COMMAND_LIMIT);
        }
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
                    dir: self.0.cfg.store.job_dir(AttemptId(job.attempt)),
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

    fn remote(&self) -> bool {
        true
    }
}

/// The `--comment` of an array: its manifest.
fn comment(manifest: &Path) -> String {
    format!("vitgraph:{}", manifest.display())
}

fn record(r: &JobRecord) -> RawJson {
    RawJson(serde_json::to_string(r).unwrap_or_default())
}

/// `p` quoted for `sh`.
fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

use crate::clock::now_ms;
