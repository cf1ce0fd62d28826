use serde_json::json;

use super::*;
use crate::compare::measure::{tests::doc, values_of, Metric};

/// A run of `n` batches around `level` with relative within-run noise, as a
/// `results.json` would give it: its median latency and the batches.
fn run(rng: &mut Rng, level: f64, within: f64, n: usize) -> Value {
    let mut samples: Vec<f64> = (0..n)
        .map(|_| level * (1.0 + within * normal(rng)).max(0.1))
        .collect();
    let d = json!({"latency_samples_ms": samples.clone(), "latency_ms": {
        "median": crate::tasks::report::Statistic::Quantile(0.5).of(&mut samples)}});
    let m = [Metric::parse("latency_ms.median").unwrap()];
    values_of(&doc(&d), &m)[0].expect("a median")
}

/// `k` runs of a configuration whose runs' levels spread by `between`.
fn side_of(rng: &mut Rng, mean: f64, k: usize, between: f64, within: f64) -> Vec<Value> {
    (0..k)
        .map(|_| {
            let level = mean * (1.0 + between * normal(rng));
            run(rng, level, within, 200)
        })
        .collect()
}

/// How often the ratio's interval holds the true ratio, over `trials`.
fn coverage(k: usize, between: f64, within: f64, effect: f64, trials: u64) -> f64 {
    let mut rng = Rng::new(7 + k as u64);
    let mut held = 0;
    for t in 0..trials {
        let a = side_of(&mut rng, 10.0, k, between, within);
        let b = side_of(&mut rng, 10.0 * effect, k, between, within);
        let r = ratio(&a, &b, t).expect("a ratio");
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
        let c = coverage(k, between, within, effect, 400);
        eprintln!("coverage k={k} between={between} within={within} effect={effect}: {c:.3}");
        assert!(c >= 0.93, "k={k} between={between} effect={effect}: {c}");
    }
}

#[test]
fn one_run_a_side_is_within_run_and_covers_when_runs_do_not_shift() {
    let c = coverage(1, 0.0, 0.05, 1.0, 400);
    eprintln!("within-run coverage, no shift between runs: {c:.3}");
    assert!(c >= 0.93, "{c}");
    let mut rng = Rng::new(1);
    let a = side_of(&mut rng, 10.0, 1, 0.0, 0.05);
    let b = side_of(&mut rng, 10.0, 1, 0.0, 0.05);
    assert_eq!(ratio(&a, &b, 1).unwrap().basis, Basis::WithinRun);
    assert_eq!(side(&a).unwrap().basis, Basis::WithinRun);
}

#[test]
fn a_clear_effect_is_seen_and_the_rank_test_agrees() {
    let mut rng = Rng::new(3);
    let a = side_of(&mut rng, 10.0, 5, 0.01, 0.02);
    let b = side_of(&mut rng, 11.0, 5, 0.01, 0.02);
    let r = ratio(&a, &b, 9).unwrap();
    let (lo, hi) = r.interval.unwrap();
    assert!(
        lo > 1.05 && hi < 1.15 && (r.value - 1.1).abs() < 0.03,
        "{r:?}"
    );
    assert!(r.p.unwrap() < 0.01, "{r:?}");
    assert_eq!(r.basis, Basis::Repetitions);
}

#[test]
fn exact_values_without_batches_have_no_interval_with_one_run_each() {
    let exact = |v: f64| Value {
        value: v,
        rel_se: 0.0,
        inverse: false,
    };
    let r = ratio(&[exact(2.0)], &[exact(3.0)], 1).unwrap();
    assert_eq!((r.value, r.interval, r.p), (1.5, None, None));
    assert!(ratio(&[], &[exact(1.0)], 1).is_none());
    assert!(ratio(&[exact(0.0)], &[exact(1.0)], 1).is_none());
    let r = ratio(&[exact(2.0), exact(2.2)], &[exact(3.0), exact(3.1)], 1).unwrap();
    assert!(r.interval.is_some());
}

#[test]
fn the_normal_table_has_the_normal_quantiles() {
    assert!((inverse_normal(0.975) - 1.959_964).abs() < 1e-5);
    assert!((inverse_normal(0.5)).abs() < 1e-12);
    assert!((inverse_normal(0.001) + 3.090_232).abs() < 1e-5);
    let mut rng = Rng::new(5);
    let draws: Vec<f64> = (0..200_000).map(|_| normal(&mut rng)).collect();
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws.len() as f64;
    assert!(
        mean.abs() < 0.01 && (var - 1.0).abs() < 0.01,
        "{mean} {var}"
    );
    let mut d = vec![5.0, 1.0, 4.0, 2.0, 3.0];
    assert_eq!(percentiles(&mut d), (1.0, 5.0));
}

#[test]
fn the_exact_rank_test_matches_its_tables() {
    // 3 against 3, completely separated: 2/20 arrangements are as extreme.
    let p = mann_whitney_two_sided(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
    assert!((p - 0.1).abs() < 1e-12, "{p}");
    // 5 against 5, separated: 2/252.
    let p = mann_whitney_two_sided(&[1., 2., 3., 4., 5.], &[6., 7., 8., 9., 10.]);
    assert!((p - 2.0 / 252.0).abs() < 1e-12, "{p}");
    // Interleaved: no evidence.
    let p = mann_whitney_two_sided(&[1., 3., 5.], &[2., 4., 6.]);
    assert!(p > 0.6, "{p}");
    let dist = u_distribution(4, 3);
    assert!((dist.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    assert_eq!(dist.len(), 13);
    // Large sides use the normal form.
    let a: Vec<f64> = (0..40).map(f64::from).collect();
    let b: Vec<f64> = (0..40).map(|i| f64::from(i) + 100.0).collect();
    assert!(mann_whitney_two_sided(&a, &b) < 1e-6);
}

#[test]
fn one_deviate_per_draw_draws_what_one_per_pick_draws() {
    // Three runs with within-run errors of 1 %, 4 % and 10 %: the pooled
    // draw (one deviate for the picks' summed variance) and the per-pick
    // draw give the same distribution, up to Monte Carlo error.
    let v = |value: f64, rel_se: f64| Value {
        value,
        rel_se,
        inverse: false,
    };
    let values = [v(10.0, 0.01), v(10.5, 0.04), v(9.0, 0.10)];
    let pooled = SideDraw::new(&values);
    assert!(!pooled.pooled.is_empty());
    let per_pick = SideDraw {
        pooled: Vec::new(),
        ..SideDraw::new(&values)
    };
    let table = normal_table();
    let quantiles = |side: &SideDraw, seed: u64| {
        let mut rng = Rng::new(seed);
        let mut d: Vec<f64> = (0..200_000).map(|_| side.draw(&mut rng, table)).collect();
        d.sort_by(f64::total_cmp);
        [0.025, 0.16, 0.5, 0.84, 0.975].map(|q| d[(q * (d.len() - 1) as f64) as usize])
    };
    let (a, b) = (quantiles(&pooled, 1), quantiles(&per_pick, 2));
    let spread = b[4] - b[0];
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 0.01 * spread, "{a:?} against {b:?}");
    }
    // Throughputs, and errors where the clamp could bind, draw per pick.
    let tp = [
        Value {
            inverse: true,
            ..v(100.0, 0.02)
        },
        v(101.0, 0.02),
    ];
    assert!(SideDraw::new(&tp).pooled.is_empty());
    assert!(SideDraw::new(&[v(1.0, 0.3), v(1.0, 0.01)])
        .pooled
        .is_empty());
}

#[test]
fn a_throughputs_interval_covers_the_true_ratio() {
    // The per-pick path: throughput = 1 / mean batch time.
    let mut rng = Rng::new(11);
    let side = |rng: &mut Rng, level: f64| -> Vec<Value> {
        (0..3)
            .map(|_| {
                let run_level = level * (1.0 + 0.03 * normal(rng));
                let samples: Vec<f64> = (0..200)
                    .map(|_| run_level * (1.0 + 0.02 * normal(rng)).max(0.1))
                    .collect();
                let mean = samples.iter().sum::<f64>() / samples.len() as f64;
                let d = json!({"latency_samples_ms": samples, "throughput_images_per_s": 1000.0 / mean});
                let m = [Metric::parse("throughput_images_per_s").unwrap()];
                values_of(&doc(&d), &m)[0].expect("a throughput")
            })
            .collect()
    };
    let trials = 400;
    let mut held = 0;
    for t in 0..trials {
        // B's batches take 10 % longer: its throughput is 1/1.1 of A's.
        let (a, b) = (side(&mut rng, 10.0), side(&mut rng, 11.0));
        assert!(a[0].inverse);
        let (lo, hi) = ratio(&a, &b, t).unwrap().interval.unwrap();
        if lo <= 1.0 / 1.1 && 1.0 / 1.1 <= hi {
            held += 1;
        }
    }
    let c = f64::from(held) / f64::from(trials as u32);
    eprintln!("throughput coverage k=3: {c:.3}");
    assert!(c >= 0.93, "{c}");
}
