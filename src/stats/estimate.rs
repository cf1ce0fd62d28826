//! Estimates from repeated measurements, with 95 % intervals that include
//! the spread between runs.
//!
//! A configuration measured in R separate processes (repetitions) gives R
//! estimates of a metric (one median latency per process, say). Its value
//! is their mean, and its interval the Student t-interval over them:
//! `mean ± t(0.975, R−1) · s / √R`, where `s` is the repetitions' standard
//! deviation — for a positive quantity on the log scale,
//! `mean · exp(± t(0.975, R−1) · s / (mean · √R))`, so no bound is negative. The spread of the R estimates holds both the noise within
//! each run and the shifts between runs, so the interval covers what one
//! more build would measure, not only what one process saw. With one
//! repetition there is no such interval: see [`Basis::WithinRun`].
//!
//! A ratio of two configurations (candidate / baseline) is the ratio of
//! their means; its interval is Welch's, on the log scale by the delta
//! method: `log r ± t(0.975, ν) · √(s_c²/(R_c·m_c²) + s_b²/(R_b·m_b²))`,
//! with Welch–Satterthwaite's ν.
//!
//! No dependency: the t quantile is computed here (Lentz's continued
//! fraction for the incomplete beta function, then bisection), so an
//! interval reads the same after any upgrade.

/// What an interval accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The spread between repetitions (two or more processes).
    Repetitions,
    /// The batches of one process only: it says nothing of how far the
    /// next process lands.
    WithinRun,
    /// A ratio of two configurations measured together, in the same
    /// processes: the spread of its per-process ratios.
    Paired,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Repetitions => "repetitions",
            Basis::WithinRun => "within-run",
            Basis::Paired => "paired",
        }
    }
}

/// A value with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// How many repetitions it rests on.
    pub runs: usize,
    pub basis: Basis,
}

impl Estimate {
    /// Half the interval's width relative to the value (0.02 for ±2 %);
    /// infinite for a value of 0.
    pub fn half_width_rel(&self) -> f64 {
        let half = (self.high - self.low) / 2.0;
        if self.value == 0.0 {
            f64::INFINITY
        } else {
            (half / self.value).abs()
        }
    }

    /// Whether the interval holds `x`.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The t-interval over the repetitions' estimates; None with fewer than
/// two, or with a value that is not a finite number.
///
/// A positive quantity (every value above 0: a latency, a throughput, a
/// time) gets it on the log scale by the delta method,
/// `mean · exp(± t(0.975, R−1) · s / (m · √R))`: the same width where the
/// spread is small, and never a bound at or below 0 where it is large (a
/// throughput of 10 ± 12 reads [2.9, 34], not [−2, 22], and a log axis can
/// draw it). Any other quantity keeps `mean ± t · s / √R`.
pub fn of_repetitions(values: &[f64]) -> Option<Estimate> {
    let (mean, var) = mean_var(values)?;
    let n = values.len() as f64;
    let half = t_quantile(0.975, n - 1.0) * (var / n).sqrt();
    let (low, high) = if mean > 0.0 && values.iter().all(|v| *v > 0.0) {
        let rel = half / mean;
        (mean * (-rel).exp(), mean * rel.exp())
    } else {
        (mean - half, mean + half)
    };
    Some(Estimate {
        value: mean,
        low,
        high,
        runs: values.len(),
        basis: Basis::Repetitions,
    })
}

/// `candidate / baseline` from each side's repetition estimates, with
/// Welch's interval on the log scale; None unless both sides have two or
/// more finite values with a positive mean.
pub fn ratio_of_repetitions(baseline: &[f64], candidate: &[f64]) -> Option<Estimate> {
    let (mb, vb) = mean_var(baseline)?;
    let (mc, vc) = mean_var(candidate)?;
    if mb <= 0.0 || mc <= 0.0 {
        return None;
    }
    let (nb, nc) = (baseline.len() as f64, candidate.len() as f64);
    let a = vb / (nb * mb * mb);
    let c = vc / (nc * mc * mc);
    let se = (a + c).sqrt();
    let ratio = mc / mb;
    if se == 0.0 {
        return Some(Estimate {
            value: ratio,
            low: ratio,
            high: ratio,
            runs: baseline.len().min(candidate.len()),
            basis: Basis::Repetitions,
        });
    }
    let df = (a + c).powi(2) / (a * a / (nb - 1.0) + c * c / (nc - 1.0));
    let half = t_quantile(0.975, df) * se;
    Some(Estimate {
        value: ratio,
        low: ratio * (-half).exp(),
        high: ratio * half.exp(),
        runs: baseline.len().min(candidate.len()),
        basis: Basis::Repetitions,
    })
}

/// `candidate / baseline` of two configurations measured in the same
/// processes (a block measured together): `baseline[i]` and `candidate[i]`
/// come from process `i`. Whatever sets a process's speed acts on both and
/// cancels in their ratio, so the estimate rests on the per-process
/// log-ratios `dᵢ = ln(cᵢ / bᵢ)`: it is `exp(mean d)`, the geometric mean
/// of the per-process ratios, and its interval
/// `exp(mean d ± t(0.975, n−1) · s_d / √n)`, the t-interval over the
/// processes on the log scale. The t-interval, not a bootstrap: with 3 to
/// 10 processes a bootstrap sees at most a few dozen distinct resamples
/// and its percentile interval is too narrow, while the t-interval is exact
/// when the log-ratios are normal and close to it otherwise. None unless
/// both sides have the same two or more processes with positive, finite
/// values.
pub fn paired_ratio(baseline: &[f64], candidate: &[f64]) -> Option<Estimate> {
    if baseline.len() != candidate.len() || baseline.len() < 2 {
        return None;
    }
    let logs: Option<Vec<f64>> = baseline
        .iter()
        .zip(candidate)
        .map(|(&b, &c)| (b > 0.0 && c > 0.0).then(|| (c / b).ln()))
        .collect();
    let logs = logs?;
    let (mean, var) = mean_var(&logs)?;
    let n = logs.len() as f64;
    let half = t_quantile(0.975, n - 1.0) * (var / n).sqrt();
    Some(Estimate {
        value: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        runs: logs.len(),
        basis: Basis::Paired,
    })
}

/// How much of the spread between processes pairing removed from a
/// comparison measured together: `1 − var(d) / (var(ln b) + var(ln c))`,
/// with `d` the per-process log-ratios. Near 1 when whatever moves a
/// process's speed moves both members alike (it cancels in their ratio);
/// near 0 or below when it moves them unequally — a launch-bound eager run
/// against a CUDA graph, whose replay the host's speed does not touch —
/// so the paired interval still carries that spread. None as for
/// [`paired_ratio`], or when neither member varies between processes.
pub fn cancellation(baseline: &[f64], candidate: &[f64]) -> Option<f64> {
    if baseline.len() != candidate.len() || baseline.iter().chain(candidate).any(|v| *v <= 0.0) {
        return None;
    }
    let lb: Vec<f64> = baseline.iter().map(|v| v.ln()).collect();
    let lc: Vec<f64> = candidate.iter().map(|v| v.ln()).collect();
    let d: Vec<f64> = lb.iter().zip(&lc).map(|(b, c)| c - b).collect();
    let (_, vb) = mean_var(&lb)?;
    let (_, vc) = mean_var(&lc)?;
    let (_, vd) = mean_var(&d)?;
    (vb + vc > 0.0).then(|| 1.0 - vd / (vb + vc))
}

/// Mean and sample variance of two or more finite values.
pub(super) fn mean_var(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < 2 || !values.iter().all(|v| v.is_finite()) {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var))
}

/// The `p` quantile of Student's t distribution with `df` degrees of
/// freedom (`df` may be fractional, as Welch's is), for 0.5 ≤ p < 1. The
/// 0.975 quantile at a whole `df` up to 256 is computed once per process
/// (a comparison asks it for every configuration).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    const MEMO: usize = 256;
    static T975: [std::sync::OnceLock<f64>; MEMO] = [const { std::sync::OnceLock::new() }; MEMO];
    if p == 0.975 && df.fract() == 0.0 && df >= 1.0 && df < MEMO as f64 {
        return *T975[df as usize].get_or_init(|| t_quantile_search(p, df));
    }
    t_quantile_search(p, df)
}

fn t_quantile_search(p: f64, df: f64) -> f64 {
    if df.is_nan() || df <= 0.0 || p <= 0.5 {
        return 0.0;
    }
    // Newton's steps on the density from a close start (for the 0.975
    // quantile, the Cornish–Fisher expansion around the normal's), each
    // kept inside the bracket the steps have found (doubling while there
    // is no upper bound, bisecting where a step would leave it): two or
    // three steps, where a Welch interval asks for a quantile at a
    // fractional df per comparison.
    let norm =
        (ln_gamma(0.5 * (df + 1.0)) - ln_gamma(0.5 * df) - 0.5 * (df * std::f64::consts::PI).ln())
            .exp();
    let density = |t: f64| norm * (1.0 + t * t / df).powf(-0.5 * (df + 1.0));
    let (mut lo, mut hi) = (0.0, f64::INFINITY);
    let mut t = if p == 0.975 {
        cornish_fisher_975(df)
    } else {
        1.0
    };
    for _ in 0..400 {
        let f = t_cdf(t, df) - p;
        if f < 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        let mut next = t - f / density(t);
        if !(next > lo && next < hi) {
            next = if hi.is_finite() {
                0.5 * (lo + hi)
            } else {
                2.0 * t.max(1.0)
            };
        }
        if (next - t).abs() <= 1e-13 * next
            || (hi.is_finite() && hi - lo <= 1e-13 * hi)
            || next > 1e12
        {
            return next;
        }
        t = next;
    }
    t
}

/// t(0.975, df) to about 1 % at df ≥ 2: the Cornish–Fisher expansion in
/// 1/df around the normal quantile (Abramowitz & Stegun 26.7.5).
fn cornish_fisher_975(df: f64) -> f64 {
    let z = 1.959_963_984_540_054_f64;
    let (z2, n) = (z * z, df);
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + g1 / n + g2 / (n * n) + g3 / n.powi(3) + g4 / n.powi(4)
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(0.5 * df, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// P(F > f) for Fisher's F with (`d1`, `d2`) degrees of freedom.
pub fn f_sf(f: f64, d1: f64, d2: f64) -> f64 {
    if f <= 0.0 {
        return 1.0;
    }
    1.0 - incomplete_beta(0.5 * d1, 0.5 * d2, d1 * f / (d1 * f + d2))
}

/// The regularized incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast below the mean; use symmetry above it.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        sum += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests;
