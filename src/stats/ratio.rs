//! The ratio of two configurations, candidate / baseline, by the design
//! that measured them — the one function behind a report's `compare.csv`
//! and `vitgraph compare`, so the same pair gets the same interval from
//! both.
//!
//! | design | estimate | 95 % interval |
//! |---|---|---|
//! | measured together (the same processes) | `exp(mean dᵢ)`, dᵢ the per-process log-ratios | t over the processes ([`paired_ratio`]) |
//! | apart, two or more processes a side | ratio of the means | Welch on the log scale ([`ratio_of_repetitions`]) |
//! | apart, one process on a side | ratio of the means | within-run: the log scale, each one-run side's variance its batches' (`rel_se²`), a repeated side's its repetitions'; Welch–Satterthwaite degrees of freedom |
//!
//! The within-run interval says nothing of how far the next process lands;
//! it is labelled so wherever it is shown. A p-value comes with it where a
//! test fits the design: Mann–Whitney's U over the processes (three or
//! more a side) apart, the paired t-test of the log-ratios together.

use super::estimate::{
    mean_var, paired_ratio, ratio_of_repetitions, t_cdf, t_quantile, Basis, Estimate,
};
use super::rank;

/// The standard normal's 0.975 quantile.
const Z975: f64 = 1.959_963_984_540_054;

/// One run's value of a metric, and how far its own batches say it could
/// be off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub value: f64,
    /// The statistic's standard error over the run's batches, relative to
    /// the value; 0 when the run kept no batches.
    pub rel_se: f64,
    /// A throughput: the inverse of a mean over the batches.
    pub inverse: bool,
}

impl Value {
    /// A value with nothing known of its run's batches.
    pub fn exact(value: f64) -> Value {
        Value {
            value,
            rel_se: 0.0,
            inverse: false,
        }
    }
}

/// How the two sides of a ratio were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// Each side in processes of its own.
    Apart,
    /// Both in the same processes, `baseline[i]` and `candidate[i]` from
    /// process `i`.
    Together,
}

/// A ratio with its 95 % interval (None where nothing varies: one run a
/// side without batches) and a p-value where the design has a test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    pub basis: Basis,
    pub p: Option<f64>,
}

/// One side's value: the t-interval over its runs (two or more), or the
/// run's own interval from its batches, on the log scale.
pub fn side(values: &[Value]) -> Option<Estimate> {
    match values {
        [] => None,
        [one] => {
            let half = Z975 * one.rel_se;
            let (low, high) = if one.value > 0.0 {
                (one.value * (-half).exp(), one.value * half.exp())
            } else {
                (one.value * (1.0 - half), one.value * (1.0 + half))
            };
            Some(Estimate {
                value: one.value,
                low: low.min(high),
                high: low.max(high),
                runs: 1,
                basis: Basis::WithinRun,
            })
        }
        many => {
            let v: Vec<f64> = many.iter().map(|v| v.value).collect();
            super::estimate::of_repetitions(&v)
        }
    }
}

/// `candidate / baseline` for one metric; None when a side is empty, its
/// mean is not positive, or (together) the sides are not the same two or
/// more processes.
pub fn ratio(baseline: &[Value], candidate: &[Value], design: Design) -> Option<Ratio> {
    if baseline.is_empty() || candidate.is_empty() {
        return None;
    }
    let raw = |side: &[Value]| side.iter().map(|v| v.value).collect::<Vec<f64>>();
    let (b, c) = (raw(baseline), raw(candidate));
    if design == Design::Together {
        let e = paired_ratio(&b, &c)?;
        return Some(Ratio {
            value: e.value,
            interval: Some((e.low, e.high)),
            basis: Basis::Paired,
            p: paired_p(&b, &c),
        });
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mb, mc) = (mean(&b), mean(&c));
    if !(mb > 0.0 && mc > 0.0 && mb.is_finite() && mc.is_finite()) {
        return None;
    }
    let value = mc / mb;
    if b.len() >= 2 && c.len() >= 2 {
        let e = ratio_of_repetitions(&b, &c)?;
        return Some(Ratio {
            value: e.value,
            interval: Some((e.low, e.high)),
            basis: Basis::Repetitions,
            p: (b.len() >= 3 && c.len() >= 3).then(|| rank::two_sided(&b, &c)),
        });
    }
    Some(Ratio {
        value,
        interval: within_run(baseline, candidate)
            .map(|half| (value * (-half).exp(), value * half.exp())),
        basis: Basis::WithinRun,
        p: None,
    })
}

/// The log-scale half-width of a ratio with a side of one run: each side's
/// variance of its log mean (a one-run side's `rel_se²`, degrees of freedom
/// unbounded; a repeated side's `s²/(k·m²)`, k − 1), Welch–Satterthwaite's
/// degrees of freedom for their sum. None where the sum is 0.
fn within_run(baseline: &[Value], candidate: &[Value]) -> Option<f64> {
    let term = |side: &[Value]| -> (f64, f64) {
        if let [one] = side {
            return (one.rel_se * one.rel_se, f64::INFINITY);
        }
        let values: Vec<f64> = side.iter().map(|v| v.value).collect();
        let (m, var) = mean_var(&values).unwrap_or((f64::NAN, f64::NAN));
        let k = side.len() as f64;
        (var / (k * m * m), k - 1.0)
    };
    let (vb, db) = term(baseline);
    let (vc, dc) = term(candidate);
    let var = vb + vc;
    if !(var > 0.0 && var.is_finite()) {
        return None;
    }
    let denominator = vb * vb / db + vc * vc / dc;
    let quantile = if denominator > 0.0 {
        t_quantile(0.975, var * var / denominator)
    } else {
        Z975
    };
    Some(quantile * var.sqrt())
}

/// An A/A pair — one configuration measured twice in one process, whose
/// ratio's truth is 1: `twin / first` and the largest `|ln ratio|` their
/// batches allow, `k` standard errors of the log-ratio (each side's
/// `rel_se`, summed in square). None where the batches give no noise or a
/// value is not above 0.
pub fn aa_limit(first: Value, twin: Value, k: f64) -> Option<(f64, f64)> {
    let se = (first.rel_se * first.rel_se + twin.rel_se * twin.rel_se).sqrt();
    (se > 0.0 && first.value > 0.0 && twin.value > 0.0).then(|| (twin.value / first.value, k * se))
}

/// The paired t-test's two-sided p-value of the per-process log-ratios
/// (None with fewer than two, or a value not above 0).
fn paired_p(baseline: &[f64], candidate: &[f64]) -> Option<f64> {
    let d: Vec<f64> = baseline
        .iter()
        .zip(candidate)
        .map(|(&b, &c)| (b > 0.0 && c > 0.0).then(|| (c / b).ln()))
        .collect::<Option<_>>()?;
    let n = d.len() as f64;
    if d.len() < 2 {
        return None;
    }
    let mean = d.iter().sum::<f64>() / n;
    let se = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
    Some(if se == 0.0 {
        if mean == 0.0 {
            1.0
        } else {
            0.0
        }
    } else {
        2.0 * (1.0 - t_cdf((mean / se).abs(), n - 1.0))
    })
}

/// Whether a paired comparison's per-process log-ratios (`pair`) spread
/// more than an A/A check's over the same processes (`aa`: a second
/// instance of a member against the first): the variance ratio and the
/// one-sided F test's p. Where the process's speed acts on both members
/// alike the two spread alike; where it moves one more (a launch-bound
/// eager run against a CUDA graph, CPU-bound preprocessing against
/// kernel launches) the pair's spread is the larger. None with fewer than
/// 3 processes a side or an A/A without spread.
pub fn interaction(pair: &[f64], aa: &[f64]) -> Option<(f64, f64)> {
    if pair.len() < 3 || aa.len() < 3 {
        return None;
    }
    let (_, var_pair) = super::estimate::mean_var(pair)?;
    let (_, var_aa) = super::estimate::mean_var(aa)?;
    if var_aa.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let f = var_pair / var_aa;
    let p = super::estimate::f_sf(f, (pair.len() - 1) as f64, (aa.len() - 1) as f64);
    Some((f, p))
}

#[cfg(test)]
mod tests;
