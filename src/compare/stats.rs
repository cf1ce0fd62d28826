//! The statistics of a comparison: each side's estimate, the ratio B / A
//! with a hierarchical-bootstrap interval, and a rank test's p-value.
//!
//! **The ratio's interval.** A side is k runs of a configuration, each with
//! its batches. One bootstrap draw of a side picks k of its runs with
//! replacement (the outer level: the spread between processes) and, for
//! each picked run, a value its own batches could have given (the inner
//! level): for a quantile of n batches, the sorted batches at rank
//! `q·(n−1) + z·√(n·q·(1−q))`, the order-statistic distribution a resample
//! of the batches has, in its normal form; for a mean (or throughput, its
//! inverse), `mean·(1 + z·se)`. The draw is the mean over the k picks. A
//! percentile bootstrap over k = 3 runs is known to be too narrow (its
//! spread is that of a normal with the runs' *population* deviation, where
//! a t-distribution with k − 1 degrees of freedom applies), so each side's
//! deviation from its mean is scaled by `t(0.975, k−1)/z(0.975)·√(k/(k−1))`;
//! the coverage test below checks the result at 3, 5 and 10 runs. With one
//! run on a side its draws are the inner level only, and the interval is
//! labelled `within-run`: it says nothing of how far the next process lands.
//!
//! **The p-value.** Mann–Whitney's U over the two sides' run values, exact
//! (no ties assumed) up to 30 runs a side, normal beyond; only with at least
//! three runs a side (with fewer, no arrangement reaches p < 0.1).

use crate::estimate::{t_quantile, Basis, Estimate};
use crate::tasks::report::Rng;

use super::measure::{Inner, Value};

/// Bootstrap draws per ratio.
pub(crate) const RESAMPLES: usize = 2000;

const Z975: f64 = 1.959_963_984_540_054;

/// A ratio B / A with its 95 % interval (None when neither side has any
/// noise to resample: one run each without batches) and a rank test's
/// p-value where both sides have three runs or more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ratio {
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    pub basis: Basis,
    pub p: Option<f64>,
}

/// One side's value: the mean over its runs, with the t-interval over them
/// (two or more runs) or the run's own interval from its batches.
pub(crate) fn side(values: &[Value]) -> Option<Estimate> {
    match values {
        [] => None,
        [one] => {
            let (low, high) = within_interval(one);
            Some(Estimate {
                value: one.value,
                low,
                high,
                runs: 1,
                basis: Basis::WithinRun,
            })
        }
        many => {
            let v: Vec<f64> = many.iter().map(|v| v.value).collect();
            crate::estimate::of_repetitions(&v)
        }
    }
}

fn within_interval(v: &Value) -> (f64, f64) {
    let (a, b) = (draw(v, -Z975), draw(v, Z975));
    (a.min(b), a.max(b))
}

/// The value `v`'s batches give at `z` standard deviations from its centre.
fn draw(v: &Value, z: f64) -> f64 {
    match &v.inner {
        Inner::Exact => v.value,
        Inner::Mean { rel_se, inverse } => {
            let factor = (1.0 + z * rel_se).max(0.05);
            if *inverse {
                v.value / factor
            } else {
                v.value * factor
            }
        }
        Inner::Quantile {
            q,
            n,
            first,
            window,
            base,
        } => {
            let n = *n as f64;
            let rank = q * (n - 1.0) + z * (n * q * (1.0 - q)).sqrt();
            let local = (rank - *first as f64).clamp(0.0, (window.len() - 1) as f64);
            let (lo, hi) = (local.floor() as usize, local.ceil() as usize);
            let x = window[lo] + (window[hi] - window[lo]) * (local - lo as f64);
            if *base == 0.0 {
                v.value
            } else {
                v.value * x / base
            }
        }
    }
}

/// A standard normal deviate (Box–Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u1 = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

struct SideDraw<'a> {
    values: &'a [Value],
    mean: f64,
    scale: f64,
}

impl<'a> SideDraw<'a> {
    fn new(values: &'a [Value]) -> SideDraw<'a> {
        let k = values.len() as f64;
        let mean = values.iter().map(|v| v.value).sum::<f64>() / k;
        let scale = if values.len() >= 2 {
            t_quantile(0.975, k - 1.0) / Z975 * (k / (k - 1.0)).sqrt()
        } else {
            1.0
        };
        SideDraw {
            values,
            mean,
            scale,
        }
    }

    fn draw(&self, rng: &mut Rng) -> f64 {
        let k = self.values.len();
        let sum: f64 = (0..k)
            .map(|_| draw(&self.values[rng.below(k)], normal(rng)))
            .sum();
        self.mean + self.scale * (sum / k as f64 - self.mean)
    }

    fn has_noise(&self) -> bool {
        self.values.len() >= 2 || self.values.iter().any(|v| v.inner != Inner::Exact)
    }
}

/// B / A for one metric of one pair; None when a side is empty or its mean
/// is not positive.
pub(crate) fn ratio(a: &[Value], b: &[Value], seed: u64) -> Option<Ratio> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (da, db) = (SideDraw::new(a), SideDraw::new(b));
    if da.mean <= 0.0 || db.mean <= 0.0 {
        return None;
    }
    let value = db.mean / da.mean;
    let basis = if a.len() >= 2 && b.len() >= 2 {
        Basis::Repetitions
    } else {
        Basis::WithinRun
    };
    let interval = (da.has_noise() || db.has_noise()).then(|| {
        let mut rng = Rng::new(seed);
        let mut draws: Vec<f64> = (0..RESAMPLES)
            .map(|_| db.draw(&mut rng) / da.draw(&mut rng))
            .filter(|r| r.is_finite() && *r > 0.0)
            .collect();
        draws.sort_by(f64::total_cmp);
        let at = |q: f64| draws[((draws.len() - 1) as f64 * q).round() as usize];
        if draws.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (at(0.025), at(0.975))
        }
    });
    let p = (a.len() >= 3 && b.len() >= 3).then(|| {
        let va: Vec<f64> = a.iter().map(|v| v.value).collect();
        let vb: Vec<f64> = b.iter().map(|v| v.value).collect();
        mann_whitney_two_sided(&va, &vb)
    });
    Some(Ratio {
        value,
        interval: interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()),
        basis,
        p,
    })
}

/// Two-sided p-value of Mann–Whitney's U for `a` against `b`.
pub(crate) fn mann_whitney_two_sided(a: &[f64], b: &[f64]) -> f64 {
    let (m, n) = (a.len(), b.len());
    // U: pairs where b's value is larger (ties count half), doubled to stay whole.
    let u2: usize = a
        .iter()
        .map(|x| {
            b.iter()
                .map(|y| match y.total_cmp(x) {
                    std::cmp::Ordering::Greater => 2,
                    std::cmp::Ordering::Equal => 1,
                    std::cmp::Ordering::Less => 0,
                })
                .sum::<usize>()
        })
        .sum();
    let u = u2 as f64 / 2.0;
    let p = if m <= 30 && n <= 30 {
        let dist = u_distribution(m, n);
        let (low, high) = (u.floor() as usize, u.ceil() as usize);
        let below: f64 = dist[..=low].iter().sum();
        let above: f64 = dist[high..].iter().sum();
        2.0 * below.min(above)
    } else {
        let (mf, nf) = (m as f64, n as f64);
        let mean = mf * nf / 2.0;
        let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
        let z = ((u - mean).abs() - 0.5).max(0.0) / sd;
        2.0 * (1.0 - crate::estimate::t_cdf(z, 1e6))
    };
    p.min(1.0)
}

/// P(U = u) for u = 0..=m·n under the null, no ties: the number of
/// arrangements of m and n values with U = u, over C(m+n, m).
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // counts[i][j][u]: arrangements of i values of a and j of b.
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]);
        for j in 1..=n {
            let mut counts = vec![0.0; i * j + 1];
            // The largest value is a's: it adds nothing to U.
            for (u, c) in prev[j].iter().enumerate() {
                counts[u] += c;
            }
            // The largest value is b's: it is above all i of a's.
            for (u, c) in cur[j - 1].iter().enumerate() {
                counts[u + i] += c;
            }
            cur.push(counts);
        }
        prev = cur;
    }
    let total: f64 = prev[n].iter().sum();
    prev[n].iter().map(|c| c / total).collect()
}

#[cfg(test)]
mod tests;
