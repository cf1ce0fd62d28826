//! The plan's verdict on a gated repetition (see [`crate::engine::precision`]):
//! not needed, undecided, or stale with `imprecise` saying why.

use std::collections::HashMap;

use super::{Evaluation, Evaluator, Reason, ReasonKind, Verdict};
use crate::graph::{Graph, NodeIdx};

/// A gated repetition's verdict: what its configuration's earlier
/// repetitions call for (judged before it), whether or not it has a run
/// of its own. Not needed when they are precise (or spent), even if an
/// earlier build under a tighter target ran it: its run stays in the
/// store, unseen, so the same pipeline and params give the same state and
/// the same repetitions to what needs the stage, whatever targets earlier
/// builds had. Needed, it keeps its own verdict (fresh when built).
pub(super) fn gated(
    ev: &Evaluator<'_>,
    graph: &Graph,
    out: &HashMap<NodeIdx, Evaluation>,
    i: NodeIdx,
    e: Evaluation,
) -> Evaluation {
    let mut earlier = Vec::new();
    for j in graph.earlier_repetitions(i) {
        match out.get(&j).map(|e| &e.verdict) {
            Some(Verdict::Fresh(run)) => earlier.push((j, run.duration_ms)),
            Some(Verdict::Unneeded(_)) => {
                let why = format!(
                    "repetition {} {}",
                    graph.nodes[j].rep.unwrap_or(0),
                    crate::engine::events::NOT_NEEDED_EITHER
                );
                return unneeded(e, why);
            }
            _ if e.verdict.is_fresh() => return e,
            _ => {
                let why = format!(
                    "decided once the repetitions before it are built (repetition {} is not)",
                    graph.nodes[j].rep.unwrap_or(0)
                );
                return Evaluation {
                    key: e.key,
                    verdict: Verdict::Undecided(why),
                };
            }
        }
    }
    match crate::engine::precision::gate(graph, ev.root, i, &earlier) {
        Ok(d) if d.needs_more() => {
            let stage = graph.stage_of(i).and_then(|s| s.precision.as_ref());
            let why = stage.map(|p| d.describe(p)).unwrap_or_default();
            imprecise(e, why)
        }
        Ok(d) => {
            let why = graph
                .stage_of(i)
                .and_then(|s| s.precision.as_ref())
                .map(|p| d.describe(p))
                .unwrap_or_default();
            unneeded(e, why)
        }
        Err(message) => imprecise(e, format!("cannot judge the precision target: {message}")),
    }
}

fn unneeded(e: Evaluation, why: String) -> Evaluation {
    Evaluation {
        key: e.key,
        verdict: Verdict::Unneeded(why),
    }
}

/// A gated repetition that must run: `imprecise` says why, in place of
/// `never_built`.
pub(crate) fn imprecise(mut e: Evaluation, why: String) -> Evaluation {
    let reason = Reason::new(ReasonKind::Imprecise, why);
    match &mut e.verdict {
        Verdict::Stale(reasons) | Verdict::Restore(_, reasons) => {
            reasons.retain(|r| r.kind != ReasonKind::NeverBuilt);
            reasons.insert(0, reason);
        }
        _ => {}
    }
    e
}

/// A node that follows a repetition with `for_each` (it has a `rep` and is
/// not gated itself) is not needed, or undecided, with that repetition.
pub(super) fn follows(
    graph: &Graph,
    out: &HashMap<NodeIdx, Evaluation>,
    i: NodeIdx,
) -> Option<Verdict> {
    if graph.nodes[i].rep.is_none() || graph.is_gated(i) {
        return None;
    }
    graph.nodes[i].deps().into_iter().find_map(|d| {
        let upstream = &graph.nodes[d].id;
        match out.get(&d).map(|e| &e.verdict) {
            Some(Verdict::Unneeded(_)) => Some(Verdict::Unneeded(format!(
                "follows {upstream}, {}",
                crate::engine::events::NOT_NEEDED_WITH
            ))),
            Some(Verdict::Undecided(_)) => {
                Some(Verdict::Undecided(format!("decided with {upstream}")))
            }
            _ => None,
        }
    })
}
