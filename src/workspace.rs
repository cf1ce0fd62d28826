//! The workspace: the nearest ancestor directory that has a `pipelines/` folder.

use std::path::{Path, PathBuf};

/// Paths of one workspace. All relative paths in pipelines are relative to `root`.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    pub root: PathBuf,
}

impl Workspace {
    /// Finds the workspace containing `start` (the nearest ancestor with `pipelines/`).
    pub(crate) fn discover(start: &Path) -> Option<Workspace> {
        let start = start.canonicalize().ok()?;
        start
            .ancestors()
            .find(|dir| dir.join("pipelines").is_dir())
            .map(|root| Workspace {
                root: root.to_path_buf(),
            })
    }

    /// A workspace rooted exactly at `root` (for `-C DIR` and `init`).
    pub(crate) fn at(root: &Path) -> Workspace {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        Workspace { root }
    }
}
