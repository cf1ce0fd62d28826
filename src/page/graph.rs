//! The stage graph as an inline SVG: a band per pipeline file, and in it
//! the file's stages in columns by their depth (the longest chain of stages
//! before them), a box per stage coloured by its state, an arrow per
//! dependency. The page's script makes a box filter the node list.

use std::fmt::Write;

use super::{escape, Study};

const BOX_W: f64 = 210.0;
const BOX_H: f64 = 46.0;
const COL_GAP: f64 = 70.0;
const ROW_GAP: f64 = 16.0;
const PAD: f64 = 10.0;
/// A pipeline file's band: its label's line, and the gap between bands.
const BAND_LABEL: f64 = 18.0;
const BAND_GAP: f64 = 22.0;

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

/// Where each stage's box goes: pipeline files in bands, one under the
/// other (in the order their first stage comes), and inside a band the
/// stages in columns by depth.
struct Layout {
    /// Each stage's box corner.
    at: Vec<(f64, f64)>,
    /// Each band's file, top and height.
    bands: Vec<(String, f64, f64)>,
    width: f64,
    height: f64,
}

fn layout(study: &Study) -> Layout {
    let depth = depths(study);
    let columns = depth.iter().max().copied().unwrap_or(0) + 1;
    let mut files: Vec<&str> = Vec::new();
    for s in &study.stages {
        if !files.contains(&s.pipeline.as_str()) {
            files.push(&s.pipeline);
        }
    }
    // One file needs no band.
    let (label, gap) = if files.len() > 1 {
        (BAND_LABEL, BAND_GAP)
    } else {
        (0.0, 0.0)
    };
    let mut at = vec![(0.0, 0.0); study.stages.len()];
    let mut bands = Vec::new();
    let mut top = PAD;
    for file in &files {
        let mut rows_in = vec![0usize; columns];
        for (i, s) in study.stages.iter().enumerate() {
            if s.pipeline != *file {
                continue;
            }
            let (c, r) = (depth[i], rows_in[depth[i]]);
            rows_in[c] += 1;
            at[i] = (
                PAD + c as f64 * (BOX_W + COL_GAP),
                top + label + r as f64 * (BOX_H + ROW_GAP),
            );
        }
        let rows = rows_in.iter().max().copied().unwrap_or(1) as f64;
        let height = label + rows * BOX_H + (rows - 1.0) * ROW_GAP;
        bands.push((file.to_string(), top, height));
        top += height + gap;
    }
    Layout {
        at,
        bands,
        width: PAD * 2.0 + columns as f64 * BOX_W + (columns - 1) as f64 * COL_GAP,
        height: top - gap + PAD,
    }
}

pub(super) fn svg(study: &Study) -> String {
    if study.stages.is_empty() {
        return "<p class=\"empty\">No stages.</p>".into();
    }
    let Layout {
        at,
        bands,
        width,
        height,
    } = layout(study);
    let pos = |i: usize| at[i];
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg id=\"stage-graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"stage graph\">\
<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#777\"/></marker></defs>"
    );
    if bands.len() > 1 {
        for (file, top, h) in &bands {
            let _ = write!(
                s,
                "<g class=\"band\"><rect x=\"2\" y=\"{y}\" width=\"{w}\" height=\"{bh}\" rx=\"4\"/><text x=\"{PAD}\" y=\"{ty}\">{name}</text></g>",
                y = top - 6.0,
                w = width - 4.0,
                bh = h + 12.0,
                ty = top + 8.0,
                name = escape(file),
            );
        }
    }
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
            "<g class=\"stage {state}\" data-stage=\"{name}\" data-i=\"{i}\"><title>{name}: {counts}</title>\
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
