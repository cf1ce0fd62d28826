//! Which runs a remote holds, for `vitgraph status --remote`: of the runs
//! that stand for the selected nodes here, those the remote has too and
//! those only here; and the selected nodes with runs on the remote that
//! this store lacks (what a `pull` would bring).

use std::collections::{BTreeMap, HashSet};

use super::error::StoreError;
use super::open::Store;
use super::remote::Remote;
use crate::hash::ContentHash;

/// Where the selected nodes' runs are.
#[derive(Debug, Default)]
pub(crate) struct RemoteState {
    /// Runs here whose record the remote holds too.
    pub both: usize,
    /// Runs here the remote lacks, by node id.
    pub local_only: Vec<String>,
    /// Selected nodes with runs on the remote this store lacks: by node
    /// id, how many.
    pub remote_only: BTreeMap<String, usize>,
}

/// Where the runs `here` (node id, key of the run that stands for it) and
/// the remote's runs of `selected` nodes are.
pub(crate) fn remote_state(
    remote: &Remote,
    store: Option<&Store>,
    here: &[(&str, ContentHash)],
    selected: &[&str],
) -> Result<RemoteState, StoreError> {
    let keys = remote.keys()?;
    let on_remote: HashSet<ContentHash> = keys.iter().copied().collect();
    let mut out = RemoteState::default();
    for (node, key) in here {
        if on_remote.contains(key) {
            out.both += 1;
        } else {
            out.local_only.push((*node).to_owned());
        }
    }
    let known = match store {
        Some(s) => s.reader().known_keys(&keys)?,
        None => HashSet::new(),
    };
    let wanted: HashSet<&str> = selected.iter().copied().collect();
    for key in keys.iter().filter(|k| !known.contains(k)) {
        if let Some(run) = remote
            .record_of(key)
            .filter(|r| wanted.contains(r.node_id.as_str()))
        {
            *out.remote_only.entry(run.node_id).or_default() += 1;
        }
    }
    Ok(out)
}
