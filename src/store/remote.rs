//! Directory remotes: a folder (a shared or network file system) that
//! several workspaces push runs to and pull them from (`vitgraph push`,
//! `pull`, `remote verify`).
//!
//! ```text
//! REMOTE/objects/<2 hex>/<62 hex>   one read-only file per content, as in cache/objects
//! REMOTE/runs/<64 hex>.json         one run record per key (as a bundle carries it)
//! REMOTE/tmp/                       files being written
//! ```
//!
//! Objects and records never change once written: each is written into
//! `tmp/` under a name of its own (host, process, sequence) and
//! hard-linked into place — put-if-absent, so two machines pushing one
//! object at once both succeed and one copy stays. A run's record is
//! linked only after every object it names is in place and the remote's
//! file system has been flushed (`syncfs`, objects and records' bytes
//! together), so a record on the remote always has its objects, whatever
//! process dies when. A push killed with -9 leaves at
//! most files in `tmp/` and objects no record names yet.
//!
//! A pull reads the records of keys this store does not hold, keeps those
//! of the selected nodes, and brings them in as an import does (see
//! `arrival`): every object checked against its name on arrival.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::arrival::{check_runs, without_damaged, CarriedRun, Checked, Damaged};
use super::error::{IoContext, StoreError};
use super::fileio::{hash_contents, make_read_only, remove_tree};
use super::roles::{Objects, Reader};
use super::signing::{SecretKey, Trust};
use crate::hash::ContentHash;

/// A remote as a command names it.
pub struct Remote<'a> {
    pub name: &'a str,
    pub root: &'a Path,
}

/// What a push did.
#[derive(Debug, Default)]
pub struct Pushed {
    pub runs: usize,
    /// Runs whose record the remote did not have.
    pub runs_added: usize,
    pub objects_added: usize,
    pub bytes_added: u64,
}

/// What a pull did.
#[derive(Debug, Default)]
pub struct Pulled {
    /// Records on the remote whose key this store did not hold.
    pub new_on_remote: usize,
    /// Of those, the runs of selected nodes, recorded here.
    pub runs_added: usize,
    pub current: usize,
    pub objects_added: usize,
    pub bytes_added: u64,
    /// Runs that arrived signed (their signature checked).
    pub signed: usize,
    /// Runs not pulled because an object they name arrived damaged: why,
    /// one line each (the rest were pulled).
    pub refused: Vec<String>,
}

/// One thing wrong on a remote (`remote verify`).
#[derive(Debug)]
pub(crate) struct RemoteDamage {
    pub path: PathBuf,
    pub problem: String,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl Remote<'_> {
    pub(super) fn object(&self, hash: &ContentHash) -> PathBuf {
        let hex = hash.to_hex();
        self.root.join("objects").join(&hex[..2]).join(&hex[2..])
    }

    pub(super) fn record(&self, key: &ContentHash) -> PathBuf {
        self.root
            .join("runs")
            .join(format!("{}.json", key.to_hex()))
    }

    pub(super) fn unreachable(&self, e: io::Error) -> StoreError {
        let detail = if e.kind() == io::ErrorKind::NotFound && !self.root.exists() {
            "it does not exist: nothing was pushed to it yet, or its file system is not mounted"
                .to_owned()
        } else {
            format!("it cannot be read ({e})")
        };
        StoreError::Remote {
            name: self.name.to_owned(),
            path: self.root.to_path_buf(),
            detail,
            help: "check that its file system is mounted and that `path:` in `vitgraph.ron`'s `remotes` names it".into(),
        }
    }

    fn damaged(&self, detail: String) -> StoreError {
        StoreError::Remote {
            name: self.name.to_owned(),
            path: self.root.to_path_buf(),
            detail,
            help: "nothing was pulled; `vitgraph remote verify` lists what is damaged on the remote, and pushing from a machine that holds the runs writes them again".into(),
        }
    }

    /// A file in `tmp/` no other writer uses.
    fn tmp_file(&self) -> PathBuf {
        let host = crate::host::env::hostname();
        self.root.join("tmp").join(format!(
            "{host}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Writes `tmp` into place at `dest` unless something is there already
    /// (put-if-absent); removes `tmp` either way.
    fn link(&self, tmp: &Path, dest: &Path) -> Result<bool, StoreError> {
        if let Some(dir) = dest.parent() {
            fs::create_dir_all(dir).ctx("create directory", dir)?;
        }
        let result = match fs::hard_link(tmp, dest) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(StoreError::io("write into the remote", dest, e)),
        };
        let _ = fs::remove_file(tmp);
        result
    }

    /// Flushes the remote's file system.
    fn sync(&self) -> Result<(), StoreError> {
        super::fileio::sync_filesystem_of(self.root)
    }
}

impl Reader<'_> {
    /// Pushes the current runs of `node_ids` to `remote`: the objects of
    /// each run the remote lacks, then, once they are flushed, its record.
    pub fn push(
        &self,
        remote: &Remote<'_>,
        node_ids: &[&str],
        signer: Option<&SecretKey>,
    ) -> Result<Pushed, StoreError> {
        let runs = self.current_runs_with_parts(node_ids)?;
        fs::create_dir_all(remote.root.join("tmp")).map_err(|e| remote.unreachable(e))?;
        let mut out = Pushed {
            runs: runs.len(),
            ..Pushed::default()
        };
        let missing: Vec<&super::RunRecord> = runs
            .iter()
            .filter(|r| !remote.record(&r.key).is_file())
            .collect();
        let mut done: HashSet<ContentHash> = HashSet::new();
        for run in &missing {
            let objects = run.outputs.iter().map(|o| o.hash).chain(run.log);
            for hash in objects {
                if done.insert(hash) {
                    if let Some(size) = self.push_object(remote, &hash)? {
                        out.objects_added += 1;
                        out.bytes_added += size;
                    }
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        // The records are written, then the objects and the records'
        // bytes flushed (one `syncfs`), and only then linked into place.
        let mut records = Vec::with_capacity(missing.len());
        for run in &missing {
            let tmp = remote.tmp_file();
            let json = serde_json::to_vec(&CarriedRun::of(run, signer)).unwrap_or_default();
            fs::write(&tmp, &json).ctx("write into the remote", &tmp)?;
            make_read_only(&tmp).ctx("make read-only", &tmp)?;
            records.push((tmp, remote.record(&run.key)));
        }
        remote.sync()?;
        for (tmp, dest) in &records {
            if remote.link(tmp, dest)? {
                out.runs_added += 1;
            }
        }
        remote.sync()?;
        Ok(out)
    }

    /// Copies one object to the remote unless it holds it; its size when
    /// copied. The bytes are checked against the name as they are read.
    fn push_object(
        &self,
        remote: &Remote<'_>,
        hash: &ContentHash,
    ) -> Result<Option<u64>, StoreError> {
        let dest = remote.object(hash);
        let local = self.objects().path(hash);
        let size = fs::metadata(&local).ctx("read object", &local)?.len();
        if fs::metadata(&dest).is_ok_and(|m| m.len() == size) {
            // A record about to name it: `remote gc` spares what was
            // touched within its grace period (best effort: another
            // user's file may refuse).
            touch(&dest);
            return Ok(None);
        }
        let tmp = remote.tmp_file();
        let mut reader = Checked::new(fs::File::open(&local).ctx("read object", &local)?);
        {
            // Flushed with the rest by `syncfs` before any record names it.
            let mut file = fs::File::create(&tmp).ctx("write into the remote", &tmp)?;
            io::copy(&mut reader, &mut file).ctx("copy into the remote", &tmp)?;
        }
        if reader.hasher.finalize().as_bytes() != &hash.0 {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::Bundle {
                path: local,
                detail: "this object's bytes do not match its name".into(),
                help: "nothing of it was pushed; `vitgraph verify --repair` sets damaged objects aside, and building again restores them".into(),
            });
        }
        make_read_only(&tmp).ctx("make read-only", &tmp)?;
        remote.link(&tmp, &dest)?;
        Ok(Some(size))
    }

    /// Whether each of `keys` is recorded here.
    pub(super) fn known_keys(
        &self,
        keys: &[ContentHash],
    ) -> Result<HashSet<ContentHash>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT 1 FROM runs WHERE key = ?1")
            .map_err(|e| self.db_err(e))?;
        let mut known = HashSet::new();
        for key in keys {
            if stmt.exists([&key.0[..]]).map_err(|e| self.db_err(e))? {
                known.insert(*key);
            }
        }
        Ok(known)
    }
}

/// Sets a file's modification time to now, if this user may.
fn touch(path: &Path) {
    if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid NUL-terminated path; a null `times` means now.
        unsafe {
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0);
        }
    }
}

/// Every file under the remote's `objects/`: its path, the hash its path
/// names (None when it names none) and its size.
pub(super) fn remote_objects(
    remote: &Remote<'_>,
) -> Result<Vec<(PathBuf, Option<ContentHash>, u64)>, StoreError> {
    let mut out = Vec::new();
    let root = remote.root.join("objects");
    // A remote whose first push was killed before its first object: empty.
    if !root.exists() && remote.root.is_dir() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(&root).min_depth(2).max_depth(2) {
        let entry = entry.map_err(|e| remote.unreachable(e.into()))?;
        let shard = entry
            .path()
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let hash =
            ContentHash::from_hex(&format!("{shard}{}", entry.file_name().to_string_lossy()));
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        out.push((entry.into_path(), hash, size));
    }
    Ok(out)
}

/// The keys the remote has records of.
pub(super) fn remote_keys(remote: &Remote<'_>) -> Result<Vec<ContentHash>, StoreError> {
    let dir = remote.root.join("runs");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound && remote.root.is_dir() => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(remote.unreachable(e)),
    };
    let mut keys = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| remote.unreachable(e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(key) = name.strip_suffix(".json").and_then(ContentHash::from_hex) {
            keys.push(key);
        }
    }
    Ok(keys)
}

impl Objects<'_> {
    /// Pulls from `remote` the runs of `node_ids` this store lacks (see the
    /// module's doc). `key_of` computes a key from recorded parts.
    pub fn pull(
        &self,
        remote: &Remote<'_>,
        node_ids: &[&str],
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
        trust: &Trust,
    ) -> Result<Pulled, StoreError> {
        let keys = remote_keys(remote)?;
        let known = self.reader().known_keys(&keys)?;
        let wanted: HashSet<&str> = node_ids.iter().copied().collect();
        let mut runs: Vec<CarriedRun> = Vec::new();
        let mut out = Pulled::default();
        for key in keys.iter().filter(|k| !known.contains(k)) {
            out.new_on_remote += 1;
            let path = remote.record(key);
            let text = fs::read(&path).map_err(|e| remote.unreachable(e))?;
            let run: CarriedRun = serde_json::from_slice(&text).map_err(|e| {
                remote.damaged(format!(
                    "record `runs/{}.json` is not a run record ({e})",
                    key.to_hex()
                ))
            })?;
            if run.key != *key {
                return Err(remote.damaged(format!(
                    "record `runs/{}.json` holds the run of another key",
                    key.to_hex()
                )));
            }
            if wanted.contains(run.node_id.as_str()) {
                runs.push(run);
            }
        }
        // Oldest first: the newest run of a node ends as its current one.
        runs.sort_by_key(|r| r.started_at_ms);
        let objects: BTreeMap<ContentHash, ()> = runs
            .iter()
            .flat_map(|r| r.outputs.iter().map(|o| o.hash).chain(r.log))
            .map(|h| (h, ()))
            .collect();
        let names: BTreeSet<ContentHash> = objects.keys().copied().collect();
        let refuse = |detail: String| remote.damaged(detail);
        let signers = check_runs(&runs, &names, key_of, trust, &refuse)?;
        if runs.is_empty() {
            return Ok(out);
        }
        let _gc_guard = self.store_lock(false)?;
        let staging = self.new_staging_dir()?;
        let mut damaged = Damaged::new();
        let result = self.pull_objects(remote, &names, &staging, &refuse, &mut damaged);
        let (runs, signers, refused) = without_damaged(runs, signers, &damaged);
        out.refused = refused;
        let landed = result.and_then(|(arrived, bytes)| {
            out.objects_added = arrived.len();
            out.bytes_added = bytes;
            self.land(&staging, &arrived, &runs, &signers)
        });
        let _ = remove_tree(&staging);
        let (added, current) = landed?;
        out.signed = signers.iter().filter(|s| s.is_some()).count();
        out.runs_added = added;
        out.current = current;
        Ok(out)
    }

    /// Brings the objects `names` this store lacks into `staging`, each
    /// checked: (those brought, their bytes).
    fn pull_objects(
        &self,
        remote: &Remote<'_>,
        names: &BTreeSet<ContentHash>,
        staging: &Path,
        refuse: &dyn Fn(String) -> StoreError,
        damaged: &mut Damaged,
    ) -> Result<(Vec<ContentHash>, u64), StoreError> {
        let mut arrived = Vec::new();
        let mut bytes = 0;
        for hash in names {
            let path = remote.object(hash);
            let size = match fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(refuse(format!(
                        "object `objects/{}` is named by a run record but missing",
                        hash.to_hex()
                    )))
                }
                Err(e) => return Err(remote.unreachable(e)),
            };
            if self.holds_object(hash, size) {
                continue;
            }
            let file = fs::File::open(&path).map_err(|e| remote.unreachable(e))?;
            let name = format!("objects/{}", hash.to_hex());
            if self.receive(refuse, &name, *hash, file, staging, damaged)? {
                arrived.push(*hash);
                bytes += size;
            }
        }
        Ok((arrived, bytes))
    }
}

/// Checks every record and object on `remote`: records that do not parse
/// or name a missing object, objects whose bytes do not match their name.
pub(crate) fn verify_remote(
    remote: &Remote<'_>,
    key_of: &dyn Fn(&str) -> Option<ContentHash>,
) -> Result<(usize, usize, Vec<RemoteDamage>), StoreError> {
    let mut damage = Vec::new();
    let keys = remote_keys(remote)?;
    for key in &keys {
        let path = remote.record(key);
        let run = fs::read(&path)
            .ok()
            .and_then(|t| serde_json::from_slice::<CarriedRun>(&t).ok());
        let Some(run) = run else {
            damage.push(RemoteDamage {
                path,
                problem: "not a run record".into(),
            });
            continue;
        };
        if key_of(&run.key_parts) != Some(*key) {
            damage.push(RemoteDamage {
                path: path.clone(),
                problem: "its key does not match its recorded parts".into(),
            });
        }
        for hash in run.outputs.iter().map(|o| o.hash).chain(run.log) {
            if !remote.object(&hash).is_file() {
                damage.push(RemoteDamage {
                    path: path.clone(),
                    problem: format!("names object `{}`, which is missing", hash.to_hex()),
                });
            }
        }
    }
    let mut objects = 0;
    for (path, hash, size) in remote_objects(remote)? {
        objects += 1;
        let ok = hash.is_some_and(|h| hash_contents(&path, size).is_ok_and(|got| got == h));
        if !ok {
            damage.push(RemoteDamage {
                path,
                problem: "its bytes do not match its name".into(),
            });
        }
    }
    Ok((keys.len(), objects, damage))
}
