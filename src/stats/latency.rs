//! Latency statistics of `results.json`: mean, median, percentiles, spread
//! and a seeded bootstrap 95% confidence interval of the median (the
//! crate's one bootstrap, [`super::bootstrap`]).

use serde::{Deserialize, Serialize};

use super::statistic::Statistic;

/// Per-batch latency summary, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    pub std: f64,
    pub median_ci95: [f64; 2],
}

/// Bootstrap resamples for the median's confidence interval.
const RESAMPLES: usize = 2000;

impl LatencyStats {
    /// Summarises `samples` (at least one); the bootstrap is seeded so the same
    /// samples give the same interval.
    pub fn from_samples(samples: &[f64], seed: u64) -> Option<LatencyStats> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        Some(LatencyStats {
            mean,
            median: percentile(&sorted, 50.0),
            p90: percentile(&sorted, 90.0),
            p99: percentile(&sorted, 99.0),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            std: var.sqrt(),
            median_ci95: bootstrap_median_ci(&sorted, seed),
        })
    }
}

/// Linear-interpolated percentile of sorted data (numpy's default).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    super::statistic::quantile_sorted(sorted, p / 100.0)
}

fn bootstrap_median_ci(sorted: &[f64], seed: u64) -> [f64; 2] {
    super::bootstrap::interval(
        sorted,
        Statistic::Quantile(0.5),
        RESAMPLES,
        seed ^ 0x9E37_79B9_7F4A_7C15,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_one_to_a_hundred() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = LatencyStats::from_samples(&samples, 7).expect("non-empty");
        assert_eq!(s.mean, 50.5);
        assert_eq!(s.median, 50.5);
        assert!((s.p90 - 90.1).abs() < 1e-9);
        assert!((s.p99 - 99.01).abs() < 1e-9);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        assert!((s.std - 29.011491975882016).abs() < 1e-9);
        let [lo, hi] = s.median_ci95;
        assert!(
            lo < 50.5 && 50.5 < hi && lo > 40.0 && hi < 61.0,
            "{lo} {hi}"
        );
    }

    #[test]
    fn bootstrap_is_reproducible_for_a_seed() {
        let samples: Vec<f64> = (0..50).map(|i| f64::from(i * 7 % 13)).collect();
        let a = LatencyStats::from_samples(&samples, 1).expect("non-empty");
        let b = LatencyStats::from_samples(&samples, 1).expect("non-empty");
        assert_eq!(a, b);
        assert!(LatencyStats::from_samples(&[], 1).is_none());
    }
}
