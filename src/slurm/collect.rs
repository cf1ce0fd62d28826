//! Recording cluster jobs that finished while no driver waited for them: a
//! driver that was killed, or `build --detach`. The next `build` (before it
//! plans) and `status` record every job whose result record has landed —
//! its run, or its failure — without running anything; jobs still queued or
//! running are left to the next driver, which adopts them.

use std::path::Path;

use super::job::{read_outcome, JOB_FILE};
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::run::Job;
use crate::store::{LiveJob, Store, StoreError};

/// What [`collect_finished`] recorded.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Nodes whose runs were recorded.
    pub recorded: Vec<String>,
    /// Nodes whose jobs failed (recorded as failed attempts).
    pub failed: Vec<String>,
}

/// Records every finished job of `live` (the store's running attempts with
/// a job). The caller holds the workspace's driver lock.
pub fn collect_finished(store: &Store, live: &[LiveJob]) -> Result<Collected, StoreError> {
    let mut out = Collected::default();
    for job in live {
        let dir = store.journal().job_dir(job.attempt);
        let Some(outcome) = read_outcome(&dir) else {
            continue;
        };
        let failure = match outcome {
            Ok(o) if o.ok => match record_run(store, job, &dir, o.duration_ms as i64)? {
                None => {
                    out.recorded.push(job.node_id.clone());
                    let _ = std::fs::remove_dir_all(&dir);
                    continue;
                }
                Some(f) => f,
            },
            Ok(o) => o.failure.unwrap_or_else(|| {
                NodeFailure::new(FailureKind::Lost, "the job failed without saying why")
            }),
            Err(damaged) => damaged,
        };
        let task_log = dir.join("task.log");
        let failure = if failure.log.is_none() && task_log.is_file() {
            failure.with_log(task_log.clone(), &crate::logs::excerpt(&task_log))
        } else {
            failure
        };
        crate::engine::failure::settle(store, job.attempt, failure);
        out.failed.push(job.node_id.clone());
    }
    Ok(out)
}

/// Records the run of a finished job; Some(failure) when its outputs do
/// not make a run (a declared output is missing).
fn record_run(
    store: &Store,
    live: &LiveJob,
    dir: &Path,
    duration_ms: i64,
) -> Result<Option<NodeFailure>, StoreError> {
    let bytes = std::fs::read(dir.join(JOB_FILE))
        .map_err(|e| StoreError::io("read", &dir.join(JOB_FILE), e))?;
    let Ok(job) = serde_json::from_slice::<Job>(&bytes) else {
        return Ok(Some(NodeFailure::new(
            FailureKind::Lost,
            format!("`{}` cannot be read", dir.join(JOB_FILE).display()),
        )));
    };
    let Some(record) = job.record else {
        return Ok(Some(NodeFailure::new(
            FailureKind::Lost,
            "the job was submitted without what recording its run needs",
        )));
    };
    let outputs = job.task.outputs();
    let finished = crate::engine::record::Finished {
        attempt: live.attempt,
        node_id: &live.node_id,
        stage: &job.stage,
        key: record.key,
        key_parts: crate::store::RawJson(record.key_parts.clone()),
        outputs: &outputs,
        env: &record.env,
        started_at_ms: live.started_at_ms,
        duration_ms,
        staging: &job.staging,
        log: &job.log,
        dest: &record.dest,
        replace: record.replace,
        measures: job.task.measures(),
        members: job.task.member_keys(),
        aa: job.task.aa_members(),
    };
    let (staged, materialized) = match crate::engine::record::stage(store, finished) {
        Ok(s) => s,
        Err(e) if crate::engine::record::is_outputs(&e) => {
            return Ok(Some(crate::engine::record::failure_of(&e)))
        }
        Err(e) => return Err(e),
    };
    let runs = store.objects().commit_batch(vec![(staged, materialized)])?;
    crate::engine::record::keep_summaries(store, &runs);
    Ok(None)
}
