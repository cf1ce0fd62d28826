//! What a ratio's interval says, in one word: `faster`, `slower`, `same`
//! or `inconclusive`.
//!
//! With `m` the equivalence margin (`--threshold`, 2 % unless set):
//! - **faster** / **slower**: the 95 % interval excludes 1 and the ratio
//!   is at least `m` from it — a change shown, in the metric's better or
//!   worse direction;
//! - **same**: the interval lies within `[1/(1+m), 1+m]` (no change larger
//!   than the margin is compatible with the data), or it excludes 1 but
//!   the change itself is smaller than the margin;
//! - **inconclusive**: the interval holds 1 and reaches beyond the margin —
//!   the data neither show a change nor rule one out. A ratio of
//!   0.118 [0.004, 8.1] is inconclusive, never `same`.

/// The verdict on a ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// The default equivalence margin: a change within ±2 % is `same`.
pub const MARGIN: f64 = 0.02;

/// Whether a larger value of the metric at `path` is better: throughputs,
/// rates, FLOP/s and bandwidths are; times and everything else are not.
pub fn higher_is_better(path: &str) -> bool {
    const HIGHER: [&str; 6] = [
        "throughput",
        "per_s",
        "tflops",
        "gbps",
        "bandwidth",
        "fraction_of",
    ];
    HIGHER.iter().any(|h| path.contains(h))
}

/// The verdict on `ratio` with 95 % interval `(low, high)` and margin
/// `margin` (a fraction), for a metric that is better `higher` (a
/// throughput) or lower (a latency).
pub fn judge(ratio: f64, (low, high): (f64, f64), margin: f64, higher: bool) -> Verdict {
    let holds_one = low <= 1.0 && 1.0 <= high;
    let inside = low >= 1.0 / (1.0 + margin) && high <= 1.0 + margin;
    let change = ratio - 1.0;
    if inside || (!holds_one && change.abs() < margin) {
        Verdict::Same
    } else if holds_one {
        Verdict::Inconclusive
    } else if (change > 0.0) == higher {
        Verdict::Faster
    } else {
        Verdict::Slower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_verdict_where_its_interval_lies() {
        let lower = |r, i| judge(r, i, MARGIN, false);
        assert_eq!(lower(0.9, (0.85, 0.95)), Verdict::Faster);
        assert_eq!(lower(1.1, (1.05, 1.15)), Verdict::Slower);
        assert_eq!(judge(1.1, (1.05, 1.15), MARGIN, true), Verdict::Faster);
        assert_eq!(lower(1.001, (0.99, 1.012)), Verdict::Same);
        assert_eq!(lower(1.01, (1.005, 1.03)), Verdict::Same);
        assert_eq!(lower(0.118, (0.004, 8.1)), Verdict::Inconclusive);
        assert_eq!(lower(1.0, (0.97, 1.03)), Verdict::Inconclusive);
        // A margin of 5 %: the same interval is now within it.
        assert_eq!(judge(1.0, (0.97, 1.03), 0.05, false), Verdict::Same);
    }
}
