//! The store's role for judging files ([`Store::hasher`]): content hashes of
//! inputs and checks of materialized outputs through the stat cache
//! (`stat_cache`), and the stamps that tell whether a task wrote its input.
//!
//! A command that keeps a record of what it judged (the no-op snapshot's fact
//! log, `engine::facts`) passes an [`Observer`] in (`Hasher::observed`):
//! every file judged is told to it with its stat.

use std::fs;
use std::io;
use std::path::Path;

use rusqlite::TransactionBehavior;

use super::error::StoreError;
use super::fileio::{now_ns, Stat};
use super::memo::{Entry, Probe};
use super::open::Store;
use super::record::{OutputCheck, RunRecord};
use super::stat_cache::upsert_stat;
use crate::hash::ContentHash;

/// What an input's stat said at one moment (absent: None), with its link
/// count: a task that hard-links its input moves the input's ctime without
/// touching its content, so a ctime that moved counts as a change only when
/// the link count did not.
#[derive(Clone, Copy, Debug)]
pub struct InputStamp(Option<(Stat, u64)>);

impl PartialEq for InputStamp {
    fn eq(&self, other: &InputStamp) -> bool {
        match (self.0, other.0) {
            (None, None) => true,
            (Some((a, la)), Some((b, lb))) => {
                let content = (a.size, a.mtime_ns, a.inode) == (b.size, b.mtime_ns, b.inode);
                content && (a.ctime_ns == b.ctime_ns || la != lb)
            }
            _ => false,
        }
    }
}

fn stamp_of(meta: &fs::Metadata) -> (Stat, u64) {
    use std::os::unix::fs::MetadataExt;
    (Stat::of(meta), meta.nlink())
}

/// Told of every file a [`Hasher`] judges (see `engine::facts`).
pub trait Observer: Sync {
    /// `rel` (relative to the workspace root) had `stat` at `at_ns` (None:
    /// it did not exist), looked at as `probe` says.
    fn saw(&self, rel: &str, probe: Probe, stat: Option<Stat>, at_ns: i64);

    /// Something was judged that a stat cannot vouch for (a folder's tree).
    fn unusable(&self);
}

/// The store's role for judging files: content hashes of inputs and checks
/// of materialized outputs through the stat cache.
#[derive(Clone, Copy)]
pub struct Hasher<'a> {
    store: &'a Store,
    observer: Option<&'a dyn Observer>,
}

impl std::ops::Deref for Hasher<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}

impl Store {
    /// The hasher, telling no one what it judges.
    pub fn hasher(&self) -> Hasher<'_> {
        Hasher {
            store: self,
            observer: None,
        }
    }
}

impl<'a> Hasher<'a> {
    /// This hasher, telling `observer` of every file it judges.
    pub fn observed(self, observer: Option<&'a dyn Observer>) -> Hasher<'a> {
        Hasher { observer, ..self }
    }

    fn note(&self, rel: &str, probe: Probe, stat: Option<Stat>, at_ns: i64) {
        if let Some(o) = self.observer {
            o.saw(rel, probe, stat, at_ns);
        }
    }

    /// Tells the observer that something was judged that a stat cannot vouch
    /// for (a folder's tree, hashed file by file).
    pub fn unusable(&self) {
        if let Some(o) = self.observer {
            o.unusable();
        }
    }

    /// Content hash of a workspace file through the stat cache; `Ok(None)` if
    /// it does not exist. Large files are hashed with mmap and blake3's rayon mode.
    pub fn hash_file(&self, path: &Path) -> Result<Option<ContentHash>, StoreError> {
        let recorded_ns = now_ns();
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.note(&self.stat_key(path), Probe::Follow, None, recorded_ns);
                return Ok(None);
            }
            Err(e) => return Err(StoreError::io("read metadata of", path, e)),
        };
        if !meta.is_file() {
            return Err(StoreError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let stat = Stat::of(&meta);
        let key = self.stat_key(path);
        self.note(&key, Probe::Follow, Some(stat), recorded_ns);
        self.cached_hash(path, key, stat, recorded_ns).map(Some)
    }

    /// The content hash of `path`, whose stat is `stat` (taken at
    /// `recorded_ns`): the stat cache's entry when it vouches for the file,
    /// else hashed now and remembered.
    fn cached_hash(
        &self,
        path: &Path,
        key: String,
        stat: Stat,
        recorded_ns: i64,
    ) -> Result<ContentHash, StoreError> {
        if let Some(hash) = self.trusted_hash(&key, &stat)? {
            return Ok(hash);
        }
        let hash = self.hash_uncached(path, stat.size)?;
        let entry = Entry {
            stat,
            hash,
            recorded_ns,
        };
        self.remember(key, entry, true);
        Ok(hash)
    }

    /// Writes the entries learned since the last flush, in one transaction.
    pub fn flush(&self) -> Result<(), StoreError> {
        // Nothing loaded, nothing noted: nothing to write (and no reason to load it).
        let dirty = std::mem::take(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()).dirty);
        if dirty.is_empty() || self.read_only {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        for (path, entry) in &dirty {
            upsert_stat(&tx, path, entry).map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))
    }

    /// Whether `dest` holds `run`'s outputs: a `stat` per file, hashing only
    /// the files whose stat differs from the one recorded when they were
    /// materialized (or last checked).
    pub fn check_outputs(&self, run: &RunRecord, dest: &Path) -> Result<OutputCheck, StoreError> {
        for output in &run.outputs {
            let path = dest.join(&output.name);
            let recorded_ns = now_ns();
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                // A file where a folder of the path belongs (`out/` is a
                // view vitgraph rewrites): the output is not there.
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTDIR) =>
                {
                    return Ok(OutputCheck::Missing(output.name.clone()))
                }
                Err(e) => return Err(StoreError::io("read metadata of", &path, e)),
            };
            if !meta.is_file() {
                return Ok(OutputCheck::Modified(output.name.clone()));
            }
            let stat = Stat::of(&meta);
            let key = self.stat_key(&path);
            self.note(&key, Probe::NoFollow, Some(stat), recorded_ns);
            if self.cached_hash(&path, key, stat, recorded_ns)? != output.hash {
                return Ok(OutputCheck::Modified(output.name.clone()));
            }
        }
        Ok(OutputCheck::Intact)
    }

    /// The stat of an input file whose content is still `expected` (the hash
    /// its node's key was computed with), to compare with its stat after the
    /// task ran ([`Store::input_stamp`]); None when it changed or is gone.
    /// A zero hash stands for an input that was absent: it must still be.
    pub fn input_stamp_if(
        &self,
        path: &Path,
        expected: &ContentHash,
    ) -> Result<Option<InputStamp>, StoreError> {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok((expected.0 == [0; 32]).then_some(InputStamp(None)))
            }
            Err(e) => return Err(StoreError::io("read metadata of", path, e)),
        };
        let stat = Stat::of(&meta);
        let hash = match self.trusted_hash(&self.stat_key(path), &stat)? {
            Some(hash) => hash,
            None => self.hash_uncached(path, stat.size)?,
        };
        Ok((hash == *expected).then_some(InputStamp(Some(stamp_of(&meta)))))
    }

    /// An input's stat now, to compare with [`Store::input_stamp_if`]'s: a
    /// write since, even one reverted with its old mtime, moves its ctime.
    pub fn input_stamp(&self, path: &Path) -> InputStamp {
        InputStamp(fs::metadata(path).ok().map(|m| stamp_of(&m)))
    }

    /// Loads only the entries of `keys` (when nothing is loaded yet): for a
    /// command that will look at those files alone, such as an incremental
    /// build. A file outside them is then hashed rather than looked up, which
    /// costs time but is never wrong.
    pub fn preload_for(&self, keys: &[String]) -> Result<(), StoreError> {
        let mut cache = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.loaded {
            let keys = serde_json::to_string(keys).unwrap_or_default();
            cache.entries = self.load_stat_rows_of(Some(&keys))?;
            cache.loaded = true;
        }
        Ok(())
    }

    /// Drops the loaded entries (after [`Store::preload_stat_cache_for`], when
    /// the command turns out to look at every file): the next use loads all.
    pub fn unload(&self) {
        let mut cache = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        cache.entries.clear();
        cache.loaded = false;
    }
}
