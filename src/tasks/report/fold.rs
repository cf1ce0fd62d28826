//! Repetitions folded into configurations: the rows of a repeated stage's
//! repetitions (equal in every param but `rep`) become one row, whose
//! numbers are the mean over the repetitions with a t-interval
//! ([`crate::stats::estimate`]). A row of one run gets a within-run interval
//! where the metric has per-batch samples, labelled as such.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::cell::Cell;
use super::join::Row;
use crate::stats::estimate::{self, Basis, Estimate};
use crate::stats::Statistic;
use crate::tasks::REP_PARAM;

/// Rows of repetitions of one configuration become one row (in the place
/// of the first); other rows stay as they are.
pub(super) fn fold(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Result<Row, (BTreeMap<_, _>, Vec<Row>)>> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows {
        if row.rep.is_none() || row.table_entry {
            out.push(Ok(row));
            continue;
        }
        let mut params = row.params.clone();
        params.remove(REP_PARAM);
        let key = serde_json::to_string(&params).unwrap_or_default();
        match index.get(&key) {
            Some(&i) => {
                if let Err((_, reps)) = &mut out[i] {
                    reps.push(row);
                }
            }
            None => {
                index.insert(key, out.len());
                out.push(Err((params, vec![row])));
            }
        }
    }
    let mut rows: Vec<Row> = out
        .into_iter()
        .map(|r| r.unwrap_or_else(|(params, reps)| Row::configuration(params, reps)))
        .collect();
    attach_shared(&mut rows);
    rows
}

/// A row of a stage without repetitions whose params equal a repeated
/// configuration's (a traced run and its analysis beside repetitions
/// measured together) joins that configuration: its values are the
/// configuration's where no repetition has the column.
fn attach_shared(rows: &mut Vec<Row>) {
    let key = |r: &Row| serde_json::to_string(&r.params).unwrap_or_default();
    let configurations: BTreeMap<String, usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.repetitions.is_empty())
        .map(|(i, r)| (key(r), i))
        .collect();
    if configurations.is_empty() {
        return;
    }
    let mut shared: Vec<(usize, Row)> = Vec::new();
    let mut kept = Vec::with_capacity(rows.len());
    for (i, row) in std::mem::take(rows).into_iter().enumerate() {
        let target = (row.rep.is_none() && row.repetitions.is_empty() && !row.table_entry)
            .then(|| configurations.get(&key(&row)))
            .flatten();
        match target {
            Some(&t) => shared.push((t, row)),
            None => kept.push((i, row)),
        }
    }
    for (t, row) in shared {
        if let Some((_, config)) = kept.iter_mut().find(|(i, _)| *i == t) {
            config.share(row);
        }
    }
    *rows = kept.into_iter().map(|(_, r)| r).collect();
}

/// A value column of one row: its cell, its 95 % interval where one is
/// known, and the repetitions' values behind it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Value {
    pub cell: Cell,
    pub interval: Option<Estimate>,
    /// Each repetition's number, for a row of two or more.
    pub per_rep: Option<Vec<f64>>,
    /// For a row of one run: its batches' standard error of the value,
    /// relative to it.
    pub rel_se: Option<f64>,
}

/// Column `path` of `row`.
pub(super) fn value(row: &Row, path: &str) -> Value {
    if row.repetitions.len() < 2 {
        let one = row.repetitions.first().unwrap_or(row);
        if one.lookup(path).is_none() && !row.repetitions.is_empty() {
            return shared_value(row, path);
        }
        let cell = one.lookup(path).map_or(Cell::Null, Cell::from_json);
        let interval = cell.as_f64().and_then(|v| within_run(one, path, v));
        return Value {
            cell,
            interval,
            per_rep: None,
            rel_se: batches_rel_se(one, path),
        };
    }
    let cells: Vec<Cell> = row
        .repetitions
        .iter()
        .map(|r| r.lookup(path).map_or(Cell::Null, Cell::from_json))
        .collect();
    if cells.iter().all(|c| *c == Cell::Null) {
        return shared_value(row, path);
    }
    let numbers: Option<Vec<f64>> = cells.iter().map(Cell::as_f64).collect();
    match numbers.as_deref().and_then(estimate::of_repetitions) {
        Some(e) => Value {
            cell: Cell::Float(e.value),
            interval: Some(e),
            per_rep: numbers,
            rel_se: None,
        },
        // Text, or a number some repetition lacks: shown when all agree.
        None => Value {
            cell: if cells.windows(2).all(|w| w[0] == w[1]) {
                cells[0].clone()
            } else {
                Cell::Null
            },
            interval: None,
            per_rep: None,
            rel_se: None,
        },
    }
}

/// Column `path` of a configuration from a row joined to it (see
/// [`attach_shared`]): one value, no interval.
fn shared_value(row: &Row, path: &str) -> Value {
    Value {
        cell: row.shared(path).map_or(Cell::Null, Cell::from_json),
        interval: None,
        per_rep: None,
        rel_se: None,
    }
}

/// One run's batches behind column `path`: `latency_samples_ms` for
/// `latency_ms.*` and `throughput_images_per_s` (a `Vit` run), else
/// `samples.X` for `X.*` (a measuring `Command`).
fn batches(row: &Row, path: &str) -> Option<Vec<f64>> {
    let (head, _) = path.rsplit_once('.').unwrap_or(("", path));
    if path == "throughput_images_per_s" || head == "latency_ms" {
        if let Some(samples) = &row.samples {
            return Some(samples.clone());
        }
    }
    let list = row.lookup(&format!("samples.{head}"))?;
    list.as_array()?.iter().map(Json::as_f64).collect()
}

/// The standard error one run's batches give its statistic at `path`,
/// relative to its value ([`Statistic::rel_se`]): what a ratio with this
/// run on a side takes as its within-run noise.
fn batches_rel_se(row: &Row, path: &str) -> Option<f64> {
    let stat = Statistic::for_metric(path)?;
    let mut sorted: Vec<f64> = batches(row, path)?
        .into_iter()
        .filter(|v| v.is_finite())
        .collect();
    sorted.sort_by(f64::total_cmp);
    (sorted.len() >= 2).then(|| stat.rel_se(&sorted))
}

/// The interval one run's own batches give `value` (column `path`), where
/// its files hold per-batch samples: `latency_samples_ms` for `latency_ms.*`
/// and `throughput_images_per_s` (a `Vit` run), `samples.X` for `X.mean`,
/// `X.median`, `X.pNN` (a measuring `Command`). Quantiles take the
/// distribution-free order-statistic interval, means the t-interval, a
/// throughput (images / mean batch time) the mean's interval inverted.
fn within_run(row: &Row, path: &str, value: f64) -> Option<Estimate> {
    let (_, stat) = path.rsplit_once('.').unwrap_or(("", path));
    let samples = batches(row, path)?;
    let (low, high) = if path == "throughput_images_per_s" {
        let m = mean_interval(&samples)?;
        // value = k / mean: the interval of the mean, inverted.
        let k = value * m.value;
        (k / m.high, k / m.low)
    } else {
        match stat {
            "mean" => {
                let m = mean_interval(&samples)?;
                (m.low, m.high)
            }
            "median" => quantile_interval(&samples, 0.5)?,
            p if p.starts_with('p') => {
                let q: f64 = p[1..].parse().ok()?;
                quantile_interval(&samples, q / 100.0)?
            }
            _ => return None,
        }
    };
    (low.is_finite() && high.is_finite() && low <= value && value <= high).then_some(Estimate {
        value,
        low,
        high,
        runs: 1,
        basis: Basis::WithinRun,
    })
}

/// The fewest samples a within-run interval rests on: for a mean, and
/// below the quantile (and above it) for a quantile.
const MIN_SAMPLES: f64 = 5.0;

/// The t-interval of the samples' mean.
fn mean_interval(samples: &[f64]) -> Option<Estimate> {
    if (samples.len() as f64) < MIN_SAMPLES {
        return None;
    }
    let e = estimate::of_repetitions(samples)?;
    (e.low > 0.0).then_some(e)
}

/// The distribution-free 95 % interval of quantile `q`: the order
/// statistics at ranks `nq ∓ 1.96·√(nq(1−q))` (the normal approximation
/// of the binomial count below the quantile); None unless at least
/// [`MIN_SAMPLES`] samples are expected on each side of it.
fn quantile_interval(samples: &[f64], q: f64) -> Option<(f64, f64)> {
    let n = samples.len() as f64;
    if !(0.0..=1.0).contains(&q) || n * q.min(1.0 - q) < MIN_SAMPLES {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let spread = 1.96 * (n * q * (1.0 - q)).sqrt();
    let rank = |r: f64| (r.round().max(1.0).min(n) as usize) - 1;
    Some((
        sorted[rank(n * q - spread)],
        sorted[rank(n * q + spread + 1.0)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantile_interval_brackets_the_median() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let (lo, hi) = quantile_interval(&samples, 0.5).unwrap();
        // n = 100: ranks 50 ∓ 9.8 → 40 and 61 (1-based).
        assert_eq!((lo, hi), (40.0, 61.0));
        assert_eq!(
            quantile_interval(&samples, 0.99),
            None,
            "one sample above p99"
        );
        let many: Vec<f64> = (1..=1000).map(f64::from).collect();
        let (lo, hi) = quantile_interval(&many, 0.99).unwrap();
        assert!(
            (980.0..990.0).contains(&lo) && hi > 990.0 && hi <= 1000.0,
            "{lo} {hi}"
        );
    }
}
