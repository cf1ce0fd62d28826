//! The SLURM executor's submissions: jobs grouped by their `sbatch`
//! arguments into arrays (chunked at `MaxArraySize`), journaled before and
//! after `sbatch`, rate-limited, transient errors retried with backoff.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Cores an `isolation: Gpu` job asks for when its stage's `slurm:` does
/// not say (`cpus_per_task`).
const ISOLATED_CPUS: u32 = 4;

use tokio::time::{Duration, Instant};

use super::cmd;
use super::executor::{
    comment, record, shell_quote, Flight, JobRecord, Queued, SlurmExecutor, MAX_BACKOFF,
    SBATCH_TRIES,
};
use super::job::JOB_FILE;
use crate::clock::now_ms;
use crate::config::{GpuRequest, Slurm, DEFAULT_MAX_SUBMIT_PER_S};
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::run::Job;
use crate::store::{AttemptId, RawJson};

impl SlurmExecutor {
    /// Submits every queued job; how many.
    pub(super) async fn submit_queued(&self) -> usize {
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
    pub(super) fn settings_of(&self, job: &Job) -> Slurm {
        self.0
            .cfg
            .stages
            .get(&job.stage)
            .cloned()
            .unwrap_or_default()
    }

    /// The `sbatch` arguments of a job's resources and settings (jobs with
    /// equal arguments share an array).
    pub(super) fn sbatch_args(&self, job: &Job) -> Vec<String> {
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
        let res = job.task.resources();
        // `isolation: Gpu`: its GPUs and cores bound to them, not a node.
        let isolated = job.isolated && res.gpus > 0;
        match s.cpus_per_task {
            Some(c) => a.push(format!("--cpus-per-task={c}")),
            None if isolated => a.push(format!("--cpus-per-task={ISOLATED_CPUS}")),
            None => {}
        }
        if res.gpus > 0 {
            a.push(match s.gpu_request.unwrap_or(GpuRequest::Gres) {
                GpuRequest::Gres => format!("--gres=gpu:{}", res.gpus),
                GpuRequest::Gpus => format!("--gpus={}", res.gpus),
            });
        }
        if isolated {
            a.push("--gres-flags=enforce-binding".into());
        } else if res.exclusive && res.gpus > 0 {
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
    pub(super) fn probe_of(&self, job: &Job) -> Option<String> {
        if !job.task.measures_hardware() {
            return None;
        }
        let s = self.settings_of(job);
        let selectors = super::probe::selectors(&s, &job.task.resources());
        Some(super::probe::signature(&selectors))
    }

    pub(super) async fn max_array(&self) -> usize {
        if let Some(m) = self.state().max_array {
            return m;
        }
        let calls = self.clone();
        let found = tokio::task::spawn_blocking(move || {
            let args = vec!["show".to_string(), "config".to_string()];
            calls
                .command("scontrol", &args)
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
    pub(super) async fn submit_array(&self, args: &[String], jobs: Vec<Queued>) {
        let store = &self.0.cfg.store;
        let batch = {
            let mut st = self.state();
            st.batches += 1;
            st.batches
        };
        let first = jobs.first().map_or(0, |q| q.job.attempt);
        let batch_dir = store
            .journal()
            .jobs_dir()
            .join(format!("batch-{first}-{batch}"));
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
    pub(super) fn prepare(&self, jobs: &[Queued], manifest: &Path) -> Result<(), NodeFailure> {
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
            let dir = store.journal().job_dir(AttemptId(q.job.attempt));
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
            .journal()
            .record_jobs(&journal)
            .map_err(|e| NodeFailure::store(&e))
    }

    /// Runs `sbatch` (rate-limited; transient errors retried with backoff);
    /// the job id, or why SLURM refused.
    pub(super) async fn sbatch(&self, args: Vec<String>) -> Result<String, String> {
        let mut backoff = Duration::from_secs(1);
        let mut last = String::new();
        for _ in 0..SBATCH_TRIES {
            self.rate_limit().await;
            let me = self.clone();
            let a = args.clone();
            let out = tokio::task::spawn_blocking(move || me.command("sbatch", &a))
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

    pub(super) async fn rate_limit(&self) {
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
    pub(super) fn launched(&self, id: &str, batch_dir: &Path, manifest: &Path, jobs: Vec<Queued>) {
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
        let journaled = store.journal().record_jobs(&journal);
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
                dir: store.journal().job_dir(AttemptId(q.job.attempt)),
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
}
