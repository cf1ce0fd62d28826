//! Bundles: recorded runs and the objects they name in one file, to carry a
//! study's results between machines (`vitgraph export` and `import`).
//!
//! A bundle is a tar archive (`tar tvf study.vgb` lists it):
//! `vitgraph-bundle.json` first — the format, where and when it was
//! written, and each run as the store records it (node, stage, key, key
//! parts, environment record, outputs, log, times) — then
//! `objects/<64 hex>` for every object a run names, each once.
//!
//! Import checks everything before anything becomes visible (see
//! `arrival`), and also that every object its manifest lists arrived or is
//! in the store already; a key recorded before is left as it is, so
//! importing a bundle twice adds nothing.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::arrival::{check_runs, without_damaged, CarriedRun, Checked, Damaged};
use super::error::{IoContext, StoreError};
use super::fileio::{now_ms, remove_tree};
use super::record::RunRecord;
use super::roles::{Objects, Reader};
use super::signing::{SecretKey, Trust};
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
    runs: Vec<CarriedRun>,
    objects: Vec<BundledObject>,
    /// Runs carried without their objects (`--results-only`), with the
    /// host that has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    left_behind: Vec<LeftBehind>,
}

#[derive(Serialize, Deserialize)]
struct LeftBehind {
    key: ContentHash,
    /// The host that holds the run's objects.
    host: String,
}

#[derive(Serialize, Deserialize)]
struct BundledObject {
    hash: ContentHash,
    size: u64,
}

/// What a `--results-only` bundle carries, by node id: all the outputs of
/// its current run (None) or those named; a node not named goes as its
/// record alone.
pub(crate) type Carry<'a> = BTreeMap<&'a str, Option<&'a [&'a str]>>;

/// What an export wrote.
#[derive(Debug, Default)]
pub struct Exported {
    pub runs: usize,
    /// Runs carried without their objects (`--results-only`).
    pub left_behind: usize,
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
    /// Runs that arrived signed (their signature checked).
    pub signed: usize,
    /// Runs that arrived without their outputs (`--results-only`) and
    /// whose outputs the store does not hold.
    pub without_outputs: usize,
    /// The host that wrote the bundle.
    pub from_host: Option<String>,
    /// Runs not imported because an object they name arrived damaged:
    /// why, one line each (the rest were imported).
    pub refused: Vec<String>,
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
    /// renamed into place); with `with_outputs`, only the runs of the
    /// nodes it names carry objects (the outputs it names, or all), the
    /// others go as records alone (see `left_behind`). Every object is checked against its name as it
    /// is copied: a damaged one is named and nothing is written.
    pub fn export_bundle(
        &self,
        node_ids: &[&str],
        with_outputs: Option<&Carry<'_>>,
        dest: &Path,
        host: Option<String>,
        signer: Option<&SecretKey>,
    ) -> Result<Exported, StoreError> {
        let runs = self.current_runs_with_parts(node_ids)?;
        let (objects, left_behind) = self.what_goes(&runs, with_outputs, host.as_deref(), dest)?;
        let manifest = Manifest {
            format: FORMAT.into(),
            version: VERSION,
            host,
            exported_at_ms: now_ms(),
            runs: runs.iter().map(|r| CarriedRun::of(r, signer)).collect(),
            objects: objects
                .iter()
                .map(|(&hash, &size)| BundledObject { hash, size })
                .collect(),
            left_behind,
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
            left_behind: manifest.left_behind.len(),
            objects: objects.len(),
            bytes,
        })
    }

    /// The objects `runs` carry (see [`Carry`]) and the runs that go
    /// without some of theirs, with the host that has them (this one, or
    /// where a run that arrived without them has them).
    fn what_goes(
        &self,
        runs: &[RunRecord],
        with_outputs: Option<&Carry<'_>>,
        host: Option<&str>,
        dest: &Path,
    ) -> Result<(BTreeMap<ContentHash, u64>, Vec<LeftBehind>), StoreError> {
        let elsewhere = self.all_bytes_elsewhere()?;
        let mut left_behind = Vec::new();
        let mut objects: BTreeMap<ContentHash, u64> = BTreeMap::new();
        for run in runs {
            let wanted = match with_outputs {
                None => Some(None),
                Some(carry) => carry.get(run.node_id.as_str()).copied(),
            };
            let outputs: Vec<_> = match wanted {
                None => Vec::new(),
                Some(None) => run.outputs.iter().collect(),
                Some(Some(files)) => run
                    .outputs
                    .iter()
                    .filter(|o| files.contains(&o.name.as_str()))
                    .collect(),
            };
            let away = elsewhere.get(&run.key);
            if let Some(at) = away {
                if outputs.iter().any(|o| !self.holds(&o.hash, o.size)) {
                    return Err(outputs_elsewhere(dest, &run.node_id, at));
                }
            }
            let log = run.log.map(|l| (l, self.objects().path(&l)));
            let whole = outputs.len() == run.outputs.len()
                && (away.is_none() || log.as_ref().is_none_or(|(_, p)| p.is_file()));
            objects.extend(outputs.iter().map(|o| (o.hash, o.size)));
            match log {
                Some((log, path)) if whole => {
                    objects.insert(log, fs::metadata(path).map(|m| m.len()).unwrap_or(0));
                }
                _ => {}
            }
            if !whole {
                left_behind.push(LeftBehind {
                    key: run.key,
                    host: away
                        .map(String::as_str)
                        .or(host)
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
        }
        Ok((objects, left_behind))
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
    pub(super) fn current_runs_with_parts(
        &self,
        node_ids: &[&str],
    ) -> Result<Vec<RunRecord>, StoreError> {
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

/// A run to export with its outputs that arrived here without them.
fn outputs_elsewhere(dest: &Path, node_id: &str, host: &str) -> StoreError {
    let on = super::left_behind::host_text(host);
    StoreError::Bundle {
        path: dest.to_path_buf(),
        detail: format!("nothing was written: the run of `{node_id}` arrived here without its outputs (a `--results-only` bundle); they are on {on}"),
        help: "export with `--results-only` (its record goes without them), or bring its outputs first: import a bundle exported without `--results-only` on the machine that has them".into(),
    }
}

fn damaged_object(path: &Path) -> StoreError {
    StoreError::Bundle {
        path: path.to_path_buf(),
        detail: "this object's bytes do not match its name".into(),
        help: "nothing was exported; `vitgraph verify --repair` sets damaged objects aside, and building again restores them".into(),
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

impl Objects<'_> {
    /// Imports the bundle at `bundle` (see the module's doc). `key_of`
    /// computes a run's key from its recorded parts (None when they do not
    /// parse). A run becomes its node's current run when the node has none
    /// or one that started earlier.
    pub fn import_bundle(
        &self,
        bundle: &Path,
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
        trust: &Trust,
    ) -> Result<Imported, StoreError> {
        let _gc_guard = self.store_lock(false)?;
        let staging = self.new_staging_dir()?;
        let result = self.import_staged(bundle, &staging, key_of, trust);
        let _ = remove_tree(&staging);
        result
    }

    fn import_staged(
        &self,
        bundle: &Path,
        staging: &Path,
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
        trust: &Trust,
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
        let listed: BTreeMap<ContentHash, u64> =
            manifest.objects.iter().map(|o| (o.hash, o.size)).collect();
        let refuse = |detail: String| refused(bundle, detail);
        let names = names_and_left_behind(&manifest);
        let signers = check_runs(&manifest.runs, &names, key_of, trust, &refuse)?;
        let mut arrived: Vec<ContentHash> = Vec::new();
        let mut seen: HashSet<ContentHash> = HashSet::new();
        let mut damaged = Damaged::new();
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
            if self.receive(&refuse, &name, hash, entry, staging, &mut damaged)? {
                arrived.push(hash);
            }
        }
        self.all_there(bundle, &listed, &seen)?;
        let added_bytes = arrived.iter().map(|h| listed[h]).sum();
        let runs = manifest.runs.len();
        let (kept, signers, refused_runs) = without_damaged(manifest.runs, signers, &damaged);
        let elsewhere = self.still_elsewhere(&kept, &manifest.left_behind, &arrived);
        let (added, current) = self.land(staging, &arrived, &kept, &signers, &elsewhere)?;
        Ok(Imported {
            runs,
            added,
            current,
            objects_added: arrived.len(),
            bytes_added: added_bytes,
            signed: signers.iter().filter(|s| s.is_some()).count(),
            without_outputs: elsewhere.len(),
            from_host: manifest.host,
            refused: refused_runs,
        })
    }
}

/// The objects a run may name: those the bundle lists, and those of the
/// runs it carries without their objects.
fn names_and_left_behind(manifest: &Manifest) -> BTreeSet<ContentHash> {
    let left: BTreeSet<ContentHash> = manifest.left_behind.iter().map(|l| l.key).collect();
    let mut names: BTreeSet<ContentHash> = manifest.objects.iter().map(|o| o.hash).collect();
    for run in manifest.runs.iter().filter(|r| left.contains(&r.key)) {
        names.extend(run.outputs.iter().map(|o| o.hash).chain(run.log));
    }
    names
}

impl Objects<'_> {
    /// Of the runs carried without their objects, those whose objects the
    /// store does not hold either (nor got from this bundle), with the
    /// host that has them.
    fn still_elsewhere(
        &self,
        runs: &[CarriedRun],
        left_behind: &[LeftBehind],
        arrived: &[ContentHash],
    ) -> BTreeMap<ContentHash, String> {
        let hosts: BTreeMap<ContentHash, &str> = left_behind
            .iter()
            .map(|l| (l.key, l.host.as_str()))
            .collect();
        let arrived: HashSet<&ContentHash> = arrived.iter().collect();
        runs.iter()
            .filter_map(|run| {
                let host = hosts.get(&run.key)?;
                let all = run
                    .outputs
                    .iter()
                    .all(|o| arrived.contains(&o.hash) || self.holds(&o.hash, o.size))
                    && run
                        .log
                        .is_none_or(|l| arrived.contains(&l) || self.path(&l).is_file());
                (!all).then(|| (run.key, (*host).to_owned()))
            })
            .collect()
    }

    /// Every object the manifest lists arrived (`seen`) or is held.
    fn all_there(
        &self,
        bundle: &Path,
        listed: &BTreeMap<ContentHash, u64>,
        seen: &HashSet<ContentHash>,
    ) -> Result<(), StoreError> {
        match listed
            .iter()
            .find(|(hash, size)| !seen.contains(*hash) && !self.holds_object(hash, **size))
        {
            Some((hash, _)) => Err(refused(
                bundle,
                format!(
                    "object `{}` is listed but missing (the file is truncated?)",
                    object_entry(hash)
                ),
            )),
            None => Ok(()),
        }
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
