use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::compare::gate::Condition;
use crate::compare::measure::{tests::doc, values_of};
use crate::compare::{output, Comparison, SideInfo};
use crate::hash::ContentHash;
use crate::stats::Rng;

/// A `Vit`-like run of `config` (rep `rep`) whose batches are `level` ms
/// with a small spread, in environment `torch`.
fn run(config: &str, rep: u32, level: f64, torch: &str, seed: u64) -> Run {
    let mut rng = Rng::new(seed);
    let samples: Vec<f64> = (0..101)
        .map(|_| level * (1.0 + 0.01 * ((rng.below(1000) as f64) / 500.0 - 1.0)))
        .collect();
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let d = json!({
        "latency_ms": {"median": sorted[50]},
        "throughput_images_per_s": 1000.0 / (samples.iter().sum::<f64>() / 101.0),
        "latency_samples_ms": samples,
    });
    let parts = json!({"kind": "Vit", "version": 1, "env": {"libtorch": torch}});
    Run {
        measurement: ContentHash::of_bytes(format!("{config}{rep}{level}{torch}{seed}").as_bytes()),
        config: config.to_owned(),
        stage: Arc::from(config.split('[').next().unwrap()),
        values: values_of(&doc(&d), &all()),
        parts: Arc::from(parts.to_string()),
        invalid: None,
        unusable: None,
    }
}

/// Every headline metric, as `compare` reads them when none are named.
fn all() -> Vec<Metric> {
    HEADLINE
        .iter()
        .flat_map(|g| g.iter())
        .map(|m| Metric::parse(m).unwrap())
        .collect()
}

fn reps(config: &str, level: f64, torch: &str, seed: u64) -> Vec<Run> {
    (1..=3)
        .map(|rep| {
            run(
                config,
                rep,
                level * (1.0 + 0.002 * f64::from(rep)),
                torch,
                seed + u64::from(rep),
            )
        })
        .collect()
}

fn comparison(a: &[Run], b: &[Run], pairing: Pairing) -> Comparison {
    Comparison {
        a: SideInfo {
            name: "baseline:main".into(),
            description: "baseline main".into(),
            runs: a.len(),
        },
        b: SideInfo {
            name: "HEAD".into(),
            description: "current runs".into(),
            runs: b.len(),
        },
        threshold: 0.02,
        pairing,
        kernels: Vec::new(),
    }
}

#[test]
fn pairing_rules() {
    let mut a = Vec::new();
    let mut b = Vec::new();
    // Unchanged, same environment.
    a.extend(reps("s[model=x,batch=1]", 10.0, "2.10.0", 1));
    b.extend(reps("s[model=x,batch=1]", 10.0, "2.10.0", 11));
    // 20 % slower after an upgrade: paired, the facet listed.
    a.extend(reps("s[model=y,batch=1]", 10.0, "2.10.0", 2));
    b.extend(reps("s[model=y,batch=1]", 12.0, "2.11.0", 12));
    // Different params: not paired.
    a.extend(reps("s[model=z,batch=1]", 5.0, "2.10.0", 3));
    b.extend(reps("s[model=z,batch=2]", 5.0, "2.10.0", 13));
    // Missing on one side.
    a.extend(reps("t[n=1]", 1.0, "2.10.0", 4));
    // The same runs on both sides.
    let same = reps("u", 3.0, "2.10.0", 5);
    a.extend(same.clone());
    b.extend(same);
    // One run a side: within-run.
    a.push(run("v[n=1]", 1, 2.0, "2.10.0", 6));
    b.push(run("v[n=1]", 1, 2.0, "2.10.0", 16));
    // A metric missing on one side.
    let mut bare = reps("w", 4.0, "2.10.0", 7);
    for r in &mut bare {
        r.values[0] = None;
    }
    a.extend(reps("w", 4.0, "2.10.0", 17));
    b.extend(bare);
    let pairing = pair(&a, &b, &all(), false, 0.02);
    let c = comparison(&a, &b, pairing);
    insta::assert_snapshot!("pairing_rules", output::text(&c, false));
    let verdicts: Vec<(&str, &str, Verdict)> = c
        .pairing
        .rows
        .iter()
        .map(|r| (&*r.config, &*r.metric, r.verdict))
        .collect();
    assert!(verdicts.contains(&("s[model=y,batch=1]", "latency_ms.median", Verdict::Slower)));
    assert!(verdicts.contains(&("s[model=x,batch=1]", "latency_ms.median", Verdict::Same)));
    assert!(verdicts.contains(&("w", "throughput_images_per_s", Verdict::NotComparable)));
    assert_eq!(c.pairing.only_a, ["s[model=z,batch=1]", "t[n=1]"]);
    assert_eq!(c.pairing.only_b, ["s[model=z,batch=2]"]);
    let y = c
        .pairing
        .rows
        .iter()
        .find(|r| &*r.config == "s[model=y,batch=1]")
        .unwrap();
    assert_eq!(
        &*y.differs,
        [Difference {
            facet: "libtorch".into(),
            a: "2.10.0".into(),
            b: "2.11.0".into()
        }]
    );
    // The gate trips on the slower pair only, in the direction asked.
    let gate = Condition::parse("latency_ms.median > +5%").unwrap();
    let tripped: Vec<&str> = c
        .pairing
        .rows
        .iter()
        .filter(|r| gate.trips(r))
        .map(|r| &*r.config)
        .collect();
    assert_eq!(tripped, ["s[model=y,batch=1]"]);
    let gate = Condition::parse("throughput_images_per_s < -25%").unwrap();
    assert!(!c.pairing.rows.iter().any(|r| gate.trips(r)));
    insta::assert_snapshot!("pairing_rules_csv", output::csv(&c));
}

/// Runs of one configuration: `k` processes whose levels spread by
/// `between`, each with 200 batches spread by `within`.
fn noisy_side(rng: &mut Rng, config: &str, k: usize, between: f64, within: f64) -> Vec<Run> {
    let mut normal = || {
        // Irwin–Hall: close enough to normal for noise.
        (0..12)
            .map(|_| rng.below(1_000_000) as f64 / 1e6)
            .sum::<f64>()
            - 6.0
    };
    (0..k)
        .map(|rep| {
            let level = 10.0 * (1.0 + between * normal());
            let samples: Vec<f64> = (0..200)
                .map(|_| level * (1.0 + within * normal()))
                .collect();
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let d = json!({"latency_ms": {"median": (sorted[99] + sorted[100]) / 2.0},
                             "latency_samples_ms": samples});
            let metric = [Metric::parse("latency_ms.median").unwrap()];
            Run {
                measurement: ContentHash::of_bytes(format!("{config}{rep}{level}").as_bytes()),
                config: config.to_owned(),
                stage: Arc::from("s"),
                values: values_of(&doc(&d), &metric),
                parts: Arc::from(""),
                invalid: None,
                unusable: None,
            }
        })
        .collect()
}

#[test]
fn the_gate_rarely_fires_on_pure_noise() {
    // 3 runs a side, runs shifting by 3 % between processes: no true change.
    let mut rng = Rng::new(42);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let trials = 500;
    for t in 0..trials {
        let config = format!("s[i={t}]");
        a.extend(noisy_side(&mut rng, &config, 3, 0.03, 0.02));
        b.extend(noisy_side(&mut rng, &config, 3, 0.03, 0.02));
    }
    let metric = Metric::parse("latency_ms.median").unwrap();
    let pairing = pair(&a, &b, &[metric], true, 0.05);
    let gates = [
        Condition::parse("latency_ms.median > +5%").unwrap(),
        Condition::parse("latency_ms.median < -5%").unwrap(),
    ];
    let fired = pairing
        .rows
        .iter()
        .filter(|r| gates.iter().any(|g| g.trips(r)))
        .count();
    let changed = pairing
        .rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Faster | Verdict::Slower))
        .count();
    let rate = fired as f64 / trials as f64;
    eprintln!("gate at ±5 % under pure noise: {fired} of {trials} ({rate:.3}); verdicts faster or slower: {changed}");
    assert_eq!(pairing.rows.len(), trials);
    assert!(rate <= 0.05, "{rate}");
    assert_eq!(fired, changed);
}

/// A side whose values overflow (or underflow) when averaged is not
/// comparable for that reason, not for a lack of runs.
#[test]
fn an_overflowing_side_is_named_as_such() {
    let metric = Metric::parse("latency_ms.median").unwrap();
    let v = |value: f64| Value {
        value,
        rel_se: 0.0,
        inverse: false,
    };
    let ok = [v(10.0), v(10.1), v(9.9)];
    for bad in [[v(1.7e308); 3], [v(5e-324); 3], [v(f64::INFINITY); 3]] {
        let (verdict, why) = judge(&ok, &bad, None, &metric, 0.02);
        assert_eq!(verdict, Verdict::NotComparable);
        let why = why.unwrap();
        assert!(
            why.starts_with("B's `latency_ms.median` is not a usable number"),
            "{why}"
        );
    }
}
