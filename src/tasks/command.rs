//! `Command`: a shell command run under `sh -c` in the workspace root.

use serde::{Deserialize, Serialize};

use super::Resources;

pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The command line, run under `sh -c` with the workspace root as working directory.
    pub run: String,
    /// Workspace files whose content is part of the key.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Files the command must create in `${out}`.
    #[serde(default)]
    pub outputs: Vec<String>,
    #[serde(default)]
    pub resources: Resources,
}
