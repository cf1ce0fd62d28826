//! A plot's axes: tick positions, an axis with exactly those ticks, and
//! the axis titles.

use plotters::coord::ranged1d::Ranged;

/// A linear axis whose ticks are given (plotters picks its own otherwise).
pub(super) struct Ticked {
    pub(super) range: std::ops::Range<f64>,
    pub(super) ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let f = if span > 0.0 {
            (value - self.range.start) / span
        } else {
            0.5
        };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// Tick positions of one axis over `r` (in plotted units: `log10` of the
/// values on a log axis). A log axis ticks at decades (and at 2 and 5 of
/// each when it spans less than two); an axis of integers at integers; any
/// other at 1, 2 or 5 times a power of ten, about six of them.
pub(super) fn ticks(r: &std::ops::Range<f64>, log: bool, integers: bool) -> Vec<f64> {
    let t = round_ticks(r, log, integers);
    with_floor_tick(t, r, log, integers)
}

/// `ticks` plus one near the data's minimum (the range less its 5 %
/// padding, rounded up to two significant digits) when the lowest round
/// tick sits far above it — more than half a step, or a factor of 2 on a
/// log axis — so a line along the bottom of a plot has a number beside it.
fn with_floor_tick(
    mut t: Vec<f64>,
    r: &std::ops::Range<f64>,
    log: bool,
    integers: bool,
) -> Vec<f64> {
    let (lo, hi) = (r.start, r.end);
    let (Some(&first), true) = (t.first(), t.len() >= 2 && hi > lo) else {
        return t;
    };
    let step = t[1] - t[0];
    let min = lo + (hi - lo) / 22.0;
    let (far, near) = if log {
        (2f64.log10(), 1.5f64.log10())
    } else {
        (0.5 * step, 0.3 * step)
    };
    if first - min <= far {
        return t;
    }
    let value = if log { 10f64.powf(min) } else { min };
    if value <= 0.0 && log {
        return t;
    }
    let digits = 10f64.powf(value.abs().log10().floor() - 1.0);
    let mut rounded = (value / digits).ceil() * digits;
    if integers {
        rounded = rounded.ceil();
    }
    let at = if log { rounded.log10() } else { rounded };
    if at < first - near && at >= lo {
        t.insert(0, at);
    }
    t
}

fn round_ticks(r: &std::ops::Range<f64>, log: bool, integers: bool) -> Vec<f64> {
    let (lo, hi) = (r.start, r.end);
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    if log {
        let decades: Vec<f64> = ((lo.ceil() as i64)..=(hi.floor() as i64))
            .map(|k| k as f64)
            .collect();
        if decades.len() >= 3 {
            return decades;
        }
        let mut t = Vec::new();
        for k in (lo.floor() as i64)..=(hi.ceil() as i64) {
            for m in [1.0f64, 2.0, 5.0] {
                let v = k as f64 + m.log10();
                if v >= lo && v <= hi {
                    t.push(v);
                }
            }
        }
        return t;
    }
    let raw = (hi - lo) / 6.0;
    let p = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p);
    if integers {
        step = step.max(1.0).round();
    }
    let mut t = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 && t.len() < 50 {
        t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    t
}

pub(super) fn axis_title(column: &str, log: bool) -> String {
    let label = super::labels::axis_label(column);
    if log {
        format!("{label}, log scale")
    } else {
        label
    }
}

/// A sweep of this many x values or fewer is ticked at its values.
pub(super) const SPARSE: usize = 8;

/// The distinct values of a sparse axis (at most [`SPARSE`], at least 2),
/// ascending; None for a denser one.
pub(super) fn sparse_ticks(values: impl Iterator<Item = f64>) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| (*a - *b).abs() <= 1e-12 * b.abs().max(1.0));
    (2..=SPARSE).contains(&v.len()).then_some(v)
}

/// Ticks at powers of two for a log axis (log10 values) whose points are
/// all powers of two — a batch or resolution sweep — at most ten of them
/// (every other one, or every fourth, when there are more); None otherwise.
pub(super) fn powers_of_two(
    values: impl Iterator<Item = f64>,
    r: &std::ops::Range<f64>,
) -> Option<Vec<f64>> {
    let mut any = false;
    for v in values {
        let x = 10f64.powf(v);
        let k = x.log2().round();
        if !v.is_finite() || (x / 2f64.powf(k) - 1.0).abs() > 1e-9 {
            return None;
        }
        any = true;
    }
    if !any {
        return None;
    }
    let (lo, hi) = (r.start / 2f64.log10(), r.end / 2f64.log10());
    let all: Vec<f64> = ((lo - 1e-9).ceil() as i64..=(hi + 1e-9).floor() as i64)
        .map(|k| k as f64 * 2f64.log10())
        .collect();
    let step = all.len().div_ceil(10).max(1);
    Some(all.into_iter().step_by(step).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_axis_of_powers_of_two_ticks_at_powers_of_two() {
        let batches = [1f64, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0].map(f64::log10);
        let r = 0.0..256f64.log10();
        let t = powers_of_two(batches.into_iter(), &r).unwrap();
        let labels: Vec<String> = t
            .iter()
            .map(|v| super::super::labels::tick(*v, true))
            .collect();
        assert_eq!(labels, ["1", "2", "4", "8", "16", "32", "64", "128", "256"]);
        // 1 to 2^20: every other power at most ten ticks.
        let wide = 0.0..(2f64.powi(20)).log10();
        let t = powers_of_two([0.0, wide.end].into_iter(), &wide).unwrap();
        assert!(t.len() <= 11, "{t:?}");
        // Not all powers of two: no such ticks.
        assert!(powers_of_two([1f64, 3.0, 8.0].map(f64::log10).into_iter(), &r).is_none());
    }

    #[test]
    fn a_sparse_sweep_is_ticked_at_its_values() {
        // batch 1, 8, 32 on a log axis: log10 of each.
        let batches = [1f64, 8.0, 32.0, 8.0].map(f64::log10);
        let t = sparse_ticks(batches.into_iter()).expect("sparse");
        assert_eq!(t.len(), 3);
        let labels: Vec<String> = t
            .iter()
            .map(|v| super::super::labels::tick(*v, true))
            .collect();
        assert_eq!(labels, ["1", "8", "32"]);
        assert_eq!(sparse_ticks((0..20).map(f64::from)), None, "a dense axis");
        assert_eq!(sparse_ticks([5.0].into_iter()), None, "one value");
    }
}
