//! Remotes: `vitgraph.ron`'s `remotes: {"lab": Remote(path: "…")}`, the
//! places `vitgraph push` and `pull` carry runs to and from.

use serde::Deserialize;

/// One remote.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSpec {
    /// A folder (a shared or network file system); relative to the
    /// workspace root when relative.
    pub path: String,
    /// `ReadWrite` (the default) or `Read`: this workspace pulls from it
    /// and never pushes.
    #[serde(default)]
    pub mode: RemoteMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum RemoteMode {
    #[default]
    ReadWrite,
    Read,
}
