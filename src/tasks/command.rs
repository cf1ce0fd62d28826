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
    /// The software the command runs with (`env: Python(interpreter:
    /// "python3")`): probed once per process, its versions are part of the
    /// key, so upgrading them makes the node stale (`env_changed`). Left out
    /// of the serialized spec when absent.
    #[serde(
        default,
        deserialize_with = "bare_env",
        skip_serializing_if = "Option::is_none"
    )]
    pub env: Option<SoftwareEnv>,
}

/// The software environment a `Command` declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SoftwareEnv {
    /// A Python interpreter (a name on `PATH`, or a path relative to the
    /// workspace root): its version, those of torch, triton and cuDNN, and
    /// a hash of every installed package's name and version.
    Python { interpreter: String },
}

fn bare_env<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SoftwareEnv>, D::Error> {
    SoftwareEnv::deserialize(d).map(Some)
}

/// What a measuring command writes in `${out}`.
pub const RESULTS_JSON: &str = "results.json";
