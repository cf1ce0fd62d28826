//! What a plan looked at, so that a later command can tell in one `stat` per
//! file that nothing it depends on has changed (the no-op snapshot,
//! `engine::noop`).
//!
//! While observing is on, `hash_file` and `check_outputs` note the stat of
//! every file they judged (or that it was absent). [`Store::observed_files`]
//! hands the notes back as [`FileFacts`] only when each one is *settled*: the
//! file's mtime lies more than the racy window before the moment it was
//! stat'ed, so any later write gives it a different stat (the rule the stat
//! cache trusts, see `stat_cache`). [`FileFacts::unchanged`] then checks them
//! all again, in parallel.
//!
//! The database side is [`Store::generation`]: a counter that triggers bump
//! on every change to what verdicts read (see `schema`).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use rusqlite::OptionalExtension;

use super::error::StoreError;
use super::fileio::Stat;
use super::memo::FileFacts;
pub(crate) use super::memo::{Observations, Observed, Probe};
use super::open::Store;
use super::record::NodeState;

impl Store {
    /// Starts noting the files `hash_file` and `check_outputs` judge (forgets
    /// earlier notes).
    pub fn observe_files(&self) {
        let mut o = self.observations();
        *o = Observations {
            on: true,
            ..Observations::default()
        };
    }

    /// Marks the notes unusable: something was judged that a stat cannot vouch for.
    pub fn observation_unusable(&self) {
        self.observations().unusable = true;
    }

    /// Notes the folders the graph's `files:` stages listed, with the stats
    /// they had before they were read.
    pub fn note_listings(&self, listings: &[crate::listing::Listing]) {
        for l in listings {
            let stat = Stat {
                size: l.size,
                mtime_ns: l.mtime_ns,
                ctime_ns: l.ctime_ns,
                inode: l.inode,
            };
            self.note(&l.rel, Probe::Dir, Some(stat), l.at_ns);
        }
    }

    pub(super) fn note(&self, rel: &str, probe: Probe, stat: Option<Stat>, at_ns: i64) {
        let mut o = self.observations();
        if o.on {
            o.files.push(Observed {
                rel: rel.to_string(),
                probe,
                stat,
                at_ns,
            });
        }
    }

    fn observations(&self) -> std::sync::MutexGuard<'_, Observations> {
        self.observed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops observing and returns the notes, or None when they cannot vouch
    /// for the files: observing was off, something unusable was judged, a
    /// file was too recently written to be told apart from a later write, or
    /// one file was seen with two different stats.
    pub fn observed_files(&self) -> Option<FileFacts> {
        self.observed(false)
    }

    /// [`Store::observed_files`], but a file modified too recently for its
    /// stat to vouch for its content (within the racy window) is kept with a
    /// stat no file has, so a snapshot built from these facts always sees it
    /// as changed and has its nodes judged again.
    pub fn observed_files_lenient(&self) -> Option<FileFacts> {
        self.observed(true)
    }

    fn observed(&self, lenient: bool) -> Option<FileFacts> {
        let o = std::mem::take(&mut *self.observations());
        if !o.on || o.unusable {
            return None;
        }
        let window = self.racy_window_ns.load(Ordering::Relaxed);
        let mut by_path: HashMap<String, (Probe, Option<Stat>)> =
            HashMap::with_capacity(o.files.len());
        for mut f in o.files {
            if let Some(stat) = &f.stat {
                if stat.mtime_ns >= f.at_ns - window {
                    if !lenient {
                        return None;
                    }
                    f.stat = Some(UNTRUSTED);
                }
            }
            match by_path.get(&f.rel) {
                Some(seen) if *seen != (f.probe, f.stat) => return None,
                Some(_) => {}
                None => {
                    by_path.insert(f.rel, (f.probe, f.stat));
                }
            }
        }
        let mut entries: Vec<(String, Probe, Option<Stat>)> = by_path
            .into_iter()
            .map(|(rel, (probe, stat))| (rel, probe, stat))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Some(FileFacts { entries })
    }

    /// The database's change counter; None for a database without one (a
    /// version-1 store opened read-only).
    /// How many times this process's own writes moved the change counter
    /// (0 for a read-only store).
    pub fn own_generation(&self) -> i64 {
        self.conn()
            .query_row("SELECT n FROM temp.own_generation", [], |r| r.get(0))
            .unwrap_or(0)
    }

    pub fn generation(&self) -> Result<Option<i64>, StoreError> {
        let conn = self.conn();
        read_generation(&conn).map_err(|e| self.db_err(e))
    }

    /// [`Store::load_states`] and the change counter, read in one transaction
    /// so the counter names exactly the records loaded.
    pub fn load_states_at(&self) -> Result<(HashMap<String, NodeState>, Option<i64>), StoreError> {
        self.read(|s| {
            let generation = s.generation()?;
            Ok((s.load_states()?, generation))
        })
    }

    /// Runs `reads` in one read transaction: every query it makes sees one
    /// state of the database (the change counter names exactly the records
    /// read). The transaction ends whatever `reads` returns.
    pub fn read<T>(
        &self,
        reads: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.begin_read()?;
        let result = reads(self);
        let end = self.end_read();
        let value = result?;
        end?;
        Ok(value)
    }

    /// Starts a read transaction (see [`Store::read`]).
    fn begin_read(&self) -> Result<(), StoreError> {
        // The stat cache first (lock order: the stat cache before the connection).
        drop(self.stat_cache()?);
        self.conn()
            .execute_batch("BEGIN DEFERRED")
            .map_err(|e| self.db_err(e))
    }

    fn end_read(&self) -> Result<(), StoreError> {
        self.conn()
            .execute_batch("COMMIT")
            .map_err(|e| self.db_err(e))
    }
}

fn read_generation(conn: &rusqlite::Connection) -> rusqlite::Result<Option<i64>> {
    let exists: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'generation')",
        )?
        .query_row([], |r| r.get(0))?;
    if !exists {
        return Ok(None);
    }
    conn.prepare_cached("SELECT n FROM generation WHERE id = 0")?
        .query_row([], |r| r.get(0))
        .optional()
}

impl FileFacts {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether every file still has the stat it had (or is still absent).
    /// One `stat` per file, spread over the cores.
    pub fn unchanged(&self, root: &Path) -> bool {
        use rayon::prelude::*;
        self.entries.par_chunks(512).all(|chunk| {
            let mut dirs = Dirs::new(root);
            chunk.iter().all(|entry| dirs.same(entry))
        })
    }

    /// The files whose stat is no longer the recorded one (relative paths).
    pub fn changed(&self, root: &Path) -> Vec<String> {
        use rayon::prelude::*;
        self.entries
            .par_chunks(512)
            .flat_map_iter(|chunk| {
                let mut dirs = Dirs::new(root);
                chunk
                    .iter()
                    .filter(|entry| !dirs.same(entry))
                    .map(|(rel, _, _)| rel.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// These facts with `newer`'s in place of any for the same files.
    pub fn updated_with(&self, newer: &FileFacts) -> FileFacts {
        let replaced: std::collections::HashSet<&str> = newer
            .entries
            .iter()
            .map(|(rel, _, _)| rel.as_str())
            .collect();
        let mut entries: Vec<_> = self
            .entries
            .iter()
            .filter(|(rel, _, _)| !replaced.contains(rel.as_str()))
            .chain(newer.entries.iter())
            .cloned()
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        FileFacts { entries }
    }

    /// Appends the facts to `out` (see [`FileFacts::decode`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for (rel, probe, stat) in &self.entries {
            out.extend_from_slice(&(rel.len() as u32).to_le_bytes());
            out.extend_from_slice(rel.as_bytes());
            out.push(*probe as u8 | if stat.is_some() { 4 } else { 0 });
            let s = stat.unwrap_or(Stat {
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                inode: 0,
            });
            out.extend_from_slice(&s.size.to_le_bytes());
            out.extend_from_slice(&s.mtime_ns.to_le_bytes());
            out.extend_from_slice(&s.ctime_ns.to_le_bytes());
            out.extend_from_slice(&s.inode.to_le_bytes());
        }
    }

    /// Reads facts written by [`FileFacts::encode`] from the front of `bytes`,
    /// advancing it; None when the bytes are damaged.
    pub fn decode(bytes: &mut &[u8]) -> Option<FileFacts> {
        let n = u64::from_le_bytes(take(bytes, 8)?.try_into().ok()?) as usize;
        let mut entries = Vec::with_capacity(n.min(1 << 24));
        for _ in 0..n {
            let len = u32::from_le_bytes(take(bytes, 4)?.try_into().ok()?) as usize;
            let rel = std::str::from_utf8(take(bytes, len)?).ok()?.to_string();
            let flags = take(bytes, 1)?[0];
            let probe = match flags & 3 {
                0 => Probe::Follow,
                1 => Probe::NoFollow,
                2 => Probe::Dir,
                _ => return None,
            };
            let mut word = || Some(u64::from_le_bytes(take(bytes, 8)?.try_into().ok()?));
            let stat = Stat {
                size: word()?,
                mtime_ns: word()? as i64,
                ctime_ns: word()? as i64,
                inode: word()?,
            };
            entries.push((rel, probe, (flags & 4 != 0).then_some(stat)));
        }
        Some(FileFacts { entries })
    }
}

/// The first `n` bytes of `bytes`, advancing it.
/// The stat recorded for a file too recent to vouch for: matches no file
/// (no file has size `u64::MAX`).
const UNTRUSTED: Stat = Stat {
    size: u64::MAX,
    mtime_ns: i64::MIN,
    ctime_ns: i64::MIN,
    inode: 0,
};

/// Whether a file still has the stat (or the absence) recorded for it.
fn same(root: &Path, (rel, probe, stat): &(String, Probe, Option<Stat>)) -> bool {
    let path = root.join(rel);
    let meta = match probe {
        Probe::Follow | Probe::Dir => fs::metadata(&path),
        Probe::NoFollow => fs::symlink_metadata(&path),
    };
    let kind_ok = |m: &fs::Metadata| match probe {
        Probe::Dir => m.is_dir(),
        _ => m.is_file(),
    };
    match (meta, stat) {
        (Ok(meta), Some(stat)) => kind_ok(&meta) && Stat::of(&meta) == *stat,
        (Err(e), None) => e.kind() == io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Stats files relative to open folders two levels under the root
/// (`out/exp`, `inputs`), so that each `stat` walks the last components of
/// its path only, not the root's: a no-op at 100,000 nodes spends most of
/// its time in these calls. Falls back to the full path for anything else.
struct Dirs<'r> {
    root: &'r Path,
    open: Vec<(String, Option<fs::File>)>,
}

impl<'r> Dirs<'r> {
    fn new(root: &'r Path) -> Dirs<'r> {
        Dirs {
            root,
            open: Vec::new(),
        }
    }

    fn same(&mut self, entry: &(String, Probe, Option<Stat>)) -> bool {
        use std::os::fd::AsRawFd;
        let (rel, probe, stat) = entry;
        // The folder: the first two components, when the file lies below them.
        let cut = rel
            .match_indices('/')
            .nth(1)
            .or_else(|| rel.match_indices('/').next())
            .map(|(i, _)| i);
        let (Some(cut), false) = (cut, rel.contains("..") || rel.starts_with('/')) else {
            return same(self.root, entry);
        };
        let (dir, name) = (&rel[..cut], &rel[cut + 1..]);
        let Ok(name) = std::ffi::CString::new(name) else {
            return same(self.root, entry);
        };
        let fd = match self.open.iter().find(|(d, _)| d == dir) {
            Some((_, fd)) => fd.as_ref().map(|f| f.as_raw_fd()),
            None => {
                let f = fs::File::open(self.root.join(dir)).ok();
                let fd = f.as_ref().map(|f| f.as_raw_fd());
                self.open.push((dir.to_string(), f));
                fd
            }
        };
        let Some(fd) = fd else {
            return same(self.root, entry);
        };
        let flags = match probe {
            Probe::NoFollow => libc::AT_SYMLINK_NOFOLLOW,
            Probe::Follow | Probe::Dir => 0,
        };
        // SAFETY: `st` is plain data that fstatat fills; `name` is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, flags) };
        if rc != 0 {
            let absent = io::Error::last_os_error().kind() == io::ErrorKind::NotFound;
            return absent && stat.is_none();
        }
        let kind = st.st_mode & libc::S_IFMT;
        let kind_ok = match probe {
            Probe::Dir => kind == libc::S_IFDIR,
            _ => kind == libc::S_IFREG,
        };
        let now = Stat {
            size: st.st_size as u64,
            mtime_ns: (st.st_mtime as i64)
                .saturating_mul(1_000_000_000)
                .saturating_add(st.st_mtime_nsec as i64),
            ctime_ns: (st.st_ctime as i64)
                .saturating_mul(1_000_000_000)
                .saturating_add(st.st_ctime_nsec as i64),
            inode: st.st_ino as u64,
        };
        kind_ok && stat.as_ref() == Some(&now)
    }
}

use crate::codec::take;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::ContentHash;

    #[test]
    fn own_generation_counts_only_this_processs_changes() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(dir.path()).unwrap();
        let b = Store::open(dir.path()).unwrap();
        let start = a.generation().unwrap().unwrap();
        let (own_a, own_b) = (a.own_generation(), b.own_generation());
        b.begin_attempt("n", &ContentHash([1; 32])).unwrap();
        b.begin_attempt("m", &ContentHash([2; 32])).unwrap();
        assert_eq!(a.own_generation(), own_a, "b's writes are not a's");
        let moved = a.generation().unwrap().unwrap() - start;
        assert!(moved >= 2);
        assert_eq!(b.own_generation() - own_b, moved);
        a.begin_attempt("n", &ContentHash([3; 32])).unwrap();
        assert_eq!(
            a.generation().unwrap().unwrap() - start,
            (a.own_generation() - own_a) + (b.own_generation() - own_b)
        );
    }

    #[test]
    fn states_of_some_nodes_match_the_full_load() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (id, k) in [("x", 1u8), ("y", 2), ("z", 3)] {
            store.begin_attempt(id, &ContentHash([k; 32])).unwrap();
        }
        let all = store.load_states().unwrap();
        let some = store.load_states_for(&["x", "z", "absent"]).unwrap();
        assert_eq!(some.len(), 2);
        for id in ["x", "z"] {
            assert_eq!(
                some[id].last_attempt.as_ref().map(|a| a.key),
                all[id].last_attempt.as_ref().map(|a| a.key)
            );
        }
        // Attempts of the judged nodes only.
        let judged = store
            .load_states_with_attempts_of(&["x", "y", "z"], &["y"])
            .unwrap();
        assert_eq!(judged.keys().map(String::as_str).collect::<Vec<_>>(), ["y"]);
        assert_eq!(
            judged["y"].last_attempt.as_ref().map(|a| a.key),
            Some(ContentHash([2; 32]))
        );
    }
}
