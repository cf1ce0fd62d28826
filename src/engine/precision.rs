//! Precision targets: whether a configuration of a stage with
//! `precision: (…)` needs another repetition.
//!
//! After its first `repeat` repetitions, a configuration's next repetition
//! (a *gated* node, see [`Graph::is_gated`]) runs only while the 95 %
//! interval of the metric over the repetitions before it is wider than the
//! target and the budget (`max_repeat` repetitions, `max_seconds` of runs)
//! is not spent. Otherwise it is *not needed*: it does not run, is not
//! stale, and what depends on the stage does not wait for it or see it.
//! The metric is read from each repetition's `results.json` in `out/`,
//! which the judge has just found intact or the build has just written.

use std::path::Path;

use crate::graph::{Graph, NodeIdx, Precision};
use crate::stats::estimate::{self, Estimate};

/// What the repetitions so far say about a configuration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// The interval is within the target.
    Precise(Estimate),
    /// Too wide, and the budget is spent.
    Spent {
        estimate: Option<Estimate>,
        why: String,
    },
    /// Too wide (or not yet known), with budget left: one more repetition.
    More { estimate: Option<Estimate> },
    /// A repetition measured nothing (its `results.json` says a `status`
    /// other than `ok`, e.g. an unsupported backend): repeating it would
    /// measure nothing again.
    Unmeasured(String),
    /// A block of one member (or without the baseline): that member's own
    /// values decided, as a node's measured alone would.
    Alone {
        member: String,
        decision: Box<Decision>,
    },
}

impl Decision {
    /// `precise at ±1.4 % after 4 runs`, `budget spent at ±6.1 % after 10
    /// runs (max_repeat 10)`, and for more: `±6.1 % > ±2 % after 3 runs`
    /// (the detail of the reason `imprecise`).
    pub(crate) fn describe(&self, p: &Precision) -> String {
        match (self, &p.baseline) {
            (Decision::Alone { member, decision }, _) => {
                format!("`{member}` alone: {}", decision.describe_estimate(p))
            }
            (_, Some(b)) => format!("ratios to `{b}`: {}", self.describe_estimate(p)),
            (_, None) => self.describe_estimate(p),
        }
    }

    /// The decision itself, whether a lone member's or not.
    pub(crate) fn inner(&self) -> &Decision {
        match self {
            Decision::Alone { decision, .. } => decision.inner(),
            other => other,
        }
    }

    fn describe_estimate(&self, p: &Precision) -> String {
        match self {
            Decision::Alone { decision, .. } => decision.describe_estimate(p),
            Decision::Precise(e) => format!("precise at {} after {} runs", pm(e), e.runs),
            Decision::Spent { estimate, why } => match estimate {
                Some(e) => format!("budget spent at {} after {} runs ({why})", pm(e), e.runs),
                None => format!("budget spent ({why})"),
            },
            Decision::More { estimate } => match estimate {
                Some(e) => format!("{} > ±{} after {} runs", pm(e), percent(p.ci_rel), e.runs),
                None => "no interval yet".to_owned(),
            },
            Decision::Unmeasured(why) => format!("nothing to measure: {why}"),
        }
    }

    pub(crate) fn needs_more(&self) -> bool {
        matches!(self.inner(), Decision::More { .. })
    }
}

fn pm(e: &Estimate) -> String {
    format!("±{}", percent(e.half_width_rel()))
}

/// A fraction as a percentage with one decimal (`2 %`, `6.1 %`), two
/// under 0.1 % (`0.04 %`).
fn percent(x: f64) -> String {
    let p = 100.0 * x;
    let text = if p < 0.095 {
        format!("{p:.2}")
    } else {
        format!("{p:.1}")
    };
    format!("{} %", text.trim_end_matches(".0"))
}

/// What a configuration's repetitions before a gated node (`values`: the
/// metric of each, `seconds`: their recorded run time) call for.
pub(crate) fn decide(p: &Precision, values: &[f64], seconds: f64) -> Decision {
    judge(p, estimate::of_repetitions(values), values.len(), seconds)
}

/// The same for a block measured together, from each member's values in
/// the repetitions so far (`members`: key and values, the baseline's
/// among them): the widest of the members' paired ratios to the baseline
/// decides, so repetitions stop once every comparison is precise.
pub(crate) fn decide_paired(
    p: &Precision,
    baseline: &str,
    members: &[(String, Vec<f64>)],
    seconds: f64,
) -> Decision {
    let runs = members.first().map_or(0, |(_, v)| v.len());
    let Some((_, base)) = members.iter().find(|(k, _)| k == baseline) else {
        return judge(p, None, runs, seconds);
    };
    let mut widest: Option<Estimate> = None;
    for (key, values) in members {
        if key == baseline {
            continue;
        }
        let Some(e) = estimate::paired_ratio(base, values) else {
            return judge(p, None, runs, seconds);
        };
        if widest.is_none_or(|w| e.half_width_rel() > w.half_width_rel()) {
            widest = Some(e);
        }
    }
    judge(p, widest, runs, seconds)
}

/// The decision from an estimate over `runs` repetitions.
fn judge(p: &Precision, estimate: Option<Estimate>, runs: usize, seconds: f64) -> Decision {
    if let Some(e) = estimate {
        if e.half_width_rel() <= p.ci_rel {
            return Decision::Precise(e);
        }
    }
    let runs = runs as u32;
    if runs >= p.max_repeat {
        return Decision::Spent {
            estimate,
            why: format!("max_repeat {}", p.max_repeat),
        };
    }
    if let Some(limit) = p.max_seconds {
        if seconds >= limit {
            return Decision::Spent {
                estimate,
                why: format!("{seconds:.0} s of runs, max_seconds {limit}"),
            };
        }
    }
    Decision::More { estimate }
}

/// A repetition's `results.json` under `dir`: its path and its document.
fn read_results(dir: &Path) -> Result<(std::path::PathBuf, serde_json::Value), String> {
    let file = dir.join("results.json");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let doc =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
    Ok((file, doc))
}

/// The number at dotted `path` in `doc` (list items by index).
fn number_at(doc: &serde_json::Value, path: &str) -> Option<f64> {
    let found = path.split('.').try_fold(doc, |at, key| match at {
        serde_json::Value::Object(map) => map.get(key),
        serde_json::Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    });
    found.and_then(serde_json::Value::as_f64)
}

/// Whether a run's (or a member's) document says it measured nothing: a
/// `status` other than `ok`.
fn measured_nothing(doc: Option<&serde_json::Value>) -> bool {
    doc.and_then(|d| d.get("status"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|s| s != "ok")
}

/// The metric `path` of a repetition's `results.json` under `dir`; None
/// when the run says it measured nothing (a `status` other than `ok`).
pub(crate) fn metric_of(dir: &Path, path: &str) -> Result<Option<f64>, String> {
    let (file, doc) = read_results(dir)?;
    if let Some(v) = number_at(&doc, path) {
        return Ok(Some(v));
    }
    if measured_nothing(Some(&doc)) {
        return Ok(None);
    }
    Err(format!(
        "{} has no number at `{path}` (the stage's `precision.metric`)",
        file.display()
    ))
}

/// The decision for gated node `i` from the repetitions before it: each
/// with its output folder and its run's duration (ms).
pub(crate) fn gate(
    graph: &Graph,
    root: &Path,
    i: NodeIdx,
    earlier: &[(NodeIdx, i64)],
) -> Result<Decision, String> {
    let Some(p) = graph.stage_of(i).and_then(|s| s.precision.as_ref()) else {
        return Ok(Decision::More { estimate: None });
    };
    let seconds = earlier.iter().map(|&(_, ms)| ms as f64 / 1000.0).sum();
    if let (Some(keys), Some(baseline)) = (graph.nodes[i].task.member_keys(), &p.baseline) {
        return gate_block(graph, root, p, &keys, baseline, earlier, seconds);
    }
    let mut values = Vec::with_capacity(earlier.len());
    for &(j, _) in earlier {
        match metric_of(&root.join(graph.nodes[j].out_rel()), &p.metric)? {
            Some(v) => values.push(v),
            None => {
                return Ok(Decision::Unmeasured(format!(
                    "`{}` measured nothing (its results.json has a status other than ok)",
                    graph.nodes[j].id
                )))
            }
        }
    }
    Ok(decide(p, &values, seconds))
}

/// [`gate`] for a block measured together: the members' paired ratios to
/// the baseline decide. A member that measured nothing (an unsupported
/// backend) has no ratio and is left out, unless it is the baseline; a
/// block that holds one member, or lacks the baseline, is judged on its
/// first member's own values, as a node measured alone is.
fn gate_block(
    graph: &Graph,
    root: &Path,
    p: &Precision,
    keys: &[String],
    baseline: &str,
    earlier: &[(NodeIdx, i64)],
    seconds: f64,
) -> Result<Decision, String> {
    let paired = keys.len() > 1 && keys.iter().any(|k| k == baseline);
    let wanted: Vec<&String> = if paired {
        keys.iter().collect()
    } else {
        keys.iter().take(1).collect()
    };
    let mut members: Vec<(String, Vec<f64>)> =
        wanted.iter().map(|k| ((*k).clone(), Vec::new())).collect();
    let mut unmeasured: Vec<String> = Vec::new();
    for &(j, _) in earlier {
        let doc = read_results(&root.join(graph.nodes[j].out_rel()))?;
        for (key, values) in &mut members {
            let member = doc.1.get("members").and_then(|m| m.get(key.as_str()));
            match member.map(|m| number_at(m, &p.metric)) {
                Some(Some(v)) => values.push(v),
                Some(None) if measured_nothing(member) => {
                    if !paired || key == baseline {
                        return Ok(Decision::Unmeasured(format!(
                            "`{}` measured nothing for member `{key}`",
                            graph.nodes[j].id
                        )));
                    }
                    unmeasured.push(key.clone());
                }
                _ => {
                    return Err(format!(
                    "{} has no number at `members.{key}` → `{}` (the stage's `precision.metric`)",
                    doc.0.display(),
                    p.metric
                ))
                }
            }
        }
    }
    members.retain(|(k, _)| !unmeasured.contains(k));
    if !paired {
        let (member, values) = &members[0];
        return Ok(Decision::Alone {
            member: member.clone(),
            decision: Box::new(decide(p, values, seconds)),
        });
    }
    if members.len() < 2 {
        return Ok(Decision::Unmeasured(format!(
            "every member but the baseline `{baseline}` measured nothing"
        )));
    }
    Ok(decide_paired(p, baseline, &members, seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(max_repeat: u32, max_seconds: Option<f64>) -> Precision {
        Precision {
            metric: "latency_ms.median".into(),
            ci_rel: 0.02,
            max_repeat,
            max_seconds,
            baseline: None,
        }
    }

    #[test]
    fn more_until_precise_or_spent() {
        let p = target(5, None);
        let tight = decide(&p, &[10.0, 10.01, 9.99], 0.0);
        assert!(matches!(tight, Decision::Precise(_)), "{tight:?}");
        assert!(tight
            .describe(&p)
            .starts_with("precise at ±0.2 % after 3 runs"));
        let wide = decide(&p, &[10.0, 11.0, 9.0], 0.0);
        assert!(wide.needs_more());
        assert_eq!(wide.describe(&p), "±25.1 % > ±2 % after 3 runs");
        let tighter = decide(&p, &[10.0, 10.001, 9.999], 0.0);
        assert!(tighter.describe(&p).starts_with("precise at ±0.02 %"));
        let spent = decide(&p, &[10.0, 11.0, 9.0, 10.5, 9.5], 0.0);
        assert_eq!(
            spent.describe(&p),
            "budget spent at ±9.8 % after 5 runs (max_repeat 5)"
        );
        let timed = decide(&target(10, Some(60.0)), &[10.0, 11.0, 9.0], 61.0);
        assert!(matches!(timed, Decision::Spent { .. }), "{timed:?}");
        assert!(decide(&target(10, Some(60.0)), &[10.0, 11.0, 9.0], 59.0).needs_more());
    }

    #[test]
    fn the_metric_is_read_by_its_dotted_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("results.json"),
            r#"{"latency_ms": {"median": 1.5}, "l": [2, 3]}"#,
        )
        .unwrap();
        assert_eq!(metric_of(dir.path(), "latency_ms.median"), Ok(Some(1.5)));
        assert_eq!(metric_of(dir.path(), "l.1"), Ok(Some(3.0)));
        let err = metric_of(dir.path(), "latency_ms.p99").unwrap_err();
        assert!(err.contains("no number at `latency_ms.p99`"), "{err}");
        std::fs::write(
            dir.path().join("results.json"),
            r#"{"status": "unsupported", "error": "no flash kernel for head_dim 512"}"#,
        )
        .unwrap();
        assert_eq!(metric_of(dir.path(), "time_ms.median"), Ok(None));
    }
}
