//! Stale reasons as people read them: grouped, so a report node with 10,000
//! changed upstreams takes one line, and a per-stage summary before the
//! nodes. `--json` keeps every reason as it is; this is only the text form.

use std::collections::BTreeMap;

use crate::engine::plan::{Reason, ReasonKind};
use crate::graph::Graph;

/// More reasons of one kind than this on one node are summarized.
const LIST_AT_MOST: usize = 3;

/// One node's reasons as text: each kind once, in the order it first
/// appears; a kind with many reasons as a count (upstreams by stage) and the
/// first one.
pub(super) fn grouped(reasons: &[Reason], graph: &Graph) -> Vec<String> {
    let mut kinds: Vec<(ReasonKind, Vec<&Reason>)> = Vec::new();
    for r in reasons {
        match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, list)) => list.push(r),
            None => kinds.push((r.kind, vec![r])),
        }
    }
    let mut out = Vec::new();
    for (kind, list) in kinds {
        if list.len() <= LIST_AT_MOST {
            out.extend(
                list.iter()
                    .map(|r| format!("{}: {}", kind.as_str(), r.detail)),
            );
            continue;
        }
        let first = &list[0].detail;
        let counted = if kind == ReasonKind::UpstreamChanged {
            upstream_counts(&list, graph)
        } else {
            format!("{} of them", list.len())
        };
        out.push(format!("{}: {counted} (first: {first})", kind.as_str()));
    }
    out
}

/// `27 nodes of rq1_runs, 40 of rq1_analysis`, stages in the pipeline's order.
fn upstream_counts(list: &[&Reason], graph: &Graph) -> String {
    let mut per_stage: BTreeMap<usize, usize> = BTreeMap::new();
    let mut unknown = 0;
    for r in list {
        let id = r.detail.strip_suffix(" (stale)").unwrap_or(&r.detail);
        let stage = graph.find(id).and_then(|i| {
            graph
                .stages
                .iter()
                .position(|s| s.name == graph.nodes[i].stage)
        });
        match stage {
            Some(s) => *per_stage.entry(s).or_default() += 1,
            None => unknown += 1,
        }
    }
    let mut parts: Vec<String> = per_stage
        .iter()
        .enumerate()
        .map(|(n, (&s, &count))| {
            let noun = if n == 0 {
                if count == 1 {
                    "node of "
                } else {
                    "nodes of "
                }
            } else {
                "of "
            };
            format!("{count} {noun}{}", graph.stages[s].name)
        })
        .collect();
    if unknown > 0 {
        parts.push(format!("{unknown} no longer in the pipelines"));
    }
    parts.join(", ")
}

/// One stage's line of the summary: `12 fresh, 27 stale (never_built 26,
/// interrupted 1)`, counting each stale node by its first reason.
pub(super) fn stage_summary<'a>(
    fresh: usize,
    stale_first_reasons: impl Iterator<Item = &'a Reason>,
) -> String {
    match counted(stale_first_reasons) {
        None => format!("{fresh} fresh"),
        Some((stale, detail)) => format!("{fresh} fresh, {stale} stale ({detail})"),
    }
}

/// How many reasons, and their kinds counted, most first (`never_built 26,
/// interrupted 1`); None for none.
pub(super) fn counted<'a>(reasons: impl Iterator<Item = &'a Reason>) -> Option<(usize, String)> {
    let mut kinds: Vec<(ReasonKind, usize)> = Vec::new();
    let mut total = 0;
    for r in reasons {
        total += 1;
        match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((r.kind, 1)),
        }
    }
    if total == 0 {
        return None;
    }
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let detail: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    Some((total, detail.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> (tempfile::TempDir, Graph) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        let values: Vec<String> = (0..30).map(|i| i.to_string()).collect();
        std::fs::write(
            dir.path().join("pipelines/p.ron"),
            format!(
                r#"Pipeline(stages: {{
                    "runs": Stage(matrix: {{"i": [{}]}}, task: Command(run: "true", outputs: [])),
                    "analysis": Stage(matrix: {{"i": [0, 1, 2, 3, 4]}}, task: Command(run: "true", outputs: [])),
                }})"#,
                values.join(", ")
            ),
        )
        .unwrap();
        let graph = crate::pipeline::load(dir.path(), &[]).unwrap();
        (dir, graph)
    }

    #[test]
    fn many_upstream_changes_are_one_line_counted_by_stage() {
        let (_dir, g) = graph();
        let mut reasons = vec![Reason::new(ReasonKind::InputChanged, "a.csv")];
        for i in 0..27 {
            reasons.push(Reason::new(
                ReasonKind::UpstreamChanged,
                format!("runs[i={i}]"),
            ));
        }
        for i in 0..4 {
            reasons.push(Reason::new(
                ReasonKind::UpstreamChanged,
                format!("analysis[i={i}] (stale)"),
            ));
        }
        reasons.push(Reason::new(ReasonKind::UpstreamChanged, "gone[i=1]"));
        assert_eq!(
            grouped(&reasons, &g),
            vec![
                "input_changed: a.csv".to_string(),
                "upstream_changed: 27 nodes of runs, 4 of analysis, 1 no longer in the pipelines \
                 (first: runs[i=0])"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn a_few_reasons_are_listed_as_they_are() {
        let (_dir, g) = graph();
        let reasons = vec![
            Reason::new(ReasonKind::UpstreamChanged, "runs[i=1]"),
            Reason::new(ReasonKind::UpstreamChanged, "runs[i=2] (stale)"),
        ];
        assert_eq!(
            grouped(&reasons, &g),
            vec![
                "upstream_changed: runs[i=1]",
                "upstream_changed: runs[i=2] (stale)"
            ]
        );
    }

    #[test]
    fn a_stage_summary_counts_nodes_by_their_first_reason_most_first() {
        let never = Reason::new(ReasonKind::NeverBuilt, "no successful run recorded");
        let interrupted = Reason::new(ReasonKind::Interrupted, "x");
        let firsts = [&interrupted, &never, &never];
        assert_eq!(
            stage_summary(12, firsts.into_iter()),
            "12 fresh, 3 stale (never_built 2, interrupted 1)"
        );
        assert_eq!(stage_summary(4, std::iter::empty()), "4 fresh");
    }
}
