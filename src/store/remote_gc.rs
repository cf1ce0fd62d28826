//! `vitgraph remote gc`: what a workspace's study no longer needs on a
//! remote, removed — a dry run unless asked.
//!
//! A record is removed only when all of these hold: its node belongs to
//! the selected nodes of this workspace (a remote shared by several
//! studies keeps every other study's records), it is not among its node's
//! newest [`GcRoots::last`] records on the remote, no baseline saved in
//! this workspace names its run, and it is older than the grace period. Then an
//! object is removed when no record left names it and it is older than the
//! grace period (a push touches the objects it relies on, so a push under
//! way keeps its objects); files left in `tmp/` by dead pushes go once
//! older than the grace period too.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use super::arrival::CarriedRun;
use super::error::StoreError;
use super::remote::Remote;
use super::remote_dir::{Area, Listed};
use crate::hash::ContentHash;

/// What a collection keeps whatever its age: each node's newest `last`
/// records, and the runs of `keys` (those this workspace's baselines name).
#[derive(Debug, Clone)]
pub(crate) struct GcRoots {
    pub last: usize,
    pub keys: HashSet<ContentHash>,
}

/// What a collection removes (or would): names under the remote.
#[derive(Debug, Default)]
pub(crate) struct RemoteGc {
    pub records: Vec<String>,
    pub objects: Vec<String>,
    pub tmp: Vec<String>,
    pub bytes: u64,
    pub records_kept: usize,
    /// Of those kept, the records a baseline alone kept.
    pub kept_for_baselines: usize,
}

fn older_than(file: &Listed, grace: Duration) -> bool {
    file.modified
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age >= grace)
}

/// The names of the newest `last` records of each of the nodes `ours`.
fn newest_records<'a>(
    records: &'a [(Listed, Option<CarriedRun>)],
    ours: &HashSet<&str>,
    last: usize,
) -> HashSet<&'a str> {
    let mut by_node: HashMap<&str, Vec<(i64, &str)>> = HashMap::new();
    for (file, run) in records {
        if let Some(run) = run.as_ref().filter(|r| ours.contains(r.node_id.as_str())) {
            by_node
                .entry(run.node_id.as_str())
                .or_default()
                .push((run.started_at_ms, file.name.as_str()));
        }
    }
    let mut newest = HashSet::new();
    for runs in by_node.values_mut() {
        runs.sort_by(|a, b| b.cmp(a));
        newest.extend(runs.iter().take(last.max(1)).map(|r| r.1));
    }
    newest
}

/// Finds what to remove from `remote` for the nodes `node_ids`, and
/// removes it when `apply`.
pub(crate) fn remote_gc(
    remote: &Remote,
    node_ids: &[&str],
    roots: &GcRoots,
    grace: Duration,
    apply: bool,
) -> Result<RemoteGc, StoreError> {
    let list = |area| remote.backend.list(area).map_err(|e| remote.unreachable(e));
    let ours: HashSet<&str> = node_ids.iter().copied().collect();
    let mut records: Vec<(Listed, Option<CarriedRun>)> = Vec::new();
    for file in list(Area::Runs)? {
        let run = file.hash.and_then(|key| remote.record_of(&key));
        records.push((file, run));
    }
    let newest = newest_records(&records, &ours, roots.last);
    let mut out = RemoteGc::default();
    let mut named: HashSet<ContentHash> = HashSet::new();
    for (file, run) in &records {
        let superseded = run.as_ref().is_some_and(|r| {
            ours.contains(r.node_id.as_str()) && !newest.contains(file.name.as_str())
        });
        let in_baseline = file.hash.is_some_and(|k| roots.keys.contains(&k));
        if superseded && !in_baseline && older_than(file, grace) {
            out.records.push(file.name.clone());
            continue;
        }
        out.records_kept += 1;
        if superseded && in_baseline && older_than(file, grace) {
            out.kept_for_baselines += 1;
        }
        match run {
            Some(run) => named.extend(run.outputs.iter().map(|o| o.hash).chain(run.log)),
            // What it names cannot be read: nothing is removed.
            None => {
                return Err(remote.error(
                    Some(&file.name),
                    "this record is not a run record, so what it names is unknown".into(),
                    "nothing was removed; `vitgraph remote verify` lists the damage, and pushing again from a machine that holds the run writes it anew once the damaged file is removed",
                ))
            }
        }
    }
    for object in list(Area::Objects)? {
        let kept = object.hash.is_some_and(|h| named.contains(&h));
        if !kept && older_than(&object, grace) {
            out.bytes += object.size;
            out.objects.push(object.name);
        }
    }
    for file in list(Area::Tmp)? {
        if older_than(&file, grace) {
            out.tmp.push(file.name);
        }
    }
    if apply {
        // Records first: an object is never missing under a record.
        for name in out.records.iter().chain(&out.objects).chain(&out.tmp) {
            remote.backend.remove(name).map_err(|e| {
                remote.error(
                    Some(name),
                    format!("it cannot be removed ({e})"),
                    "what was removed before it is gone; run `vitgraph remote gc --apply` again once it may be written",
                )
            })?;
        }
    }
    Ok(out)
}
