//! The statistics of a comparison: each side's estimate, the ratio B / A
//! with a hierarchical-bootstrap interval, and a rank test's p-value.
//!
//! **The ratio's interval.** A side is k runs of a configuration, each with
//! its batches. One bootstrap draw of a side picks k of its runs with
//! replacement (the outer level: the spread between processes) and, for
//! each picked run, a value its own batches could have given (the inner
//! level): the run's value times `1 + z·se`, z standard normal and se the
//! statistic's relative standard error over the run's batches (for a
//! quantile, from the order statistics one rank-deviation either side; for
//! a mean, sd/√n; a throughput divides instead). The draw is the mean over
//! the k picks. A
//! percentile bootstrap over k = 3 runs is known to be too narrow (its
//! spread is that of a normal with the runs' *population* deviation, where
//! a t-distribution with k − 1 degrees of freedom applies), so each side's
//! deviation from its mean is scaled by `t(0.975, k−1)/z(0.975)·√(k/(k−1))`;
//! the coverage test below checks the result at 3, 5 and 10 runs.
//!
//! Where the value multiplies (every metric but a throughput), the k picks'
//! inner deviations `value·se·z` are independent normals, whose sum is one
//! normal with the picks' variances summed: a draw takes one deviate for
//! its k picks instead of k (the same distribution; the clamp that keeps
//! `1 + z·se` above 0.05 cannot bind there, since the table's deviates end
//! at ±3.7 and this path is taken only where every se is below 0.2). A
//! throughput divides by `1 + z·se` and keeps one deviate per pick. With one
//! run on a side its draws are the inner level only, and the interval is
//! labelled `within-run`: it says nothing of how far the next process lands.
//!
//! **The p-value.** Mann–Whitney's U over the two sides' run values, exact
//! (no ties assumed) up to 30 runs a side, normal beyond; only with at least
//! three runs a side (with fewer, no arrangement reaches p < 0.1).

use crate::estimate::{t_quantile, Basis, Estimate};
use crate::tasks::report::Rng;

use super::measure::Value;

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

/// The value `v`'s batches give at `z` standard errors from its centre.
fn draw(v: &Value, z: f64) -> f64 {
    let factor = (1.0 + z * v.rel_se).max(0.05);
    if v.inverse {
        v.value / factor
    } else {
        v.value * factor
    }
}

/// Entries of the standard normal's quantile table.
const TABLE: usize = 4096;

/// Φ⁻¹ at the midpoints of `TABLE + 1` equal slices of (0, 1), by Acklam's
/// rational approximation (relative error below 1.2e-9), as each entry and
/// the step to the next: a deviate is one entry, one multiply and one add.
fn normal_table() -> &'static [(f64, f64); TABLE] {
    static T: std::sync::OnceLock<[(f64, f64); TABLE]> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let at = |i: usize| inverse_normal((i as f64 + 0.5) / (TABLE as f64 + 1.0));
        std::array::from_fn(|i| (at(i), at(i + 1) - at(i)))
    })
}

fn inverse_normal(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// A standard normal deviate: the quantile table at a uniform point,
/// interpolated (one generator call and one lookup).
#[cfg(test)]
fn normal(rng: &mut Rng) -> f64 {
    normal_of(rng.next_u64() as u32)
}

/// The normal deviate at the uniform point `u / 2³²`: 12 bits pick the
/// table's slice, 20 interpolate within it.
#[cfg(test)]
fn normal_of(u: u32) -> f64 {
    normal_in(normal_table(), u)
}

/// [`normal_of`] with the table at hand (fetched once per ratio, not per
/// deviate).
#[inline(always)]
fn normal_in(table: &[(f64, f64); TABLE], u: u32) -> f64 {
    let (base, step) = table[(u >> 20) as usize];
    base + step * (f64::from(u & ((1 << 20) - 1)) * (1.0 / f64::from(1u32 << 20)))
}

/// One side of a ratio, ready to draw from: its runs' values and relative
/// standard errors side by side, and the draw's scaling folded into one
/// multiply and one add.
struct SideDraw {
    /// (value, relative standard error) per run.
    runs: Vec<(f64, f64)>,
    /// (value, variance of the value's inner deviation `(value·se)²`) per
    /// run, where one deviate serves all picks of a draw (see the module's
    /// notes); empty otherwise.
    pooled: Vec<(f64, f64)>,
    /// The metric is a throughput (the inverse of a mean over batches).
    inverse: bool,
    mean: f64,
    /// A draw is `offset + slope · (sum of the k picks)`: the mean of the
    /// picks, its deviation from the side's mean scaled by `scale`.
    offset: f64,
    slope: f64,
}

impl SideDraw {
    fn new(values: &[Value]) -> SideDraw {
        let k = values.len() as f64;
        let mean = values.iter().map(|v| v.value).sum::<f64>() / k;
        let scale = if values.len() >= 2 {
            t_quantile(0.975, k - 1.0) / Z975 * (k / (k - 1.0)).sqrt()
        } else {
            1.0
        };
        let inverse = values.iter().any(|v| v.inverse && v.rel_se != 0.0);
        // Where |z·se| < 0.95 for every deviate the table gives, the clamp
        // never binds and the picks' deviations add as normals do.
        let unclamped = values.iter().all(|v| v.rel_se.abs() < 0.2);
        let pooled = if !inverse && unclamped {
            values
                .iter()
                .map(|v| (v.value, (v.value * v.rel_se).powi(2)))
                .collect()
        } else {
            Vec::new()
        };
        SideDraw {
            runs: values.iter().map(|v| (v.value, v.rel_se)).collect(),
            pooled,
            inverse,
            mean,
            offset: mean * (1.0 - scale),
            slope: scale / k,
        }
    }

    /// Inlined into the ratio's loop, so that the generator's state stays
    /// in registers.
    #[inline(always)]
    fn draw(&self, rng: &mut Rng, table: &[(f64, f64); TABLE]) -> f64 {
        if !self.pooled.is_empty() {
            return self.draw_pooled(rng, table);
        }
        let k = self.runs.len() as u64;
        let mut sum = 0.0;
        for _ in 0..k {
            // One generator call: the run from the high 32 bits, the
            // normal deviate from the low 32.
            let u = rng.next_u64();
            let (value, rel_se) = self.runs[(((u >> 32) * k) >> 32) as usize];
            sum += if rel_se == 0.0 {
                value
            } else {
                let factor = (1.0 + normal_in(table, u as u32) * rel_se).max(0.05);
                if self.inverse {
                    value / factor
                } else {
                    value * factor
                }
            };
        }
        self.offset + self.slope * sum
    }

    /// A draw with one deviate for all its picks: the first generator call
    /// gives the deviate (low 32 bits) and the first pick (high 32), each
    /// further call two picks.
    #[inline(always)]
    fn draw_pooled(&self, rng: &mut Rng, table: &[(f64, f64); TABLE]) -> f64 {
        let k = self.pooled.len() as u64;
        let pick = |bits: u64| self.pooled[((bits * k) >> 32) as usize];
        let first = rng.next_u64();
        let (mut sum, mut var) = pick(first >> 32);
        let mut left = k - 1;
        while left > 0 {
            let u = rng.next_u64();
            let (v, w) = pick(u >> 32);
            sum += v;
            var += w;
            if left >= 2 {
                let (v, w) = pick(u & 0xFFFF_FFFF);
                sum += v;
                var += w;
            }
            left = left.saturating_sub(2);
        }
        sum += normal_in(table, first as u32) * var.sqrt();
        self.offset + self.slope * sum
    }

    fn has_noise(&self) -> bool {
        self.runs.len() >= 2 || self.runs.iter().any(|&(_, se)| se > 0.0)
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
        let table = normal_table();
        // No branch on a draw inside the loop: the next draw's generator
        // calls need not wait for this one's division.
        let mut draws = vec![0.0; RESAMPLES];
        for slot in &mut draws {
            let b = db.draw(&mut rng, table);
            *slot = b / da.draw(&mut rng, table);
        }
        draws.retain(|r| r.is_finite() && *r > 0.0);
        percentiles(&mut draws)
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

/// The 2.5th and 97.5th percentiles (nearest rank) of `draws`, by
/// selection rather than a sort.
fn percentiles(draws: &mut [f64]) -> (f64, f64) {
    if draws.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let last = draws.len() - 1;
    let (lo, hi) = (
        (last as f64 * 0.025).round() as usize,
        (last as f64 * 0.975).round() as usize,
    );
    let (_, high, _) = draws.select_nth_unstable_by(hi, f64::total_cmp);
    let high = *high;
    let (_, low, _) = draws[..hi].select_nth_unstable_by(lo, f64::total_cmp);
    (*low, high)
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
