//! What a plan looked at, so that a later command can tell in one `stat` per
//! file that nothing it depends on has changed (the no-op snapshot, `noop`).
//!
//! While a [`FactLog`] is passed to the store's hasher (`Hasher::observed`),
//! every file the hasher judges — an input it hashes, an output it checks —
//! is noted with its stat (or that it was absent). [`FactLog::take`] hands
//! the notes back as [`FileFacts`] only when each one is *settled*: the
//! file's mtime lies more than the racy window before the moment it was
//! stat'ed, so any later write gives it a different stat (the rule the stat
//! cache trusts, see `store::stat_cache`). [`FileFacts::changed`] then
//! checks them all again, in parallel.
//!
//! The database side is the store's change counter (`Reader::generation`).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use crate::codec::take;
use crate::listing::Listing;
use crate::store::{Observer, Probe, Stat};

/// The notes of one command's judging; shared by the threads that judge.
#[derive(Default)]
pub(crate) struct FactLog {
    notes: Mutex<Notes>,
}

#[derive(Default)]
struct Notes {
    on: bool,
    /// Something was judged that a stat cannot vouch for (a directory input).
    unusable: bool,
    files: Vec<Observed>,
}

struct Observed {
    rel: String,
    probe: Probe,
    /// None: the file did not exist.
    stat: Option<Stat>,
    /// When the stat was taken.
    at_ns: i64,
}

impl FactLog {
    fn notes(&self) -> MutexGuard<'_, Notes> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts noting (forgets earlier notes).
    pub(crate) fn start(&self) {
        *self.notes() = Notes {
            on: true,
            ..Notes::default()
        };
    }

    /// Notes the folders the graph's `files:` stages listed, with the stats
    /// they had before they were read.
    pub(crate) fn note_listings(&self, listings: &[Listing]) {
        for l in listings {
            let stat = Stat {
                size: l.size,
                mtime_ns: l.mtime_ns,
                ctime_ns: l.ctime_ns,
                inode: l.inode,
            };
            self.saw(&l.rel, Probe::Dir, Some(stat), l.at_ns);
        }
    }

    /// Stops noting and returns the notes, or None when they cannot vouch
    /// for the files: noting was off, something unusable was judged, or one
    /// file was seen with two different stats. A file modified within
    /// `racy_window_ns` of its stat cannot be told apart from a later write:
    /// it makes the notes unusable, or when `lenient` is kept with a stat no
    /// file has, so a snapshot built from these facts always sees it as
    /// changed and has its nodes judged again.
    pub(crate) fn take(&self, racy_window_ns: i64, lenient: bool) -> Option<FileFacts> {
        let notes = std::mem::take(&mut *self.notes());
        if !notes.on || notes.unusable {
            return None;
        }
        let mut by_path: HashMap<String, (Probe, Option<Stat>)> =
            HashMap::with_capacity(notes.files.len());
        for mut f in notes.files {
            if let Some(stat) = &f.stat {
                if stat.mtime_ns >= f.at_ns - racy_window_ns {
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
}

impl Observer for FactLog {
    fn saw(&self, rel: &str, probe: Probe, stat: Option<Stat>, at_ns: i64) {
        let mut notes = self.notes();
        if notes.on {
            notes.files.push(Observed {
                rel: rel.to_string(),
                probe,
                stat,
                at_ns,
            });
        }
    }

    fn unusable(&self) {
        self.notes().unusable = true;
    }
}

/// The settled stats a plan relied on, by path relative to the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileFacts {
    entries: Vec<(String, Probe, Option<Stat>)>,
}

impl FileFacts {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The files whose stat is no longer the recorded one (relative paths).
    pub(crate) fn changed(&self, root: &Path) -> Vec<String> {
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
    pub(crate) fn updated_with(&self, newer: &FileFacts) -> FileFacts {
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
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
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
    pub(crate) fn decode(bytes: &mut &[u8]) -> Option<FileFacts> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mtime_ns: i64) -> Stat {
        Stat {
            size: 1,
            mtime_ns,
            ctime_ns: mtime_ns,
            inode: 7,
        }
    }

    #[test]
    fn notes_are_kept_only_while_on_and_settled() {
        let log = FactLog::default();
        log.saw("a", Probe::Follow, Some(stat(0)), 100);
        assert_eq!(log.take(10, false), None, "not started");

        log.start();
        log.saw("a", Probe::Follow, Some(stat(0)), 100);
        log.saw("b", Probe::Follow, None, 100);
        log.saw("a", Probe::Follow, Some(stat(0)), 120);
        let facts = log.take(10, false).expect("settled");
        assert_eq!(facts.len(), 2, "one entry per file");
        assert_eq!(log.take(10, false), None, "taking stops noting");

        // Written within the window before it was looked at.
        log.start();
        log.saw("a", Probe::Follow, Some(stat(95)), 100);
        assert_eq!(log.take(10, false), None);
        log.start();
        log.saw("a", Probe::Follow, Some(stat(95)), 100);
        let lenient = log.take(10, true).expect("kept, untrusted");
        assert_eq!(lenient.entries[0].2, Some(UNTRUSTED));

        // One file seen with two stats; a tree no stat vouches for.
        log.start();
        log.saw("a", Probe::Follow, Some(stat(0)), 100);
        log.saw("a", Probe::Follow, Some(stat(1)), 100);
        assert_eq!(log.take(10, false), None);
        log.start();
        log.saw("a", Probe::Follow, Some(stat(0)), 100);
        log.unusable();
        assert_eq!(log.take(10, false), None);
    }

    #[test]
    fn facts_read_back_what_they_wrote_and_see_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("in.txt");
        std::fs::write(&file, "x").unwrap();
        let meta = fs::metadata(&file).unwrap();
        let log = FactLog::default();
        log.start();
        log.saw("in.txt", Probe::Follow, Some(Stat::of(&meta)), i64::MAX);
        log.saw("gone.txt", Probe::Follow, None, i64::MAX);
        let facts = log.take(0, false).unwrap();
        let mut bytes = Vec::new();
        facts.encode(&mut bytes);
        let decoded = FileFacts::decode(&mut bytes.as_slice()).unwrap();
        assert_eq!(decoded, facts);
        assert!(facts.changed(dir.path()).is_empty());
        std::fs::write(dir.path().join("gone.txt"), "now here").unwrap();
        assert_eq!(facts.changed(dir.path()), ["gone.txt"]);
    }
}
