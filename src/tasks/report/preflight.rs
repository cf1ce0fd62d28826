//! A plot's faults found from params alone, before anything runs: the
//! pipelines' loader knows every node a report will join and its params,
//! so a plot of a column the table cannot have, or whose line would pass
//! through a param it neither draws, splits by, facets nor fixes, can be
//! refused before a sweep of hours runs. The report checks its rows again
//! when it runs ([`super::zigzag`]), for what params cannot tell: columns
//! only the files hold, such as those of `rows` tables.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::cell::Cell;
use super::compare::same;
use super::join::kept;
use super::spec::{Plot, ReportSpec};
use super::table::{CI_HIGH, CI_LOW, ENV_GROUP, INTERVAL, INVALID, NODES, REPS, SAMPLES, WIDE};
use crate::tasks::{TaskError, REP_PARAM};
use crate::value::Value;

/// The first plot of `spec` (its index, and the error) that names a column
/// the table cannot have, or whose line would pass through a hidden param,
/// judged from `configs`: the params of the nodes the report joins
/// (repetitions fold into one configuration, as the report folds them). A
/// plot whose `x`, `series`, `facet` or `filter` names a column that is not
/// a param of every configuration is left to the report: its values are
/// known only once the files are read. So is a report whose `filter`
/// leaves no configuration (it fails saying so when it runs).
pub fn check_plots<'a>(
    spec: &ReportSpec,
    configs: impl IntoIterator<Item = &'a [(String, Value)]>,
) -> Result<(), (usize, TaskError)> {
    if spec.plots.is_empty() {
        return Ok(());
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut rows: Vec<BTreeMap<String, Value>> = Vec::new();
    for config in configs {
        let params: BTreeMap<String, Value> = config
            .iter()
            .filter(|(name, _)| name != REP_PARAM)
            .cloned()
            .collect();
        if !kept(spec, &params) {
            continue;
        }
        let key = serde_json::to_string(&params).unwrap_or_default();
        if seen.insert(key) {
            rows.push(params);
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    let params: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.keys())
        .map(String::as_str)
        .collect();
    for (i, plot) in spec.plots.iter().enumerate() {
        if let Some(e) = missing_column(spec, plot, &params) {
            return Err((i, e));
        }
        check_plot(plot, &rows).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// A column the plot names that the table cannot have. With `columns`
/// given, the table holds the params, those columns (and their interval
/// bounds) and the report's own columns (`reps`, `interval`, …); without,
/// its columns come from the files, and nothing is judged here.
fn missing_column(spec: &ReportSpec, plot: &Plot, params: &BTreeSet<&str>) -> Option<TaskError> {
    if spec.columns.is_empty() {
        return None;
    }
    let own = [REPS, INTERVAL, WIDE, INVALID, SAMPLES, ENV_GROUP, NODES];
    let known = |name: &str| {
        params.contains(name)
            || own.contains(&name)
            || spec.columns.iter().any(|c| {
                c == name
                    || [CI_LOW, CI_HIGH]
                        .iter()
                        .any(|bound| name.strip_suffix(bound) == Some(c.as_str()))
            })
    };
    let series = plot.series.iter().flat_map(|s| &s.0);
    let named = [("plot.x", &plot.x), ("plot.y", &plot.y)]
        .into_iter()
        .chain(series.map(|c| ("plot.series", c)))
        .chain(plot.facet.iter().map(|c| ("plot.facet", c)))
        .chain(plot.filter.keys().map(|c| ("plot.filter", c)));
    let (field, name) = named.into_iter().find(|(_, name)| !known(name))?;
    let columns: Vec<String> = params
        .iter()
        .copied()
        .chain(spec.columns.iter().map(String::as_str))
        .map(|c| format!("`{c}`"))
        .collect();
    Some(TaskError::UnknownTableColumn {
        field: field.to_owned(),
        name: name.clone(),
        help: format!(
            "the table's columns are {}; a metric must also be listed in `columns`",
            columns.join(", ")
        ),
    })
}

/// One plot over the configurations' params.
fn check_plot(plot: &Plot, rows: &[BTreeMap<String, Value>]) -> Result<(), TaskError> {
    let series: &[String] = plot.series.as_ref().map_or(&[], |s| &s.0);
    let mut shown = std::iter::once(&plot.x)
        .chain(series)
        .chain(&plot.facet)
        .chain(plot.filter.keys());
    if shown.any(|column| rows.iter().any(|row| !row.contains_key(column))) {
        return Ok(());
    }
    // The drawn configurations by x, as the report draws them.
    let mut drawn: Vec<(f64, usize)> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let passes = plot
            .filter
            .iter()
            .all(|(name, wanted)| same(&Cell::from_value(&row[name]), &Cell::from_value(wanted)));
        if !passes {
            continue;
        }
        let Some(x) = Cell::from_value(&row[&plot.x]).as_f64() else {
            return Ok(());
        };
        drawn.push((x, r));
    }
    drawn.sort_by(|a, b| a.0.total_cmp(&b.0));
    // (facet, line, x) -> the first configuration drawn there.
    let mut at: HashMap<(String, String, u64), usize> = HashMap::new();
    for (x, r) in drawn {
        let row = &rows[r];
        let label = if series.is_empty() {
            plot.y.clone()
        } else {
            series
                .iter()
                .map(|name| format!("{name}={}", Cell::from_value(&row[name]).text()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let panel = plot
            .facet
            .as_ref()
            .map_or(String::new(), |f| Cell::from_value(&row[f]).text());
        let key = (panel, label.clone(), x.to_bits());
        if let Some(&first) = at.get(&key) {
            let other = &rows[first];
            let differ: Vec<&str> = row
                .keys()
                .chain(other.keys())
                .filter(|name| row.get(*name) != other.get(*name))
                .map(String::as_str)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(super::zigzag::error(plot, &label, x, &differ));
        }
        at.insert(key, r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(plot: &str) -> ReportSpec {
        ron::from_str(&format!(
            r#"(title: "t", sources: ["runs"], plots: [Plot(x: "n", y: "t", series: ["m", "dtype"]), {plot}])"#
        ))
        .unwrap()
    }

    /// m × n × dtype, each configuration run twice (`rep`).
    fn configs() -> Vec<Vec<(String, Value)>> {
        let mut out = Vec::new();
        for m in [1, 2] {
            for n in [64, 128] {
                for dtype in ["f16", "f32"] {
                    for rep in [0, 1] {
                        out.push(vec![
                            ("m".to_owned(), Value::Int(m)),
                            ("n".to_owned(), Value::Int(n)),
                            ("dtype".to_owned(), Value::Str(dtype.to_owned())),
                            (REP_PARAM.to_owned(), Value::Int(rep)),
                        ]);
                    }
                }
            }
        }
        out
    }

    fn check(plot: &str) -> Result<(), (usize, TaskError)> {
        let configs = configs();
        check_plots(&spec(plot), configs.iter().map(Vec::as_slice))
    }

    /// A report of the one plot `plot`.
    fn one(plot: &str) -> ReportSpec {
        ron::from_str(&format!(
            r#"(title: "t", sources: ["runs"], plots: [{plot}])"#
        ))
        .unwrap()
    }

    /// `plot` alone over [`configs`].
    fn run(plot: &str) -> Result<(), (usize, TaskError)> {
        let configs = configs();
        check_plots(&one(plot), configs.iter().map(Vec::as_slice))
    }

    #[test]
    fn a_line_through_a_param_the_plot_does_not_show_is_found_from_params() {
        let (plot, e) = check(r#"Plot(x: "n", y: "t", series: "m")"#).unwrap_err();
        // The first plot splits by both; the second's line `m=1` passes
        // through f16 and f32 at n = 64.
        assert_eq!(plot, 1);
        let TaskError::BadSpec { detail, help, .. } = e else {
            panic!("{e:?}")
        };
        assert!(
            detail.contains("the line `m=1`") && detail.contains("n = 64: they differ in `dtype`,"),
            "{detail}"
        );
        assert!(help.contains("`series`"), "{help}");
    }

    #[test]
    fn a_series_a_facet_or_a_filter_for_every_hidden_param_passes() {
        for ok in [
            r#"Plot(x: "n", y: "t", series: ["m", "dtype"])"#,
            r#"Plot(x: "n", y: "t", series: "m", facet: "dtype")"#,
            r#"Plot(x: "n", y: "t", series: "m", filter: {"dtype": "f16"})"#,
            r#"Plot(x: "n", y: "t", filter: {"dtype": "f16", "m": 2.0})"#,
        ] {
            assert!(run(ok).is_ok(), "{ok}");
        }
        let TaskError::BadSpec { detail, .. } =
            run(r#"Plot(x: "n", y: "t", facet: "m")"#).unwrap_err().1
        else {
            panic!()
        };
        assert!(detail.contains("differ in `dtype`"), "{detail}");
    }

    #[test]
    fn a_plot_of_a_column_the_table_cannot_have_is_found() {
        let with_columns = |plot: &str| -> Result<(), (usize, TaskError)> {
            let mut spec = one(plot);
            spec.columns = vec!["t".to_owned()];
            let configs = configs();
            check_plots(&spec, configs.iter().map(Vec::as_slice))
        };
        let e = with_columns(r#"Plot(x: "n", y: "latency_ms.p99", series: ["m", "dtype"])"#)
            .unwrap_err()
            .1;
        let TaskError::UnknownTableColumn { field, name, help } = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            (field.as_str(), name.as_str()),
            ("plot.y", "latency_ms.p99")
        );
        assert!(help.contains("`dtype`, `m`, `n`, `t`"), "{help}");
        // A param, a listed column, its interval bound, the report's own.
        for ok in [
            r#"Plot(x: "n", y: "t.ci95_high", series: ["m", "dtype"])"#,
            r#"Plot(x: "reps", y: "t", series: ["m", "dtype"], filter: {"n": 64})"#,
        ] {
            assert!(with_columns(ok).is_ok(), "{ok}");
        }
        // Without `columns`, the files say what the table holds.
        assert!(run(r#"Plot(x: "n", y: "latency_ms.p99", series: ["m", "dtype"])"#).is_ok());
    }

    #[test]
    fn a_column_that_is_not_a_param_is_left_to_the_report() {
        // x, a series or a filter that only the files hold.
        assert!(run(r#"Plot(x: "latency_ms.median", y: "t")"#).is_ok());
        assert!(run(r#"Plot(x: "n", y: "t", series: "op")"#).is_ok());
        assert!(run(r#"Plot(x: "n", y: "t", filter: {"op": "mm"})"#).is_ok());
        // The report's own filter leaves one value of each hidden param.
        let mut fixed = one(r#"Plot(x: "n", y: "t")"#);
        fixed.filter = [
            ("m".to_owned(), Value::Int(1)),
            ("dtype".to_owned(), Value::Str("f32".to_owned())),
        ]
        .into();
        let configs = configs();
        assert!(check_plots(&fixed, configs.iter().map(Vec::as_slice)).is_ok());
        // A filter that leaves nothing: the report says so when it runs,
        // not a plot column as missing here.
        let mut none = one(r#"Plot(x: "n", y: "t")"#);
        none.columns = vec!["t".to_owned()];
        none.filter = [("m".to_owned(), Value::Int(3))].into();
        assert!(check_plots(&none, configs.iter().map(Vec::as_slice)).is_ok());
    }
}
