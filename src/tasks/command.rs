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
    /// The command measures (a timing, a rate): it may take `repeat`, and
    /// it writes `results.json` (see the book's Repetitions chapter). Left
    /// out of the serialized spec when false, so other commands keep their keys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub measure: bool,
}

/// What a measuring command writes in `${out}`.
pub const RESULTS_JSON: &str = "results.json";
