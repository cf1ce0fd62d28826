//! One recorded run as compare reads it: its configuration (stage and the
//! params of its node id, less `rep`), the metrics asked for from its
//! `results.json`, what each metric's batches say of its own noise, and the
//! facets that describe how it was made.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value as Json;

use crate::store::{RecordedRun, Store};
use crate::tasks::report::{lookup, Statistic};

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

/// A run's value of one metric, and how far its own batches say it could
/// be off: the inner level of the bootstrap (see `stats`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Value {
    pub value: f64,
    /// The statistic's standard error over the run's batches, relative to
    /// the value; 0 when the run kept no batches.
    pub rel_se: f64,
    /// A throughput: the inverse of a mean over the batches.
    pub inverse: bool,
}

/// One recorded run, read for comparing.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// Its `results.json` object: two sides holding the same objects hold
    /// the same measurements (a run measured again under the same key has
    /// another).
    pub measurement: crate::hash::ContentHash,
    /// The node id without its `rep=N`: what pairs runs.
    pub config: String,
    pub stage: Arc<str>,
    /// The values of the metrics read, in their order; None where the run
    /// lacks one.
    pub values: Vec<Option<Value>>,
    /// How it was made (the key's parts as JSON text, shared by the runs
    /// that share it): facets are read from it only where two sides differ.
    pub parts: Arc<str>,
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

/// Reads `results.json` of each run that has one (analyses' runs are left
/// out). A file that is gone or unreadable is an error naming the run.
pub(crate) fn read_runs(
    store: &Store,
    runs: &[RecordedRun],
    metrics: &[Metric],
) -> Result<Vec<Run>, String> {
    use rayon::prelude::*;
    runs.par_iter()
        .filter_map(|run| Some((run, run.results?)))
        .map(|(run, measurement)| {
            let path = store.objects().path(&measurement);
            let text = std::fs::read(&path).map_err(|e| {
                format!(
                    "{}: cannot read its results.json ({}): {e}; `vitgraph verify` checks the store",
                    run.node_id,
                    path.display()
                )
            })?;
            let doc: HashMap<String, Box<RawValue>> = serde_json::from_slice(&text).map_err(|e| {
                format!(
                    "{}: its results.json ({}) is not a JSON object: {e}",
                    run.node_id,
                    path.display()
                )
            })?;
            Ok(Run {
                measurement,
                config: config_of(&run.node_id),
                stage: run.stage.clone(),
                values: values_of(&doc, metrics),
                parts: run.parts.clone(),
                invalid: run.invalid.clone(),
            })
        })
        .collect()
}

/// Each metric's value, from a document parsed one level deep: only the
/// fields the metrics name (and the batches, when one of them is a
/// statistic of the batches) are parsed further.
pub(super) fn values_of(
    doc: &HashMap<String, Box<RawValue>>,
    metrics: &[Metric],
) -> Vec<Option<Value>> {
    let mut heads: HashMap<&str, Option<Json>> = HashMap::new();
    let mut sorted: Option<Option<Vec<f64>>> = None;
    metrics
        .iter()
        .map(|m| {
            let mut path = m.path.split('.');
            let head = path.next().unwrap_or_default();
            let rest = path.collect::<Vec<_>>().join(".");
            let parsed = heads.entry(head).or_insert_with(|| {
                doc.get(head)
                    .and_then(|raw| serde_json::from_str::<Json>(raw.get()).ok())
            });
            let parsed = parsed.as_ref()?;
            let found = if rest.is_empty() {
                Some(parsed)
            } else {
                lookup(parsed, &rest)
            };
            let value = found?.as_f64().filter(|v| v.is_finite())?;
            let stat = Statistic::for_metric(&m.path);
            let batches = stat.and_then(|_| {
                sorted
                    .get_or_insert_with(|| batches_of(doc, head))
                    .as_deref()
            });
            let (rel_se, inverse) = match (stat, batches) {
                (Some(stat), Some(b)) => se_of(stat, b),
                _ => (0.0, false),
            };
            Some(Value {
                value,
                rel_se,
                inverse,
            })
        })
        .collect()
}

/// The run's batches, sorted: `Vit`'s `latency_samples_ms`, or a measuring
/// command's `samples.<head>`.
fn batches_of(doc: &HashMap<String, Box<RawValue>>, head: &str) -> Option<Vec<f64>> {
    let list: Vec<f64> = match doc.get("latency_samples_ms") {
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
        None => {
            let samples: HashMap<String, Box<RawValue>> =
                serde_json::from_str(doc.get("samples")?.get()).ok()?;
            serde_json::from_str(samples.get(head)?.get()).ok()?
        }
    };
    let mut list: Vec<f64> = list.into_iter().filter(|v| v.is_finite()).collect();
    list.sort_by(f64::total_cmp);
    (list.len() >= 2).then_some(list)
}

/// The statistic's relative standard error over `sorted` batches: for a
/// quantile q of n batches, half the spread between the batches √(n·q·(1−q))
/// ranks (at least one) either side of its rank — the order-statistic
/// interval of one standard deviation; for a mean, sd/√n.
fn se_of(stat: Statistic, sorted: &[f64]) -> (f64, bool) {
    let n = sorted.len() as f64;
    let at = |rank: f64| {
        let r = rank.clamp(0.0, n - 1.0);
        let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
    };
    let quantile = |q: f64| {
        let spread = (n * q * (1.0 - q)).sqrt().max(1.0);
        let center = q * (n - 1.0);
        let base = at(center);
        if base == 0.0 {
            0.0
        } else {
            ((at(center + spread) - at(center - spread)) / 2.0 / base).abs()
        }
    };
    let mean_se = || {
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        if mean == 0.0 {
            0.0
        } else {
            (var / n).sqrt() / mean.abs()
        }
    };
    match stat {
        Statistic::Mean => (mean_se(), false),
        Statistic::InverseMean => (mean_se(), true),
        Statistic::Quantile(q) => (quantile(q), false),
        Statistic::Min => (quantile(0.0), false),
        Statistic::Max => (quantile(1.0), false),
    }
}

/// The facets a pair's two sides may differ in, flattened to text, from
/// a run's key parts.
pub(crate) fn facets(parts: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(parts) = serde_json::from_str::<Json>(parts) else {
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
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A document parsed one level deep, as `read_runs` parses it.
    pub(crate) fn doc(value: &Json) -> HashMap<String, Box<RawValue>> {
        serde_json::from_str(&value.to_string()).unwrap()
    }

    fn metric(path: &str) -> Metric {
        Metric::parse(path).unwrap()
    }

    #[test]
    fn a_config_is_the_node_id_without_its_repetition() {
        assert_eq!(config_of("s[model=a,batch=1,rep=2]"), "s[model=a,batch=1]");
        assert_eq!(config_of("s[rep=3]"), "s");
        assert_eq!(config_of("s[rep=x,b=1]"), "s[rep=x,b=1]");
        assert_eq!(config_of("plain"), "plain");
    }

    #[test]
    fn metrics_parse_with_their_direction() {
        assert_eq!(metric("throughput_images_per_s").better, Better::Higher);
        assert_eq!(metric("latency_ms.p99").better, Better::Lower);
        assert_eq!(metric("score:higher").path, "score");
        assert!(Metric::parse("a..b").is_err());
        assert!(Metric::parse("a:up").unwrap_err().contains("higher"));
    }

    #[test]
    fn a_vit_run_gives_each_metric_its_batches_standard_error() {
        // 101 batches, evenly 10.00 … 11.00 ms: the median's rank spread is
        // √(101·¼) ≈ 5.02 ranks, 0.0502 ms either side of 10.5.
        let samples: Vec<f64> = (0..101).map(|i| 10.0 + f64::from(i) / 100.0).collect();
        let d = doc(&json!({
            "throughput_images_per_s": 95.0,
            "latency_ms": {"median": 10.5, "p99": 10.99},
            "latency_samples_ms": samples,
            "telemetry": {"huge": [1, 2, 3]},
        }));
        let ms = [
            metric("latency_ms.median"),
            metric("throughput_images_per_s"),
            metric("missing"),
            metric("latency_ms.nope"),
        ];
        let v = values_of(&d, &ms);
        let median = v[0].unwrap();
        assert_eq!(median.value, 10.5);
        assert!((median.rel_se - 0.0502 / 10.5).abs() < 1e-4, "{median:?}");
        let tp = v[1].unwrap();
        assert!(tp.inverse && tp.rel_se > 0.0, "{tp:?}");
        assert_eq!((v[2], v[3]), (None, None));
        // Without batches the value stands alone.
        let bare = values_of(
            &doc(&json!({"time_ms": {"median": 3.0}})),
            &[metric("time_ms.median")],
        );
        assert_eq!(bare[0].unwrap().rel_se, 0.0);
        // A measuring command's samples under `samples.<name>`.
        let cmd = values_of(
            &doc(
                &json!({"latency_ms": {"median": 2.0}, "samples": {"latency_ms": [1.0, 2.0, 3.0]}}),
            ),
            &[metric("latency_ms.median")],
        );
        assert!(cmd[0].unwrap().rel_se > 0.0);
    }

    #[test]
    fn facets_flatten_env_task_spec_and_inputs() {
        let parts = json!({"kind": "Vit", "version": 1,
            "spec": {"Vit": {"samples": 48, "dtype": "f32"}},
            "inputs": {"model.py": "0123456789abcdef0123"},
            "env": {"libtorch": "2.11.0", "gpu": "none"}});
        let f = facets(&parts.to_string());
        assert_eq!(f["libtorch"], "2.11.0");
        assert_eq!(f["task"], "Vit v1");
        assert_eq!(f["spec.samples"], "48");
        assert_eq!(f["input model.py"], "0123456789ab");
        assert!(facets("").is_empty());
    }
}
