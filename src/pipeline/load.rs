//! From pipeline files to the expanded graph, in stages: each file's
//! declarations (`decl`), duplicates, `-p` overrides (`overrides`), the
//! stages' order (unknown stages and cycles, here), then the nodes
//! (`nodes`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::decl::{check_duplicates, read_file, FileDecl, StageDecl};
use super::nodes::expand_nodes;
use super::overrides::{apply_overrides, Override};
use super::syntax::{self, Span};
use super::{did_you_mean, PipelineError, Sources};
use crate::graph::Graph;

/// Loads every `pipelines/**/*.ron` under `root`, applies `-p` overrides and
/// expands the graph. Any problem is a [`PipelineError`] (exit status 2).
pub fn load(root: &Path, overrides: &[Override]) -> Result<Graph, PipelineError> {
    let mut sources = Sources::default();
    let files = pipeline_files(root)?;
    if files.is_empty() {
        return Err(PipelineError::plain(format!(
            "no pipeline files in `{}`",
            root.join("pipelines").display()
        ))
        .with_help(
            "add a `pipelines/NAME.ron` file, or run `vitgraph init` to create an example",
        ));
    }
    let mut decls = Vec::new();
    let mut stages: Vec<StageDecl> = Vec::new();
    for rel in files {
        let path = root.join(&rel);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PipelineError::plain(format!("cannot read `{}`: {e}", path.display())))?;
        let src = sources.add(rel.display().to_string(), text);
        let tree = syntax::parse(src, sources.text(src)).map_err(|e| {
            let err = sources.error(format!("syntax error: {}", e.message), e.span, "here");
            match e.help {
                Some(h) => err.with_help(h),
                None => err,
            }
        })?;
        let file_idx = decls.len();
        let (params, file_stages, about) = read_file(&sources, &tree, file_idx)?;
        let stem = rel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        decls.push(FileDecl {
            rel,
            stem,
            params,
            about,
        });
        stages.extend(file_stages);
    }
    check_duplicates(&sources, &stages)?;
    apply_overrides(&mut sources, &mut decls, &mut stages, overrides)?;
    let order = stage_order(&sources, &stages)?;
    expand_nodes(root, &sources, &decls, &stages, &order)
}

/// The pipeline files of the workspace at `root`, relative to it, in the
/// order they are loaded (`pipelines/**/*.ron`, sorted by name).
pub fn pipeline_files(root: &Path) -> Result<Vec<PathBuf>, PipelineError> {
    let dir = root.join("pipelines");
    let mut files = Vec::new();
    // Symbolic links are followed (a pipeline shared between workspaces is
    // often linked in); a dangling one or a loop is an error naming it.
    for entry in walkdir::WalkDir::new(&dir)
        .follow_links(true)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(&dir).display().to_string();
            PipelineError::plain(format!("cannot read `{at}`: {e}"))
                .with_help("fix or remove the entry under `pipelines/` (links are followed)")
        })?;
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|x| x == "ron") {
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap_or(entry.path())
                .to_path_buf();
            files.push(rel);
        }
    }
    Ok(files)
}

/// Stages in dependency order; unknown references and cycles are errors.
fn stage_order(sources: &Sources, stages: &[StageDecl]) -> Result<Vec<usize>, PipelineError> {
    let index: HashMap<&str, usize> = stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.name.as_str(), i))
        .collect();
    let mut deps: Vec<Vec<(usize, Span)>> = Vec::with_capacity(stages.len());
    for s in stages {
        let mut d = Vec::new();
        for up in s.upstream() {
            match index.get(up.name.as_str()) {
                Some(&i) => d.push((i, up.span)),
                None => {
                    let help =
                        match did_you_mean(&up.name, stages.iter().map(|s| s.name.name.as_str())) {
                            Some(x) => format!("did you mean `{x}`?"),
                            None => {
                                "stage names are the keys of `stages` in any pipeline file".into()
                            }
                        };
                    return Err(sources
                        .error(
                            format!("unknown stage `{}`", up.name),
                            up.span,
                            "no stage has this name",
                        )
                        .with_help(help));
                }
            }
        }
        deps.push(d);
    }
    // Kahn's algorithm, keeping declaration order among ready stages.
    let mut remaining: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); stages.len()];
    for (i, d) in deps.iter().enumerate() {
        for &(j, _) in d {
            dependents[j].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..stages.len()).filter(|&i| remaining[i] == 0).collect();
    let mut order = Vec::with_capacity(stages.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &k in &dependents[i] {
            remaining[k] -= 1;
            if remaining[k] == 0 {
                ready.insert(k);
            }
        }
    }
    if order.len() == stages.len() {
        return Ok(order);
    }
    Err(cycle_error(sources, stages, &deps, &remaining))
}

fn cycle_error(
    sources: &Sources,
    stages: &[StageDecl],
    deps: &[Vec<(usize, Span)>],
    remaining: &[usize],
) -> PipelineError {
    // Walk from a stage left in the cycle until a stage repeats.
    let start = (0..stages.len()).find(|&i| remaining[i] > 0).unwrap_or(0);
    let mut path = vec![start];
    let mut cur = start;
    while let Some(&(next, _)) = deps[cur].iter().find(|(j, _)| remaining[*j] > 0) {
        if let Some(pos) = path.iter().position(|&p| p == next) {
            path.drain(..pos);
            break;
        }
        path.push(next);
        cur = next;
    }
    let names: Vec<&str> = path.iter().map(|&i| stages[i].name.name.as_str()).collect();
    let chain = names
        .iter()
        .chain(names.first())
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" → ");
    let mut errors = Vec::new();
    for (k, &i) in path.iter().enumerate() {
        let next = path[(k + 1) % path.len()];
        let span = deps[i]
            .iter()
            .find(|(j, _)| *j == next)
            .map(|(_, s)| *s)
            .unwrap_or(stages[i].name.span);
        errors.push(sources.error(
            format!(
                "`{}` depends on `{}`",
                stages[i].name.name, stages[next].name.name
            ),
            span,
            format!(
                "`{}` needs `{}`",
                stages[i].name.name, stages[next].name.name
            ),
        ));
    }
    let mut first = errors.remove(0);
    first.message = format!("dependency cycle: {chain}");
    first = first.with_help(
        "a stage cannot depend on itself, directly or through others: remove one of these edges",
    );
    // Labels in the same file go on the main error; other files become related errors.
    for e in errors {
        first = first.with_related(e);
    }
    first
}
