//! What an analysis leaves for looking at its measured window: its first
//! kernels per stream and its batches in a compact form the study page draws
//! as tracks (`window.tracks.json`, always), and with `perfetto: true` the
//! window's events as Chrome-trace JSON that ui.perfetto.dev opens
//! (`window.perfetto.json`).

use std::path::Path;

use serde_json::json;

use super::compute::Options;
use super::output::write_atomic;
use super::window::{find_window, Span};
use super::AnalysisError;
use crate::trace::reader::Trace;

/// The window's events for a trace viewer.
pub const WINDOW_TRACE: &str = "window.perfetto.json";
/// The window's tracks for the study page.
pub const WINDOW_TRACKS: &str = "window.tracks.json";
/// Kernels the page's track view holds (the first ones of the window).
const TRACK_KERNELS: usize = 1000;
/// Batch ranges the page's track view holds.
const TRACK_RANGES: usize = 200;

/// Writes [`WINDOW_TRACKS`] into `dir`, and [`WINDOW_TRACE`] with `perfetto`.
pub fn write_window(
    trace: &Trace,
    opts: &Options,
    dir: &Path,
    perfetto: bool,
) -> Result<(), AnalysisError> {
    let (_, span) = find_window(&trace.nvtx, &opts.window);
    if perfetto {
        let path = dir.join(WINDOW_TRACE);
        crate::trace::perfetto::write(&within(trace, span), &path)?;
    }
    let tracks = tracks(trace, span, opts);
    write_atomic(&dir.join(WINDOW_TRACKS), tracks.to_string().as_bytes())
}

/// The activities and ranges of `trace` that overlap `span`.
fn within(trace: &Trace, span: Span) -> Trace {
    Trace {
        kernels: (trace.kernels.iter())
            .filter(|k| span.overlaps(k.start, k.end))
            .copied()
            .collect(),
        memcpys: (trace.memcpys.iter())
            .filter(|m| span.overlaps(m.start, m.end))
            .copied()
            .collect(),
        memsets: (trace.memsets.iter())
            .filter(|m| span.overlaps(m.start, m.end))
            .copied()
            .collect(),
        runtime: (trace.runtime.iter())
            .filter(|r| span.overlaps(r.start, r.end))
            .copied()
            .collect(),
        nvtx: (trace.nvtx.iter())
            .filter(|r| r.end.is_some_and(|e| span.overlaps(r.start, e)))
            .cloned()
            .collect(),
        path: trace.path.clone(),
        gpus: trace.gpus.clone(),
        names: trace.names.clone(),
        producer: trace.producer.clone(),
    }
}

/// `{start_ns, end_ns, streams: ["GPU 0 stream 7", …], names: […],
/// kernels: [[track, start offset ns, duration ns, name], …], batches:
/// [[start offset ns, duration ns, text], …], kernels_in_window, shown}`:
/// offsets from the window's start, the first kernels by start time.
fn tracks(trace: &Trace, span: Span, opts: &Options) -> serde_json::Value {
    // The window's kernels; of a large window only the first are sorted.
    let mut kernels: Vec<_> = (trace.kernels.iter())
        .filter(|k| span.overlaps(k.start, k.end))
        .collect();
    let in_window = kernels.len();
    let streams: Vec<(u32, u32)> = (kernels.iter().map(|k| (k.device, k.stream)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let by_start = |k: &&crate::trace::reader::KernelRow| (k.start, k.device, k.stream);
    if kernels.len() > TRACK_KERNELS {
        kernels.select_nth_unstable_by_key(TRACK_KERNELS, by_start);
        kernels.truncate(TRACK_KERNELS);
    }
    kernels.sort_by_key(by_start);
    let t0 = span
        .start
        .or_else(|| kernels.first().map(|k| k.start))
        .unwrap_or(0);
    let end = span
        .end
        .or_else(|| trace.kernels.iter().map(|k| k.end).max())
        .unwrap_or(t0);
    let mut names: Vec<&str> = Vec::new();
    let shown: Vec<serde_json::Value> = kernels
        .iter()
        .map(|k| {
            let name = trace.name(k.name);
            let n = names.iter().position(|x| *x == name).unwrap_or_else(|| {
                names.push(name);
                names.len() - 1
            });
            let track = streams.binary_search(&(k.device, k.stream)).unwrap_or(0);
            json!([track, k.start - t0, k.end - k.start, n])
        })
        .collect();
    let prefix = opts.batch_prefix.to_lowercase();
    let batches: Vec<serde_json::Value> = (trace.nvtx.iter())
        .filter(|r| r.text != opts.window && r.text.to_lowercase().starts_with(&prefix))
        .filter_map(|r| Some((r.start, r.end?, &r.text)))
        .filter(|(s, e, _)| span.overlaps(*s, *e))
        .take(TRACK_RANGES)
        .map(|(s, e, text)| json!([s - t0, e - s, text]))
        .collect();
    json!({
        "window": opts.window,
        "duration_ns": end - t0,
        "streams": streams.iter().map(|(d, s)| format!("GPU {d} stream {s}")).collect::<Vec<_>>(),
        "names": names,
        "kernels": shown,
        "batches": batches,
        "kernels_in_window": in_window,
    })
}
