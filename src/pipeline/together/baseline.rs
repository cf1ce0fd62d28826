//! A precision target's baseline member on a stage measured together.

use super::super::decl::StageDecl;
use super::super::syntax::Node;
use super::super::{PipelineError, Sources};

/// A precision target on a stage measured together judges the members'
/// paired ratios to a baseline member: `baseline` must be a member of every
/// block of several members (the first block's first member when left
/// out, filled in here); a block of one member is judged on its own
/// values. On a stage not measured together a baseline is an error.
pub(in crate::pipeline) fn baseline_of<'n>(
    sources: &Sources,
    s: &StageDecl,
    precision: Option<(crate::graph::Precision, &'n Node)>,
    nodes: &[crate::graph::Node],
    stage_nodes: &[crate::graph::NodeIdx],
) -> Result<Option<(crate::graph::Precision, &'n Node)>, PipelineError> {
    let Some((mut p, node)) = precision else {
        return Ok(None);
    };
    let blocks: Vec<Vec<String>> = stage_nodes
        .iter()
        .filter_map(|&i| nodes[i].task.member_keys())
        .collect();
    if blocks.is_empty() {
        if let Some(b) = &p.baseline {
            return Err(sources
                .error(
                    format!("`precision.baseline` is `{b}`, and stage `{}` is not measured together", s.name.name),
                    node.span,
                    "in this precision target",
                )
                .with_help("a baseline names the member the others' ratios are judged against: give the stage `together: [\"axis\"]`, or drop `baseline`"));
        }
        return Ok(Some((p, node)));
    }
    let baseline = p.baseline.clone().unwrap_or_else(|| blocks[0][0].clone());
    // A block of one member is judged on its own values; any other must
    // hold the baseline its members' ratios are taken to.
    if let Some(block) = blocks
        .iter()
        .find(|b| b.len() > 1 && !b.contains(&baseline))
    {
        return Err(sources
            .error(
                format!("`precision.baseline` `{baseline}` is not a member of every block"),
                node.span,
                "in this precision target",
            )
            .with_help(format!(
                "a member's key is its values of the together axes joined by `,`; one block holds {}",
                block.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            )));
    }
    p.baseline = Some(baseline);
    Ok(Some((p, node)))
}
