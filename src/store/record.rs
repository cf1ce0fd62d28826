//! What the store records: runs (a successful build of one key), attempts (every
//! time a node started), and the values the store's queries return.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::hash::ContentHash;

/// A successful run to record; see [`crate::store::Store::commit_success`].
pub struct NewRun<'a> {
    pub node_id: &'a str,
    pub stage: &'a str,
    pub key: ContentHash,
    /// The key's parts (spec, inputs, upstream manifests, env...) for `explain` diffs.
    pub key_parts: RawJson,
    /// Declared outputs, relative to the staging directory.
    pub outputs: &'a [String],
    /// The full environment record (record-only facets too).
    pub env: &'a serde_json::Value,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// The task's combined stdout/stderr log in staging, stored as an object too.
    pub log: Option<&'a Path>,
    /// Replace a run recorded before for the same key (`build --force`: a
    /// deliberate re-measurement) instead of keeping the earlier one.
    pub replace: bool,
}

/// A recorded successful run. `node_id` and `stage` are those of the node the
/// record was asked for: two nodes with one key share one run.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub node_id: String,
    pub stage: String,
    pub key: ContentHash,
    /// The key's parts, as recorded (parsed only where a diff is needed).
    pub key_parts: RawJson,
    /// Sorted by name.
    pub outputs: Vec<OutputEntry>,
    pub env: RawJson,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    pub log: Option<ContentHash>,
}

/// JSON text kept as it was stored. Loading thousands of runs for `status`
/// must not build a JSON tree per run; callers parse the few they need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawJson(pub String);

impl RawJson {
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap_or(serde_json::Value::Null)
    }

    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(&self.0).ok()
    }
}

impl From<&serde_json::Value> for RawJson {
    fn from(v: &serde_json::Value) -> RawJson {
        RawJson(v.to_string())
    }
}

impl RunRecord {
    /// blake3 over the sorted (name, hash) list: what dependents' keys include.
    /// Two runs whose outputs are byte-identical have the same manifest hash,
    /// which is what gives early cutoff.
    pub fn manifest_hash(&self) -> ContentHash {
        manifest_hash(&self.outputs)
    }
}

/// The manifest hash of an output list (sorted by name here, whatever the input order).
pub(super) fn manifest_hash(outputs: &[OutputEntry]) -> ContentHash {
    let mut sorted: Vec<&OutputEntry> = outputs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"vitgraph-manifest-v1\0");
    for entry in sorted {
        // Length-prefixed so that no two lists encode alike.
        hasher.update(&(entry.name.len() as u64).to_le_bytes());
        hasher.update(entry.name.as_bytes());
        hasher.update(&entry.hash.0);
    }
    ContentHash(*hasher.finalize().as_bytes())
}

/// The stored form of an output list: per entry, the name's length (u32 LE),
/// the name, the 32-byte hash and the size (u64 LE). Decoding it is a copy,
/// which matters when `load_states` reads ten thousand runs.
pub(crate) fn encode_outputs(outputs: &[OutputEntry]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(outputs.iter().map(|o| o.name.len() + 44).sum());
    for entry in outputs {
        bytes.extend_from_slice(&(entry.name.len() as u32).to_le_bytes());
        bytes.extend_from_slice(entry.name.as_bytes());
        bytes.extend_from_slice(&entry.hash.0);
        bytes.extend_from_slice(&entry.size.to_le_bytes());
    }
    bytes
}

/// Reads back [`encode_outputs`]; None when the bytes are damaged.
pub(crate) fn decode_outputs(mut bytes: &[u8]) -> Option<Vec<OutputEntry>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (bytes.get(..n)?, bytes.get(n..)?);
        *bytes = tail;
        Some(head)
    }
    let mut outputs = Vec::new();
    while !bytes.is_empty() {
        let len = u32::from_le_bytes(take(&mut bytes, 4)?.try_into().ok()?) as usize;
        let name = String::from_utf8(take(&mut bytes, len)?.to_vec()).ok()?;
        let hash = ContentHash(take(&mut bytes, 32)?.try_into().ok()?);
        let size = u64::from_le_bytes(take(&mut bytes, 8)?.try_into().ok()?);
        outputs.push(OutputEntry { name, hash, size });
    }
    Some(outputs)
}

/// One output file of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputEntry {
    pub name: String,
    pub hash: ContentHash,
    pub size: u64,
}

/// Everything recorded about one node id.
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    /// The node's current successful run (any key): the latest committed or
    /// materialized for this node id.
    pub latest_success: Option<RunRecord>,
    /// The most recent attempt.
    pub last_attempt: Option<Attempt>,
}

/// One start of a node's task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub key: ContentHash,
    pub status: AttemptStatus,
    pub started_at_ms: i64,
    /// The failure message, for failed attempts.
    pub message: Option<String>,
    /// The failure as the engine described it (JSON), when it did.
    pub failure: Option<RawJson>,
    /// The cluster job it ran as (JSON), for attempts run on a cluster.
    pub job: Option<RawJson>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptStatus {
    Running,
    Succeeded,
    Failed,
    Interrupted,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Running => "running",
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(text: &str) -> Option<AttemptStatus> {
        match text {
            "running" => Some(AttemptStatus::Running),
            "succeeded" => Some(AttemptStatus::Succeeded),
            "failed" => Some(AttemptStatus::Failed),
            "interrupted" => Some(AttemptStatus::Interrupted),
            _ => None,
        }
    }
}

/// Identifies an attempt between `begin_attempt` and its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttemptId(pub i64);

/// The state of a node's materialized outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputCheck {
    Intact,
    /// The first declared output (by name) that is absent.
    Missing(String),
    /// The first declared output (by name) whose content differs from the run's.
    Modified(String),
}

/// One damaged object found by `verify`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The object's path.
    pub object: String,
    /// The content its name promises.
    pub named: ContentHash,
    pub kind: DamageKind,
    /// Node ids whose recorded runs refer to the object.
    pub runs: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// The content no longer hashes to the object's name.
    Corrupt { actual: ContentHash },
    /// A recorded run refers to it but it is absent.
    Missing,
    /// It exists but cannot be read.
    Unreadable(String),
}

/// What `verify --repair` did with the damage it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// Objects rewritten from an intact copy in `out/`: (object, the copy).
    pub repaired: Vec<(String, String)>,
    /// Objects set aside or missing with no intact copy: their nodes run
    /// again when a build must restore them.
    pub unrepaired: Vec<Damage>,
}

/// What `gc` removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    pub objects_removed: u64,
    pub bytes_freed: u64,
    pub staging_removed: u64,
    pub locks_removed: u64,
    /// Directories under `cache/jobs/` of finished cluster jobs.
    pub job_dirs_removed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, content: &[u8]) -> OutputEntry {
        OutputEntry {
            name: name.into(),
            hash: ContentHash::of_bytes(content),
            size: content.len() as u64,
        }
    }

    #[test]
    fn manifest_hash_ignores_order_and_sizes_but_not_names_or_content() {
        let a = entry("a.txt", b"1");
        let b = entry("b.txt", b"2");
        assert_eq!(
            manifest_hash(&[a.clone(), b.clone()]),
            manifest_hash(&[b.clone(), a.clone()])
        );
        let renamed = entry("c.txt", b"2");
        assert_ne!(
            manifest_hash(&[a.clone(), b.clone()]),
            manifest_hash(&[a.clone(), renamed])
        );
        let changed = entry("b.txt", b"3");
        assert_ne!(manifest_hash(&[a.clone(), b]), manifest_hash(&[a, changed]));
    }

    #[test]
    fn manifest_hash_is_unambiguous_about_name_boundaries() {
        let h = ContentHash::of_bytes(b"x");
        let one = [OutputEntry {
            name: "ab".into(),
            hash: h,
            size: 1,
        }];
        let two = [OutputEntry {
            name: "a".into(),
            hash: h,
            size: 1,
        }];
        assert_ne!(manifest_hash(&one), manifest_hash(&two));
    }

    #[test]
    fn output_lists_round_trip_and_damage_is_detected() {
        let outputs = vec![
            entry("plots/a.svg", b"<svg/>"),
            entry("v.txt", b"1"),
            entry("", b""),
        ];
        let bytes = encode_outputs(&outputs);
        assert_eq!(decode_outputs(&bytes), Some(outputs));
        assert_eq!(decode_outputs(&[]), Some(vec![]));
        assert_eq!(decode_outputs(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode_outputs(&[255, 255, 255, 255, 0]), None);
    }

    #[test]
    fn attempt_status_round_trips() {
        for s in [
            AttemptStatus::Running,
            AttemptStatus::Succeeded,
            AttemptStatus::Failed,
            AttemptStatus::Interrupted,
        ] {
            assert_eq!(AttemptStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(AttemptStatus::parse("done"), None);
    }
}
