//! One recorded run as compare reads it: its configuration (stage and the
//! params of its node id, less `rep`), the metrics asked for from its
//! `results.json`, what each metric's batches say of its own noise, and the
//! facets that describe how it was made.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::hash::ContentHash;
use crate::store::{RecordedRun, Store};
pub(crate) use crate::tasks::summary::Value;
use crate::tasks::summary::{self, Doc};

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
    if crate::stats::verdict::higher_is_better(path) {
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
    /// Why its `results.json` cannot be used (an object that does not hash
    /// to its name, a file that is not a JSON object): its pairs are not
    /// comparable, for this reason.
    pub unusable: Option<Arc<str>>,
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

/// Runs whose `results.json` is read at once (in parallel).
const CHUNK: usize = 8192;

/// Each run's values of `metrics` (analyses' runs, without a
/// `results.json`, are left out), in the order of `runs`. Headline metrics
/// come from the run's summary, read with the run set, where the store
/// keeps one; otherwise, and for any other metric, from its `results.json`,
/// and the summaries read from files are kept for the next comparison
/// (where the store is writable). A file that is gone or unreadable is an
/// error naming the run.
///
/// `runs` is consumed as it is read: at 600,000 runs holding both the
/// recorded runs and the runs read was most of a comparison's memory.
pub(crate) fn read_runs(
    store: &Store,
    runs: Vec<RecordedRun>,
    metrics: &[Metric],
) -> Result<Vec<Run>, String> {
    use rayon::prelude::*;
    // Where each metric sits in a summary; None when one is not a headline.
    let slots: Option<Vec<usize>> = metrics
        .iter()
        .map(|m| summary::PATHS.iter().position(|p| *p == m.path))
        .collect();
    let mut read: Vec<Vec<Run>> = Vec::new();
    let mut pending: Vec<(usize, RecordedRun, ContentHash)> = Vec::new();
    for run in runs {
        let Some(measurement) = run.results else {
            continue;
        };
        // A block measured together has no summary of its own: its
        // members are read from its file.
        let kept = slots
            .as_ref()
            .zip(run.summary.as_deref().and_then(summary::decode))
            .filter(|_| !run.parts.contains("\"together\""));
        match kept {
            Some((slots, s)) => {
                let values = slots.iter().map(|&i| s[i]).collect();
                read.push(vec![run_of(run, measurement, values)]);
            }
            None => {
                pending.push((read.len(), run, measurement));
                read.push(Vec::new());
            }
        }
    }
    // In chunks, from the back: what a chunk read is in place (and its
    // summaries kept) before the next is read, so that the files' runs are
    // not held twice at once.
    while !pending.is_empty() {
        let chunk = pending.split_off(pending.len().saturating_sub(CHUNK));
        let from_files: Vec<(usize, Vec<Run>, Option<Vec<u8>>)> = chunk
            .into_par_iter()
            .map(|(at, run, measurement)| {
                let unusable = |run: RecordedRun, why: String| {
                    let mut run = run_of(run, measurement, vec![None; metrics.len()]);
                    run.unusable = Some(why.into());
                    (at, vec![run], None)
                };
                let doc = match read_doc(store, &run, &measurement)? {
                    Ok(doc) => doc,
                    Err(why) => return Ok(unusable(run, why)),
                };
                if let Some(together) = super::members::together_of(&run.parts) {
                    return Ok(
                        match super::members::members(&run.node_id, &together, &doc) {
                            Ok(members) => (
                                at,
                                member_runs(&run, measurement, members, metrics, slots.as_deref()),
                                None,
                            ),
                            Err(why) => unusable(run, why),
                        },
                    );
                }
                let (values, fresh) = match &slots {
                    Some(slots) => {
                        let s = summary::summarize(&doc);
                        let values = slots.iter().map(|&i| s[i]).collect();
                        (values, Some(summary::encode(&s)))
                    }
                    None => (values_of(&doc, metrics), None),
                };
                Ok((at, vec![run_of(run, measurement, values)], fresh))
            })
            .collect::<Result<_, String>>()?;
        let mut fresh: Vec<(ContentHash, Vec<u8>)> = Vec::new();
        for (at, runs, bytes) in from_files {
            if let (Some(bytes), Some(run)) = (bytes, runs.first()) {
                fresh.push((run.measurement, bytes));
            }
            read[at] = runs;
        }
        if !fresh.is_empty() && !store.is_read_only() {
            // A cache: a comparison that cannot keep it has lost nothing.
            let _ = store.journal().save_summaries(&fresh);
        }
    }
    Ok(read.into_iter().flatten().collect())
}

/// A block's runs, one per member (see [`super::members`]), each with its
/// member's values of `metrics` (through a summary where `slots` place them).
fn member_runs(
    run: &RecordedRun,
    measurement: ContentHash,
    members: Vec<(String, Doc)>,
    metrics: &[Metric],
    slots: Option<&[usize]>,
) -> Vec<Run> {
    members
        .into_iter()
        .map(|(config, doc)| {
            let values = match slots {
                Some(slots) => {
                    let s = summary::summarize(&doc);
                    slots.iter().map(|&i| s[i]).collect()
                }
                None => values_of(&doc, metrics),
            };
            Run {
                config,
                ..run_of(run.clone(), measurement, values)
            }
        })
        .collect()
}

fn run_of(run: RecordedRun, measurement: ContentHash, values: Vec<Option<Value>>) -> Run {
    Run {
        measurement,
        config: config_of(&run.node_id),
        stage: run.stage,
        values,
        parts: run.parts,
        invalid: run.invalid,
        unusable: None,
    }
}

/// `run`'s `results.json`, parsed one level deep, once its bytes hash to
/// the object's name, as a restore checks them: the outer error is a store
/// that cannot be read (the comparison stops), the inner one a run whose
/// object is damaged or not a JSON object (its pairs are not comparable).
fn read_doc(
    store: &Store,
    run: &RecordedRun,
    measurement: &ContentHash,
) -> Result<Result<Doc, String>, String> {
    let path = store.objects().path(measurement);
    let text = std::fs::read(&path).map_err(|e| {
        format!(
            "{}: cannot read its results.json ({}): {e}; `vitgraph verify` checks the store",
            run.node_id,
            path.display()
        )
    })?;
    if ContentHash::of_bytes(&text) != *measurement {
        return Ok(Err(format!(
            "{}'s results.json object is damaged ({} does not hash to its name): `vitgraph verify --repair` sets it aside and rewrites it from out/ where an intact copy is",
            run.node_id,
            path.display()
        )));
    }
    Ok(summary::parse(&text).map_err(|e| {
        format!(
            "{}'s results.json ({}) is not a JSON object: {e}",
            run.node_id,
            path.display()
        )
    }))
}

/// Each metric's value in a parsed `results.json`.
pub(super) fn values_of(doc: &Doc, metrics: &[Metric]) -> Vec<Option<Value>> {
    let paths: Vec<&str> = metrics.iter().map(|m| m.path.as_str()).collect();
    summary::values_of(doc, &paths)
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
                // A block's members by their keys, not every member's spec
                // (those differ where the first member's fields do).
                let value = match super::members::together_of(&format!("{{\"together\":{v}}}")) {
                    Some(t) if k == "together" => t.keys().join(" "),
                    _ => text(v),
                };
                out.insert(format!("spec.{k}"), value);
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
    pub(crate) fn doc(value: &Json) -> Doc {
        summary::parse(value.to_string().as_bytes()).unwrap()
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
    fn the_summary_holds_every_headline_metric() {
        let headline: Vec<&str> = HEADLINE.iter().flat_map(|g| g.iter().copied()).collect();
        assert_eq!(headline, summary::PATHS);
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
