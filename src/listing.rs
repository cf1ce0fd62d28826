//! A folder's stat as a `files:` stage listed it: the graph keeps it, the
//! graph cache and the no-op snapshot check it (one `stat` tells that no
//! file came or went).

use std::fs;
use std::os::unix::fs::MetadataExt;

/// A folder a `files:` stage listed, with the stat it had just before (so
/// the no-op snapshot can tell that no file came or went).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Relative to the workspace root (`.` for the root).
    pub rel: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    /// When the stat was taken.
    pub at_ns: i64,
}

impl Listing {
    /// The stat of a folder (relative path left empty), taken at `at_ns`.
    pub fn of(meta: &fs::Metadata, at_ns: i64) -> Listing {
        Listing {
            rel: String::new(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            inode: meta.ino(),
            at_ns,
        }
    }
}
