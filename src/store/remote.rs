//! Remotes: a place (a folder on a shared or network file system, or an
//! S3-compatible bucket) that several workspaces push runs to and pull
//! them from (`vitgraph push`, `pull`, `remote verify`). How each kind
//! stores and writes its files is its [`Backend`]'s (`remote_dir`,
//! `remote_s3`); what is written when is here.
//!
//! Objects and records never change once written, and each is written
//! put-if-absent. A run's record is written only after every object it
//! names is in place and durable, so a record on the remote always has its
//! objects, whatever process dies when: a push killed with -9 leaves at
//! most temporary files and objects no record names yet.
//!
//! A pull reads the records of keys this store does not hold, keeps those
//! of the selected nodes, and brings them in as an import does (see
//! `arrival`): every object checked against its name on arrival.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use super::arrival::{check_runs, without_damaged, CarriedRun, Damaged};
use super::error::StoreError;
use super::fileio::remove_tree;
use super::remote_dir::{object_name, record_name, Area, Backend, DirRemote};
use super::roles::{Objects, Reader};
use super::signing::{SecretKey, Trust};
use crate::hash::ContentHash;

/// A remote as a command names it.
pub struct Remote {
    pub name: String,
    pub(super) backend: Box<dyn Backend>,
}

/// What a push did.
#[derive(Debug, Default)]
pub struct Pushed {
    pub runs: usize,
    /// Runs whose record the remote did not have.
    pub runs_added: usize,
    /// Runs not pushed because they are here without all their outputs.
    pub without_outputs: usize,
    pub objects_added: usize,
    pub bytes_added: u64,
}

/// What a pull did.
#[derive(Debug, Default)]
pub struct Pulled {
    /// Records on the remote whose key this store did not hold (or held
    /// without all its outputs: see `left_behind`).
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
    /// Where it is (a path or a URL).
    pub path: String,
    pub problem: String,
}

impl Remote {
    /// A remote in the folder `root`.
    pub fn dir(name: &str, root: PathBuf) -> Remote {
        Remote {
            name: name.to_owned(),
            backend: Box::new(DirRemote { root }),
        }
    }

    /// The remote `name` as `vitgraph.ron` describes it (`ws_root` for a
    /// relative folder).
    pub fn of_spec(
        name: &str,
        spec: &crate::config::RemoteSpec,
        ws_root: &std::path::Path,
    ) -> Result<Remote, StoreError> {
        match spec.kind() {
            crate::config::RemoteKind::Dir(path) => Ok(Remote::dir(name, ws_root.join(path))),
            crate::config::RemoteKind::S3 {
                url,
                endpoint,
                region,
            } => Ok(Remote {
                name: name.to_owned(),
                backend: super::remote_s3::open(name, url, endpoint, region)?,
            }),
        }
    }

    /// Where the remote is, for messages.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    pub(super) fn error(&self, at: Option<&str>, detail: String, help: &str) -> StoreError {
        StoreError::Remote {
            name: self.name.clone(),
            path: PathBuf::from(match at {
                Some(name) => self.backend.location_of(name),
                None => self.backend.location(),
            }),
            detail,
            help: help.to_owned(),
        }
    }

    pub(super) fn unreachable(&self, e: io::Error) -> StoreError {
        let detail = if e.kind() == io::ErrorKind::NotFound && !self.backend.exists() {
            "it does not exist: nothing was pushed to it yet, or its file system is not mounted"
                .to_owned()
        } else {
            format!("it cannot be read ({e})")
        };
        self.error(
            None,
            detail,
            "check that it is reachable (its file system mounted, its endpoint up, credentials in `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`) and that `vitgraph.ron`'s `remotes` names it",
        )
    }

    fn damaged(&self, detail: String) -> StoreError {
        self.error(
            None,
            detail,
            "nothing was pulled; `vitgraph remote verify` lists what is damaged on the remote, and pushing from a machine that holds the runs writes them again",
        )
    }

    /// The keys the remote has records of.
    pub(super) fn keys(&self) -> Result<Vec<ContentHash>, StoreError> {
        let listed = self
            .backend
            .list(Area::Runs)
            .map_err(|e| self.unreachable(e))?;
        Ok(listed.into_iter().filter_map(|l| l.hash).collect())
    }

    /// The record of `key`, parsed; None when it is missing or is not a
    /// run record.
    pub(super) fn record_of(&self, key: &ContentHash) -> Option<CarriedRun> {
        let text = self.backend.read(&record_name(key)).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

impl Reader<'_> {
    /// Pushes the current runs of `node_ids` to `remote`: the objects of
    /// each run the remote lacks, then, once they are flushed, its record.
    pub fn push(
        &self,
        remote: &Remote,
        node_ids: &[&str],
        signer: Option<&SecretKey>,
    ) -> Result<Pushed, StoreError> {
        let runs = self.current_runs_with_parts(node_ids)?;
        let mut out = Pushed {
            runs: runs.len(),
            ..Pushed::default()
        };
        remote
            .backend
            .prepare_write()
            .map_err(|e| remote.unreachable(e))?;
        let there: HashSet<ContentHash> = remote.keys()?.into_iter().collect();
        // A run here without all its outputs (see `left_behind`) is not
        // pushed: a record goes up only with every object it names.
        let elsewhere = self.all_bytes_elsewhere()?;
        let (missing, left): (Vec<&super::RunRecord>, Vec<&super::RunRecord>) = runs
            .iter()
            .filter(|r| !there.contains(&r.key))
            .partition(|r| !elsewhere.contains_key(&r.key) || self.objects().holds_run(r));
        out.without_outputs = left.len();
        if missing.is_empty() {
            return Ok(out);
        }
        let mut seen: HashSet<ContentHash> = HashSet::new();
        let mut wanted: Vec<(ContentHash, u64)> = Vec::new();
        for run in &missing {
            for hash in run.outputs.iter().map(|o| o.hash).chain(run.log) {
                if seen.insert(hash) {
                    let local = self.objects().path(&hash);
                    let size = std::fs::metadata(&local)
                        .map_err(|e| StoreError::io("read object", &local, e))?
                        .len();
                    wanted.push((hash, size));
                }
            }
        }
        let hashes: Vec<ContentHash> = wanted.iter().map(|w| w.0).collect();
        let held = remote
            .backend
            .object_sizes(&hashes)
            .map_err(|e| remote.unreachable(e))?;
        // Objects a record is about to name that the remote holds are
        // touched: `remote gc` spares what was touched within its grace
        // period. The others are sent.
        let (mut present, mut absent) = (Vec::new(), Vec::new());
        for (hash, size) in &wanted {
            if held.get(hash) == Some(size) {
                present.push(*hash);
            } else {
                absent.push((*hash, self.objects().path(hash)));
            }
        }
        remote.backend.touch_objects(&present);
        let (added, bytes) = remote
            .backend
            .put_objects(&absent)
            .map_err(|e| push_error(remote, e))?;
        out.objects_added = added;
        out.bytes_added = bytes;
        let records: Vec<(ContentHash, Vec<u8>)> = missing
            .iter()
            .map(|run| {
                let json = serde_json::to_vec(&CarriedRun::of(run, signer)).unwrap_or_default();
                (run.key, json)
            })
            .collect();
        out.runs_added = remote
            .backend
            .put_records(&records)
            .map_err(|e| push_error(remote, e))?;
        Ok(out)
    }

    /// Which of `keys` are recorded here with all their outputs: a run
    /// here without some (see `left_behind`) is not, so a pull brings
    /// them and `status --remote` counts it as there only.
    pub(super) fn known_keys(
        &self,
        keys: &[ContentHash],
    ) -> Result<HashSet<ContentHash>, StoreError> {
        let elsewhere = self.all_bytes_elsewhere()?;
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT 1 FROM runs WHERE key = ?1")
            .map_err(|e| self.db_err(e))?;
        let mut known = HashSet::new();
        for key in keys.iter().filter(|k| !elsewhere.contains_key(k)) {
            if stmt.exists([&key.0[..]]).map_err(|e| self.db_err(e))? {
                known.insert(*key);
            }
        }
        Ok(known)
    }
}

/// A push's error: a local object that does not match its name is this
/// store's damage; anything else the remote's.
fn push_error(remote: &Remote, e: io::Error) -> StoreError {
    if e.kind() == io::ErrorKind::InvalidData {
        return StoreError::Bundle {
            path: PathBuf::from(e.to_string()),
            detail: "this object's bytes do not match its name".into(),
            help: "nothing of it was pushed; `vitgraph verify --repair` sets damaged objects aside, and building again restores them".into(),
        };
    }
    remote.error(
        None,
        format!("writing to it failed ({e})"),
        "nothing a record names is missing there: push again once it is reachable",
    )
}

impl Objects<'_> {
    /// Pulls from `remote` the runs of `node_ids` this store lacks (see the
    /// module's doc). `key_of` computes a key from recorded parts.
    pub fn pull(
        &self,
        remote: &Remote,
        node_ids: &[&str],
        key_of: &dyn Fn(&str) -> Option<ContentHash>,
        trust: &Trust,
    ) -> Result<Pulled, StoreError> {
        let keys = remote.keys()?;
        let known = self.reader().known_keys(&keys)?;
        let wanted: HashSet<&str> = node_ids.iter().copied().collect();
        let mut runs: Vec<CarriedRun> = Vec::new();
        let mut out = Pulled::default();
        for key in keys.iter().filter(|k| !known.contains(k)) {
            out.new_on_remote += 1;
            let text = remote
                .backend
                .read(&record_name(key))
                .map_err(|e| remote.unreachable(e))?;
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
            self.land(&staging, &arrived, &runs, &signers, &Default::default())
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
        remote: &Remote,
        names: &BTreeSet<ContentHash>,
        staging: &Path,
        refuse: &dyn Fn(String) -> StoreError,
        damaged: &mut Damaged,
    ) -> Result<(Vec<ContentHash>, u64), StoreError> {
        let hashes: Vec<ContentHash> = names.iter().copied().collect();
        let sizes = remote
            .backend
            .object_sizes(&hashes)
            .map_err(|e| remote.unreachable(e))?;
        let mut arrived = Vec::new();
        let mut bytes = 0;
        for hash in names {
            let Some(&size) = sizes.get(hash) else {
                return Err(refuse(format!(
                    "object `objects/{}` is named by a run record but missing",
                    hash.to_hex()
                )));
            };
            if self.holds_object(hash, size) {
                continue;
            }
            let file = remote
                .backend
                .open(&object_name(hash))
                .map_err(|e| remote.unreachable(e))?;
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
    remote: &Remote,
    key_of: &dyn Fn(&str) -> Option<ContentHash>,
) -> Result<(usize, usize, Vec<RemoteDamage>), StoreError> {
    let mut damage = Vec::new();
    let keys = remote.keys()?;
    let objects = remote
        .backend
        .list(Area::Objects)
        .map_err(|e| remote.unreachable(e))?;
    let held: HashSet<ContentHash> = objects.iter().filter_map(|o| o.hash).collect();
    for key in &keys {
        let path = remote.backend.location_of(&record_name(key));
        let Some(run) = remote.record_of(key) else {
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
            if !held.contains(&hash) {
                damage.push(RemoteDamage {
                    path: path.clone(),
                    problem: format!("names object `{}`, which is missing", hash.to_hex()),
                });
            }
        }
    }
    for object in &objects {
        let ok = object.hash.is_some_and(|h| {
            remote
                .backend
                .hash_of(&object.name)
                .is_ok_and(|got| got == h)
        });
        if !ok {
            damage.push(RemoteDamage {
                path: remote.backend.location_of(&object.name),
                problem: "its bytes do not match its name".into(),
            });
        }
    }
    Ok((keys.len(), objects.len(), damage))
}
