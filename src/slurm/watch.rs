//! The SLURM executor's watch over its jobs: result records, one `squeue`
//! per look, a settle window for records still on their way over the
//! shared file system, `sacct` for jobs that vanished, and cancelling.

use std::collections::HashMap;
use std::path::PathBuf;

use tokio::time::Instant;

use super::classify::{classify, Vanished};
use super::cmd;
use super::executor::{
    comment, record, JobRecord, Queued, SlurmExecutor, MIN_POLL, SCANCEL_BATCH, SETTLE,
};
use super::job::read_outcome;
use crate::engine::executor::Finished;
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::run::Job;
use crate::store::AttemptId;

impl SlurmExecutor {
    /// Settles the jobs whose result records appeared, and those that
    /// vanished without one; how many.
    pub(super) async fn collect(&self) -> usize {
        let mut settled = self.collect_results();
        {
            let mut st = self.state();
            if st.flights.is_empty() || st.last_squeue.is_some_and(|t| t.elapsed() < MIN_POLL) {
                return settled;
            }
            st.last_squeue = Some(Instant::now());
        }
        let me = self.clone();
        let queue = tokio::task::spawn_blocking(move || me.command("squeue", &cmd::squeue_args()))
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
    pub(super) fn confirm(&self, queue: &HashMap<String, cmd::Queued>) {
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
            let _ = self.0.cfg.store.journal().record_jobs(&journal);
        }
    }

    /// Replies to every flight whose result record exists.
    pub(super) fn collect_results(&self) -> usize {
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
                            let _ = self.0.cfg.store.journal().forget_env_probe(sig);
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
    pub(super) async fn classify_vanished(&self, dirs: &[PathBuf]) -> usize {
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
    pub(super) async fn sacct(&self, ids: &[String]) -> HashMap<String, cmd::Accounted> {
        if ids.is_empty()
            || self.state().sacct_works == Some(false)
            || !self.0.cfg.ctl.available("sacct")
        {
            return HashMap::new();
        }
        let me = self.clone();
        let args = cmd::sacct_args(ids);
        let out = tokio::task::spawn_blocking(move || me.command("sacct", &args))
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
    pub(super) async fn cancel_all(&self) {
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

    pub(super) fn scancel(&self, ids: &[String]) {
        for chunk in ids.chunks(SCANCEL_BATCH) {
            let _ = self.command("scancel", chunk);
        }
    }
}
