//! What a [`super::Store`] handle keeps in memory between its queries: the
//! stat cache's entries ([`StatCache`]). Plain data: the code that fills and
//! reads them is in `stat_cache`.

use std::collections::HashMap;

use super::fileio::Stat;
use crate::hash::ContentHash;

/// How a path was looked at: inputs follow symbolic links (`hash_file`),
/// outputs do not (`check_outputs`); either way it had to be a regular file.
/// A folder a `files:` stage listed is followed and must be a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Follow = 0,
    NoFollow = 1,
    Dir = 2,
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
