//! Bundles: recorded runs and the objects they name in one file, to carry a
//! study's results between machines (`vitgraph export` and `import`).
//!
//! A bundle is a tar archive (`tar tvf study.vgb` lists it):
//! `vitgraph-bundle.json` first — the format, where and when it was
//! written, and each run as the store records it (node, stage, key, key
//! parts, environment record, outputs, log, times) — then
//! `objects/<64 hex>` for every object a run names, each once.
//!
//! Import checks everything before anything becomes visible: every object's
//! bytes against its name and size as they arrive (into a staging folder of
//! this process), every run's key against its parts (the caller's check:
//! keys are the engine's), every name a run gives an output, and that every
//! object a run names arrived or is in the store. Only then are the objects
//! moved into `objects/` (put-if-absent), flushed, and the runs recorded in
//! one transaction; a key recorded before is left as it is, so importing a
//! bundle twice adds nothing. An import killed at any instant leaves the
//! store as it was, but for unreferenced objects (`gc` removes them) and a
//! staging folder the next command removes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use rusqlite::{params, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::error::{IoContext, StoreError};
use super::fileio::{make_read_only, now_ms, remove_tree};
use super::record::{OutputEntry, RunRecord};
use super::roles::{Objects, Reader};
use crate::hash::ContentHash;

/// The first entry's name.
const MANIFEST: &str = "vitgraph-bundle.json";
/// `format` in the manifest.
const FORMAT: &str = "vitgraph-bundle";
/// The manifest's version this vitgraph writes and reads.
const VERSION: u32 = 1;
/// The largest manifest read (a million runs' records fit).
const MANIFEST_LIMIT: u64 = 1 << 30;

/// The bundle's table of contents.
#[derive(Serialize, Deserialize)]
struct Manifest {
    format: String,
    version: u32,
    /// The host that wrote it, and when.
    host: Option<String>,
    exported_at_ms: i64,
    runs: Vec<BundledRun>,
    objects: Vec<BundledObject>,
}

/// One run, as the store records it.
#[derive(Serialize, Deserialize)]
struct BundledRun {
    node_id: String,
    stage: String,
    key: ContentHash,
    /// The key's parts as recorded (JSON text).
    key_parts: String,
    /// The environment record (JSON text, kept byte for byte).
    env: String,
    outputs: Vec<OutputEntry>,
    log: Option<ContentHash>,
    started_at_ms: i64,
    duration_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct BundledObject {
    hash: ContentHash,
    size: u64,
}

/// What an export wrote.
#[derive(Debug, Default)]
pub struct Exported {
    pub runs: usize,
    pub objects: usize,
    pub bytes: u64,
}

/// What an import recorded.
#[derive(Debug, Default)]
pub struct Imported {
    /// Runs in the bundle.
    pub runs: usize,
    /// Runs not recorded here before.
    pub added: usize,
    /// Nodes whose current run is now the bundle's.
    pub current: usize,
    /// Objects the store did not hold, and their bytes.
    pub objects_added: usize,
    pub bytes_added: u64,
    /// The host that wrote the bundle.
    pub from_host: Option<String>,
}

/// A bundle that cannot be imported: what is wrong, where in the file.
fn refused(bundle: &Path, detail: String) -> StoreError {
    StoreError::Bundle {
        path: bundle.to_path_buf(),
        detail,
        help: "nothing was imported; export the bundle again on the machine that wrote it (a copy damaged in transit differs from the original), or ask its author".into(),
    }
}

impl Reader<'_> {
    /// Writes the current runs of `node_ids` (those that have one) and the
    /// objects they name into a bundle at `dest` (written beside it and
    /// renamed into place). Every object is checked against its name as it
    /// is copied: a damaged one is named and nothing is written.
    pub fn export_bundle(
        &self,
        node_ids: &[&str],
        dest: &Path,
        host: Option<String>,
    ) -> Result<Exported, StoreError> {
        let runs = self.current_runs_with_parts(node_ids)?;
        let mut objects: BTreeMap<ContentHash, u64> = BTreeMap::new();
        for run in &runs {
            for o in &run.outputs {
                objects.insert(o.hash, o.size);
            }
            if let Some(log) = run.log {
                let size = fs::metadata(self.objects().path(&log))
                    .map(|m| m.len())
                    .unwrap_or(0);
                objects.insert(log, size);
            }
        }
        let manifest = Manifest {
            format: FORMAT.into(),
            version: VERSION,
            host,
            exported_at_ms: now_ms(),
            runs: runs.iter().map(bundled).collect(),
            objects: objects
                .iter()
                .map(|(&hash, &size)| BundledObject { hash, size })
                .collect(),
        };
        let tmp = dest.with_file_name(format!(
            ".{}.{}.tmp",
            dest.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        let result = self.write_bundle(&tmp, &manifest);
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        let bytes = result?;
        fs::rename(&tmp, dest).ctx("move the bundle into", dest)?;
        Ok(Exported {
            runs: runs.len(),
            objects: objects.len(),
            bytes,
        })
    }

    fn write_bundle(&self, tmp: &Path, manifest: &Manifest) -> Result<u64, StoreError> {
        let file = fs::File::create(tmp).ctx("create", tmp)?;
        let mut tar = tar::Builder::new(io::BufWriter::with_capacity(1 << 20, file));
        let json = serde_json::to_vec(manifest).unwrap_or_default();
        append(&mut tar, MANIFEST, json.len() as u64, &json[..]).ctx("write", tmp)?;
        for o in &manifest.objects {
            let path = self.objects().path(&o.hash);
            let file = fs::File::open(&path).ctx("read object", &path)?;
            let mut reader = Checked::new(file);
            append(&mut tar, &object_entry(&o.hash), o.size, &mut reader).map_err(|e| {
                match e.kind() {
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => {
                        damaged_object(&path)
                    }
                    _ => StoreError::io("write", tmp, e),
                }
            })?;
            if reader.hasher.finalize().as_bytes() != &o.hash.0 {
                return Err(damaged_object(&path));
            }
        }
        let mut out = tar.into_inner().ctx("write", tmp)?;
        out.flush().ctx("write", tmp)?;
        let file = out
            .into_inner()
            .map_err(|e| StoreError::io("write", tmp, e.into_error()))?;
        file.sync_all().ctx("flush", tmp)?;
        Ok(file.metadata().map(|m| m.len()).unwrap_or(0))
    }

    /// The current runs of `node_ids`, with their key parts.
    fn current_runs_with_parts(&self, node_ids: &[&str]) -> Result<Vec<RunRecord>, StoreError> {
        let states = self.load_states_for(node_ids)?;
        let mut runs = Vec::new();
        for id in node_ids {
            let Some(run) = states.get(*id).and_then(|s| s.latest_success.as_ref()) else {
                continue;
            };
            let mut run = run.clone();
            run.key_parts = self.key_parts(&run)?;
            runs.push(run);
        }
        Ok(runs)
    }
}

fn damaged_object(path: &Path) -> StoreError {
    StoreError::Bundle {
        path: path.to_path_buf(),
        detail: "this object's bytes do not match its name".into(),
        help: "nothing was exported; `vitgraph verify --repair` sets damaged objects aside, and building again restores them".into(),
    }
}

fn bundled(run: &RunRecord) -> BundledRun {
    BundledRun {
        node_id: run.node_id.clone(),
        stage: run.stage.clone(),
        key: run.key,
        key_parts: run.key_parts.0.clone(),
        env: run.env.0.clone(),
        outputs: run.outputs.clone(),
        log: run.log,
        started_at_ms: run.started_at_ms,
        duration_ms: run.duration_ms,
    }
}

fn object_entry(hash: &ContentHash) -> String {
    format!("objects/{}", hash.to_hex())
}

/// Appends a read-only file entry with a fixed time, so that one store's
/// runs always make the same bundle.
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    size: u64,
    data: impl Read,
) -> io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(size);
    header.set_mode(0o444);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    // `append_data` fills in the path and the checksum; a reader shorter
    // than `size` fails it with `UnexpectedEof`.
    tar.append_data(&mut header, name, data.take(size))
}

/// A reader that hashes what passes through it.
struct Checked<R> {
    inner: R,
    hasher: blake3::Hasher,
}

impl<R: Read> Checked<R> {
    fn new(inner: R) -> Checked<R> {
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

impl Objects<'_> {
    /// Imports the bundle at `bundle` (see the module's doc). `key_of`
    /// computes a run's key from its recorded parts (None when they do not
    /// parse). A run becomes its node's current run when the node has none
    /// or one that started earlier.
    pub fn import_bundle(
        &self,
        bundle: &Path,
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
    ) -> Result<Imported, StoreError> {
        let _gc_guard = self.store_lock(false)?;
        let staging = self.new_staging_dir()?;
        let result = self.import_staged(bundle, &staging, key_of);
        let _ = remove_tree(&staging);
        result
    }

    fn import_staged(
        &self,
        bundle: &Path,
        staging: &Path,
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
    ) -> Result<Imported, StoreError> {
        let file = fs::File::open(bundle).ctx("read", bundle)?;
        let mut archive = tar::Archive::new(io::BufReader::with_capacity(1 << 20, file));
        let read_err =
            |e: io::Error| refused(bundle, format!("it is not a readable tar archive ({e})"));
        let mut entries = archive.entries().map_err(read_err)?;
        let manifest = match entries.next() {
            Some(entry) => read_manifest(bundle, entry.map_err(read_err)?)?,
            None => return Err(refused(bundle, "it is empty".into())),
        };
        check_runs(bundle, &manifest, key_of)?;
        let listed: BTreeMap<ContentHash, u64> =
            manifest.objects.iter().map(|o| (o.hash, o.size)).collect();
        let mut arrived: Vec<ContentHash> = Vec::new();
        let mut seen: HashSet<ContentHash> = HashSet::new();
        for entry in entries {
            let entry = entry.map_err(read_err)?;
            let name = entry
                .path()
                .map_err(read_err)?
                .to_string_lossy()
                .into_owned();
            let hash = name
                .strip_prefix("objects/")
                .and_then(ContentHash::from_hex)
                .filter(|h| listed.contains_key(h))
                .ok_or_else(|| {
                    refused(
                        bundle,
                        format!("entry `{name}` is not an object its manifest lists"),
                    )
                })?;
            if !seen.insert(hash) {
                return Err(refused(bundle, format!("entry `{name}` appears twice")));
            }
            if entry.header().entry_type() != tar::EntryType::Regular
                || entry.size() != listed[&hash]
            {
                return Err(refused(
                    bundle,
                    format!("entry `{name}` is not a file of {} bytes", listed[&hash]),
                ));
            }
            if self.receive(bundle, &name, hash, entry, staging)? {
                arrived.push(hash);
            }
        }
        for (hash, size) in &listed {
            if !seen.contains(hash) && !self.holds_object(hash, *size) {
                return Err(refused(
                    bundle,
                    format!(
                        "object `{}` is listed but missing (the file is truncated?)",
                        object_entry(hash)
                    ),
                ));
            }
        }
        let added_bytes = arrived.iter().map(|h| listed[h]).sum();
        for hash in &arrived {
            self.adopt_object(&staging.join(hash.to_hex()), hash)?;
        }
        self.sync_filesystem()?;
        let (added, current) = self.record_imported(&manifest.runs)?;
        Ok(Imported {
            runs: manifest.runs.len(),
            added,
            current,
            objects_added: arrived.len(),
            bytes_added: added_bytes,
            from_host: manifest.host,
        })
    }

    /// Reads one object entry into `staging`, checking its bytes against
    /// its name; true when kept (the store does not hold it yet).
    fn receive(
        &self,
        bundle: &Path,
        name: &str,
        hash: ContentHash,
        entry: impl Read,
        staging: &Path,
    ) -> Result<bool, StoreError> {
        let dest = staging.join(hash.to_hex());
        let mut reader = Checked::new(entry);
        {
            let mut out = io::BufWriter::with_capacity(
                1 << 20,
                fs::File::create(&dest).ctx("create", &dest)?,
            );
            io::copy(&mut reader, &mut out)
                .map_err(|e| refused(bundle, format!("entry `{name}` cannot be read ({e})")))?;
            out.flush().ctx("write", &dest)?;
        }
        if reader.hasher.finalize().as_bytes() != &hash.0 {
            return Err(refused(
                bundle,
                format!("object `{name}` is damaged: its bytes do not hash to its name"),
            ));
        }
        let size = fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
        if self.holds_object(&hash, size) {
            let _ = fs::remove_file(&dest);
            return Ok(false);
        }
        Ok(true)
    }

    fn holds_object(&self, hash: &ContentHash, size: u64) -> bool {
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
    fn record_imported(&self, runs: &[BundledRun]) -> Result<(usize, usize), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        let (mut added, mut current) = (0, 0);
        for run in runs {
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

fn read_manifest(bundle: &Path, entry: impl Read + HasPath) -> Result<Manifest, StoreError> {
    if entry.name() != MANIFEST {
        return Err(refused(
            bundle,
            format!(
                "its first entry is `{}`, not `{MANIFEST}`: it is not a vitgraph bundle",
                entry.name()
            ),
        ));
    }
    let mut text = Vec::new();
    entry
        .take(MANIFEST_LIMIT)
        .read_to_end(&mut text)
        .map_err(|e| refused(bundle, format!("`{MANIFEST}` cannot be read ({e})")))?;
    let head: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| refused(bundle, format!("`{MANIFEST}` is not JSON ({e})")))?;
    if head.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(refused(
            bundle,
            format!("`{MANIFEST}` is not a vitgraph bundle's manifest"),
        ));
    }
    match head.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {}
        v => {
            return Err(StoreError::Bundle {
                path: bundle.to_path_buf(),
                detail: format!(
                    "it is a version {} bundle; this vitgraph reads version {VERSION}",
                    v.map_or("(unknown)".into(), |v| v.to_string())
                ),
                help: "import it with the vitgraph version that wrote it, or export it again with this one".into(),
            })
        }
    }
    serde_json::from_value(head)
        .map_err(|e| refused(bundle, format!("`{MANIFEST}` is damaged ({e})")))
}

/// A tar entry's name.
trait HasPath {
    fn name(&self) -> String;
}

impl<R: Read> HasPath for tar::Entry<'_, R> {
    fn name(&self) -> String {
        self.path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Every run's key matches its parts, its outputs have names a node's
/// folder can hold, and every object it names is listed.
fn check_runs(
    bundle: &Path,
    manifest: &Manifest,
    key_of: &dyn Fn(&str) -> Option<ContentHash>,
) -> Result<(), StoreError> {
    let listed: BTreeSet<ContentHash> = manifest.objects.iter().map(|o| o.hash).collect();
    for run in &manifest.runs {
        let at = |what: String| refused(bundle, format!("the run of `{}`: {what}", run.node_id));
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
    }
    Ok(())
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
