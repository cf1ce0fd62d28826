//! A `Report`'s plots checked against the params of the nodes it joins, as
//! the pipelines load: a plot of a column the table cannot have, or a line
//! through a param the plot does not show, refuses the report node, pointing at the plot, before a sweep runs for
//! hours to feed it. The refusal is kept with the graph and stops every
//! command that selects the node (`build`, `status`, `exec`); the other
//! nodes of the workspace stay usable, since a `-p` override meant for one
//! study can make another study's plot ambiguous.

use std::path::Path;

use miette::Diagnostic;

use super::decl::StageDecl;
use super::syntax::{Kind, Node, Span};
use super::{PipelineError, Sources};
use crate::graph::{Graph, Refusal};
use crate::tasks::{report, TaskError, TaskSpec};
use crate::value::Value;

/// The refusals of the `Report` nodes of `graph` whose plots would zig-zag.
pub(super) fn refusals(sources: &Sources, decls: &[StageDecl], graph: &Graph) -> Vec<Refusal> {
    let mut out = Vec::new();
    for decl in decls {
        let Some(stage) = graph.stage(&decl.name.name) else {
            continue;
        };
        for &i in &stage.nodes {
            let TaskSpec::Report(spec) = &graph.nodes[i].task else {
                break;
            };
            let configs: Vec<Vec<(String, Value)>> = graph.nodes[i]
                .needs
                .iter()
                .filter(|need| spec.sources.contains(&need.stage))
                .flat_map(|need| need.nodes.iter())
                .flat_map(|&up| configurations(&graph.nodes[up]))
                .collect();
            let Err((plot, e)) = report::check_plots(spec, configs.iter().map(Vec::as_slice))
            else {
                continue;
            };
            let (detail, help) = match e {
                TaskError::BadSpec { detail, help, .. } => (detail, help),
                other => (
                    other.to_string(),
                    other.help().map(|h| h.to_string()).unwrap_or_default(),
                ),
            };
            let span = plot_spans(decl.task())
                .get(plot)
                .copied()
                .unwrap_or(decl.task().span);
            out.push(Refusal {
                node: i,
                message: format!("`{}`: {detail}", graph.nodes[i].id),
                help,
                file: sources.name(span.src).to_owned(),
                start: span.start,
                end: span.end,
                label: "this plot".to_owned(),
            });
        }
    }
    out.sort_by_key(|r| r.node);
    out
}

/// The configurations a node stands for in a report: its params, or, for
/// a block measured together, each member's (the block's params with the
/// member's values of the together axes; A/A twins are no row).
fn configurations(node: &crate::graph::Node) -> Vec<Vec<(String, Value)>> {
    let Some(t) = node.task.together() else {
        return vec![node.id_params.clone()];
    };
    t.configs()
        .filter(|(values, _)| !t.is_twin(values))
        .map(|(_, params)| {
            let mut config = node.id_params.clone();
            config.extend(params);
            config
        })
        .collect()
}

/// A refusal as the error a pipeline's loader shows: the message, the plot
/// underlined in its file (read again from the workspace `root`), the fix.
pub fn refusal_error(root: &Path, r: &Refusal) -> PipelineError {
    match located(root, r) {
        Some((sources, span)) => sources.error(r.message.clone(), span, r.label.clone()),
        None => PipelineError::plain(format!("{} ({})", r.message, r.file)),
    }
    .with_help(r.help.clone())
}

/// A refusal in one line, for the study page: what cannot run, where the
/// pipeline says it, and the fix.
pub fn refusal_line(root: &Path, r: &Refusal) -> String {
    let place = located(root, r).map_or_else(|| r.file.clone(), |(s, span)| s.location(span));
    format!("{} ({place}); not built until fixed: {}", r.message, r.help)
}

/// The refusal's pipeline file, read again, and its span in it; `None`
/// when the file is gone or shorter than the span.
fn located(root: &Path, r: &Refusal) -> Option<(Sources, Span)> {
    let text = std::fs::read_to_string(root.join(&r.file)).ok()?;
    if r.end as usize > text.len() {
        return None;
    }
    let mut sources = Sources::default();
    let src = sources.add(r.file.clone(), text);
    let span = Span {
        src,
        start: r.start,
        end: r.end,
    };
    Some((sources, span))
}

/// The spans of a `Report(plots: [...])`'s plots, in order.
fn plot_spans(task: &Node) -> Vec<Span> {
    let Kind::Struct { fields, .. } = &task.kind else {
        return Vec::new();
    };
    fields
        .iter()
        .find(|(name, _)| name.name == "plots")
        .and_then(|(_, value)| match &value.kind {
            Kind::List(items) => Some(items.iter().map(|item| item.span).collect()),
            _ => None,
        })
        .unwrap_or_default()
}
