//! Where each configuration of a stage with a precision target stands,
//! for `status`: precise, budget spent, imprecise, or waiting for a stale
//! repetition.

use std::path::Path;

use super::plan::{ReasonKind, Verdict};
use super::precision::{gate, Decision};
use crate::graph::{Graph, NodeIdx};

/// Where one configuration of a stage with a precision target stands.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Standing {
    /// The configuration: the repetitions' id without `rep`.
    pub configuration: String,
    pub stage: String,
    /// `precise`, `budget_spent`, `imprecise`, `unmeasured` (a run measured
    /// nothing), or `stale` (a repetition it needs is not built).
    pub state: &'static str,
    /// Repetitions built.
    pub runs: usize,
    /// The 95 % interval's half-width relative to the value, once known.
    pub half_width_rel: Option<f64>,
    pub target: f64,
    pub detail: String,
}

/// Each selected configuration of every stage with a precision target, as
/// the verdicts of its repetitions (`verdict`, None when not judged) say.
pub(crate) fn standings<'v>(
    graph: &Graph,
    root: &Path,
    selection: &[NodeIdx],
    verdict: impl Fn(NodeIdx) -> Option<&'v Verdict>,
) -> Vec<Standing> {
    let selected: std::collections::HashSet<NodeIdx> = selection.iter().copied().collect();
    let mut out = Vec::new();
    for stage in &graph.stages {
        let Some(p) = &stage.precision else { continue };
        let firsts = stage
            .nodes
            .iter()
            .copied()
            .filter(|&i| graph.nodes[i].rep == Some(1) && selected.contains(&i));
        for first in firsts {
            let reps: Vec<NodeIdx> = (first..first + p.max_repeat as usize)
                .filter(|&i| i < graph.nodes.len() && graph.nodes[i].stage == stage.name)
                .collect();
            // The repetitions built, up to the first not needed or stale.
            let mut earlier = Vec::new();
            let mut stale = false;
            for &i in &reps {
                match verdict(i) {
                    Some(Verdict::Fresh(run)) => earlier.push((i, run.duration_ms)),
                    Some(Verdict::Unneeded(_)) => break,
                    // The next repetition is stale only for the interval.
                    Some(v)
                        if !v.reasons().is_empty()
                            && v.reasons().iter().all(|r| r.kind == ReasonKind::Imprecise) =>
                    {
                        break
                    }
                    _ => {
                        stale = true;
                        break;
                    }
                }
            }
            let (state, detail, half) = if stale {
                (
                    "stale",
                    "a repetition it needs is not built".to_owned(),
                    None,
                )
            } else {
                judged(gate(graph, root, reps[reps.len() - 1], &earlier), p)
            };
            out.push(Standing {
                configuration: configuration(graph, first),
                stage: stage.name.clone(),
                state,
                runs: earlier.len(),
                half_width_rel: half,
                target: p.ci_rel,
                detail,
            });
        }
    }
    out
}

/// A configuration's name: its first repetition's id without `rep`.
fn configuration(graph: &Graph, first: NodeIdx) -> String {
    let node = &graph.nodes[first];
    let params: Vec<String> = node
        .configuration()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if params.is_empty() {
        node.stage.clone()
    } else {
        format!("{}[{}]", node.stage, params.join(","))
    }
}

/// State, detail and relative half-width of a configuration whose
/// repetitions are built.
fn judged(
    decision: Result<Decision, String>,
    p: &crate::graph::Precision,
) -> (&'static str, String, Option<f64>) {
    let d = match decision {
        Ok(d) => d,
        Err(e) => return ("imprecise", e, None),
    };
    let (state, estimate) = match d.inner() {
        Decision::Precise(e) => ("precise", Some(*e)),
        Decision::Spent { estimate, .. } => ("budget_spent", *estimate),
        Decision::More { estimate } => ("imprecise", *estimate),
        Decision::Unmeasured(_) => ("unmeasured", None),
        Decision::Alone { .. } => unreachable!("`inner` is never `Alone`"),
    };
    (state, d.describe(p), estimate.map(|e| e.half_width_rel()))
}
