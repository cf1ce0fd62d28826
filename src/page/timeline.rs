//! The latest build's timeline as an inline SVG: a lane per CPU slot, GPU
//! and SLURM job, a bar per attempt from its start to its end, coloured by
//! stage; hovering a bar shows its node and duration (the page's script
//! reads them from the page's data). The script also zooms into a window
//! of time (drag across it, or the zoom buttons) and labels bars wide
//! enough to hold their node's name; the SVG carries the scale it needs.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{escape, BuildView, Study, PALETTE};

/// The narrowest bar drawn, in px: a node of a few ms is still a mark.
const MIN_BAR: f64 = 3.0;
const WIDTH: f64 = 1100.0;
const LABEL: f64 = 110.0;
const LANE_H: f64 = 20.0;
const AXIS_H: f64 = 24.0;

/// Lanes in reading order: CPU slots by number, then GPUs, then jobs, then
/// attempts with no recorded slot.
fn lane_order(lane: &str) -> (u8, u64, String) {
    let (kind, rest) = lane.split_once(':').unwrap_or(("~", lane));
    let rank = match kind {
        "cpu" => 0,
        "gpu" => 1,
        "job" => 2,
        _ => 3,
    };
    (rank, rest.parse().unwrap_or(u64::MAX), rest.to_string())
}

pub(super) fn svg(build: &BuildView, study: &Study) -> String {
    if build.entries.is_empty() {
        return "<p class=\"empty\">This build started no node.</p>".into();
    }
    let mut lanes: BTreeMap<(u8, u64, String), String> = BTreeMap::new();
    for b in &build.entries {
        lanes.insert(lane_order(&b.lane), b.lane.clone());
    }

    let t0 = build.entries.iter().map(|b| b.start_ms).min().unwrap_or(0);
    let t1 = build
        .entries
        .iter()
        .map(|b| b.end_ms)
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let span = (t1 - t0) as f64;
    let plot_w = WIDTH - LABEL - 10.0;
    let height = AXIS_H + lanes.len() as f64 * LANE_H + 6.0;
    let x = |t: i64| LABEL + (t - t0) as f64 / span * plot_w;
    let mut s = String::with_capacity(build.entries.len() * 160 + 4096);
    let _ = write!(
        s,
        "<svg id=\"timeline-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"build timeline\" data-left=\"{LABEL}\" data-plot-w=\"{plot_w}\" data-span-ms=\"{span}\" data-min-bar=\"{MIN_BAR}\"><clipPath id=\"timeline-clip\"><rect x=\"{LABEL}\" y=\"0\" width=\"{plot_w}\" height=\"{height}\"/></clipPath>"
    );
    // Time axis: about six ticks at round seconds (the page's script draws
    // them anew for a zoomed window).
    s.push_str("<g id=\"timeline-ticks\">");
    let step = nice_step(span / 1000.0 / 6.0);
    let mut tick = 0.0;
    while tick * 1000.0 <= span + 1e-9 {
        let tx = LABEL + tick * 1000.0 / span * plot_w;
        let _ = write!(
            s,
            "<line class=\"tick\" x1=\"{tx:.1}\" x2=\"{tx:.1}\" y1=\"{AXIS_H}\" y2=\"{height}\"/><text class=\"tick\" x=\"{tx:.1}\" y=\"14\">{}</text>",
            seconds_label(tick, step)
        );
        tick += step;
    }
    s.push_str("</g>");
    for (i, lane) in lanes.values().enumerate() {
        let y = AXIS_H + i as f64 * LANE_H;
        let _ = write!(
            s,
            "<text class=\"lane\" x=\"4\" y=\"{:.1}\">{}</text>",
            y + 14.0,
            escape(lane)
        );
    }
    // Bars by lane in a group, colour by stage class; the node and duration
    // come from the page's data on hover (a title per bar would double the
    // page at 10,000 nodes).
    let mut style = String::from("<style>");
    for i in 0..=study.stages.len() {
        let _ = write!(
            style,
            "#timeline-svg .s{i}{{fill:{}}}",
            PALETTE[i % PALETTE.len()]
        );
    }
    style.push_str("</style>");
    s.push_str(&style);
    // The bars inside the plot's area: a zoomed window clips the rest.
    s.push_str("<g id=\"timeline-bars\" clip-path=\"url(#timeline-clip)\">");
    // A node that held the whole machine: its time shaded across every
    // lane, under the bars (nothing else ran then, by design).
    let lanes_h = lanes.len() as f64 * LANE_H;
    for b in build.entries.iter().filter(|b| b.alone) {
        let x0 = x(b.start_ms);
        let _ = write!(
            s,
            "<rect class=\"alone\" x=\"{x0:.1}\" y=\"{AXIS_H}\" width=\"{w:.1}\" height=\"{lanes_h}\" data-at=\"{at}\" data-d=\"{d}\"/>",
            w = (x(b.end_ms) - x0).max(MIN_BAR),
            at = b.start_ms - t0,
            d = b.end_ms - b.start_ms,
        );
    }
    for (lane, name) in lanes.values().enumerate() {
        let y = AXIS_H + lane as f64 * LANE_H + 2.0;
        let _ = write!(s, "<g transform=\"translate(0,{y})\">");
        // Short and failed bars last, so that the next bar never covers
        // them (N12): a 6 ms analysis, drawn MIN_BAR wide, stays visible.
        let mut bars: Vec<_> = build.entries.iter().filter(|b| b.lane == *name).collect();
        bars.sort_by_key(|b| b.status != "succeeded" || x(b.end_ms) - x(b.start_ms) < MIN_BAR);
        for b in bars {
            let x0 = x(b.start_ms);
            // Short nodes stay visible: at least MIN_BAR wide.
            let w = (x(b.end_ms) - x0).max(MIN_BAR);
            let mut status = if b.status == "succeeded" {
                String::new()
            } else {
                format!(" {}", escape(&b.status))
            };
            if b.index.is_none() {
                // A node no longer in the pipelines: grey, not a live stage's colour.
                status.push_str(" removed");
            }
            if b.replaced {
                status.push_str(" replaced");
            }
            let index = b.index.map_or(-1, |i| i as i64);
            let _ = write!(
                s,
                "<rect class=\"bar s{stage}{status}\" x=\"{x0:.1}\" width=\"{w:.1}\" height=\"{h}\" data-i=\"{index}\" data-d=\"{d}\"/>",
                stage = b.stage,
                h = LANE_H - 4.0,
                d = b.end_ms - b.start_ms,
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</g></svg>");
    s
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

fn seconds_label(t: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{t:.0} s")
    } else {
        let digits = (-step.log10().floor()) as usize;
        format!("{t:.digits$} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_steps_and_lanes_read_in_order() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(31.0), 50.0);
        let mut lanes = ["gpu:1", "cpu:10", "cpu:2", "job:77", "~"];
        lanes.sort_by_key(|l| lane_order(l));
        assert_eq!(lanes, ["cpu:2", "cpu:10", "gpu:1", "job:77", "~"]);
    }
}
