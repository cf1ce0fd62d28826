//! What a [`super::Store`] handle keeps in memory between its queries: the
//! stat cache's entries ([`StatCache`]) and the files a plan judged, for
//! the no-op snapshot ([`Observations`], [`FileFacts`]). Plain data: the
//! code that fills and reads them is in `stat_cache` and `observe`.

use std::collections::HashMap;

use super::fileio::Stat;
use crate::hash::ContentHash;

/// How a path was looked at: inputs follow symbolic links (`hash_file`),
/// outputs do not (`check_outputs`); either way it had to be a regular file.
/// A folder a `files:` stage listed is followed and must be a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    Follow = 0,
    NoFollow = 1,
    Dir = 2,
}

#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub rel: String,
    pub probe: Probe,
    /// None: the file did not exist.
    pub stat: Option<Stat>,
    /// When the stat was taken.
    pub at_ns: i64,
}

#[derive(Default)]
pub(crate) struct Observations {
    pub(super) on: bool,
    /// Something was judged that a stat cannot vouch for (a directory input).
    pub(super) unusable: bool,
    pub(super) files: Vec<Observed>,
}

/// The settled stats a plan relied on, by path relative to the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    pub(super) entries: Vec<(String, Probe, Option<Stat>)>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub stat: Stat,
    pub hash: ContentHash,
    pub recorded_ns: i64,
}

#[derive(Default)]
pub(crate) struct StatCache {
    pub(super) loaded: bool,
    pub(super) entries: HashMap<String, Entry>,
    /// Learned since the last flush.
    pub(super) dirty: HashMap<String, Entry>,
}

impl StatCache {
    pub(super) fn entries_keys(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries.iter()
    }
}
