//! Seeded percentile bootstrap of a ratio of two per-sample statistics.
//!
//! The generator is written out here (SplitMix64 seeding xoshiro256**) rather
//! than taken from a crate, so an interval computed today is bit-for-bit the
//! interval computed after any dependency upgrade.

/// A per-sample statistic the bootstrap can recompute on a resample.
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
    /// Which statistic of `latency_samples_ms` a metric path corresponds to.
    pub fn for_metric(metric: &str) -> Option<Statistic> {
        Some(match metric {
            "latency_ms.mean" => Statistic::Mean,
            "latency_ms.median" => Statistic::Quantile(0.5),
            "latency_ms.p90" => Statistic::Quantile(0.9),
            "latency_ms.p99" => Statistic::Quantile(0.99),
            "latency_ms.min" => Statistic::Min,
            "latency_ms.max" => Statistic::Max,
            "throughput_images_per_s" => Statistic::InverseMean,
            _ => return None,
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
pub(super) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let low = pos.floor() as usize;
    let high = pos.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (pos - low as f64)
}

/// xoshiro256** seeded through SplitMix64.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform index below `n` (Lemire's multiply-shift; its bias is far
    /// below anything a bootstrap could show).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// The 95% interval of `stat(candidate) / stat(baseline)` relative to the
/// ratio on the full samples: returns `(low, high)` factors to multiply the
/// reported ratio by. `None` when either side has no samples.
pub fn ratio_interval(
    baseline: &[f64],
    candidate: &[f64],
    stat: Statistic,
    resamples: u32,
    seed: u64,
) -> Option<(f64, f64)> {
    if baseline.is_empty() || candidate.is_empty() || resamples == 0 {
        return None;
    }
    let point = stat.of(&mut candidate.to_vec()) / stat.of(&mut baseline.to_vec());
    let mut rng = Rng::new(seed);
    let draw = |from: &[f64], into: &mut Vec<f64>, rng: &mut Rng| {
        into.clear();
        into.extend((0..from.len()).map(|_| from[rng.below(from.len())]));
    };
    let (mut b, mut c) = (Vec::new(), Vec::new());
    let mut relative: Vec<f64> = (0..resamples)
        .map(|_| {
            draw(baseline, &mut b, &mut rng);
            draw(candidate, &mut c, &mut rng);
            stat.of(&mut c) / stat.of(&mut b) / point
        })
        .filter(|r| r.is_finite())
        .collect();
    if relative.is_empty() {
        return None;
    }
    relative.sort_by(f64::total_cmp);
    Some((
        quantile_sorted(&relative, 0.025),
        quantile_sorted(&relative, 0.975),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(center: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        (0..n)
            .map(|_| center * (0.9 + 0.2 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64))
            .collect()
    }

    #[test]
    fn generator_is_fixed_by_its_seed() {
        let a: Vec<u64> = (0..3)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..3)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..3)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&sorted, 0.5), 2.5);
        assert!((quantile_sorted(&sorted, 0.9) - 3.7).abs() < 1e-12);
    }

    #[test]
    fn interval_is_reproducible_and_brackets_one() {
        let base = noisy(10.0, 200, 1);
        let cand = noisy(5.0, 200, 2);
        let stat = Statistic::Quantile(0.5);
        let first = ratio_interval(&base, &cand, stat, 1000, 42).unwrap();
        assert_eq!(first, ratio_interval(&base, &cand, stat, 1000, 42).unwrap());
        assert_ne!(first, ratio_interval(&base, &cand, stat, 1000, 43).unwrap());
        assert!(first.0 < 1.0 && 1.0 < first.1, "{first:?}");
        // ±10% uniform noise on 200 samples: the median ratio is known to a few percent.
        assert!(first.0 > 0.9 && first.1 < 1.1, "{first:?}");
    }

    #[test]
    fn no_samples_means_no_interval() {
        assert_eq!(ratio_interval(&[], &[1.0], Statistic::Mean, 100, 1), None);
    }
}
