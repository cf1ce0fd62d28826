//! The A/A checks a report reads from blocks measured with `check: true`:
//! per process, the log-ratio of the twin (`NAME#2`, a second instance of
//! the block's first member) to that member, for the compared metric. A
//! paired comparison whose per-process ratios spread more than these is
//! one the process's speed moved unequally ([`crate::stats::ratio::interaction`]).

use std::collections::BTreeMap;

use super::join::Row;

/// A row's A/A check: (process, log of twin / member) per process.
pub(super) type AaLogs = Vec<(String, f64)>;

/// Per row of `rows`: its A/A check from the twin rows (`twins`) of
/// `metric`, where one measured it (None without a compared metric).
pub(super) fn checks(twins: &[Row], rows: &[Row], metric: Option<&str>) -> Vec<Option<AaLogs>> {
    let mut out = vec![None; rows.len()];
    let Some(metric) = metric else {
        return out;
    };
    for twin in twins {
        let Some(i) = original(twin, rows) else {
            continue;
        };
        let (Some(t), Some(o)) = (per_process(twin, metric), per_process(&rows[i], metric)) else {
            continue;
        };
        let logs: AaLogs = t
            .iter()
            .filter_map(|(p, v)| {
                let (_, w) = o.iter().find(|(q, _)| q == p)?;
                (*v > 0.0 && *w > 0.0).then(|| (p.clone(), (v / w).ln()))
            })
            .collect();
        out[i] = Some(logs);
    }
    out
}

/// A row's values of `metric` by process (its repetitions' node ids).
pub(super) fn per_process(row: &Row, metric: &str) -> Option<Vec<(String, f64)>> {
    let per_rep = super::fold::value(row, metric).per_rep?;
    Some(
        row.repetitions
            .iter()
            .map(|r| r.nodes.join(" "))
            .zip(per_rep)
            .collect(),
    )
}

/// The row a twin is the second instance of: its params with `NAME#2`
/// read as `NAME`.
fn original(twin: &Row, rows: &[Row]) -> Option<usize> {
    let want: BTreeMap<&String, String> = twin
        .params
        .iter()
        .map(|(k, v)| {
            let text = v.display();
            (
                k,
                text.strip_suffix("#2").map_or(text.clone(), str::to_owned),
            )
        })
        .collect();
    rows.iter().position(|r| {
        r.params.len() == want.len()
            && r.params
                .iter()
                .all(|(k, v)| want.get(k) == Some(&v.display()))
    })
}
