//! How the evaluator hashes a node's inputs: files through the store's
//! hasher (telling the no-op snapshot's log what it judged), folders file by
//! file, and without a store (`build -n` on a fresh workspace) straight from
//! the bytes.

use std::collections::BTreeMap;
use std::path::Path;

use super::Evaluator;
use crate::graph::Node;
use crate::hash::ContentHash;
use crate::store::{Hasher, StoreError};

/// Content hashes by name.
type Hashes = BTreeMap<String, ContentHash>;

impl<'a> Evaluator<'a> {
    /// A node's key parts of its workspace inputs: each input's hash by
    /// path (zeros for a missing one), and a notebook's code cells in
    /// place of its bytes (see `tasks::notebook::code_cells`).
    pub(super) fn hash_inputs(&self, node: &Node) -> Result<(Hashes, Hashes), StoreError> {
        let mut inputs = BTreeMap::new();
        let mut cells = BTreeMap::new();
        for rel in node.inputs() {
            let path = self.root.join(&rel);
            let hash = self.hash_input(&path)?;
            if hash.is_some() && node.task.keyed_by_code() == Some(rel.as_str()) {
                // Hashed all the same: the no-op snapshot watches the file.
                if let Ok(bytes) = std::fs::read(&path) {
                    cells = crate::tasks::notebook::code_cells(&rel, &bytes);
                    continue;
                }
            }
            inputs.insert(rel, hash.unwrap_or(ContentHash([0; 32])));
        }
        Ok((inputs, cells))
    }

    /// The store's hasher, telling the observer what it judges.
    pub(super) fn hasher(&self) -> Option<Hasher<'a>> {
        self.store.map(|s| s.hasher().observed(self.observer))
    }

    /// Hash of a file, or of a directory's files and names; None if absent.
    /// A file (the common case) costs one `stat`.
    pub(super) fn hash_input(&self, path: &Path) -> Result<Option<ContentHash>, StoreError> {
        match self.hash_file(path) {
            Err(StoreError::NotAFile { .. }) if path.is_dir() => self.hash_dir(path),
            Ok(None) if self.store.is_none() && path.is_dir() => self.hash_dir(path),
            other => other,
        }
    }

    fn hash_dir(&self, path: &Path) -> Result<Option<ContentHash>, StoreError> {
        // A stat cannot vouch for a tree: no no-op snapshot (see `noop`).
        if let Some(hasher) = self.hasher() {
            hasher.unusable();
        }
        let mut h = blake3::Hasher::new();
        for entry in walkdir::WalkDir::new(path)
            .sort_by_file_name()
            .into_iter()
            .flatten()
        {
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(path).unwrap_or(entry.path());
                h.update(rel.to_string_lossy().as_bytes());
                h.update(&[0]);
                if let Some(fh) = self.hash_file(entry.path())? {
                    h.update(&fh.0);
                }
            }
        }
        Ok(Some(ContentHash(*h.finalize().as_bytes())))
    }

    fn hash_file(&self, path: &Path) -> Result<Option<ContentHash>, StoreError> {
        match self.hasher() {
            Some(h) => h.hash_file(path),
            // Without a store, as with one: only a regular file is read (a
            // FIFO would block, a device such as /dev/zero never end).
            None => match std::fs::metadata(path) {
                Ok(m) if m.is_file() => match std::fs::read(path) {
                    Ok(bytes) => Ok(Some(ContentHash::of_bytes(&bytes))),
                    Err(_) => Ok(None),
                },
                Ok(m) if !m.is_dir() => Err(StoreError::NotAFile {
                    path: path.to_owned(),
                }),
                _ => Ok(None),
            },
        }
    }
}
