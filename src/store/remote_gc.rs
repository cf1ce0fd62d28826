//! `vitgraph remote gc`: what a workspace's study no longer needs on a
//! remote, removed — a dry run unless asked.
//!
//! A record is removed only when all of these hold: its node belongs to
//! the selected nodes of this workspace (a remote shared by several
//! studies keeps every other study's records), a newer record of the same
//! node is on the remote, and it is older than the grace period. Then an
//! object is removed when no record left names it and it is older than the
//! grace period (a push touches the objects it relies on, so a push under
//! way keeps its objects); files left in `tmp/` by dead pushes go once
//! older than the grace period too.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::arrival::CarriedRun;
use super::error::StoreError;
use super::remote::{remote_keys, remote_objects, Remote};
use crate::hash::ContentHash;

/// What a collection removes (or would).
#[derive(Debug, Default)]
pub(crate) struct RemoteGc {
    pub records: Vec<PathBuf>,
    pub objects: Vec<PathBuf>,
    pub tmp: Vec<PathBuf>,
    pub bytes: u64,
    pub records_kept: usize,
}

fn older_than(path: &std::path::Path, grace: Duration) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age >= grace)
}

/// Finds what to remove from `remote` for the nodes `node_ids`, and
/// removes it when `apply`.
pub(crate) fn remote_gc(
    remote: &Remote<'_>,
    node_ids: &[&str],
    grace: Duration,
    apply: bool,
) -> Result<RemoteGc, StoreError> {
    let ours: HashSet<&str> = node_ids.iter().copied().collect();
    let mut records: Vec<(ContentHash, Option<CarriedRun>)> = Vec::new();
    for key in remote_keys(remote)? {
        let run = fs::read(remote.record(&key))
            .ok()
            .and_then(|t| serde_json::from_slice::<CarriedRun>(&t).ok());
        records.push((key, run));
    }
    // The newest record of each of our nodes.
    let mut newest: HashMap<&str, (i64, ContentHash)> = HashMap::new();
    for (key, run) in &records {
        if let Some(run) = run.as_ref().filter(|r| ours.contains(r.node_id.as_str())) {
            let e = newest
                .entry(run.node_id.as_str())
                .or_insert((run.started_at_ms, *key));
            if run.started_at_ms > e.0 {
                *e = (run.started_at_ms, *key);
            }
        }
    }
    let mut out = RemoteGc::default();
    let mut named: HashSet<ContentHash> = HashSet::new();
    for (key, run) in &records {
        let path = remote.record(key);
        let superseded = run.as_ref().is_some_and(|r| {
            ours.contains(r.node_id.as_str())
                && newest.get(r.node_id.as_str()).is_some_and(|n| n.1 != *key)
        });
        if superseded && older_than(&path, grace) {
            out.records.push(path);
            continue;
        }
        out.records_kept += 1;
        match run {
            Some(run) => named.extend(run.outputs.iter().map(|o| o.hash).chain(run.log)),
            // What it names cannot be read: nothing is removed.
            None => {
                return Err(StoreError::Remote {
                    name: remote.name.to_owned(),
                    path: path.clone(),
                    detail: "this record is not a run record, so what it names is unknown".into(),
                    help: "nothing was removed; `vitgraph remote verify` lists the damage, and pushing again from a machine that holds the run writes it anew once the damaged file is removed".into(),
                })
            }
        }
    }
    unnamed_objects(remote, &named, grace, &mut out)?;
    if let Ok(dir) = fs::read_dir(remote.root.join("tmp")) {
        for entry in dir.flatten() {
            if older_than(&entry.path(), grace) {
                out.tmp.push(entry.path());
            }
        }
    }
    if apply {
        // Records first: an object is never missing under a record.
        for path in out.records.iter().chain(&out.objects).chain(&out.tmp) {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove from the remote", path, e)),
            }
        }
    }
    Ok(out)
}

/// The objects of `remote` that no record in `named` names, older than
/// `grace`, into `out`.
fn unnamed_objects(
    remote: &Remote<'_>,
    named: &HashSet<ContentHash>,
    grace: Duration,
    out: &mut RemoteGc,
) -> Result<(), StoreError> {
    for (path, hash, size) in remote_objects(remote)? {
        let kept = hash.is_some_and(|h| named.contains(&h));
        if !kept && older_than(&path, grace) {
            out.bytes += size;
            out.objects.push(path);
        }
    }
    Ok(())
}
