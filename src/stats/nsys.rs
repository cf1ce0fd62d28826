//! Summary statistics exactly as `nsys stats` computes them for its
//! `cuda_gpu_kern_sum`, `cuda_gpu_mem_time_sum` and `cuda_gpu_mem_size_sum`
//! reports: mean, median (the mean of the middle two for an even count),
//! min, max and the *sample* standard deviation (0 for a single instance).

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stats {
    pub total: i64,
    pub count: u64,
    pub avg: f64,
    pub med: f64,
    pub min: i64,
    pub max: i64,
    pub stddev: f64,
}

/// The statistics of `values` (reordered in place).
pub fn stats(values: &mut [i64]) -> Stats {
    let n = values.len();
    if n == 0 {
        return Stats::default();
    }
    let total: i64 = values.iter().sum();
    let avg = total as f64 / n as f64;
    let min = values.iter().copied().min().unwrap_or(0);
    let max = values.iter().copied().max().unwrap_or(0);
    let med = median(values);
    let stddev = if n > 1 {
        let ss: f64 = values.iter().map(|&v| (v as f64 - avg).powi(2)).sum();
        (ss / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Stats {
        total,
        count: n as u64,
        avg,
        med,
        min,
        max,
        stddev,
    }
}

/// The median of sorted values: the middle one, or the mean of the middle two.
pub fn median_sorted(sorted: &[i64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2] as f64,
        _ => (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0,
    }
}

/// The median of unsorted values (reordered in place), in linear time.
pub fn median(values: &mut [i64]) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let (lower, mid, _) = values.select_nth_unstable(n / 2);
    let mid = *mid as f64;
    if n % 2 == 1 {
        mid
    } else {
        // The other middle value is the largest of the lower half.
        let below = lower.iter().copied().max().unwrap_or(0) as f64;
        (below + mid) / 2.0
    }
}

/// The nearest-rank percentile of unsorted values (reordered in place).
pub fn percentile(values: &mut [i64], p: f64) -> i64 {
    if values.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    let k = rank.clamp(1, values.len()) - 1;
    *values.select_nth_unstable(k).1
}

/// The nearest-rank percentile `p` (0–100] of sorted values: the smallest
/// value with at least `p`% of the values at or below it.
pub fn percentile_sorted(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_instance_has_zero_stddev() {
        let s = stats(&mut [7]);
        assert_eq!((s.total, s.count, s.min, s.max), (7, 1, 7, 7));
        assert_eq!((s.avg, s.med, s.stddev), (7.0, 7.0, 0.0));
    }

    #[test]
    fn even_count_median_is_mean_of_middle_two_and_stddev_is_sample() {
        let s = stats(&mut [4, 1, 3, 2]);
        assert_eq!(s.med, 2.5);
        assert_eq!(s.avg, 2.5);
        // Sample variance of 1..4 is 5/3.
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn linear_time_median_and_percentile_agree_with_sorting() {
        let mut v: Vec<i64> = (0..1001).map(|i| (i * 7919) % 1009).collect();
        let mut sorted = v.clone();
        sorted.sort_unstable();
        for n in [1, 2, 3, 10, 1000, 1001] {
            let mut part = v[..n].to_vec();
            let mut s = part.clone();
            s.sort_unstable();
            assert_eq!(median(&mut part), median_sorted(&s), "n={n}");
            for p in [50.0, 90.0, 99.0, 100.0] {
                assert_eq!(
                    percentile(&mut part, p),
                    percentile_sorted(&s, p),
                    "n={n} p={p}"
                );
            }
        }
        assert_eq!(median(&mut v), median_sorted(&sorted));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 99.0), 99);
        assert_eq!(percentile_sorted(&v, 100.0), 100);
        assert_eq!(percentile_sorted(&[5], 99.0), 5);
        assert_eq!(percentile_sorted(&[1, 2], 50.0), 1);
    }
}
