use super::*;
use crate::stats::bootstrap::Rng;
use crate::stats::statistic::Statistic;

/// A run of `n` batches around `level` with relative within-run noise: its
/// median batch and the median's standard error over the batches.
fn run(rng: &mut Rng, level: f64, within: f64, n: usize) -> Value {
    let mut samples: Vec<f64> = (0..n)
        .map(|_| level * (1.0 + within * rng.normal()).max(0.1))
        .collect();
    samples.sort_by(f64::total_cmp);
    let stat = Statistic::Quantile(0.5);
    Value {
        value: stat.of(&mut samples.clone()),
        rel_se: stat.rel_se(&samples),
        inverse: false,
    }
}

/// `k` runs of a configuration whose runs' levels spread by `between`.
fn side_of(rng: &mut Rng, mean: f64, k: usize, between: f64, within: f64) -> Vec<Value> {
    (0..k)
        .map(|_| {
            let level = mean * (1.0 + between * rng.normal());
            run(rng, level, within, 200)
        })
        .collect()
}

/// How often the ratio's interval holds the true ratio, over `trials`.
fn coverage(ka: usize, kb: usize, between: f64, within: f64, effect: f64, trials: u64) -> f64 {
    let mut rng = Rng::new(7 + (ka * 31 + kb) as u64);
    let mut held = 0;
    for _ in 0..trials {
        let a = side_of(&mut rng, 10.0, ka, between, within);
        let b = side_of(&mut rng, 10.0 * effect, kb, between, within);
        let r = ratio(&a, &b, Design::Apart).expect("a ratio");
        let (lo, hi) = r.interval.expect("an interval");
        if lo <= effect && effect <= hi {
            held += 1;
        }
    }
    held as f64 / trials as f64
}

#[test]
fn the_ratio_interval_covers_the_true_ratio() {
    // Between-run spread dominating, within-run noise alone, and both; with
    // and without an effect. 95 % nominal; at least 93 % over 400 trials.
    for (k, between, within, effect) in [
        (3, 0.03, 0.02, 1.0),
        (3, 0.03, 0.02, 1.1),
        (5, 0.05, 0.05, 1.0),
        (10, 0.02, 0.02, 0.9),
    ] {
        let c = coverage(k, k, between, within, effect, 400);
        eprintln!("coverage k={k} between={between} within={within} effect={effect}: {c:.3}");
        assert!(c >= 0.93, "k={k} between={between} effect={effect}: {c}");
    }
}

#[test]
fn one_run_a_side_is_within_run_and_covers_when_runs_do_not_shift() {
    for (ka, kb) in [(1, 1), (1, 4)] {
        let c = coverage(ka, kb, 0.0, 0.05, 1.0, 4000);
        eprintln!("within-run coverage {ka} against {kb} runs, no shift between runs: {c:.3}");
        assert!(c >= 0.93, "{ka} {kb}: {c}");
    }
    let mut rng = Rng::new(1);
    let a = side_of(&mut rng, 10.0, 1, 0.0, 0.05);
    let b = side_of(&mut rng, 10.0, 1, 0.0, 0.05);
    assert_eq!(
        ratio(&a, &b, Design::Apart).unwrap().basis,
        Basis::WithinRun
    );
    let s = side(&a).unwrap();
    assert_eq!(s.basis, Basis::WithinRun);
    assert!(s.low < s.value && s.value < s.high, "{s:?}");
}

#[test]
fn a_clear_effect_is_seen_and_the_rank_test_agrees() {
    let mut rng = Rng::new(3);
    let a = side_of(&mut rng, 10.0, 5, 0.01, 0.02);
    let b = side_of(&mut rng, 11.0, 5, 0.01, 0.02);
    let r = ratio(&a, &b, Design::Apart).unwrap();
    let (lo, hi) = r.interval.unwrap();
    assert!(
        lo > 1.05 && hi < 1.15 && (r.value - 1.1).abs() < 0.03,
        "{r:?}"
    );
    assert!(r.p.unwrap() < 0.01, "{r:?}");
    assert_eq!(r.basis, Basis::Repetitions);
}

#[test]
fn apart_with_repetitions_is_the_estimates_welch_interval() {
    let b = [10.0, 10.5, 9.8].map(Value::exact);
    let c = [12.0, 12.2, 11.5].map(Value::exact);
    let r = ratio(&b, &c, Design::Apart).unwrap();
    let e = ratio_of_repetitions(&[10.0, 10.5, 9.8], &[12.0, 12.2, 11.5]).unwrap();
    assert_eq!((r.value, r.interval), (e.value, Some((e.low, e.high))));
}

#[test]
fn together_is_the_paired_interval_with_the_paired_t_test() {
    // A process factor of ±20 % shared by both members; the ratio 1.5.
    let factors = [0.8, 1.0, 1.2, 0.9, 1.1];
    let noise = [1.004, 0.997, 1.001, 0.999, 1.002];
    let b: Vec<Value> = factors.iter().map(|f| Value::exact(10.0 * f)).collect();
    let c: Vec<Value> = factors
        .iter()
        .zip(noise)
        .map(|(f, n)| Value::exact(15.0 * f * n))
        .collect();
    let r = ratio(&b, &c, Design::Together).unwrap();
    assert_eq!(r.basis, Basis::Paired);
    let (lo, hi) = r.interval.unwrap();
    assert!(lo < 1.5 && 1.5 < hi && hi / lo < 1.01, "{r:?}");
    assert!(r.p.unwrap() < 1e-6, "{r:?}");
    // The same values apart: the process factor stays in the interval.
    let apart = ratio(&b, &c, Design::Apart).unwrap();
    let (alo, ahi) = apart.interval.unwrap();
    assert!(ahi / alo > 1.3, "{apart:?}");
    // Together needs the same processes on both sides.
    assert!(ratio(&b[..4], &c, Design::Together).is_none());
}

#[test]
fn exact_values_without_batches_have_no_interval_with_one_run_each() {
    let exact = Value::exact;
    let r = ratio(&[exact(2.0)], &[exact(3.0)], Design::Apart).unwrap();
    assert_eq!((r.value, r.interval, r.p), (1.5, None, None));
    assert!(ratio(&[], &[exact(1.0)], Design::Apart).is_none());
    assert!(ratio(&[exact(0.0)], &[exact(1.0)], Design::Apart).is_none());
    let r = ratio(
        &[exact(2.0), exact(2.2)],
        &[exact(3.0), exact(3.1)],
        Design::Apart,
    )
    .unwrap();
    assert!(r.interval.is_some());
}

#[test]
fn the_interaction_test_finds_a_pair_that_spreads_more_than_its_aa() {
    // F(9, 9): the 99th percentile is 5.35.
    assert!((crate::stats::estimate::f_sf(5.35, 9.0, 9.0) - 0.01).abs() < 5e-4);
    assert!((crate::stats::estimate::f_sf(1.0, 4.0, 4.0) - 0.5).abs() < 1e-9);
    let mut rng = crate::stats::Rng::new(3);
    let mut alike = 0;
    let mut unequal = 0;
    for _ in 0..500 {
        // Per process: a shared band (cancels), 0.5 % noise per member; in
        // the unequal pair the band acts on one member only (σ 10 %).
        let band: Vec<f64> = (0..10).map(|_| 0.1 * rng.normal()).collect();
        let noise = |rng: &mut crate::stats::Rng| 0.005 * rng.normal();
        let aa: Vec<f64> = band
            .iter()
            .map(|_| noise(&mut rng) - noise(&mut rng))
            .collect();
        let pair: Vec<f64> = band
            .iter()
            .map(|_| noise(&mut rng) - noise(&mut rng))
            .collect();
        let apart: Vec<f64> = band
            .iter()
            .map(|b| b + noise(&mut rng) - noise(&mut rng))
            .collect();
        if interaction(&pair, &aa).is_some_and(|(_, p)| p < 0.01) {
            alike += 1;
        }
        if interaction(&apart, &aa).is_some_and(|(_, p)| p < 0.01) {
            unequal += 1;
        }
    }
    // About 1 % false alarms where the band acts alike; every unequal pair found.
    eprintln!("interaction: {alike} of 500 alike flagged, {unequal} of 500 unequal");
    assert!(alike <= 15, "{alike} of 500 alike pairs flagged");
    assert_eq!(unequal, 500);
    assert!(interaction(&[0.1, 0.2], &[0.0, 0.1, 0.2]).is_none());
    assert!(interaction(&[0.1, 0.2, 0.3], &[0.0, 0.0, 0.0]).is_none());
}
