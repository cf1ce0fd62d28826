//! A measurement's summary: what its `results.json` says of the headline
//! metrics, in the form `vitgraph compare` judges them — each metric's value
//! and how far the run's own batches say it could be off.
//!
//! A summary is a function of the `results.json` object alone, so the store
//! keeps it by the object's hash: a run's summary is written when the run is
//! recorded, and `compare` reads 90 bytes from the database instead of
//! reading and parsing the file (for runs recorded before summaries were
//! kept, it reads the file once and keeps the summary).

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::Value as Json;

use super::report::lookup;
use crate::stats::Statistic;

/// The headline metrics a summary holds, in its order: a `Vit` run's and an
/// `OpBench` run's (see `compare`'s headline groups).
pub(crate) const PATHS: [&str; 5] = [
    "throughput_images_per_s",
    "latency_ms.median",
    "latency_ms.p99",
    "time_ms.median",
    "tflops",
];

/// The encoding's version: a summary of another is read again from its file.
/// 2: a statistic of `samples.X` for any `X.mean`, `X.median`, `X.pNN` (not only `latency_ms`).
const VERSION: u8 = 2;

pub(crate) use crate::stats::Value;

/// The values of [`PATHS`], in order; None where the run lacks one.
pub(crate) type Summary = [Option<Value>; PATHS.len()];

/// A `results.json` parsed one level deep: only the fields a metric names
/// are parsed further.
pub(crate) type Doc = HashMap<String, Box<RawValue>>;

/// Parses `results.json` one level deep.
pub(crate) fn parse(bytes: &[u8]) -> Result<Doc, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// The summary of a parsed `results.json`.
pub(crate) fn summarize(doc: &Doc) -> Summary {
    let values = values_of(doc, &PATHS);
    std::array::from_fn(|i| values[i])
}

/// `summary` as the store keeps it: the version, then per metric a tag
/// (0 absent, 1 present, 2 present and a throughput), the value and the
/// relative standard error as little-endian f64.
pub(crate) fn encode(summary: &Summary) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + PATHS.len() * 17);
    out.push(VERSION);
    for v in summary {
        match v {
            None => out.push(0),
            Some(v) => {
                out.push(if v.inverse { 2 } else { 1 });
                out.extend_from_slice(&v.value.to_le_bytes());
                out.extend_from_slice(&v.rel_se.to_le_bytes());
            }
        }
    }
    out
}

/// The summary `bytes` encode; None for another version or damaged bytes.
pub(crate) fn decode(bytes: &[u8]) -> Option<Summary> {
    let (&version, mut rest) = bytes.split_first()?;
    if version != VERSION {
        return None;
    }
    let mut summary: Summary = [None; PATHS.len()];
    for slot in &mut summary {
        let (&tag, tail) = rest.split_first()?;
        rest = tail;
        if tag == 0 {
            continue;
        }
        if tag > 2 || rest.len() < 16 {
            return None;
        }
        let f = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap_or_default());
        *slot = Some(Value {
            value: f(&rest[..8]),
            rel_se: f(&rest[8..16]),
            inverse: tag == 2,
        });
        rest = &rest[16..];
    }
    rest.is_empty().then_some(summary)
}

/// Each path's value, from a document parsed one level deep: only the
/// fields the paths name (and the batches, when one of them is a statistic
/// of the batches) are parsed further.
pub(crate) fn values_of(doc: &Doc, paths: &[&str]) -> Vec<Option<Value>> {
    let mut heads: HashMap<&str, Option<Json>> = HashMap::new();
    let mut sorted: HashMap<&str, Option<Vec<f64>>> = HashMap::new();
    paths
        .iter()
        .map(|path| {
            let (head, rest) = path.split_once('.').unwrap_or((path, ""));
            let parsed = heads.entry(head).or_insert_with(|| {
                doc.get(head)
                    .and_then(|raw| serde_json::from_str::<Json>(raw.get()).ok())
            });
            let parsed = parsed.as_ref()?;
            let found = if rest.is_empty() {
                Some(parsed)
            } else {
                lookup(parsed, rest)
            };
            let value = found?.as_f64().filter(|v| v.is_finite())?;
            let stat = Statistic::for_metric(path);
            let batches = stat.and_then(|_| {
                sorted
                    .entry(head)
                    .or_insert_with(|| batches_of(doc, head))
                    .as_deref()
            });
            let (rel_se, inverse) = match (stat, batches) {
                (Some(stat), Some(b)) => (stat.rel_se(b), stat == Statistic::InverseMean),
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
fn batches_of(doc: &Doc, head: &str) -> Option<Vec<f64>> {
    let list: Vec<f64> = match doc.get("latency_samples_ms") {
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
        None => {
            let samples: Doc = serde_json::from_str(doc.get("samples")?.get()).ok()?;
            serde_json::from_str(samples.get(head)?.get()).ok()?
        }
    };
    let mut list: Vec<f64> = list.into_iter().filter(|v| v.is_finite()).collect();
    list.sort_by(f64::total_cmp);
    (list.len() >= 2).then_some(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(value: &Json) -> Doc {
        parse(value.to_string().as_bytes()).unwrap()
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
        let v = values_of(
            &d,
            &[
                "latency_ms.median",
                "throughput_images_per_s",
                "missing",
                "latency_ms.nope",
            ],
        );
        let median = v[0].unwrap();
        assert_eq!(median.value, 10.5);
        assert!((median.rel_se - 0.0502 / 10.5).abs() < 1e-4, "{median:?}");
        let tp = v[1].unwrap();
        assert!(tp.inverse && tp.rel_se > 0.0, "{tp:?}");
        assert_eq!((v[2], v[3]), (None, None));
        // Without batches the value stands alone.
        let bare = values_of(
            &doc(&json!({"time_ms": {"median": 3.0}})),
            &["time_ms.median"],
        );
        assert_eq!(bare[0].unwrap().rel_se, 0.0);
        // A measuring command's samples under `samples.<name>`.
        let cmd = values_of(
            &doc(
                &json!({"latency_ms": {"median": 2.0}, "samples": {"latency_ms": [1.0, 2.0, 3.0]}}),
            ),
            &["latency_ms.median"],
        );
        assert!(cmd[0].unwrap().rel_se > 0.0);
    }

    #[test]
    fn each_metric_takes_the_batches_of_its_own_field() {
        // Two measured fields with batches of very different spread: the
        // second metric must not borrow the first one's.
        let d = doc(&json!({
            "latency_ms": {"median": 2.0},
            "throughput_images_per_s": 0.5,
            "samples": {"latency_ms": [1.0, 2.0, 3.0], "throughput_images_per_s": [2.0, 2.0, 2.0]},
        }));
        let v = values_of(&d, &["latency_ms.median", "throughput_images_per_s"]);
        assert!(v[0].unwrap().rel_se > 0.0);
        assert_eq!(v[1].unwrap().rel_se, 0.0);
    }

    #[test]
    fn a_summary_reads_back_as_written_and_other_bytes_do_not() {
        let samples: Vec<f64> = (0..50).map(|i| 5.0 + f64::from(i % 7) / 10.0).collect();
        let d = doc(&json!({
            "throughput_images_per_s": 1600.0,
            "latency_ms": {"median": 5.3, "p99": 5.6},
            "latency_samples_ms": samples,
        }));
        let s = summarize(&d);
        assert!(s[0].unwrap().inverse);
        assert_eq!(s[3], None);
        let bytes = encode(&s);
        assert_eq!(bytes.len(), 1 + 3 * 17 + 2);
        assert_eq!(decode(&bytes), Some(s));
        // Another version, a truncated or padded record: read the file again.
        let mut other = bytes.clone();
        other[0] = VERSION + 1;
        assert_eq!(decode(&other), None);
        assert_eq!(decode(&bytes[..bytes.len() - 3]), None);
        let mut padded = bytes.clone();
        padded.push(0);
        assert_eq!(decode(&padded), None);
        assert_eq!(decode(&[]), None);
    }
}
