//! What arrives in the store from elsewhere — a bundle (`bundle`) or a
//! remote (`remote`) — and how: each object checked against its name into
//! a staging folder of this process, every run checked (its key against
//! its parts, its output names, the objects it names), then the objects
//! moved into `objects/` (put-if-absent), flushed, and the runs recorded
//! in one transaction. Until that transaction nothing is visible: a
//! process killed before it leaves unreferenced objects (`gc` removes
//! them) and a staging folder the next command removes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use rusqlite::{params, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::error::{IoContext, StoreError};
use super::fileio::{make_read_only, now_ms};
use super::record::{OutputEntry, RunRecord};
use super::roles::Objects;
use super::signing::{verifies, RecordSignature, SecretKey, Trust};
use crate::hash::ContentHash;

/// `signers`: who signed a run that arrived signed; `arrived`: the runs
/// that came from a bundle or a remote (measured elsewhere whatever the
/// host names say: cloud machines often share one).
const ARRIVAL_TABLES: &str = "
CREATE TABLE IF NOT EXISTS signers (key BLOB PRIMARY KEY, signer TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS arrived (key BLOB PRIMARY KEY) WITHOUT ROWID;
";

/// Objects that arrived damaged: by hash, the name they arrived under
/// and where their bytes were set aside.
pub(super) type Damaged = std::collections::BTreeMap<ContentHash, (String, PathBuf)>;

/// Splits `runs` (and their `signers`) into those whose objects arrived
/// intact and, for the others, why each is refused.
pub(super) fn without_damaged(
    runs: Vec<CarriedRun>,
    signers: Vec<Option<String>>,
    damaged: &Damaged,
) -> (Vec<CarriedRun>, Vec<Option<String>>, Vec<String>) {
    let (mut kept, mut kept_signers, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    for (run, signer) in runs.into_iter().zip(signers) {
        let bad = run
            .outputs
            .iter()
            .map(|o| o.hash)
            .chain(run.log)
            .find_map(|h| damaged.get(&h));
        match bad {
            Some((name, aside)) => refused.push(format!(
                "the run of `{}`: object `{name}` arrived damaged (its bytes do not hash to its name); they are set aside in `{}`",
                run.node_id,
                aside.display()
            )),
            None => {
                kept.push(run);
                kept_signers.push(signer);
            }
        }
    }
    (kept, kept_signers, refused)
}

/// One run as the store records it, carried in a bundle or a remote.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct CarriedRun {
    pub node_id: String,
    pub stage: String,
    pub key: ContentHash,
    /// The key's parts as recorded (JSON text).
    pub key_parts: String,
    /// The environment record (JSON text, kept byte for byte).
    pub env: String,
    pub outputs: Vec<OutputEntry>,
    pub log: Option<ContentHash>,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// Over every other field (see `signing`), when the sender signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<RecordSignature>,
}

impl CarriedRun {
    /// `run` as carried, signed with `key` when given.
    pub(super) fn of(run: &RunRecord, key: Option<&SecretKey>) -> CarriedRun {
        let mut carried = CarriedRun::unsigned(run);
        carried.signature = key.map(|k| k.sign(&carried.message()));
        carried
    }

    /// What a signature covers: the record without its signature.
    fn message(&self) -> Vec<u8> {
        let mut bare = self.clone();
        bare.signature = None;
        serde_json::to_vec(&bare).unwrap_or_default()
    }

    fn unsigned(run: &RunRecord) -> CarriedRun {
        CarriedRun {
            node_id: run.node_id.clone(),
            stage: run.stage.clone(),
            key: run.key,
            key_parts: run.key_parts.0.clone(),
            env: run.env.0.clone(),
            outputs: run.outputs.clone(),
            log: run.log,
            started_at_ms: run.started_at_ms,
            duration_ms: run.duration_ms,
            signature: None,
        }
    }
}

impl Objects<'_> {
    /// Moves the checked objects `arrived` (files in `staging` named by
    /// their hash) into `objects/`, flushes, and records `runs` with who
    /// signed each (`signers`, as [`check_runs`] named them) and, for the
    /// runs that arrived without their outputs, the host that has them
    /// (`elsewhere`, see `left_behind`): (runs added, runs made their
    /// node's current one).
    pub(super) fn land(
        &self,
        staging: &Path,
        arrived: &[ContentHash],
        runs: &[CarriedRun],
        signers: &[Option<String>],
        elsewhere: &BTreeMap<ContentHash, String>,
    ) -> Result<(usize, usize), StoreError> {
        for hash in arrived {
            self.adopt_object(&staging.join(hash.to_hex()), hash)?;
        }
        self.sync_filesystem()?;
        self.record_imported(runs, signers, elsewhere)
    }

    /// Reads one object into `staging`, checking its bytes against its
    /// name. A damaged one is set aside in `cache/damaged/` (kept for a
    /// look; `gc` removes it) and named in `damaged`; a read error refuses
    /// the whole arrival. True when kept (the store does not hold it yet).
    pub(super) fn receive(
        &self,
        refuse: &dyn Fn(String) -> StoreError,
        name: &str,
        hash: ContentHash,
        entry: impl Read,
        staging: &Path,
        damaged: &mut Damaged,
    ) -> Result<bool, StoreError> {
        let dest = staging.join(hash.to_hex());
        let mut reader = Checked::new(entry);
        {
            let mut out = io::BufWriter::with_capacity(
                1 << 20,
                fs::File::create(&dest).ctx("create", &dest)?,
            );
            io::copy(&mut reader, &mut out)
                .map_err(|e| refuse(format!("`{name}` cannot be read ({e})")))?;
            out.flush().ctx("write", &dest)?;
        }
        if reader.hasher.finalize().as_bytes() != &hash.0 {
            let aside = self.quarantine(&dest, &hash)?;
            damaged.insert(hash, (name.to_owned(), aside));
            return Ok(false);
        }
        let size = fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
        if self.holds_object(&hash, size) {
            let _ = fs::remove_file(&dest);
            return Ok(false);
        }
        Ok(true)
    }

    pub(super) fn holds_object(&self, hash: &ContentHash, size: u64) -> bool {
        fs::metadata(self.objects().path(hash)).is_ok_and(|m| m.len() == size)
    }

    /// Moves a checked file into `objects/` unless an object of its name is
    /// there (put-if-absent: objects never change).
    fn adopt_object(&self, file: &Path, hash: &ContentHash) -> Result<(), StoreError> {
        let object = self.objects().path(hash);
        make_read_only(file).ctx("make read-only", file)?;
        if let Some(shard) = object.parent() {
            fs::create_dir_all(shard).ctx("create directory", shard)?;
        }
        if object.exists() {
            return Ok(());
        }
        fs::rename(file, &object).ctx("move an imported object into", &object)
    }

    /// Records the bundle's runs in one transaction: (added, made current).
    fn record_imported(
        &self,
        runs: &[CarriedRun],
        signers: &[Option<String>],
        elsewhere: &BTreeMap<ContentHash, String>,
    ) -> Result<(usize, usize), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        // Who signed a run that arrived signed, and that a run arrived from
        // elsewhere (tables a store gets with its first import: older
        // vitgraphs open the database as before).
        tx.execute_batch(ARRIVAL_TABLES)
            .and_then(|()| tx.execute_batch(super::left_behind::LEFT_BEHIND_TABLE))
            .map_err(|e| self.db_err(e))?;
        let (mut added, mut current) = (0, 0);
        for (run, signer) in runs.iter().zip(signers) {
            tx.prepare_cached("INSERT OR IGNORE INTO arrived (key) VALUES (?1)")
                .and_then(|mut stmt| stmt.execute([&run.key.0[..]]))
                .map_err(|e| self.db_err(e))?;
            super::left_behind::note(&tx, &run.key, elsewhere.get(&run.key))
                .map_err(|e| self.db_err(e))?;
            if let Some(signer) = signer {
                tx.prepare_cached("INSERT OR REPLACE INTO signers (key, signer) VALUES (?1, ?2)")
                    .and_then(|mut stmt| stmt.execute(params![&run.key.0[..], signer]))
                    .map_err(|e| self.db_err(e))?;
            }
            let env_hash = ContentHash::of_bytes(run.env.as_bytes());
            tx.prepare_cached(
                "INSERT INTO envs (hash, json) VALUES (?1, ?2) ON CONFLICT(hash) DO NOTHING",
            )
            .and_then(|mut stmt| stmt.execute(params![&env_hash.0[..], run.env]))
            .map_err(|e| self.db_err(e))?;
            added += tx
                .prepare_cached(
                    "INSERT INTO runs (key, node_id, stage, key_parts, env_hash, outputs, log, started_at_ms, duration_ms, committed_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT(key) DO NOTHING",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        &run.key.0[..],
                        run.node_id,
                        run.stage,
                        run.key_parts,
                        &env_hash.0[..],
                        super::record::encode_outputs(&run.outputs),
                        run.log.map(|h| h.0.to_vec()),
                        run.started_at_ms,
                        run.duration_ms,
                        now_ms()
                    ])
                })
                .map_err(|e| self.db_err(e))?;
            // The node's current run, when it has one: its start.
            let started: Option<i64> = tx
                .prepare_cached(
                    "SELECT r.started_at_ms, r.key FROM node_runs n JOIN runs r ON r.seq = n.run_seq WHERE n.node_id = ?1",
                )
                .and_then(|mut stmt| {
                    use rusqlite::OptionalExtension;
                    stmt.query_row([&run.node_id], |r| {
                        let key: Vec<u8> = r.get(1)?;
                        Ok(if key == run.key.0 { i64::MAX } else { r.get(0)? })
                    })
                    .optional()
                })
                .map_err(|e| self.db_err(e))?;
            if started.is_none_or(|s| s < run.started_at_ms) {
                super::runs::point_node_at(&tx, &run.node_id, &run.stage, &run.key)
                    .map_err(|e| self.db_err(e))?;
                current += 1;
            }
        }
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok((added, current))
    }
}

/// A reader that hashes what passes through it.
pub(super) struct Checked<R> {
    inner: R,
    pub hasher: blake3::Hasher,
}

impl<R: Read> Checked<R> {
    pub(super) fn new(inner: R) -> Checked<R> {
        Checked {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Every run's key matches its parts, its outputs have names a node's
/// folder can hold, and every object it names is listed.
pub(super) fn check_runs(
    runs: &[CarriedRun],
    listed: &BTreeSet<ContentHash>,
    key_of: &dyn Fn(&str) -> Option<ContentHash>,
    trust: &Trust,
    refuse: &dyn Fn(String) -> StoreError,
) -> Result<Vec<Option<String>>, StoreError> {
    let mut signers = Vec::with_capacity(runs.len());
    for run in runs {
        let at = |what: String| refuse(format!("the run of `{}`: {what}", run.node_id));
        if key_of(&run.key_parts) != Some(run.key) {
            return Err(at(
                "its key does not match its recorded parts (altered or damaged)".into(),
            ));
        }
        if serde_json::from_str::<serde_json::Value>(&run.env).is_err() {
            return Err(at("its environment record is not JSON".into()));
        }
        for o in &run.outputs {
            if !safe_name(&o.name) {
                return Err(at(format!("output name `{}` leaves its folder", o.name)));
            }
            if !listed.contains(&o.hash) {
                return Err(at(format!(
                    "output `{}` names an object the bundle does not list",
                    o.name
                )));
            }
        }
        if run.log.is_some_and(|l| !listed.contains(&l)) {
            return Err(at("its log names an object the bundle does not list".into()));
        }
        signers.push(signer_of(run, trust).map_err(at)?);
    }
    Ok(signers)
}

/// Who signed `run`, as the workspace names them; an error when its
/// signature does not hold, or the workspace requires a trusted one.
fn signer_of(run: &CarriedRun, trust: &Trust) -> Result<Option<String>, String> {
    let Some(sig) = &run.signature else {
        if trust.require {
            return Err(
                "it is unsigned, and `vitgraph.ron` requires signed runs (`require_signed: true`)"
                    .into(),
            );
        }
        return Ok(None);
    };
    if !verifies(sig, &run.message()) {
        return Err(format!(
            "its signature (by \"{}\") does not match it: the record was altered after it was signed",
            sig.signer
        ));
    }
    let (name, trusted) = trust.signer(sig);
    if !trusted && trust.require {
        return Err(format!(
            "it is signed by {name}, which `trusted_keys` in `vitgraph.ron` does not list; add `\"{}\": \"{}\"` there if you trust it",
            sig.signer, sig.public
        ));
    }
    Ok(Some(name))
}

/// A relative path without `..`, as declared outputs are.
fn safe_name(name: &str) -> bool {
    let path = PathBuf::from(name);
    !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_stay_in_their_folder() {
        assert!(safe_name("results.json"));
        assert!(safe_name("trace/kernels.csv"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./x"] {
            assert!(!safe_name(bad), "{bad}");
        }
    }
}
