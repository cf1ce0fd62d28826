//! The measured window: the NVTX range named `measure` (or another name), and
//! the per-batch ranges inside it.
//!
//! The window is the CPU-side NVTX range, from the first start to the last end
//! of all ranges with that name outside the `gpu_user_annotation` domain (the
//! GPU projections of PyTorch-profiler ranges are not windows). Without such a
//! range the window is the whole trace.

use super::metrics::{BatchLatency, Window};
use crate::stats::nsys::{median_sorted, percentile_sorted, stats};
use crate::trace::kineto::GPU_ANNOTATION_DOMAIN;
use crate::trace::reader::NvtxRow;

/// A time window `[start, end]`; `None` bounds mean unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl Span {
    pub const ALL: Span = Span {
        start: None,
        end: None,
    };

    fn lo(&self) -> i64 {
        self.start.unwrap_or(i64::MIN)
    }

    fn hi(&self) -> i64 {
        self.end.unwrap_or(i64::MAX)
    }

    /// Whether `[s, e]` overlaps the window (a zero-length activity counts
    /// when it lies inside it).
    pub fn overlaps(&self, s: i64, e: i64) -> bool {
        if s == e {
            return s >= self.lo() && s <= self.hi();
        }
        s < self.hi() && e > self.lo()
    }

    /// `[s, e]` cut to the window.
    pub fn clip(&self, s: i64, e: i64) -> (i64, i64) {
        let s2 = s.max(self.lo());
        (s2, e.min(self.hi()).max(s2))
    }

    pub fn contains(&self, s: i64, e: i64) -> bool {
        s >= self.lo() && e <= self.hi()
    }
}

fn is_cpu_range(r: &NvtxRow) -> bool {
    r.end.is_some() && r.domain.as_deref() != Some(GPU_ANNOTATION_DOMAIN)
}

/// The window named `name` and its span.
pub fn find_window(nvtx: &[NvtxRow], name: &str) -> (Window, Span) {
    let ranges: Vec<(i64, i64)> = nvtx
        .iter()
        .filter(|r| is_cpu_range(r) && r.text == name)
        .filter_map(|r| r.end.map(|e| (r.start, e)))
        .collect();
    let start = ranges.iter().map(|r| r.0).min();
    let end = ranges.iter().map(|r| r.1).max();
    let window = Window {
        name: name.to_string(),
        found: !ranges.is_empty(),
        ranges: ranges.len() as u64,
        start_ns: start,
        end_ns: end,
        duration_ns: start.zip(end).map(|(s, e)| e - s),
    };
    (window, Span { start, end })
}

/// Latency statistics of the CPU ranges whose name starts with `prefix`
/// (case-insensitive) and that lie inside the window; `None` when there are none.
pub fn batch_latency(
    nvtx: &[NvtxRow],
    span: Span,
    window: &str,
    prefix: &str,
) -> Option<BatchLatency> {
    let prefix_lc = prefix.to_lowercase();
    let mut durations: Vec<i64> = nvtx
        .iter()
        .filter(|r| is_cpu_range(r) && r.text != window)
        .filter(|r| r.text.to_lowercase().starts_with(&prefix_lc))
        .filter_map(|r| r.end.map(|e| (r.start, e)))
        .filter(|&(s, e)| span.contains(s, e))
        .map(|(s, e)| e - s)
        .collect();
    if durations.is_empty() {
        return None;
    }
    let s = stats(&mut durations);
    durations.sort_unstable();
    Some(BatchLatency {
        prefix: prefix.to_string(),
        count: s.count,
        mean_ns: s.avg,
        median_ns: median_sorted(&durations),
        p90_ns: percentile_sorted(&durations, 90.0),
        p99_ns: percentile_sorted(&durations, 99.0),
        min_ns: s.min,
        max_ns: s.max,
        stddev_ns: s.stddev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_and_overlap_at_the_edges() {
        let w = Span {
            start: Some(100),
            end: Some(200),
        };
        assert!(w.overlaps(90, 110));
        assert!(!w.overlaps(50, 100));
        assert!(!w.overlaps(200, 210));
        assert!(w.overlaps(150, 150));
        assert_eq!(w.clip(90, 110), (100, 110));
        assert_eq!(w.clip(190, 250), (190, 200));
        assert_eq!(Span::ALL.clip(1, 2), (1, 2));
    }

    fn row(text: &str, start: i64, end: i64, domain: Option<&str>) -> NvtxRow {
        NvtxRow {
            start,
            end: Some(end),
            text: text.into(),
            global_tid: 0,
            domain: domain.map(str::to_string),
        }
    }

    #[test]
    fn the_window_spans_every_cpu_range_of_that_name_and_ignores_gpu_projections() {
        let nvtx = [
            row("measure", 100, 200, None),
            row("measure", 300, 400, Some("app")),
            row("measure", 50, 900, Some(GPU_ANNOTATION_DOMAIN)),
            row("batch 1", 120, 180, None),
            row("Batch 2", 310, 390, None),
            row("batch 3", 90, 150, None),
        ];
        let (w, span) = find_window(&nvtx, "measure");
        assert_eq!(
            (w.found, w.ranges, w.start_ns, w.end_ns),
            (true, 2, Some(100), Some(400))
        );
        let b = batch_latency(&nvtx, span, "measure", "batch").unwrap();
        // `batch 3` starts before the window.
        assert_eq!((b.count, b.min_ns, b.max_ns), (2, 60, 80));
        let (w, span) = find_window(&nvtx, "absent");
        assert!(!w.found && span == Span::ALL);
    }
}
