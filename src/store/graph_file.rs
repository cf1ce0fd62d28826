//! `cache/graph.bin`: the expanded graph kept between commands. Its bytes
//! are the pipeline layer's (`pipeline::cache` encodes and checks them);
//! where they live and how they are written is the store's.

use std::path::{Path, PathBuf};

const FILE: &str = "graph.bin";

fn path(root: &Path) -> PathBuf {
    root.join("cache").join(FILE)
}

/// The bytes last written, if any.
pub(crate) fn read(root: &Path) -> Option<Vec<u8>> {
    std::fs::read(path(root)).ok()
}

/// Replaces the file whole, where `cache/` exists (a workspace never built
/// gets none). Best effort: the file only saves time, so a failure is
/// not an error.
pub(crate) fn write(root: &Path, bytes: &[u8]) {
    let path = path(root);
    if path.parent().is_some_and(Path::is_dir) {
        let _ = crate::atomic::write(&path, bytes);
    }
}
