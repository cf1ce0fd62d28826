//! `Import`: files made elsewhere (a Hydra job's folder, an old run's
//! archive) taken into the store as a node's outputs, so `Export`,
//! `Analyze`, `Report` and `vitgraph.runs` read them as they read a run
//! made here. Each file is an input: its content is part of the key.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::TaskError;
use super::TaskContext;

pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportSpec {
    /// The folder the files are in, relative to the workspace root
    /// (`${job}` on a `hydra:` stage).
    pub from: String,
    /// The files, relative to `from`; each becomes the output of that name.
    pub files: Vec<String>,
}

impl ImportSpec {
    pub fn inputs(&self) -> Vec<String> {
        self.files.iter().map(|f| self.path(f)).collect()
    }

    pub fn outputs(&self) -> Vec<String> {
        self.files.clone()
    }

    fn path(&self, file: &str) -> String {
        format!("{}/{file}", self.from.trim_end_matches('/'))
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.files.is_empty() {
            return Err("`files` is empty: name the files to take from the folder (e.g. `[\"results.json\"]`)".to_owned());
        }
        Ok(())
    }
}

pub fn run(spec: &ImportSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    for file in &spec.files {
        let from = super::export::resolve(&ctx.root, &spec.path(file));
        let to = ctx.out.join(file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|source| TaskError::WriteOutput {
                path: parent.to_owned(),
                source,
            })?;
        }
        if let Err(e) = std::fs::copy(&from, &to) {
            return Err(TaskError::Import {
                message: format!("cannot take `{}`: {e}", spec.path(file)),
                help: missing_help(&super::export::resolve(&ctx.root, &spec.from), e.kind()),
            });
        }
    }
    Ok(())
}

/// What to do about a file that is not there: a job that failed or wrote
/// nothing says so in its log, whose last lines are quoted.
fn missing_help(dir: &Path, kind: std::io::ErrorKind) -> String {
    if kind != std::io::ErrorKind::NotFound {
        return "make the file readable".to_owned();
    }
    let mut help = "the run that made the folder did not write it (a Hydra job that failed or was cut short): leave its node out with the stage's `exclude` (e.g. `exclude: [{ \"batch_size\": 64 }]`), or take fewer `files`".to_owned();
    if let Some((log, tail)) = log_tail(dir) {
        help.push_str(&format!("; the end of `{}`:\n{tail}", log.display()));
    }
    help
}

/// The last lines of the folder's log (`*.log`, as Hydra names a job's).
fn log_tail(dir: &Path) -> Option<(PathBuf, String)> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log") && p.is_file())
        .collect();
    logs.sort();
    let log = logs.into_iter().next()?;
    let text = std::fs::read_to_string(&log).ok()?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join("\n");
    (!tail.is_empty()).then_some((log, tail))
}
