//! Objects: `cache/objects/<2 hex>/<62 hex>`, one read-only file per distinct
//! content. `commit_success` copies a task's outputs in; `materialize` copies
//! them out to `out/<stage>/<node>/`.
//!
//! The store owns its bytes: an object is a copy the store made (never the
//! task's file, which a process the task left behind or a hard link to an
//! input could still change), and a restore checks every byte it copies out
//! against the object's name; a damaged object is set aside and its node
//! runs again, so a restore never puts bytes into `out/` that the run did
//! not record.
//!
//! Commit order, so that a kill -9 or power cut at any instant leaves a node
//! either fully recorded or not at all: copy each output in and hash the
//! copy; make it read-only; rename it into `objects/`; flush the file system
//! (`syncfs`, once per batch, see `batch.rs`); only then record the run in
//! one SQLite transaction. An object that is in place but not recorded is
//! merely unreferenced (gc removes it); a recorded run never refers to an
//! object that is not durable.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::error::{IoContext, StoreError};

use super::fileio::{clone_or_copy, make_read_only, now_ns, remove_tree, LARGE_FILE};
use super::open::Store;
use super::record::{AttemptId, NewRun, RunRecord};
use super::roles::Objects;
use super::stat_cache::Entry;
use crate::hash::ContentHash;

impl Objects<'_> {
    /// Where the object with this content lives.
    pub fn path(&self, hash: &ContentHash) -> PathBuf {
        let hex = hash.to_hex();
        self.cache.join("objects").join(&hex[..2]).join(&hex[2..])
    }

    /// Records a successful attempt: checks that every declared output exists
    /// in `staging`, moves the outputs into `cache/objects/`, records the run
    /// and marks the attempt succeeded, then removes `staging`. Files the task
    /// wrote besides its declared outputs are ignored. A key recorded before is
    /// left as it is and its record returned.
    pub fn commit_success(
        &self,
        attempt: AttemptId,
        new: NewRun<'_>,
        staging: &Path,
    ) -> Result<RunRecord, StoreError> {
        // One node is a batch of one: the same staging, flush and record
        // as the engine's group commit.
        let staged = self.stage_run(attempt, new, staging)?;
        let mut recorded = self.commit_batch(vec![(staged, Materialized::none())])?;
        recorded
            .pop()
            .ok_or_else(|| self.damaged("a committed batch returned no run".into()))
    }

    /// Materializes a run's outputs into `dest` (see [`Store::place`]) and
    /// makes the run `node_id`'s current one (a node may restore a run that
    /// another node of the same key recorded). Returns the run as the node's.
    pub fn materialize(
        &self,
        node_id: &str,
        stage: &str,
        run: &RunRecord,
        dest: &Path,
    ) -> Result<RunRecord, StoreError> {
        let mut run = run.clone();
        run.node_id = node_id.to_string();
        run.stage = stage.to_string();
        self.place(&run, dest)?;
        self.record_materialized(&run, dest)?;
        Ok(run)
    }
}

impl Store {
    /// Copies one staged file into `objects/` (not flushed: [`Store::commit_batch`]
    /// flushes the whole batch). The store never adopts the task's inode:
    /// a process the task left behind, or a file that is a hard link to an
    /// input, could still change it after the commit. So the file is copied
    /// (a reflink where the file system has them) into `scratch` (a folder
    /// of the attempt, on the store's file system), the copy is hashed, made
    /// read-only and renamed into place; the staged file is left as it was.
    pub(super) fn ingest(
        &self,
        staged: &Path,
        scratch: &Path,
    ) -> Result<(ContentHash, u64), StoreError> {
        let seq = self.staging_seq.fetch_add(1, Ordering::Relaxed);
        let copy = scratch.join(format!(".vitgraph-object-{seq}"));
        remove_any(&copy).ctx("remove leftover", &copy)?;
        let read_error = |e| StoreError::io("read", staged, e);
        let (hash, size) = match small_file(staged).map_err(read_error)? {
            // A small file is read once: its bytes are hashed and, unless an
            // object holds them already, written as the object.
            Some(bytes) => {
                self.hashes.fetch_add(1, Ordering::Relaxed);
                let hash = ContentHash::of_bytes(&bytes);
                if self.holds(&hash, bytes.len() as u64) {
                    return Ok((hash, bytes.len() as u64));
                }
                write_new(&copy, &bytes).ctx("copy into the store", staged)?;
                (hash, bytes.len() as u64)
            }
            // A large one is copied (reflinked where the file system can),
            // and the copy is hashed.
            None => {
                clone_or_copy(staged, &copy, None).ctx("copy into the store", staged)?;
                let size = fs::metadata(&copy).ctx("read metadata of", &copy)?.len();
                let hash = self.hash_uncached(&copy, size)?;
                if self.holds(&hash, size) {
                    let _ = fs::remove_file(&copy);
                    return Ok((hash, size));
                }
                (hash, size)
            }
        };
        let object = self.objects().path(&hash);
        make_read_only(&copy).ctx("make read-only", &copy)?;
        let shard = object.parent().unwrap_or(&self.cache).to_path_buf();
        match fs::create_dir(&shard) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io("create directory", &shard, e)),
        }
        fs::rename(&copy, &object).ctx("move output into", &object)?;
        Ok((hash, size))
    }

    /// Whether the object of `hash` is in place (same content committed
    /// before; a damaged one is set aside when a restore finds it, so it is
    /// not kept by this).
    pub(super) fn holds(&self, hash: &ContentHash, size: u64) -> bool {
        fs::metadata(self.objects().path(hash)).is_ok_and(|m| m.len() == size)
    }

    /// Builds the directory in the workspace's scratch area
    /// (`out/.vitgraph-tmp/`), copies each object in and checks its bytes
    /// against the object's name, then swaps it into place, so `dest` is at
    /// every instant either the old or the new content and never holds bytes
    /// the run did not record. Touches no database state.
    pub(super) fn place(&self, run: &RunRecord, dest: &Path) -> Result<(), StoreError> {
        let (parent, name) = match (dest.parent(), dest.file_name()) {
            (Some(parent), Some(name)) => (parent, name.to_string_lossy().into_owned()),
            _ => {
                return Err(StoreError::io(
                    "materialize into",
                    dest,
                    io::ErrorKind::InvalidInput.into(),
                ))
            }
        };
        fs::create_dir_all(parent).ctx("create directory", parent)?;
        let tmp = self.scratch_dir(parent, &name)?;
        if let Err(e) = self.fill(run, &tmp) {
            let _ = remove_any(&tmp);
            return Err(e);
        }
        let result = swap_into_place(&tmp, dest);
        if result.is_err() {
            let _ = remove_any(&tmp);
        }
        result
    }

    /// A new, empty folder to assemble a node's outputs in: under
    /// `out/.vitgraph-tmp/<host>/`, named after this process so that the
    /// leftovers of a process killed mid-restore are removed by the next
    /// command ([`Store::remove_dead_scratch`]); beside `dest` when `dest`
    /// is outside `out/` or on another file system.
    fn scratch_dir(&self, parent: &Path, name: &str) -> Result<PathBuf, StoreError> {
        let seq = self.staging_seq.fetch_add(1, Ordering::Relaxed);
        let area = self.scratch_area();
        let same_fs = |a: &Path, b: &Path| match (fs::metadata(a), fs::metadata(b)) {
            (Ok(a), Ok(b)) => {
                use std::os::unix::fs::MetadataExt;
                a.dev() == b.dev()
            }
            _ => false,
        };
        let tmp = if parent.starts_with(self.root.join("out"))
            && fs::create_dir_all(&area).is_ok()
            && same_fs(&area, parent)
        {
            area.join(format!("{}{seq}", self.owner.staging_prefix()))
        } else {
            parent.join(format!("{name}.vitgraph-tmp-{}-{seq}", std::process::id()))
        };
        remove_any(&tmp).ctx("remove leftover", &tmp)?;
        fs::create_dir(&tmp).ctx("create directory", &tmp)?;
        Ok(tmp)
    }

    /// `out/.vitgraph-tmp/<host>/`.
    pub(super) fn scratch_area(&self) -> PathBuf {
        self.root
            .join("out")
            .join(SCRATCH_DIR)
            .join(&self.owner.host)
    }

    pub(super) fn fill(&self, run: &RunRecord, dir: &Path) -> Result<(), StoreError> {
        let mtime = self.materialized_mtime(run);
        for output in &run.outputs {
            check_name(&run.node_id, &output.name)?;
            let object = self.objects().path(&output.hash);
            let target = dir.join(&output.name);
            if let Some(sub) = target.parent() {
                fs::create_dir_all(sub).ctx("create directory", sub)?;
            }
            match clone_or_copy(&object, &target, Some(mtime)) {
                // A run that arrived without some of its outputs (see
                // `left_behind`) restores those it has.
                Err(e) if !object.exists() && self.left_out(run, &e) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound && !object.exists() => {
                    return Err(StoreError::MissingObject {
                        node_id: run.node_id.clone(),
                        name: output.name.clone(),
                        object,
                    })
                }
                other => other.ctx("copy object to", &target)?,
            }
            // What was copied is what the run recorded, or it is not restored.
            let size = fs::metadata(&target)
                .ctx("read metadata of", &target)?
                .len();
            let actual = self.hash_uncached(&target, size)?;
            if actual != output.hash {
                let quarantined = self.quarantine(&object, &output.hash)?;
                return Err(StoreError::DamagedObject {
                    node_id: run.node_id.clone(),
                    name: output.name.clone(),
                    object,
                    actual,
                    quarantined,
                });
            }
        }
        Ok(())
    }

    /// Moves a damaged object to `cache/damaged/<hash>-<time>` (kept for a
    /// look; `gc` removes it), so no restore or commit ever takes it for
    /// the content its name promises.
    pub(super) fn quarantine(
        &self,
        object: &Path,
        named: &ContentHash,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.cache.join(DAMAGED_DIR);
        fs::create_dir_all(&dir).ctx("create directory", &dir)?;
        let to = dir.join(format!("{}-{}", named.to_hex(), now_ns()));
        match fs::rename(object, &to) {
            Ok(()) => Ok(to),
            // Set aside by another process meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(to),
            Err(e) => Err(StoreError::io("set aside the damaged object", object, e)),
        }
    }
}

/// Stats of materialized files, recorded with the batch so `check_outputs` need not hash them.
pub struct Materialized {
    pub(super) stats: Vec<(String, Entry)>,
}

impl Materialized {
    /// Nothing materialized (a run recorded without copying it to `out/`).
    pub(super) fn none() -> Materialized {
        Materialized { stats: Vec::new() }
    }
}

/// The bytes of a regular file under [`LARGE_FILE`], read once; None for a
/// larger one (it is copied, not read into memory).
fn small_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    if f.metadata()?.len() >= LARGE_FILE {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    f.by_ref().take(LARGE_FILE).read_to_end(&mut bytes)?;
    // Grew past the limit while being read: copy it as a large one.
    Ok((bytes.len() < LARGE_FILE as usize).then_some(bytes))
}

/// Creates `path` (which must not exist) with `bytes`.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(bytes)
}

/// The workspace's scratch area for materializing, under `out/`.
pub(crate) const SCRATCH_DIR: &str = ".vitgraph-tmp";

/// Where damaged objects are set aside, under `cache/`.
pub(super) const DAMAGED_DIR: &str = "damaged";

impl Store {
    /// The modification time given to materialized files: when the run ended,
    /// but at least one racy window in the past. A later edit then always gets a
    /// different mtime, even within the same timestamp tick, so the stat
    /// recorded at materialization can be trusted without hashing.
    fn materialized_mtime(&self, run: &RunRecord) -> SystemTime {
        let window = self.racy_window_ns.load(Ordering::Relaxed);
        let latest = now_ns() - window - 1_000_000;
        let ended = run
            .started_at_ms
            .saturating_add(run.duration_ms)
            .saturating_mul(1_000_000);
        let ns = ended.min(latest).max(0) as u64;
        UNIX_EPOCH + Duration::from_nanos(ns)
    }
}

/// The staged path of each declared output, sorted and deduplicated by name.
pub(super) fn declared_files(
    new: &NewRun<'_>,
    staging: &Path,
) -> Result<Vec<(String, PathBuf)>, StoreError> {
    let mut names: Vec<&String> = new.outputs.iter().collect();
    names.sort();
    names.dedup();
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        check_name(new.node_id, name)?;
        let path = staging.join(name);
        let error = |missing: bool| {
            let (node_id, name, path) = (new.node_id.to_string(), name.clone(), path.clone());
            if missing {
                StoreError::MissingOutput {
                    node_id,
                    name,
                    path,
                }
            } else {
                StoreError::OutputNotFile {
                    node_id,
                    name,
                    path,
                }
            }
        };
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push((name.clone(), path)),
            Ok(_) => return Err(error(false)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Ok(target) = fs::read_link(&path) {
                    return Err(StoreError::DanglingOutput {
                        node_id: new.node_id.to_string(),
                        name: name.clone(),
                        target,
                    });
                }
                return Err(error(true));
            }
            Err(e) => return Err(StoreError::io("read metadata of", &path, e)),
        }
    }
    Ok(files)
}

/// Output names are relative paths that stay inside the output directory.
pub(super) fn check_name(node_id: &str, name: &str) -> Result<(), StoreError> {
    let path = Path::new(name);
    let inside = !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
    if inside {
        Ok(())
    } else {
        Err(StoreError::BadOutputName {
            node_id: node_id.to_string(),
            name: name.to_string(),
        })
    }
}

/// Replaces `dest` by `tmp`: an atomic exchange where the kernel has it, else
/// two renames (dest is briefly absent, never half-written); the old content
/// ends at `tmp`'s path and is removed. Whatever stands at `dest` — a folder,
/// or a file a user put there — is replaced.
pub(super) fn swap_into_place(tmp: &Path, dest: &Path) -> Result<(), StoreError> {
    match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return fs::rename(tmp, dest).ctx("move into place", dest)
        }
        Err(e) => return Err(StoreError::io("read metadata of", dest, e)),
        Ok(_) => {}
    }
    if exchange(tmp, dest).is_err() {
        let mut old = tmp.as_os_str().to_owned();
        old.push(".old");
        let old = PathBuf::from(old);
        remove_any(&old).ctx("remove leftover", &old)?;
        fs::rename(dest, &old).ctx("move aside", dest)?;
        fs::rename(tmp, dest).ctx("move into place", dest)?;
        return remove_any(&old).ctx("remove old outputs", &old);
    }
    remove_any(tmp).ctx("remove old outputs", tmp)
}

#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let b = CString::new(b.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Removes a file or a directory tree; absent is fine.
pub(super) fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => remove_tree(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::super::test_support::{commit, key, new_run, stage, workspace, write};
    use super::super::{AttemptStatus, OutputCheck, StoreError};

    #[test]
    fn commit_then_load_round_trips_everything() {
        let (dir, store) = workspace();
        let staging = stage(&store, &[("v.txt", "1\n"), ("plots/a.svg", "<svg/>")]);
        write(&staging.join("task.log"), "hello from the task\n");
        write(&staging.join("scratch.tmp"), "not declared");
        let outputs = vec!["v.txt".to_string(), "plots/a.svg".to_string()];
        let (parts, env) = (
            json!({"spec": {"run": "echo"}, "inputs": {}}),
            json!({"gpu": "H100"}),
        );
        let attempt = store
            .journal()
            .begin_attempt("gen[i=0]", &key("k0"))
            .unwrap();
        let mut new = new_run("gen[i=0]", key("k0"), &parts, &outputs, &env);
        let log = staging.join("task.log");
        new.log = Some(&log);
        let run = store
            .objects()
            .commit_success(attempt, new, &staging)
            .unwrap();

        assert!(!staging.exists(), "staging is removed after commit");
        let names: Vec<&str> = run.outputs.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["plots/a.svg", "v.txt"]);
        let object = store.objects().path(&run.outputs[1].hash);
        assert_eq!(std::fs::read_to_string(&object).unwrap(), "1\n");
        assert_eq!(
            std::fs::metadata(&object).unwrap().permissions().mode() & 0o777,
            0o444
        );
        let log_object = store.objects().path(&run.log.expect("log stored"));
        assert_eq!(
            std::fs::read_to_string(log_object).unwrap(),
            "hello from the task\n"
        );

        let reopened = super::Store::open(dir.path()).unwrap();
        let states = reopened.reader().load_states().unwrap();
        let state = &states["gen[i=0]"];
        let loaded = state.latest_success.as_ref().expect("recorded");
        assert_eq!((loaded.stage.as_str(), loaded.key), ("gen", key("k0")));
        assert_eq!(loaded.outputs, run.outputs);
        assert_eq!(
            loaded.key_parts.0, "",
            "load_states leaves the key parts out"
        );
        let parts_loaded = reopened.reader().key_parts(loaded).unwrap();
        assert_eq!(
            (parts_loaded.value(), loaded.env.value()),
            (parts.clone(), env.clone())
        );
        assert_eq!(
            (loaded.started_at_ms, loaded.duration_ms, loaded.log),
            (1, 2, run.log)
        );
        assert_eq!(loaded.manifest_hash(), run.manifest_hash());
        let attempt = state.last_attempt.as_ref().unwrap();
        assert_eq!(
            (attempt.status, attempt.key),
            (AttemptStatus::Succeeded, key("k0"))
        );
        assert_eq!(
            reopened
                .reader()
                .run_for_key(&key("k0"))
                .unwrap()
                .unwrap()
                .outputs,
            run.outputs
        );
        assert!(reopened
            .reader()
            .run_for_key(&key("other"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_missing_declared_output_is_an_error_naming_it() {
        let (_dir, store) = workspace();
        let staging = stage(&store, &[("a.txt", "a")]);
        let outputs = vec!["a.txt".to_string(), "sub/b.txt".to_string()];
        let (parts, env) = (json!({}), json!({}));
        let attempt = store.journal().begin_attempt("n", &key("k")).unwrap();
        let err = store
            .objects()
            .commit_success(
                attempt,
                new_run("n", key("k"), &parts, &outputs, &env),
                &staging,
            )
            .unwrap_err();
        match &err {
            StoreError::MissingOutput {
                node_id,
                name,
                path,
            } => {
                assert_eq!((node_id.as_str(), name.as_str()), ("n", "sub/b.txt"));
                assert_eq!(path, &staging.join("sub/b.txt"));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("`sub/b.txt`"));
        assert!(
            store.reader().run_for_key(&key("k")).unwrap().is_none(),
            "nothing recorded"
        );
        assert!(
            staging.join("a.txt").exists(),
            "staging is kept for inspection"
        );
    }

    #[test]
    fn output_names_may_not_escape_the_output_directory() {
        let (_dir, store) = workspace();
        for bad in ["../x", "/etc/passwd", "", "a/../../b"] {
            let staging = stage(&store, &[]);
            let outputs = vec![bad.to_string()];
            let (parts, env) = (json!({}), json!({}));
            let attempt = store.journal().begin_attempt("n", &key(bad)).unwrap();
            let result = store.objects().commit_success(
                attempt,
                new_run("n", key(bad), &parts, &outputs, &env),
                &staging,
            );
            assert!(
                matches!(result, Err(StoreError::BadOutputName { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn identical_content_is_stored_once() {
        let (dir, store) = workspace();
        let a = commit(&store, "a", "ka", &[("x.txt", "same"), ("y.txt", "same")]);
        let b = commit(&store, "b", "kb", &[("z.txt", "same")]);
        assert_eq!(a.outputs[0].hash, b.outputs[0].hash);
        let shard = store
            .objects()
            .path(&b.outputs[0].hash)
            .parent()
            .unwrap()
            .to_path_buf();
        assert_eq!(std::fs::read_dir(shard).unwrap().count(), 1);
        let objects: usize = walk_count(&dir.path().join("cache/objects"));
        assert_eq!(objects, 1);
    }

    #[test]
    fn a_key_is_recorded_once_and_shared_by_nodes_with_that_key() {
        let (_dir, store) = workspace();
        let first = commit(&store, "a", "k", &[("x.txt", "first")]);
        let again = commit(&store, "b", "k", &[("x.txt", "second")]);
        assert_eq!(again.outputs, first.outputs, "the existing record wins");
        assert_eq!(again.node_id, "b");
        let states = store.reader().load_states().unwrap();
        assert_eq!(states["a"].latest_success.as_ref().unwrap().key, key("k"));
        assert_eq!(states["b"].latest_success.as_ref().unwrap().node_id, "b");
        assert_eq!(
            states["b"].last_attempt.as_ref().unwrap().status,
            AttemptStatus::Succeeded
        );
    }

    #[test]
    fn latest_success_follows_commit_order_and_materialize() {
        let (dir, store) = workspace();
        let old = commit(&store, "n", "k1", &[("v.txt", "1")]);
        commit(&store, "n", "k2", &[("v.txt", "2")]);
        assert_eq!(
            store.reader().load_states().unwrap()["n"]
                .latest_success
                .as_ref()
                .unwrap()
                .key,
            key("k2")
        );
        // Reverting to k1 restores its run without running the task.
        store
            .objects()
            .materialize(&old.node_id, &old.stage, &old, &dir.path().join("out/n/n"))
            .unwrap();
        assert_eq!(
            store.reader().load_states().unwrap()["n"]
                .latest_success
                .as_ref()
                .unwrap()
                .key,
            key("k1")
        );
    }

    #[test]
    fn materialize_replaces_an_existing_destination() {
        let (dir, store) = workspace();
        let dest = dir.path().join("out/gen/gen[i=0]");
        write(&dest.join("stale.txt"), "left from an older run");
        write(&dest.join("v.txt"), "old");
        let run = commit(
            &store,
            "gen[i=0]",
            "k",
            &[("v.txt", "new"), ("plots/a.svg", "<svg/>")],
        );
        store
            .objects()
            .materialize(&run.node_id, &run.stage, &run, &dest)
            .unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("v.txt")).unwrap(), "new");
        assert_eq!(
            std::fs::read_to_string(dest.join("plots/a.svg")).unwrap(),
            "<svg/>"
        );
        assert!(!dest.join("stale.txt").exists());
        let mode = std::fs::metadata(dest.join("v.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(
            mode & 0o200,
            0,
            "materialized files are writable by the user"
        );
        let siblings: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(
            siblings.len(),
            1,
            "no temporary directory is left beside `dest`"
        );
        std::fs::write(dest.join("v.txt"), "edited").unwrap();
        let object = store.objects().path(&run.outputs[1].hash);
        assert_eq!(
            std::fs::read_to_string(object).unwrap(),
            "new",
            "editing out/ never touches objects"
        );
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Modified("v.txt".into())
        );
    }

    #[test]
    fn materialize_reports_a_missing_object() {
        let (dir, store) = workspace();
        let run = commit(&store, "n", "k", &[("v.txt", "x")]);
        std::fs::remove_file(store.objects().path(&run.outputs[0].hash)).unwrap();
        let dest = dir.path().join("out/n/n");
        let err = store
            .objects()
            .materialize(&run.node_id, &run.stage, &run, &dest)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::MissingObject { ref name, .. } if name == "v.txt"),
            "{err:?}"
        );
        assert!(!dest.exists());
    }

    /// Sets a file's mode to `mode` and writes `text` into it (as a
    /// background writer or an editing user would, mode permitting).
    fn overwrite(path: &std::path::Path, mode: u32, text: &str) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_store_never_shares_an_inode_with_a_staged_output() {
        use std::os::unix::fs::MetadataExt;
        let (dir, store) = workspace();
        // The task's output is a hard link to a user's input.
        let input = dir.path().join("data/in.txt");
        write(&input, "input-data\n");
        let staging = stage(&store, &[("log.txt", "still being written")]);
        std::fs::hard_link(&input, staging.join("o.txt")).unwrap();
        let outputs = vec!["o.txt".to_string(), "log.txt".to_string()];
        let (parts, env) = (json!({}), json!({}));
        let attempt = store.journal().begin_attempt("ln", &key("k")).unwrap();
        let mut new = new_run("ln", key("k"), &parts, &outputs, &env);
        let log = staging.join("log.txt");
        new.log = Some(&log);
        let run = store
            .objects()
            .commit_success(attempt, new, &staging)
            .unwrap();

        let meta = std::fs::metadata(&input).unwrap();
        assert_eq!(meta.nlink(), 1, "the input is not linked into the store");
        assert_ne!(
            meta.permissions().mode() & 0o200,
            0,
            "the input stays writable"
        );
        overwrite(&input, 0o644, "edited by the user\n");
        let object = store
            .objects()
            .path(&run.outputs.iter().find(|o| o.name == "o.txt").unwrap().hash);
        assert_eq!(std::fs::read_to_string(&object).unwrap(), "input-data\n");
        assert_eq!(std::fs::metadata(&object).unwrap().nlink(), 1);
        assert!(
            store.objects().verify().unwrap().is_empty(),
            "editing the input damages nothing"
        );
    }

    #[test]
    fn a_damaged_object_is_never_restored_and_is_set_aside() {
        let (dir, store) = workspace();
        let run = commit(
            &store,
            "gen",
            "k",
            &[("v.txt", "0123456789"), ("w.txt", "ok")],
        );
        let dest = dir.path().join("out/gen");
        store
            .objects()
            .materialize("gen", "gen", &run, &dest)
            .unwrap();
        for damage in ["0123456788", "0123"] {
            // Same size with one byte changed, then truncated.
            let v = run.outputs.iter().find(|o| o.name == "v.txt").unwrap();
            let object = store.objects().path(&v.hash);
            if !object.exists() {
                write(&object, "");
            }
            overwrite(&object, 0o644, damage);
            let err = store
                .objects()
                .materialize("gen", "gen", &run, &dest)
                .unwrap_err();
            assert!(err.is_damaged_object(), "{err:?}");
            let StoreError::DamagedObject {
                name, quarantined, ..
            } = &err
            else {
                panic!("{err:?}")
            };
            assert_eq!(name, "v.txt");
            assert!(!object.exists(), "the damaged object is set aside");
            assert_eq!(std::fs::read_to_string(quarantined).unwrap(), damage);
            assert_eq!(
                std::fs::read_to_string(dest.join("v.txt")).unwrap(),
                "0123456789",
                "out/ keeps what it had"
            );
        }
        // Removed, the run cannot be restored either, and says so.
        let err = store
            .objects()
            .materialize("gen", "gen", &run, &dest)
            .unwrap_err();
        assert!(matches!(err, StoreError::MissingObject { .. }), "{err:?}");
        assert_eq!(
            store.objects().gc().unwrap().staging_removed,
            2,
            "gc removes what was set aside"
        );
    }

    #[test]
    fn a_node_that_restores_another_nodes_run_becomes_its_owner() {
        let (dir, store) = workspace();
        let run = commit(&store, "rep[k=1]", "same", &[("o.txt", "same")]);
        let restored = store
            .objects()
            .materialize("rep[k=2]", "rep", &run, &dir.path().join("out/rep/k=2"))
            .unwrap();
        assert_eq!(restored.node_id, "rep[k=2]");
        let states = store.reader().load_states().unwrap();
        assert_eq!(
            states["rep[k=2]"].latest_success.as_ref().unwrap().key,
            run.key
        );
        assert_eq!(
            states["rep[k=1]"].latest_success.as_ref().unwrap().key,
            run.key
        );
    }

    #[test]
    fn a_restore_killed_half_way_leaves_nothing_the_next_command_keeps() {
        let (dir, store) = workspace();
        let run = commit(&store, "n", "k", &[("v.txt", "x")]);
        store
            .objects()
            .materialize("n", "n", &run, &dir.path().join("out/n"))
            .unwrap();
        // What a process killed in the middle of `place` leaves.
        let area = store.scratch_area();
        let child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        let mut child = child;
        child.wait().unwrap();
        let leftover = area.join(format!("{dead}-1-0"));
        write(&leftover.join("v.txt"), "half");
        let mine = area.join(format!("{}7", store.owner.staging_prefix()));
        std::fs::create_dir_all(&mine).unwrap();
        let old_style = dir.path().join(format!("out/n.vitgraph-tmp-{dead}"));
        write(&old_style.join("v.txt"), "half");
        drop(super::Store::open(dir.path()).unwrap());
        assert!(
            !leftover.exists(),
            "a dead process's folder is removed on open"
        );
        assert!(mine.exists(), "a live process's folder is kept");
        assert!(
            old_style.exists(),
            "an older version's folder is left to gc"
        );
        assert!(store.objects().gc().unwrap().staging_removed >= 1);
        assert!(!old_style.exists(), "gc removes it");
        let listed: Vec<_> = std::fs::read_dir(dir.path().join("out"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            listed.len(),
            2,
            "out/ holds the node and the scratch area: {listed:?}"
        );
    }

    #[test]
    fn a_symlinked_output_is_stored_by_content() {
        let (dir, store) = workspace();
        let target = dir.path().join("data.csv");
        write(&target, "a,b\n");
        let staging = stage(&store, &[]);
        std::os::unix::fs::symlink(&target, staging.join("data.csv")).unwrap();
        let outputs = vec!["data.csv".to_string()];
        let (parts, env) = (json!({}), json!({}));
        let attempt = store.journal().begin_attempt("n", &key("k")).unwrap();
        let run = store
            .objects()
            .commit_success(
                attempt,
                new_run("n", key("k"), &parts, &outputs, &env),
                &staging,
            )
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(store.objects().path(&run.outputs[0].hash)).unwrap(),
            "a,b\n"
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "a,b\n",
            "the link target is untouched"
        );
    }

    fn walk_count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                if e.path().is_dir() {
                    walk_count(&e.path())
                } else {
                    1
                }
            })
            .sum()
    }
}
