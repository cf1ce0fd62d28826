//! The stage graph as an inline SVG: stages in columns by their depth (the
//! longest chain of stages before them), a box per stage coloured by its
//! state, an arrow per dependency.

use std::fmt::Write;

use super::{escape, Study};

const BOX_W: f64 = 210.0;
const BOX_H: f64 = 46.0;
const COL_GAP: f64 = 70.0;
const ROW_GAP: f64 = 16.0;
const PAD: f64 = 10.0;

/// Each stage's column: 0 for a stage without upstream stages, else one
/// more than its deepest upstream.
fn depths(study: &Study) -> Vec<usize> {
    let n = study.stages.len();
    let mut depth = vec![0usize; n];
    // Edges go from earlier to later stages in topological order; iterate
    // until stable to be safe for any order.
    for _ in 0..n {
        let mut moved = false;
        for &(from, to) in &study.edges {
            if depth[to] < depth[from] + 1 {
                depth[to] = depth[from] + 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    depth
}

pub(super) fn svg(study: &Study) -> String {
    if study.stages.is_empty() {
        return "<p class=\"empty\">No stages.</p>".into();
    }
    let depth = depths(study);
    let columns = depth.iter().max().copied().unwrap_or(0) + 1;
    let mut rows_in = vec![0usize; columns];
    let mut at = Vec::with_capacity(study.stages.len());
    for &d in &depth {
        at.push((d, rows_in[d]));
        rows_in[d] += 1;
    }
    let rows = rows_in.iter().max().copied().unwrap_or(1);
    let width = PAD * 2.0 + columns as f64 * BOX_W + (columns - 1) as f64 * COL_GAP;
    let height = PAD * 2.0 + rows as f64 * BOX_H + (rows - 1) as f64 * ROW_GAP;
    let pos = |i: usize| {
        let (c, r) = at[i];
        (
            PAD + c as f64 * (BOX_W + COL_GAP),
            PAD + r as f64 * (BOX_H + ROW_GAP),
        )
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg id=\"stage-graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"stage graph\">\
<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#777\"/></marker></defs>"
    );
    for &(from, to) in &study.edges {
        let (x1, y1) = pos(from);
        let (x2, y2) = pos(to);
        let (sx, sy) = (x1 + BOX_W, y1 + BOX_H / 2.0);
        let (ex, ey) = (x2, y2 + BOX_H / 2.0);
        let mid = (sx + ex) / 2.0;
        let _ = write!(
            s,
            "<path class=\"edge\" d=\"M {sx} {sy} C {mid} {sy}, {mid} {ey}, {ex} {ey}\" marker-end=\"url(#arrow)\"/>"
        );
    }
    for (i, stage) in study.stages.iter().enumerate() {
        let (x, y) = pos(i);
        let mut counts = vec![format!("{} fresh", stage.fresh)];
        for (n, what) in [
            (stage.stale - stage.never_built, "stale"),
            (stage.never_built, "never built"),
            (stage.failed, "failed"),
            (stage.running, "running"),
        ] {
            if n > 0 {
                counts.push(format!("{n} {what}"));
            }
        }
        let _ = write!(
            s,
            "<g class=\"stage {state}\" data-stage=\"{name}\"><title>{name}: {counts}</title>\
<rect x=\"{x}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"6\"/>\
<text x=\"{tx}\" y=\"{ty1}\" class=\"name\">{short}</text>\
<text x=\"{tx}\" y=\"{ty2}\" class=\"counts\">{counts}</text></g>",
            state = stage.state(),
            name = escape(&stage.name),
            short = escape(&shorten(&stage.name, 26)),
            counts = escape(&counts.join(" · ")),
            tx = x + 10.0,
            ty1 = y + 19.0,
            ty2 = y + 36.0,
        );
    }
    s.push_str("</svg>");
    s
}

/// `name` cut to `max` characters with an ellipsis.
fn shorten(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        return name.to_string();
    }
    let cut: String = name.chars().take(max - 1).collect();
    format!("{cut}…")
}
