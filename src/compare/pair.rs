//! Pairing: runs group into configurations (stage and node-id params, less
//! `rep`), configurations pair across the two sides, and each pair gets,
//! per metric, both sides' estimates, the ratio, a verdict and the facets
//! that differ between the sides.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde::Serialize;

use super::measure::{Better, Metric, Run, Value, HEADLINE};
use crate::stats::estimate::Estimate;
use crate::stats::ratio::{self as stats, Design, Ratio};
use crate::stats::verdict;

/// What a pair's metric did, from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Faster,
    Slower,
    /// The interval lies within the threshold, or excludes 1 with a change
    /// smaller than the threshold (`crate::stats::verdict`).
    Same,
    /// The interval holds 1 and reaches beyond the threshold.
    Inconclusive,
    NotComparable,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotComparable => "not comparable",
        }
    }
}

/// One side of a row.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SideValue {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    pub runs: usize,
    /// `repetitions` or `within-run`.
    pub basis: &'static str,
    /// Runs recorded with a verdict other than valid (kept after their
    /// re-measurements or with `--accept-invalid`).
    pub invalid_runs: usize,
}

/// A facet whose values differ between the sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Difference {
    pub facet: String,
    pub a: String,
    pub b: String,
}

/// One configuration and one metric.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// Shared by the rows of a configuration.
    pub config: Arc<str>,
    pub stage: Arc<str>,
    pub metric: Arc<str>,
    pub better: Better,
    pub a: Option<SideValue>,
    pub b: Option<SideValue>,
    /// B / A.
    pub ratio: Option<f64>,
    pub ratio_low: Option<f64>,
    pub ratio_high: Option<f64>,
    /// What the ratio's interval rests on: `repetitions` (two or more runs
    /// a side) or `within-run`.
    pub ratio_basis: Option<&'static str>,
    pub p: Option<f64>,
    pub verdict: Verdict,
    /// Why a pair is not comparable.
    pub why: Option<String>,
    /// Shared by the rows of a configuration.
    pub differs: Arc<[Difference]>,
}

/// Every pair of two run sets.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pairing {
    pub rows: Vec<Row>,
    /// Configurations measured on one side only.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// Groups runs by configuration.
fn configs(runs: &[Run]) -> BTreeMap<&str, Vec<&Run>> {
    let mut out: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for run in runs {
        out.entry(run.config.as_str()).or_default().push(run);
    }
    out
}

/// Pairs `a` with `b`, whose runs hold the values of `metrics` in that
/// order. `chosen`: the metrics were named (`--metric`), so every pair is
/// compared on all of them; otherwise on the first headline group either
/// side has. `threshold`: the smallest relative change called a change.
pub(crate) fn pair(
    a: &[Run],
    b: &[Run],
    metrics: &[Metric],
    chosen: bool,
    threshold: f64,
) -> Pairing {
    let (ca, cb) = (configs(a), configs(b));
    let only = |x: &BTreeMap<&str, Vec<&Run>>, y: &BTreeMap<&str, Vec<&Run>>| {
        x.keys()
            .filter(|k| !y.contains_key(*k))
            .map(|k| k.to_string())
            .collect()
    };
    use rayon::prelude::*;
    let names: Vec<Arc<str>> = metrics.iter().map(|m| Arc::from(m.path.as_str())).collect();
    let paired: Vec<(&&str, &Vec<&Run>, &Vec<&Run>)> = ca
        .iter()
        .filter_map(|(config, ra)| Some((config, ra, cb.get(config)?)))
        .collect();
    // The facets that differ, once per distinct pair of parts: the
    // configurations of a study mostly share them.
    type Parts<'a> = (BTreeSet<&'a str>, BTreeSet<&'a str>);
    let mut known: HashMap<Parts<'_>, Arc<[Difference]>> = HashMap::new();
    let differs: Vec<Arc<[Difference]>> = paired
        .iter()
        .map(|(_, ra, rb)| {
            known
                .entry((distinct_parts(ra), distinct_parts(rb)))
                .or_insert_with_key(|(pa, pb)| differences(pa, pb).into())
                .clone()
        })
        .collect();
    let rows = paired
        .par_iter()
        .zip(differs)
        .flat_map_iter(|((config, ra, rb), differs)| {
            let config: Arc<str> = Arc::from(**config);
            metrics_of(ra, rb, metrics, chosen)
                .into_iter()
                .map(|i| {
                    row(
                        &config,
                        ra,
                        rb,
                        &names[i],
                        &metrics[i],
                        i,
                        threshold,
                        &differs,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Pairing {
        rows,
        only_a: only(&ca, &cb),
        only_b: only(&cb, &ca),
    }
}

/// The indexes (into the metrics read) a pair is compared on.
fn metrics_of(ra: &[&Run], rb: &[&Run], metrics: &[Metric], chosen: bool) -> Vec<usize> {
    if chosen {
        return (0..metrics.len()).collect();
    }
    let index = |m: &str| metrics.iter().position(|x| x.path == m);
    let has = |i: usize| ra.iter().chain(rb).any(|r| r.values[i].is_some());
    HEADLINE
        .iter()
        .map(|group| {
            group
                .iter()
                .filter_map(|m| index(m))
                .filter(|i| has(*i))
                .collect::<Vec<_>>()
        })
        .find(|found| !found.is_empty())
        .unwrap_or_else(|| {
            // Runs whose results.json could not be read: their pairs are
            // listed as not comparable, on the first headline group, rather
            // than dropped.
            let unusable = ra.iter().chain(rb).any(|r| r.unusable.is_some());
            match HEADLINE.first() {
                Some(group) if unusable => group.iter().filter_map(|m| index(m)).collect(),
                _ => Vec::new(),
            }
        })
}

fn values(runs: &[&Run], metric: usize) -> Vec<Value> {
    runs.iter().filter_map(|r| r.values[metric]).collect()
}

#[allow(clippy::too_many_arguments)]
fn row(
    config: &Arc<str>,
    ra: &[&Run],
    rb: &[&Run],
    name: &Arc<str>,
    metric: &Metric,
    index: usize,
    threshold: f64,
    differs: &Arc<[Difference]>,
) -> Row {
    let (va, vb) = (values(ra, index), values(rb, index));
    let side_value = |runs: &[&Run], v: &[Value]| {
        stats::side(v).map(|e: Estimate| SideValue {
            value: e.value,
            low: e.low,
            high: e.high,
            runs: e.runs,
            basis: e.basis.as_str(),
            invalid_runs: runs.iter().filter(|r| r.invalid.is_some()).count(),
        })
    };
    let ratio = stats::ratio(&va, &vb, Design::Apart);
    let (mut verdict, mut why) = judge(&va, &vb, ratio.as_ref(), metric, threshold);
    let unusable = [("A", ra), ("B", rb)].into_iter().find_map(|(side, runs)| {
        let why = runs.iter().find_map(|r| r.unusable.as_deref())?;
        Some(format!("{side}: {why}"))
    });
    if let Some(reason) = unusable {
        (verdict, why) = (Verdict::NotComparable, Some(reason));
    }
    if same_runs(ra, rb) {
        (verdict, why) = (
            Verdict::Same,
            Some("the same measurements on both sides".into()),
        );
    }
    let interval = ratio
        .and_then(|r| r.interval)
        .filter(|_| verdict != Verdict::NotComparable);
    Row {
        config: config.clone(),
        stage: ra[0].stage.clone(),
        metric: name.clone(),
        better: metric.better,
        a: side_value(ra, &va),
        b: side_value(rb, &vb),
        ratio: ratio.map(|r| r.value).filter(|v| v.is_finite()),
        // A pair that cannot be compared shows no interval: an underflowing
        // side would otherwise show `[NaN, NaN]`.
        ratio_low: interval.map(|i| i.0),
        ratio_high: interval.map(|i| i.1),
        ratio_basis: ratio.map(|r| r.basis.as_str()),
        p: ratio.and_then(|r| r.p),
        verdict,
        why,
        differs: differs.clone(),
    }
}

fn judge(
    va: &[Value],
    vb: &[Value],
    ratio: Option<&Ratio>,
    metric: &Metric,
    threshold: f64,
) -> (Verdict, Option<String>) {
    let missing = |side: &str| {
        Some(format!(
            "{side} has no number at `{}` (its runs lack the path, or hold text there)",
            metric.path
        ))
    };
    if va.is_empty() {
        return (Verdict::NotComparable, missing("A"));
    }
    if vb.is_empty() {
        return (Verdict::NotComparable, missing("B"));
    }
    // A value that is no usable number (an overflow such as 1e400 read as
    // infinity, a mean of values near f64's limit, a subnormal) says so.
    for (side, values) in [("A", va), ("B", vb)] {
        // Summed first, as the interval's arithmetic sums them.
        let mean = values.iter().map(|v| v.value).sum::<f64>() / values.len() as f64;
        if !mean.is_finite() || (mean != 0.0 && !mean.is_normal()) {
            return (
                Verdict::NotComparable,
                Some(format!(
                    "{side}'s `{}` is not a usable number (mean {mean:e}: an overflow or underflow of its runs' values)",
                    metric.path
                )),
            );
        }
    }
    let Some(ratio) = ratio else {
        return (
            Verdict::NotComparable,
            Some("a mean is zero or negative".into()),
        );
    };
    let Some((low, high)) = ratio.interval else {
        return (
            Verdict::NotComparable,
            Some("one run a side and no batches kept: no interval".into()),
        );
    };
    let higher = metric.better == Better::Higher;
    let verdict = match verdict::judge(ratio.value, (low, high), threshold, higher) {
        verdict::Verdict::Faster => Verdict::Faster,
        verdict::Verdict::Slower => Verdict::Slower,
        verdict::Verdict::Same => Verdict::Same,
        verdict::Verdict::Inconclusive => Verdict::Inconclusive,
    };
    (verdict, None)
}

/// Both sides hold the very same measurements (the same `results.json`
/// objects): nothing was measured in between.
fn same_runs(ra: &[&Run], rb: &[&Run]) -> bool {
    let measured = |runs: &[&Run]| runs.iter().map(|r| r.measurement).collect::<BTreeSet<_>>();
    measured(ra) == measured(rb)
}

fn distinct_parts<'a>(runs: &[&'a Run]) -> BTreeSet<&'a str> {
    runs.iter().map(|r| r.parts.as_ref()).collect()
}

fn facet_values(parts: &BTreeSet<&str>) -> BTreeMap<String, BTreeSet<String>> {
    let mut facets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in parts {
        for (k, v) in super::measure::facets(p) {
            facets.entry(k).or_default().insert(v);
        }
    }
    facets
}

/// The facets whose values differ between the sides (a side's runs may
/// hold several values of one facet: they are listed together).
fn differences(pa: &BTreeSet<&str>, pb: &BTreeSet<&str>) -> Vec<Difference> {
    if pa == pb {
        return Vec::new();
    }
    let (fa, fb) = (facet_values(pa), facet_values(pb));
    let keys: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let text = |s: Option<&BTreeSet<String>>| {
        s.map_or_else(
            || "—".to_owned(),
            |s| s.iter().map(String::as_str).collect::<Vec<_>>().join(" | "),
        )
    };
    keys.into_iter()
        .filter(|k| fa.get(*k) != fb.get(*k))
        .map(|k| Difference {
            facet: k.clone(),
            a: text(fa.get(k)),
            b: text(fb.get(k)),
        })
        .collect()
}

#[cfg(test)]
mod tests;
