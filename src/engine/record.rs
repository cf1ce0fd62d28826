//! Recording a finished run, one way for every executor: the outputs a task
//! left in its staging directory are checked, copied into the store and
//! materialized into `out/`, ready for a group commit. A job the build
//! waited for (`job`) and a cluster job a driver that ended left behind
//! (`slurm::collect`) both go through [`stage`].

use std::path::Path;

use super::failure::{FailureKind, NodeFailure};
use crate::hash::ContentHash;
use crate::store::{AttemptId, Materialized, NewRun, RawJson, StagedRun, Store, StoreError};

/// A finished attempt whose run is to be recorded.
pub(crate) struct Finished<'a> {
    pub attempt: AttemptId,
    pub node_id: &'a str,
    pub stage: &'a str,
    pub key: ContentHash,
    pub key_parts: RawJson,
    /// The declared outputs, relative to `staging`.
    pub outputs: &'a [String],
    pub env: &'a serde_json::Value,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    pub staging: &'a Path,
    pub log: &'a Path,
    /// `out/<stage>/<node>`.
    pub dest: &'a Path,
    /// Replace an earlier run of the key (`--force`, a damaged run).
    pub replace: bool,
    /// The task measures (its `results.json` may hold a verdict, see
    /// `validity`); no other task's outputs are read.
    pub measures: bool,
    /// The member keys of a block measured together (`together`).
    pub members: Option<Vec<String>>,
    /// The A/A check's members (`check: true`): the first member's key and
    /// its twin's.
    pub aa: Option<(String, String)>,
}

/// Stages the run of `f` (outputs copied into the store) and materializes it.
pub(crate) fn stage(
    store: &Store,
    f: Finished<'_>,
) -> Result<(StagedRun, Materialized), StoreError> {
    // A run measured invalid carries its verdict in its record; the run it
    // replaces says how many times in a row the key was.
    if f.measures {
        let path = f.staging.join(crate::tasks::command::RESULTS_JSON);
        crate::tasks::command::check_results(&path, f.members.as_deref()).map_err(
            |(detail, help)| StoreError::BadResults {
                node_id: f.node_id.to_owned(),
                path: f.dest.join(crate::tasks::command::RESULTS_JSON),
                detail,
                help,
            },
        )?;
    }
    let before = if f.replace && f.measures {
        store.reader().run_for_key(&f.key)?
    } else {
        None
    };
    let aa = f.aa.as_ref().and_then(|(baseline, twin)| {
        let path = f.staging.join(crate::tasks::command::RESULTS_JSON);
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        let check = crate::tasks::aa_check::judge(&doc, baseline, twin)?;
        let reason = check.off().then(|| check.reason(baseline, twin));
        Some((check, reason))
    });
    let env = f
        .measures
        .then(|| super::validity::record_env(f.env, f.staging, before.as_ref(), aa.as_ref()))
        .flatten();
    let new = NewRun {
        node_id: f.node_id,
        stage: f.stage,
        key: f.key,
        key_parts: f.key_parts,
        outputs: f.outputs,
        env: env.as_ref().unwrap_or(f.env),
        started_at_ms: f.started_at_ms,
        duration_ms: f.duration_ms,
        log: Some(f.log),
        replace: f.replace,
    };
    let staged = store.objects().stage_run(f.attempt, new, f.staging)?;
    let materialized = store.objects().materialize_files(&staged.run, f.dest)?;
    Ok((staged, materialized))
}

/// The failure a [`stage`] error is: the task's (a declared output missing,
/// not a file, or a dangling link) or the store's.
pub(crate) fn failure_of(e: &StoreError) -> NodeFailure {
    let kind = if is_outputs(e) {
        FailureKind::Outputs
    } else {
        FailureKind::Store
    };
    NodeFailure::new(kind, e.to_string())
}

/// Whether the task, not the store, is at fault.
pub(crate) fn is_outputs(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::MissingOutput { .. }
            | StoreError::OutputNotFile { .. }
            | StoreError::DanglingOutput { .. }
            | StoreError::BadResults { .. }
    )
}

/// Keeps the summary of each recorded measurement (a run with a
/// `results.json`) in the store, for `vitgraph compare`. A cache: a run
/// whose summary cannot be kept is summarized when it is first compared.
pub(crate) fn keep_summaries(store: &Store, runs: &[crate::store::RunRecord]) {
    use crate::tasks::summary;
    let kept: Vec<(ContentHash, Vec<u8>)> = runs
        .iter()
        .filter_map(|run| run.outputs.iter().find(|o| o.name == "results.json"))
        .filter_map(|o| {
            let bytes = std::fs::read(store.objects().path(&o.hash)).ok()?;
            let doc = summary::parse(&bytes).ok()?;
            Some((o.hash, summary::encode(&summary::summarize(&doc))))
        })
        .collect();
    if !kept.is_empty() {
        let _ = store.journal().save_summaries(&kept);
    }
}
