//! Target selection: stage names, node ids, globs and pipeline stems → nodes.

use globset::Glob;

use super::{Graph, NodeIdx};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SelectError {
    #[error("unknown target `{target}`")]
    #[diagnostic(code(vitgraph::unknown_target), help("{help}"))]
    Unknown { target: String, help: String },
    #[error("invalid glob `{target}`: {message}")]
    #[diagnostic(code(vitgraph::bad_glob))]
    BadGlob { target: String, message: String },
}

/// Resolves targets to the set of nodes they name plus everything those nodes
/// need (transitively; for a gated repetition, the repetitions before it).
/// No target means every node. Returns a sorted index list.
pub fn select(graph: &Graph, targets: &[String]) -> Result<Vec<NodeIdx>, SelectError> {
    let mut wanted = vec![false; graph.nodes.len()];
    if targets.is_empty() {
        wanted.iter_mut().for_each(|w| *w = true);
    }
    for target in targets {
        let hits = resolve_one(graph, target)?;
        for i in hits {
            wanted[i] = true;
        }
    }
    // Close over dependencies: walk backwards so dependents mark their deps
    // first. A gated repetition is judged from the repetitions before it.
    let gates = graph.stages.iter().any(|s| s.precision.is_some());
    for i in (0..graph.nodes.len()).rev() {
        if wanted[i] {
            for d in graph.nodes[i].deps() {
                wanted[d] = true;
            }
            if gates && graph.is_gated(i) {
                for d in graph.earlier_repetitions(i) {
                    wanted[d] = true;
                }
            }
        }
    }
    Ok((0..graph.nodes.len()).filter(|&i| wanted[i]).collect())
}

/// The nodes the targets name, without what they need.
pub fn select_named(graph: &Graph, targets: &[String]) -> Result<Vec<NodeIdx>, SelectError> {
    let mut hits = Vec::new();
    for t in targets {
        hits.extend(resolve_one(graph, t)?);
    }
    hits.sort_unstable();
    hits.dedup();
    Ok(hits)
}

fn resolve_one(graph: &Graph, target: &str) -> Result<Vec<NodeIdx>, SelectError> {
    if let Some(i) = graph.find(target) {
        return Ok(vec![i]);
    }
    if let Some(stage) = graph.stage(target) {
        return Ok(stage.nodes.clone());
    }
    let by_file: Vec<NodeIdx> = graph
        .stages
        .iter()
        .filter(|s| s.pipeline == target)
        .flat_map(|s| s.nodes.iter().copied())
        .collect();
    if graph.stages.iter().any(|s| s.pipeline == target) {
        return Ok(by_file);
    }
    if target.contains(['*', '?', '[']) {
        let glob = Glob::new(target)
            .map_err(|e| SelectError::BadGlob {
                target: target.into(),
                message: e.to_string(),
            })?
            .compile_matcher();
        let mut hits: Vec<NodeIdx> = Vec::new();
        for s in &graph.stages {
            if glob.is_match(&s.name) {
                hits.extend(&s.nodes);
            }
        }
        for (i, n) in graph.nodes.iter().enumerate() {
            if glob.is_match(&n.id) {
                hits.push(i);
            }
        }
        if !hits.is_empty() {
            hits.sort_unstable();
            hits.dedup();
            return Ok(hits);
        }
    }
    let candidates = graph
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .chain(graph.stages.iter().map(|s| s.pipeline.as_str()));
    let help = match crate::suggest::did_you_mean(target, candidates) {
        Some(s) => format!("did you mean `{s}`? `vitgraph ls` lists every stage and node"),
        None => "`vitgraph ls` lists every stage and node".to_string(),
    };
    Err(SelectError::Unknown {
        target: target.into(),
        help,
    })
}
