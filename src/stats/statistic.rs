//! What a metric is of a run's batches, and how far the batches say it
//! could be off.

/// A statistic of a run's batches: what a headline metric is of the
/// per-batch latencies (`latency_ms.median` is their median).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    /// Linear-interpolated quantile (0.5 = median), as numpy's default.
    Quantile(f64),
    Min,
    Max,
    /// `1 / mean`: throughput from per-batch latencies (images per batch
    /// cancel in a ratio).
    InverseMean,
}

impl Statistic {
    /// Which statistic of a run's batches the metric at `path` is:
    /// `throughput_images_per_s` is the inverse of their mean, and a path
    /// ending in `.mean`, `.median`, `.pNN`, `.min` or `.max` that
    /// statistic (`latency_ms.median` of `latency_samples_ms`, a measuring
    /// `Command`'s `time_ms.p90` of `samples.time_ms`).
    pub fn for_metric(metric: &str) -> Option<Statistic> {
        if metric == "throughput_images_per_s" {
            return Some(Statistic::InverseMean);
        }
        let (_, last) = metric.rsplit_once('.')?;
        Some(match last {
            "mean" => Statistic::Mean,
            "median" => Statistic::Quantile(0.5),
            "min" => Statistic::Min,
            "max" => Statistic::Max,
            p => {
                let q: f64 = p.strip_prefix('p')?.parse().ok()?;
                if !(q > 0.0 && q < 100.0) {
                    return None;
                }
                Statistic::Quantile(q / 100.0)
            }
        })
    }

    pub fn of(self, samples: &mut [f64]) -> f64 {
        let mean = || samples.iter().sum::<f64>() / samples.len() as f64;
        match self {
            Statistic::Mean => mean(),
            Statistic::InverseMean => 1.0 / mean(),
            Statistic::Min => samples.iter().copied().fold(f64::INFINITY, f64::min),
            Statistic::Max => samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Statistic::Quantile(q) => {
                samples.sort_by(f64::total_cmp);
                quantile_sorted(samples, q)
            }
        }
    }
}

/// Linear interpolation between the closest ranks; `sorted` is not empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let low = pos.floor() as usize;
    let high = pos.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (pos - low as f64)
}

impl Statistic {
    /// The statistic's standard error over `sorted` batches (two or more),
    /// relative to its value: for a quantile q of n batches, half the spread
    /// between the batches √(n·q·(1−q)) ranks (at least one) either side of
    /// its rank — the order-statistic interval of one standard deviation;
    /// for a mean (or its inverse, a throughput), sd/√n over the mean. 0
    /// where the statistic is 0.
    pub fn rel_se(self, sorted: &[f64]) -> f64 {
        let n = sorted.len() as f64;
        let at = |rank: f64| {
            let r = rank.clamp(0.0, n - 1.0);
            let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
        };
        let quantile = |q: f64| {
            let spread = (n * q * (1.0 - q)).sqrt().max(1.0);
            let center = q * (n - 1.0);
            let base = at(center);
            if base == 0.0 {
                0.0
            } else {
                ((at(center + spread) - at(center - spread)) / 2.0 / base).abs()
            }
        };
        let mean_se = || {
            let mean = sorted.iter().sum::<f64>() / n;
            let var = sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            if mean == 0.0 {
                0.0
            } else {
                (var / n).sqrt() / mean.abs()
            }
        };
        match self {
            Statistic::Mean | Statistic::InverseMean => mean_se(),
            Statistic::Quantile(q) => quantile(q),
            Statistic::Min => quantile(0.0),
            Statistic::Max => quantile(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&sorted, 0.5), 2.5);
        assert!((quantile_sorted(&sorted, 0.9) - 3.7).abs() < 1e-12);
    }

    #[test]
    fn the_median_of_evenly_spread_batches_has_its_rank_spread() {
        // 101 batches, evenly 10.00 … 11.00: the median's rank spread is
        // √(101·¼) ≈ 5.02 ranks, 0.0502 either side of 10.5.
        let sorted: Vec<f64> = (0..101).map(|i| 10.0 + f64::from(i) / 100.0).collect();
        let se = Statistic::Quantile(0.5).rel_se(&sorted);
        assert!((se - 0.0502 / 10.5).abs() < 1e-4, "{se}");
        let mean = Statistic::Mean.rel_se(&sorted);
        assert!((mean - 0.2930 / 10.0 / 10.5).abs() < 1e-4, "{mean}");
        assert_eq!(Statistic::Quantile(0.5).rel_se(&[0.0, 0.0, 0.0]), 0.0);
    }
}
