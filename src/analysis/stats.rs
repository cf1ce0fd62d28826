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

/// The statistics of `values` (sorted in place).
pub fn stats(values: &mut [i64]) -> Stats {
    let n = values.len();
    if n == 0 {
        return Stats::default();
    }
    values.sort_unstable();
    let total: i64 = values.iter().sum();
    let avg = total as f64 / n as f64;
    let med = median_sorted(values);
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
        min: values[0],
        max: values[n - 1],
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
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 99.0), 99);
        assert_eq!(percentile_sorted(&v, 100.0), 100);
        assert_eq!(percentile_sorted(&[5], 99.0), 5);
        assert_eq!(percentile_sorted(&[1, 2], 50.0), 1);
    }
}
