//! One recorded run as compare reads it: its configuration (stage and the
//! params of its node id, less `rep`), the metrics asked for from its
//! `results.json`, what each metric's batches say of its own noise, and the
//! facets that describe how it was made.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::store::{RunRecord, Store};
use crate::tasks::report::Statistic;

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Better {
    Higher,
    Lower,
}

/// A metric to compare: a dotted path into `results.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metric {
    pub path: String,
    pub better: Better,
}

impl Metric {
    /// `path`, or `path:higher` / `path:lower`; without a suffix, throughput,
    /// rates and FLOP/s are better higher and everything else lower.
    pub(crate) fn parse(text: &str) -> Result<Metric, String> {
        let (path, better) = match text.rsplit_once(':') {
            Some((p, "higher")) => (p, Some(Better::Higher)),
            Some((p, "lower")) => (p, Some(Better::Lower)),
            Some((_, other)) => {
                return Err(format!(
                    "`{text}`: `{other}` is not `higher` or `lower` (write `PATH`, `PATH:higher` or `PATH:lower`)"
                ))
            }
            None => (text, None),
        };
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(format!(
                "`{text}` is not a dotted path into results.json (`latency_ms.median`)"
            ));
        }
        Ok(Metric {
            path: path.to_owned(),
            better: better.unwrap_or_else(|| default_direction(path)),
        })
    }
}

fn default_direction(path: &str) -> Better {
    let higher = [
        "throughput",
        "per_s",
        "tflops",
        "gbps",
        "bandwidth",
        "fraction_of",
    ];
    if higher.iter().any(|h| path.contains(h)) {
        Better::Higher
    } else {
        Better::Lower
    }
}

/// The metrics compared when none are named: the first of these groups a
/// configuration has a metric of (a `Vit` run's, an `OpBench` run's).
pub(crate) const HEADLINE: [&[&str]; 2] = [
    &[
        "throughput_images_per_s",
        "latency_ms.median",
        "latency_ms.p99",
    ],
    &["time_ms.median", "tflops"],
];

/// A run's value of one metric, and the sampling distribution its own
/// batches give that value (the inner level of the bootstrap).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Value {
    pub value: f64,
    pub inner: Inner,
}

/// How a run's value would vary over resamples of its batches.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Inner {
    /// No per-batch samples: the value is taken as measured.
    Exact,
    /// A mean (or its inverse, a throughput): normal with this relative
    /// standard error (`sd / √n / mean`).
    Mean { rel_se: f64, inverse: bool },
    /// A quantile `q` of `n` batches: the sorted batches at rank
    /// `q·(n−1) ± 5·√(n·q·(1−q))` (`window`, starting at rank `first`), and
    /// the quantile of all of them (`base`).
    Quantile {
        q: f64,
        n: usize,
        first: usize,
        window: Vec<f64>,
        base: f64,
    },
}

/// One recorded run, read for comparing.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// The run's key: two sides holding the same keys hold the same runs.
    pub key: crate::hash::ContentHash,
    /// The node id without its `rep=N`: what pairs runs.
    pub config: String,
    pub stage: String,
    /// Metric path → value; metrics the run lacks are absent.
    pub values: BTreeMap<String, Value>,
    /// How it was made: key facets (`libtorch`, `gpu`, `driver`…), the
    /// task's kind and version, its spec's fields, its inputs' hashes.
    pub facets: BTreeMap<String, String>,
    /// The run's verdict when it was not valid (`throttled…`).
    pub invalid: Option<String>,
}

/// `stage[a=1,rep=2,b=x]` → `stage[a=1,b=x]`; `stage[rep=2]` → `stage`.
pub(crate) fn config_of(node_id: &str) -> String {
    let Some((stage, rest)) = node_id.split_once('[') else {
        return node_id.to_owned();
    };
    let inner = rest.strip_suffix(']').unwrap_or(rest);
    let kept: Vec<&str> = inner
        .split(',')
        .filter(|p| {
            !p.strip_prefix("rep=")
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    if kept.is_empty() {
        stage.to_owned()
    } else {
        format!("{stage}[{}]", kept.join(","))
    }
}

/// Reads `results.json` of each run that has one (runs of analyses and
/// reports have none and are left out). A results file whose object is
/// gone or unreadable is an error naming the run.
pub(crate) fn read_runs(
    store: &Store,
    runs: &[RunRecord],
    metrics: &[Metric],
) -> Result<Vec<Run>, String> {
    use rayon::prelude::*;
    runs.par_iter()
        .filter_map(|run| {
            let entry = run.outputs.iter().find(|o| o.name == "results.json")?;
            Some((run, store.object_path(&entry.hash)))
        })
        .map(|(run, path)| {
            let text = std::fs::read(&path).map_err(|e| {
                format!(
                    "{}: cannot read its results.json ({}): {e}; `vitgraph verify` checks the store",
                    run.node_id,
                    path.display()
                )
            })?;
            let doc: Json = serde_json::from_slice(&text).map_err(|e| {
                format!("{}: its results.json ({}) is not JSON: {e}", run.node_id, path.display())
            })?;
            Ok(read_run(run, &doc, metrics))
        })
        .collect()
}

fn read_run(record: &RunRecord, doc: &Json, metrics: &[Metric]) -> Run {
    let values = metrics
        .iter()
        .filter_map(|m| Some((m.path.clone(), value_of(doc, &m.path)?)))
        .collect();
    let env = record.env.value();
    let invalid = env
        .pointer("/validity/reason")
        .and_then(Json::as_str)
        .map(str::to_owned);
    Run {
        key: record.key,
        config: config_of(&record.node_id),
        stage: record.stage.clone(),
        values,
        facets: facets(&record.key_parts.value()),
        invalid,
    }
}

fn lookup<'a>(root: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(root, |at, key| match at {
        Json::Object(map) => map.get(key),
        Json::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// The metric's value and, where the run kept its batches (`Vit`'s
/// `latency_samples_ms`, a measuring command's `samples.<name>`), their
/// sampling distribution.
pub(super) fn value_of(doc: &Json, path: &str) -> Option<Value> {
    let value = lookup(doc, path)?.as_f64().filter(|v| v.is_finite())?;
    let samples = Statistic::for_metric(path).and_then(|stat| {
        let head = path.split('.').next().unwrap_or(path);
        let list = doc
            .get("latency_samples_ms")
            .or_else(|| doc.get("samples").and_then(|s| s.get(head)))?
            .as_array()?;
        let samples: Vec<f64> = list.iter().filter_map(Json::as_f64).collect();
        (samples.len() >= 2).then_some((stat, samples))
    });
    let inner = match samples {
        Some((stat, samples)) => inner_of(stat, samples),
        None => Inner::Exact,
    };
    Some(Value { value, inner })
}

fn inner_of(stat: Statistic, samples: Vec<f64>) -> Inner {
    let n = samples.len() as f64;
    let mean_se = |s: &[f64]| {
        let mean = s.iter().sum::<f64>() / n;
        let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean != 0.0).then(|| (var / n).sqrt() / mean.abs())
    };
    let quantile = |q: f64, mut samples: Vec<f64>| {
        samples.sort_by(f64::total_cmp);
        let spread = 5.0 * (n * q * (1.0 - q)).sqrt() + 2.0;
        let center = q * (n - 1.0);
        let first = (center - spread).floor().max(0.0) as usize;
        let last = ((center + spread).ceil() as usize).min(samples.len() - 1);
        let base = Statistic::Quantile(q).of(&mut samples);
        Inner::Quantile {
            q,
            n: samples.len(),
            first,
            window: samples[first..=last].to_vec(),
            base,
        }
    };
    match stat {
        Statistic::Mean => mean_se(&samples).map_or(Inner::Exact, |rel_se| Inner::Mean {
            rel_se,
            inverse: false,
        }),
        Statistic::InverseMean => mean_se(&samples).map_or(Inner::Exact, |rel_se| Inner::Mean {
            rel_se,
            inverse: true,
        }),
        Statistic::Quantile(q) => quantile(q, samples),
        Statistic::Min => quantile(0.0, samples),
        Statistic::Max => quantile(1.0, samples),
    }
}

/// The facets a pair's two sides may differ in, flattened to text.
fn facets(parts: &Json) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(parts) = parts.get("parts") else {
        return out;
    };
    if let Some(env) = parts.get("env").and_then(Json::as_object) {
        for (k, v) in env {
            out.insert(k.clone(), text(v));
        }
    }
    if let (Some(kind), Some(version)) = (parts.get("kind"), parts.get("version")) {
        out.insert("task".into(), format!("{} v{}", text(kind), text(version)));
    }
    if let Some(spec) = parts.get("spec").and_then(Json::as_object) {
        // `{"Vit": {...}}`: the one variant's fields.
        for fields in spec.values().filter_map(Json::as_object) {
            for (k, v) in fields {
                out.insert(format!("spec.{k}"), text(v));
            }
        }
    }
    if let Some(inputs) = parts.get("inputs").and_then(Json::as_object) {
        for (k, v) in inputs {
            let hash = text(v);
            out.insert(format!("input {k}"), hash.chars().take(12).collect());
        }
    }
    out
}

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_is_the_node_id_without_its_repetition() {
        assert_eq!(config_of("s[model=a,batch=1,rep=2]"), "s[model=a,batch=1]");
        assert_eq!(config_of("s[rep=3]"), "s");
        assert_eq!(config_of("s[rep=x,b=1]"), "s[rep=x,b=1]");
        assert_eq!(config_of("plain"), "plain");
    }

    #[test]
    fn metrics_parse_with_their_direction() {
        assert_eq!(
            Metric::parse("throughput_images_per_s").unwrap().better,
            Better::Higher
        );
        assert_eq!(
            Metric::parse("latency_ms.p99").unwrap().better,
            Better::Lower
        );
        assert_eq!(Metric::parse("score:higher").unwrap().path, "score");
        assert!(Metric::parse("a..b").is_err());
        assert!(Metric::parse("a:up").unwrap_err().contains("higher"));
    }

    #[test]
    fn a_vit_run_gives_each_metric_its_batches_distribution() {
        let samples: Vec<f64> = (0..101).map(|i| 10.0 + f64::from(i) / 100.0).collect();
        let doc = json!({
            "throughput_images_per_s": 95.0,
            "latency_ms": {"median": 10.5, "p99": 10.99},
            "latency_samples_ms": samples,
        });
        let median = value_of(&doc, "latency_ms.median").unwrap();
        let Inner::Quantile {
            base,
            n,
            first,
            window,
            ..
        } = &median.inner
        else {
            panic!("{median:?}")
        };
        assert_eq!((*n, *base), (101, 10.5));
        assert!(*first > 0 && window.len() < 101);
        let tp = value_of(&doc, "throughput_images_per_s").unwrap();
        assert!(matches!(tp.inner, Inner::Mean { inverse: true, .. }));
        assert_eq!(value_of(&doc, "missing"), None);
        let bare = value_of(&json!({"time_ms": {"median": 3.0}}), "time_ms.median").unwrap();
        assert_eq!(bare.inner, Inner::Exact);
    }

    #[test]
    fn facets_flatten_env_task_spec_and_inputs() {
        let parts = json!({"parts": {"kind": "Vit", "version": 1,
            "spec": {"Vit": {"samples": 48, "dtype": "f32"}},
            "inputs": {"model.py": "0123456789abcdef0123"},
            "env": {"libtorch": "2.11.0", "gpu": "none"}}});
        let f = facets(&parts);
        assert_eq!(f["libtorch"], "2.11.0");
        assert_eq!(f["task"], "Vit v1");
        assert_eq!(f["spec.samples"], "48");
        assert_eq!(f["input model.py"], "0123456789ab");
    }
}
