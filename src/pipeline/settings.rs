//! `vitgraph.ron`: the workspace's settings beside `pipelines/`, read with
//! the same spanned RON reader as the pipelines, so a bad setting is
//! reported with its file, line and column and a fix.
//!
//! ```ron
//! Workspace(slurm: Slurm(partition: "gpu", time: "2:00:00", gpu_request: "gres"))
//! ```

use std::path::Path;

use super::de::{self, Scope};
use super::error::{PipelineError, Sources};
use super::syntax::{self, Kind, Node};
use crate::config::{Slurm, WorkspaceFile};

/// The settings file's name, in the workspace root.
pub const FILE: &str = "vitgraph.ron";

/// Reads `vitgraph.ron` (the defaults when there is none).
pub fn load_settings(root: &Path) -> Result<WorkspaceFile, PipelineError> {
    let path = root.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(WorkspaceFile::default()),
        Err(e) => {
            return Err(PipelineError::plain(format!(
                "cannot read `{}`: {e}",
                path.display()
            )))
        }
    };
    let mut sources = Sources::default();
    let src = sources.add(FILE.to_string(), text);
    let tree = syntax::parse(src, sources.text(src)).map_err(|e| {
        let err = sources.error(format!("syntax error: {}", e.message), e.span, "here");
        match e.help {
            Some(h) => err.with_help(h),
            None => err,
        }
    })?;
    match &tree.kind {
        Kind::Struct { name, .. } if name.as_ref().is_none_or(|n| n.name == "Workspace") => {}
        other => {
            return Err(sources
                .error(
                    "`vitgraph.ron` must hold a `Workspace(…)`",
                    tree.span,
                    format!("found {}", other.describe()),
                )
                .with_help("write `Workspace(slurm: Slurm(partition: \"gpu\"))`"))
        }
    }
    let scope = Scope {
        params: &[],
        needs: &[],
    };
    let file: WorkspaceFile = de::from_node(&tree, &scope).map_err(|e| sources.de_error(e))?;
    let slurm_node = field(&tree, "slurm");
    check_slurm(&sources, &file.slurm, slurm_node.unwrap_or(&tree))?;
    Ok(file)
}

/// The value of struct field `name` in `node`, if present.
pub(super) fn field<'n>(node: &'n Node, name: &str) -> Option<&'n Node> {
    match &node.kind {
        Kind::Struct { fields, .. } => fields.iter().find(|(f, _)| f.name == name).map(|(_, v)| v),
        _ => None,
    }
}

/// Reports the first setting SLURM would refuse, at its place in `node`
/// (the `Slurm(…)` it was read from).
pub(super) fn check_slurm(
    sources: &Sources,
    slurm: &Slurm,
    node: &Node,
) -> Result<(), PipelineError> {
    let Some((name, message, help)) = slurm.problem() else {
        return Ok(());
    };
    let span = field(node, name).map_or(node.span, |v| v.span);
    Err(sources.error(message, span, "here").with_help(help))
}
