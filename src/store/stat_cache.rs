//! The stat cache: a file whose (size, mtime, ctime, inode) is unchanged since
//! it was hashed is not hashed again. It serves inputs (`hash_file`) and
//! materialized outputs (`check_outputs`) alike, keyed by the path relative to
//! the workspace root. The whole table is loaded into memory on first use, so a
//! lookup is a `stat` plus a HashMap probe; new entries are written back in one
//! transaction by `Hasher::flush`. The hasher (`hasher`) is the role that
//! uses it; this file keeps the memory and its table.
//!
//! A write that lands in the same timestamp tick as the stat we recorded leaves
//! the stat unchanged ("racy" files, as git calls them). So an entry is trusted
//! only when the file's mtime is older than the moment the entry was recorded by
//! more than the racy window ([`crate::clock::racy_window_ns`]): any later write sets the mtime to about the
//! current time, which then differs. A racy file is hashed again, and once
//! re-recorded after the window it is trusted. `materialize` sets the mtime of
//! the files it writes a window in the past, so they are trusted at once.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use rusqlite::{params, TransactionBehavior};

use super::error::StoreError;
use super::fileio::{hash_contents, now_ns, Stat};
pub(crate) use super::memo::{Entry, StatCache};
use super::open::Store;
use super::record::RunRecord;
use super::runs::point_node_at;
use crate::hash::ContentHash;

/// The stat cache's memory, shared by the roles that learn stats (the
/// hasher, and `materialize`, which knows what it wrote).
impl Store {
    /// Records the stat of each file `materialize` just wrote, and makes the
    /// run the node's current one, in one transaction.
    pub(super) fn record_materialized(
        &self,
        run: &RunRecord,
        dest: &Path,
    ) -> Result<(), StoreError> {
        let recorded_ns = now_ns();
        let mut learned = Vec::with_capacity(run.outputs.len());
        for output in &run.outputs {
            let path = dest.join(&output.name);
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if self.left_out(run, &e) => continue,
                Err(e) => return Err(StoreError::io("read metadata of", &path, e)),
            };
            learned.push((
                self.stat_key(&path),
                Entry {
                    stat: Stat::of(&meta),
                    hash: output.hash,
                    recorded_ns,
                },
            ));
        }
        if !self.read_only {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            for (key, entry) in &learned {
                upsert_stat(&tx, key, entry).map_err(|e| self.db_err(e))?;
            }
            point_node_at(&tx, &run.node_id, &run.stage, &run.key).map_err(|e| self.db_err(e))?;
            tx.commit().map_err(|e| self.db_err(e))?;
        }
        for (key, entry) in learned {
            self.remember(key, entry, false);
        }
        Ok(())
    }

    /// The cache key of a path: relative to the workspace root when inside it,
    /// so that moving the workspace keeps the entries meaningful.
    pub fn stat_key(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        relative.to_string_lossy().into_owned()
    }

    /// The path a stat key names.
    pub(super) fn stat_key_path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    pub(super) fn hash_uncached(&self, path: &Path, size: u64) -> Result<ContentHash, StoreError> {
        self.hashes.fetch_add(1, Ordering::Relaxed);
        hash_contents(path, size).map_err(|e| StoreError::io("read", path, e))
    }

    pub(super) fn trusted_hash(
        &self,
        key: &str,
        stat: &Stat,
    ) -> Result<Option<ContentHash>, StoreError> {
        let window = self.racy_window_ns.load(Ordering::Relaxed);
        let cache = self.stat_cache()?;
        Ok(cache.entries.get(key).and_then(|entry| {
            let settled = stat.mtime_ns < entry.recorded_ns - window;
            (entry.stat == *stat && settled).then_some(entry.hash)
        }))
    }

    /// Adds an entry in memory; `dirty` ones are written by the next flush.
    pub(super) fn remember(&self, key: String, entry: Entry, dirty: bool) {
        let mut cache = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if dirty {
            cache.dirty.insert(key.clone(), entry);
        }
        cache.entries.insert(key, entry);
    }

    pub(super) fn forget_stats(&self, keys: &[String]) {
        let mut cache = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            cache.entries.remove(key);
            cache.dirty.remove(key);
        }
    }

    /// The in-memory cache, loaded from the database on first use (one query).
    /// Lock order: the stat cache before the connection, never the reverse.
    pub(super) fn stat_cache(&self) -> Result<MutexGuard<'_, StatCache>, StoreError> {
        let mut cache = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.loaded {
            cache.entries = self.load_stat_rows()?;
            cache.loaded = true;
        }
        Ok(cache)
    }

    fn load_stat_rows(&self) -> Result<HashMap<String, Entry>, StoreError> {
        self.load_stat_rows_of(None)
    }

    /// Every row, or those whose path is in the JSON array `keys`.
    pub(super) fn load_stat_rows_of(
        &self,
        keys: Option<&str>,
    ) -> Result<HashMap<String, Entry>, StoreError> {
        let conn = self.conn();
        let sql = match keys {
            None => {
                "SELECT path, size, mtime_ns, ctime_ns, inode, hash, recorded_ns FROM file_stats"
            }
            Some(_) => {
                "SELECT path, size, mtime_ns, ctime_ns, inode, hash, recorded_ns FROM file_stats \
                        WHERE path IN (SELECT value FROM json_each(?1))"
            }
        };
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.db_err(e))?;
        let mut rows = match keys {
            None => stmt.query([]),
            Some(keys) => stmt.query([keys]),
        }
        .map_err(|e| self.db_err(e))?;
        let mut entries = HashMap::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let hash: Vec<u8> = row.get(5).map_err(|e| self.db_err(e))?;
            // A damaged row only costs a re-hash.
            let Ok(hash) = <[u8; 32]>::try_from(hash.as_slice()) else {
                continue;
            };
            let entry = (|| {
                Ok::<_, rusqlite::Error>(Entry {
                    stat: Stat {
                        size: row.get::<_, i64>(1)? as u64,
                        mtime_ns: row.get(2)?,
                        ctime_ns: row.get(3)?,
                        inode: row.get::<_, i64>(4)? as u64,
                    },
                    hash: ContentHash(hash),
                    recorded_ns: row.get(6)?,
                })
            })()
            .map_err(|e| self.db_err(e))?;
            entries.insert(row.get(0).map_err(|e| self.db_err(e))?, entry);
        }
        Ok(entries)
    }
}

pub(super) fn upsert_stat(
    conn: &rusqlite::Connection,
    path: &str,
    entry: &Entry,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO file_stats (path, size, mtime_ns, ctime_ns, inode, hash, recorded_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(path) DO UPDATE SET size = ?2, mtime_ns = ?3, ctime_ns = ?4, inode = ?5,
             hash = ?6, recorded_ns = ?7",
    )?;
    stmt.execute(params![
        path,
        entry.stat.size as i64,
        entry.stat.mtime_ns,
        entry.stat.ctime_ns,
        entry.stat.inode as i64,
        &entry.hash.0[..],
        entry.recorded_ns
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::{Duration, SystemTime};

    use super::super::test_support::{commit, workspace, write};
    use super::super::{OutputCheck, Store};
    use crate::hash::ContentHash;

    /// A window no loaded machine outlasts between two steps of a test
    /// (ten minutes): a file written "just now" stays racy; [`settle`]
    /// dates a file back instead of waiting for it to age.
    const WINDOW_NS: i64 = 600_000_000_000;

    /// Dates `path` an hour back, as if written long ago.
    fn settle(path: &std::path::Path) {
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }

    #[test]
    fn check_outputs_tells_intact_missing_and_modified() {
        let (dir, store) = workspace();
        store.set_racy_window_ns(WINDOW_NS);
        let run = commit(
            &store,
            "n",
            "k",
            &[("a.txt", "alpha"), ("sub/b.txt", "beta")],
        );
        let dest = dir.path().join("out/n/n");
        store
            .objects()
            .materialize(&run.node_id, &run.stage, &run, &dest)
            .unwrap();
        write(&dest.join("extra.txt"), "extra files are ignored");
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );

        // Same size, same moment: only the racy rule or the hash can see it.
        fs::write(dest.join("a.txt"), "ALPHA").unwrap();
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Modified("a.txt".into())
        );
        fs::write(dest.join("a.txt"), "alpha").unwrap();
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );

        fs::remove_file(dest.join("sub/b.txt")).unwrap();
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Missing("sub/b.txt".into())
        );
        fs::create_dir(dest.join("sub/b.txt")).unwrap();
        assert_eq!(
            store.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Modified("sub/b.txt".into())
        );
    }

    #[test]
    fn settled_outputs_are_checked_without_hashing() {
        let (dir, store) = workspace();
        store.set_racy_window_ns(WINDOW_NS);
        let run = commit(&store, "n", "k", &[("a.txt", "alpha")]);
        let dest = dir.path().join("out/n/n");
        store
            .objects()
            .materialize(&run.node_id, &run.stage, &run, &dest)
            .unwrap();
        // A fresh handle (a new command) sees the stats recorded by materialize.
        let fresh = Store::open(dir.path()).unwrap();
        fresh.set_racy_window_ns(WINDOW_NS);
        fresh.reader().load_states().unwrap();
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 0);

        // Touching without a change: hashed once, intact, then trusted again.
        let touched = SystemTime::now() - Duration::from_secs(7200);
        fs::File::options()
            .write(true)
            .open(dest.join("a.txt"))
            .unwrap()
            .set_modified(touched)
            .unwrap();
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 1);
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 1);
        // Touched to now (racy): hashed on every look until it is dated back.
        let now = SystemTime::now();
        fs::File::options()
            .write(true)
            .open(dest.join("a.txt"))
            .unwrap()
            .set_modified(now)
            .unwrap();
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 2);
        settle(&dest.join("a.txt"));
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 3);
        assert_eq!(
            fresh.hasher().check_outputs(&run, &dest).unwrap(),
            OutputCheck::Intact
        );
        assert_eq!(fresh.hashes_computed(), 3);
    }

    #[test]
    fn outputs_of_another_run_in_dest_are_modified_without_hashing() {
        let (dir, store) = workspace();
        store.set_racy_window_ns(WINDOW_NS);
        let old = commit(&store, "n", "k1", &[("v.txt", "1")]);
        let new = commit(&store, "n", "k2", &[("v.txt", "2")]);
        let dest = dir.path().join("out/n/n");
        store
            .objects()
            .materialize(&old.node_id, &old.stage, &old, &dest)
            .unwrap();
        let before = store.hashes_computed();
        assert_eq!(
            store.hasher().check_outputs(&new, &dest).unwrap(),
            OutputCheck::Modified("v.txt".into())
        );
        assert_eq!(store.hashes_computed(), before);
    }

    #[test]
    fn the_stat_cache_avoids_rehashing_and_sees_changes() {
        let (dir, store) = workspace();
        store.set_racy_window_ns(WINDOW_NS);
        let input = dir.path().join("inputs/model.cfg");
        write(&input, "depth=6");
        assert_eq!(
            store
                .hasher()
                .hash_file(&dir.path().join("inputs/none"))
                .unwrap(),
            None
        );
        let first = store.hasher().hash_file(&input).unwrap().unwrap();
        assert_eq!(first, ContentHash::of_bytes(b"depth=6"));
        // Still racy (written a moment ago): hashed again, then trusted.
        settle(&input);
        store.hasher().hash_file(&input).unwrap();
        let hashed = store.hashes_computed();
        assert_eq!(store.hasher().hash_file(&input).unwrap(), Some(first));
        assert_eq!(store.hashes_computed(), hashed, "unchanged stat: no hash");

        // Same size, written right away: must not be served from the cache.
        fs::write(&input, "depth=8").unwrap();
        assert_eq!(
            store.hasher().hash_file(&input).unwrap(),
            Some(ContentHash::of_bytes(b"depth=8"))
        );

        // Persisted: a new handle trusts the flushed entry.
        settle(&input);
        store.hasher().hash_file(&input).unwrap();
        store.hasher().flush().unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        fresh.set_racy_window_ns(WINDOW_NS);
        assert_eq!(
            fresh.hasher().hash_file(&input).unwrap(),
            Some(ContentHash::of_bytes(b"depth=8"))
        );
        assert_eq!(fresh.hashes_computed(), 0);
    }

    #[test]
    fn hash_file_rejects_directories_and_handles_large_files() {
        let (dir, store) = workspace();
        let err = store.hasher().hash_file(dir.path()).unwrap_err();
        assert!(matches!(err, super::StoreError::NotAFile { .. }));
        let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 253) as u8).collect();
        let path = dir.path().join("big.bin");
        fs::write(&path, &big).unwrap();
        assert_eq!(
            store.hasher().hash_file(&path).unwrap(),
            Some(ContentHash::of_bytes(&big))
        );
    }
}
