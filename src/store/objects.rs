//! Objects: `cache/objects/<2 hex>/<62 hex>`, one read-only file per distinct
//! content. `commit_success` moves a task's outputs in; `materialize` copies
//! them out to `out/<stage>/<node>/`.
//!
//! Commit order, so that a kill -9 or power cut at any instant leaves a node
//! either fully recorded or not at all: hash each output; make it read-only and
//! fsync it; rename it into `objects/` and fsync the directories; only then
//! record the run in one SQLite transaction. An object that is in place but
//! not recorded is merely unreferenced (gc removes it); a recorded run never
//! refers to an object that is not durable.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::{IoContext, StoreError};
use rusqlite::TransactionBehavior;

use super::fileio::{clone_or_copy, fsync_dir, fsync_file, make_read_only, now_ms, remove_tree};
use super::open::Store;
use super::record::{AttemptId, NewRun, OutputEntry, RunRecord};
use super::runs::point_node_at;
use crate::hash::ContentHash;

impl Store {
    /// Where the object with this content lives.
    pub fn object_path(&self, hash: &ContentHash) -> PathBuf {
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
        let staged = declared_files(&new, staging)?;
        if let Some(existing) = self.run_for_key(&new.key)? {
            let recorded = self.adopt_existing(attempt, existing, &new)?;
            let _ = remove_tree(staging);
            return Ok(recorded);
        }
        let guard = self.store_lock(false)?;
        let mut touched = BTreeSet::new();
        let mut outputs = Vec::with_capacity(staged.len());
        for (name, path) in &staged {
            let (hash, size) = self.ingest(path, &mut touched, true)?;
            outputs.push(OutputEntry {
                name: name.clone(),
                hash,
                size,
            });
        }
        let log = match new.log {
            Some(path) if path.is_file() => Some(self.ingest(path, &mut touched, true)?.0),
            _ => None,
        };
        for dir in &touched {
            fsync_dir(dir).ctx("flush directory", dir)?;
        }
        let run = RunRecord {
            node_id: new.node_id.to_string(),
            stage: new.stage.to_string(),
            key: new.key,
            key_parts: new.key_parts.clone(),
            outputs,
            env: new.env.clone(),
            started_at_ms: new.started_at_ms,
            duration_ms: new.duration_ms,
            log,
        };
        let recorded = self.record_run(attempt, &run)?;
        drop(guard);
        // The run is recorded; a staging directory that resists removal is
        // cleaned up once this process has exited.
        let _ = remove_tree(staging);
        Ok(recorded)
    }

    /// Points the node at a run recorded before and closes the attempt.
    pub(super) fn adopt_existing(
        &self,
        attempt: AttemptId,
        mut existing: RunRecord,
        new: &NewRun<'_>,
    ) -> Result<RunRecord, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        point_node_at(&tx, new.node_id, new.stage, &new.key).map_err(|e| self.db_err(e))?;
        tx.execute(
            "UPDATE attempts SET status = 'succeeded', finished_at_ms = ?2 WHERE id = ?1",
            rusqlite::params![attempt.0, now_ms()],
        )
        .map_err(|e| self.db_err(e))?;
        tx.commit().map_err(|e| self.db_err(e))?;
        existing.node_id = new.node_id.to_string();
        existing.stage = new.stage.to_string();
        Ok(existing)
    }

    /// Moves one staged file into `objects/` (or drops it when the object
    /// exists), adding the directories to fsync to `touched`.
    pub(super) fn ingest(
        &self,
        staged: &Path,
        touched: &mut BTreeSet<PathBuf>,
        sync: bool,
    ) -> Result<(ContentHash, u64), StoreError> {
        let source = self.regular_source(staged)?;
        let size = fs::metadata(&source)
            .ctx("read metadata of", &source)?
            .len();
        let hash = self.hash_uncached(&source, size)?;
        let object = self.object_path(&hash);
        if fs::metadata(&object)
            .map(|m| m.len() == size)
            .unwrap_or(false)
        {
            return Ok((hash, size)); // same content committed before
        }
        make_read_only(&source).ctx("make read-only", &source)?;
        if sync {
            fsync_file(&source).ctx("flush", &source)?;
        }
        let shard = object.parent().unwrap_or(&self.cache).to_path_buf();
        match fs::create_dir(&shard) {
            Ok(()) => {
                touched.insert(self.cache.join("objects"));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io("create directory", &shard, e)),
        }
        fs::rename(&source, &object).ctx("move output into", &object)?;
        touched.insert(shard);
        Ok((hash, size))
    }

    /// A task may declare a symlink as an output; the object gets the content
    /// it points to, copied beside it so the rename stays on one file system.
    fn regular_source(&self, staged: &Path) -> Result<PathBuf, StoreError> {
        let meta = fs::symlink_metadata(staged).ctx("read metadata of", staged)?;
        if !meta.file_type().is_symlink() {
            return Ok(staged.to_path_buf());
        }
        let name = staged
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let copy = staged.with_file_name(format!(".vitgraph-resolved-{name}"));
        let _ = fs::remove_file(&copy);
        clone_or_copy(staged, &copy).ctx("copy", staged)?;
        Ok(copy)
    }

    /// Materializes a run's outputs into `dest`: builds the directory beside it,
    /// reflinks or copies each object in, then swaps it into place, so `dest`
    /// is at every instant either the old or the new content. Also makes the
    /// run the node's current one.
    pub fn materialize(&self, run: &RunRecord, dest: &Path) -> Result<(), StoreError> {
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
        let tmp = parent.join(format!("{name}.vitgraph-tmp-{}", std::process::id()));
        remove_any(&tmp).ctx("remove leftover", &tmp)?;
        fs::create_dir(&tmp).ctx("create directory", &tmp)?;
        if let Err(e) = self.fill(run, &tmp) {
            let _ = remove_any(&tmp);
            return Err(e);
        }
        swap_into_place(&tmp, dest, parent, &name)?;
        self.record_materialized(run, dest)
    }

    pub(super) fn fill(&self, run: &RunRecord, dir: &Path) -> Result<(), StoreError> {
        for output in &run.outputs {
            check_name(&run.node_id, &output.name)?;
            let object = self.object_path(&output.hash);
            let target = dir.join(&output.name);
            if let Some(sub) = target.parent() {
                fs::create_dir_all(sub).ctx("create directory", sub)?;
            }
            match clone_or_copy(&object, &target) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && !object.exists() => {
                    return Err(StoreError::MissingObject {
                        node_id: run.node_id.clone(),
                        name: output.name.clone(),
                        object,
                    })
                }
                other => other.ctx("copy object to", &target)?,
            }
        }
        Ok(())
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
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(error(true)),
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
/// two renames (dest is briefly absent, never half-written).
pub(super) fn swap_into_place(
    tmp: &Path,
    dest: &Path,
    parent: &Path,
    name: &str,
) -> Result<(), StoreError> {
    match fs::symlink_metadata(dest) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return fs::rename(tmp, dest).ctx("move into place", dest)
        }
        Err(e) => return Err(StoreError::io("read metadata of", dest, e)),
        Ok(_) => {}
    }
    if exchange(tmp, dest).is_ok() {
        return remove_any(tmp).ctx("remove old outputs", tmp);
    }
    let old = parent.join(format!("{name}.vitgraph-old-{}", std::process::id()));
    remove_any(&old).ctx("remove leftover", &old)?;
    fs::rename(dest, &old).ctx("move aside", dest)?;
    fs::rename(tmp, dest).ctx("move into place", dest)?;
    remove_any(&old).ctx("remove old outputs", &old)
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
