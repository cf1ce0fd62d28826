//! Gated repetitions in a build (see [`crate::engine::precision`]): a
//! repetition beyond a precision stage's `repeat` waits for the ones
//! before it, then runs only while its configuration is imprecise.

use std::collections::HashMap;

use super::super::events::{Event, Reporter};
use super::super::plan::{imprecise, Evaluation};
use super::super::precision;
use super::{Build, Done};
use crate::graph::{Graph, NodeIdx};

/// Makes each selected gated repetition wait for the selected repetitions
/// before it, as for an upstream node (without entering its key).
pub(super) fn wait_for_earlier(
    graph: &Graph,
    selection: &[NodeIdx],
    remaining: &mut HashMap<NodeIdx, usize>,
    dependents: &mut [Vec<NodeIdx>],
) {
    for &i in selection {
        if !graph.is_gated(i) {
            continue;
        }
        for j in graph.earlier_repetitions(i) {
            if remaining.contains_key(&j) {
                dependents[j].push(i);
                *remaining.entry(i).or_default() += 1;
            }
        }
    }
}

impl Build<'_, '_> {
    /// Notes a done node's run time, for the time budgets of precision
    /// targets.
    pub(super) fn note_run(&mut self, i: NodeIdx, duration_ms: i64) {
        if self.gates {
            self.durations.insert(i, duration_ms);
        }
    }

    /// Whether gated repetition `i` may be judged: false (and `i` is done)
    /// when a repetition before it failed, was skipped or was not needed.
    pub(super) fn earlier_ok(&mut self, i: NodeIdx, reporter: &mut dyn Reporter) -> bool {
        for j in self.b.graph.earlier_repetitions(i) {
            match self.done.get(&j) {
                Some(Done::Failed | Done::Skipped) => {
                    self.skip(i, j, reporter);
                    return false;
                }
                Some(Done::Unneeded) => {
                    let why = format!(
                        "repetition {} {}",
                        self.b.graph.nodes[j].rep.unwrap_or(0),
                        crate::engine::events::NOT_NEEDED_EITHER
                    );
                    self.unneeded(i, why, reporter);
                    return false;
                }
                _ => {}
            }
        }
        true
    }

    /// Whether node `i`, following a repetition with `for_each`, is not
    /// needed with it (then it is done).
    pub(super) fn follows_unneeded(&mut self, i: NodeIdx, reporter: &mut dyn Reporter) -> bool {
        let graph = self.b.graph;
        if graph.nodes[i].rep.is_none() || graph.is_gated(i) {
            return false;
        }
        let unneeded = graph.nodes[i]
            .deps()
            .into_iter()
            .find(|d| matches!(self.done.get(d), Some(Done::Unneeded)));
        let Some(d) = unneeded else {
            return false;
        };
        let why = format!(
            "follows {}, {}",
            graph.nodes[d].id,
            crate::engine::events::NOT_NEEDED_WITH
        );
        self.unneeded(i, why, reporter);
        true
    }

    /// A gated repetition, fresh or not: not needed (None, `i` done) when
    /// the repetitions before it are precise or spent their budget; else
    /// its evaluation, with `imprecise` saying why it runs when stale.
    pub(super) fn gate(
        &mut self,
        i: NodeIdx,
        evaluation: Evaluation,
        reporter: &mut dyn Reporter,
    ) -> Option<Evaluation> {
        let graph = self.b.graph;
        let earlier: Vec<(NodeIdx, i64)> = graph
            .earlier_repetitions(i)
            .into_iter()
            .map(|j| (j, self.durations.get(&j).copied().unwrap_or(0)))
            .collect();
        let target = graph.stage_of(i).and_then(|s| s.precision.as_ref())?;
        match precision::gate(graph, &self.b.root, i, &earlier) {
            Ok(d) if d.needs_more() => Some(imprecise(evaluation, d.describe(target))),
            Ok(d) => {
                self.unneeded(i, d.describe(target), reporter);
                None
            }
            Err(message) => {
                let failure = super::NodeFailure::new(
                    super::FailureKind::Key,
                    format!(
                        "cannot judge the precision target of `{}`: {message}",
                        graph.nodes[i].stage
                    ),
                );
                self.fail(i, failure, 0, reporter);
                None
            }
        }
    }

    /// Gated repetition `i` is not needed: reported, and done.
    fn unneeded(&mut self, i: NodeIdx, why: String, reporter: &mut dyn Reporter) {
        reporter.event(&Event::Unneeded {
            node: self.b.graph.nodes[i].id.clone(),
            why,
        });
        self.counts.unneeded += 1;
        self.finish_node(i, Done::Unneeded);
    }
}
