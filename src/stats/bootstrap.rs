//! The one generator and the one bootstrap.
//!
//! The generator is written out here (SplitMix64 seeding xoshiro256**)
//! rather than taken from a crate, so an interval computed today is
//! bit-for-bit the interval computed after any dependency upgrade. It
//! draws the bootstrap's resamples, the order in which a together block
//! is measured, and every synthetic study of the tests.
//!
//! The bootstrap is a run's own: the 95 % interval of a statistic of its
//! batches (`Vit`'s `latency_ms.median_ci95`), the 2.5th and 97.5th
//! percentiles of the statistic over seeded resamples of the batches.
//! Nothing between processes is bootstrapped (see the module's notes).

use super::statistic::{quantile_sorted, Statistic};

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

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    /// A uniform draw in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller), for synthetic studies.
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// The percentile-bootstrap 95 % interval of `stat` over `samples` (one or
/// more), from `resamples` seeded resamples.
pub fn interval(samples: &[f64], stat: Statistic, resamples: usize, seed: u64) -> [f64; 2] {
    let mut rng = Rng::new(seed);
    let mut resample = vec![0.0; samples.len()];
    let mut values: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            for slot in resample.iter_mut() {
                *slot = samples[rng.below(samples.len())];
            }
            stat.of(&mut resample)
        })
        .collect();
    values.sort_by(f64::total_cmp);
    [
        quantile_sorted(&values, 0.025),
        quantile_sorted(&values, 0.975),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn normal_draws_have_the_normal_moments() {
        let mut rng = Rng::new(5);
        let draws: Vec<f64> = (0..200_000).map(|_| rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.01,
            "{mean} {var}"
        );
    }

    #[test]
    fn the_interval_is_reproducible_and_brackets_the_median() {
        let mut rng = Rng::new(1);
        let samples: Vec<f64> = (0..200)
            .map(|_| 10.0 * (0.9 + 0.2 * rng.uniform()))
            .collect();
        let stat = Statistic::Quantile(0.5);
        let first = interval(&samples, stat, 1000, 42);
        assert_eq!(first, interval(&samples, stat, 1000, 42));
        assert_ne!(first, interval(&samples, stat, 1000, 43));
        let median = stat.of(&mut samples.clone());
        assert!(first[0] < median && median < first[1], "{first:?}");
        // ±10 % uniform noise on 200 samples: the median is known to ~2 %.
        assert!(first[0] > 9.7 && first[1] < 10.3, "{first:?}");
    }
}
