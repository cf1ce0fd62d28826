//! The `Report` task as written in a pipeline file, and the file names it
//! promises to create (which depend on its plots and its comparison).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::value::Value;

/// Bump when the report's output changes for the same inputs.
/// 2: plot ticks at integers and decades, the legend in the emptiest corner, one colour per series across a report, PNG at twice the size.
/// 3: repetitions folded into one row per configuration; 95 % interval columns, `reps`, `interval`; intervals in comparisons and plots.
/// 4: a value every repetition agrees on is shown without `± 0.0 %`.
/// 5: plot axis titles in words with units (`median latency per batch (ms)`); a line through a hidden param is refused; a plot without data is a line of text; tick labels with SI prefixes.
/// 6: points of fewer than 20 per-batch samples drawn hollow, with a note under the plot; a column `invalid` for runs kept invalid; an x axis of 8 values or fewer ticked at its values.
/// 7: one statistics module: a within-run ratio on the log scale from its batches' standard errors (no bootstrap); `compare.csv` gains `verdict` (faster/slower/same/inconclusive against `margin`); points drawn hollow by fewer than 3 repetitions or an interval over the target, not by batch count.
/// 8: a tick near the data's minimum and SI tick labels in three significant digits; a series' colour picked by its sorted `name=value` parts, so it is one across plots whatever order they name them in; headings in words when a plot has no `title`.
/// 9: a faceted plot's panels share one legend under the figure's heading; `report.md` and each plot say where the rows were measured when that is one place; the lines under a plot each on its own line.
pub const VERSION: u32 = 9;

/// The files every report writes, whatever its spec.
pub(super) const TABLE_CSV: &str = "table.csv";
pub(super) const TABLE_PARQUET: &str = "table.parquet";
pub(super) const REPORT_MD: &str = "report.md";
pub(super) const COMPARE_CSV: &str = "compare.csv";

/// `Report(...)`: join upstream nodes' files with their params into tables,
/// plots and comparisons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportSpec {
    /// The heading of `report.md`.
    pub title: String,
    /// Stages (all among the stage's `needs`) whose nodes are joined.
    pub sources: Vec<String>,
    /// Dotted paths into the joined files; empty takes every field of `rows`
    /// tables, or a default set of headline metrics.
    #[serde(default)]
    pub columns: Vec<String>,
    /// Which entry of `metrics.json`'s `devices` the paths read from.
    #[serde(default)]
    pub device: usize,
    #[serde(default)]
    pub plots: Vec<Plot>,
    #[serde(default)]
    pub compare: Option<Compare>,
    /// Only source nodes whose params equal these values make rows (numbers
    /// match by value): one report per research question out of one stage.
    /// Left out of the serialized spec when empty, so reports without it
    /// keep their keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filter: BTreeMap<String, Value>,
    /// The study's precision target: a row whose 95 % interval is wider
    /// than ±`target` of its value (0.02: ±2 %) is flagged in `wide`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// The metric that answers the study's question: a column of the
    /// table (or the comparison's metric). `report.md` names it under the
    /// title with what it measures — the GPU's time, or an end-to-end
    /// number the host paces. Left out of the serialized spec when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// `Plot(...)`: one column against another, one line per value of `series`
/// (or per combination of values, when `series` names several columns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plot {
    /// The file stem under `plots/`; by default `<y>_vs_<x>[_by_<series>]`.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<String>,
    pub x: String,
    pub y: String,
    #[serde(
        default,
        deserialize_with = "bare_some_columns",
        skip_serializing_if = "Option::is_none"
    )]
    pub series: Option<Columns>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    /// Only rows whose cells equal these values are drawn (numbers match by
    /// value), so one plot can fix the params it does not show. Left out of
    /// the serialized spec when empty, so plots without it keep their keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filter: BTreeMap<String, Value>,
    /// The plot's heading, instead of `<y> vs <x> by <series>`. Left out of
    /// the serialized spec when not given, as `caption`.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// A sentence under the plot (in the image and in `report.md`): what
    /// to read in it.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub caption: Option<String>,
    /// Small multiples: one panel per value of this column, side by side on
    /// shared axes (a two-way sweep: `series: "patch"`, `facet: "depth"`).
    /// Left out of the serialized spec when not given.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub facet: Option<String>,
}

/// The column or columns of a plot's `series`: written `"patch"` or
/// `["m", "dtype"]`. One column serializes as a bare string, as it always
/// has, so existing reports keep their keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns(pub Vec<String>);

impl Columns {
    /// The column names joined by `sep`, as a stem or a caption shows them.
    pub fn joined(&self, sep: &str) -> String {
        self.0.join(sep)
    }
}

impl Serialize for Columns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_str(one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Columns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Columns, D::Error> {
        struct ColumnsVisitor;
        impl<'de> Visitor<'de> for ColumnsVisitor {
            type Value = Columns;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a column name such as \"patch\", or a list of them such as [\"m\", \"dtype\"]",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Columns, E> {
                Ok(Columns(vec![v.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Columns, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                if names.is_empty() {
                    return Err(de::Error::custom(
                        "`series` lists no column: name one or more columns, or leave `series` out",
                    ));
                }
                Ok(Columns(names))
            }
        }
        d.deserialize_any(ColumnsVisitor)
    }
}

/// `Compare(...)`: the ratio `metric(value) / metric(baseline)` for every other
/// value of `param`, within each group of rows equal in every other param.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    pub param: String,
    pub baseline: Value,
    pub metric: String,
    /// The equivalence margin of the verdict: a ratio whose interval lies
    /// within `[1/(1+margin), 1+margin]` is `same` (0.02: ±2 %).
    #[serde(default = "default_margin")]
    pub margin: f64,
    /// Accepted so older pipelines load; unused: no interval of a
    /// comparison is a bootstrap (see `crate::stats`).
    #[serde(default = "default_seed", skip_serializing)]
    pub seed: u64,
    /// Accepted so older pipelines load; unused, as `seed`.
    #[serde(default = "default_resamples", skip_serializing)]
    pub resamples: u32,
}

fn default_margin() -> f64 {
    crate::stats::verdict::MARGIN
}

/// Optional names are written bare (`series: "patch"`), as in the pipeline
/// files' other string fields, rather than as `Some("patch")`.
fn bare_some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

fn bare_some_columns<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Columns>, D::Error> {
    Columns::deserialize(d).map(Some)
}

fn default_seed() -> u64 {
    1
}

fn default_resamples() -> u32 {
    2000
}

/// Columns taken when `columns` is empty and no source is a `rows` table:
/// the headline numbers of the study, those present in at least one file.
pub(super) const DEFAULT_COLUMNS: &[&str] = &[
    "throughput_images_per_s",
    "latency_ms.median",
    "latency_ms.p99",
    "gpu_utilization",
    "kernel_time_ratio",
    "peak_memory_bytes",
];

impl Plot {
    /// The plot's heading: its `title`, else what it plots in words
    /// (`throughput against batch size, one line per model`).
    pub fn heading(&self) -> String {
        match &self.title {
            Some(title) => title.clone(),
            None => super::labels::heading(
                &self.y,
                &self.x,
                self.series.as_ref().map_or(&[][..], |s| &s.0[..]),
            ),
        }
    }

    /// The file stem of this plot's `plots/<stem>.svg` and `.png`.
    pub fn stem(&self) -> String {
        let raw = match (&self.name, &self.series) {
            (Some(name), _) => name.clone(),
            (None, Some(series)) => {
                format!("{}_vs_{}_by_{}", self.y, self.x, series.joined("_"))
            }
            (None, None) => format!("{}_vs_{}", self.y, self.x),
        };
        let raw = match (&self.name, &self.facet) {
            (None, Some(facet)) => format!("{raw}_per_{facet}"),
            _ => raw,
        };
        // Two plots of one slice each (`filter: {"batch": 1}`, `{"batch": 32}`)
        // must not share a file.
        let raw = match self.name {
            Some(_) => raw,
            None => self
                .filter
                .iter()
                .fold(raw, |acc, (k, v)| format!("{acc}_{k}-{v}")),
        };
        sanitize(&raw)
    }
}

impl ReportSpec {
    /// Every file the task creates, relative to its output directory.
    pub fn outputs(&self) -> Vec<String> {
        let mut files = vec![
            TABLE_CSV.to_owned(),
            TABLE_PARQUET.to_owned(),
            REPORT_MD.to_owned(),
        ];
        if self.compare.is_some() {
            files.push(COMPARE_CSV.to_owned());
        }
        for plot in &self.plots {
            let stem = plot.stem();
            files.push(format!("plots/{stem}.svg"));
            files.push(format!("plots/{stem}.png"));
        }
        files
    }
}

/// Keeps ASCII letters, digits, `-` and `_`; anything else becomes `_`, so a
/// dotted column path makes a safe file name.
fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"(
        title: "RQ1",
        sources: ["rq1_analysis", "rq1_runs"],
        columns: ["gpu_utilization", "latency_ms.median"],
        plots: [ Plot(x: "dim", y: "latency_ms.median", series: "patch", log_x: true) ],
        compare: Some(Compare(param: "compile", baseline: "none", metric: "throughput_images_per_s")),
    )"#;

    #[test]
    fn reads_from_ron_with_defaults() {
        let spec: ReportSpec = ron::from_str(SPEC).unwrap();
        assert_eq!(spec.device, 0);
        let compare = spec.compare.as_ref().unwrap();
        assert_eq!(compare.baseline, Value::Str("none".into()));
        assert_eq!((compare.seed, compare.resamples), (1, 2000));
        assert!(spec.plots[0].log_x && !spec.plots[0].log_y);
    }

    #[test]
    fn outputs_name_every_plot_file() {
        let spec: ReportSpec = ron::from_str(SPEC).unwrap();
        assert_eq!(
            spec.outputs(),
            [
                "table.csv",
                "table.parquet",
                "report.md",
                "compare.csv",
                "plots/latency_ms_median_vs_dim_by_patch.svg",
                "plots/latency_ms_median_vs_dim_by_patch.png",
            ]
        );
    }

    #[test]
    fn series_names_one_column_or_several() {
        let one: Plot = ron::from_str(r#"Plot(x: "n", y: "t", series: "m")"#).unwrap();
        let many: Plot =
            ron::from_str(r#"Plot(x: "n", y: "t", series: ["m", "dtype"], filter: {"k": 4096})"#)
                .unwrap();
        assert_eq!(one.series, Some(Columns(vec!["m".into()])));
        assert_eq!(many.stem(), "t_vs_n_by_m_dtype_k-4096");
        assert_eq!(many.filter.get("k"), Some(&Value::Int(4096)));
        let empty = ron::from_str::<Plot>(r#"Plot(x: "n", y: "t", series: [])"#).unwrap_err();
        assert!(empty.to_string().contains("lists no column"), "{empty}");
    }

    #[test]
    fn plots_serialize_compactly_and_read_back() {
        // The serialized spec is part of a node's key and of the job file the
        // task reads back: a one-column series stays a bare string, and unset
        // options and an empty filter do not appear at all.
        let one: Plot = ron::from_str(r#"Plot(x: "n", y: "t", series: "m")"#).unwrap();
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#"{"x":"n","y":"t","series":"m","log_x":false,"log_y":false}"#
        );
        let back: Plot = serde_json::from_str(&serde_json::to_string(&one).unwrap()).unwrap();
        assert_eq!(back, one);
        let many: Plot =
            ron::from_str(r#"Plot(x: "n", y: "t", series: ["m", "dtype"], filter: {"k": 1})"#)
                .unwrap();
        let json = serde_json::to_string(&many).unwrap();
        assert!(
            json.contains(r#""series":["m","dtype"]"#) && json.contains(r#""filter":{"k":1}"#),
            "{json}"
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err =
            ron::from_str::<ReportSpec>(r#"(title: "t", sources: [], colums: [])"#).unwrap_err();
        assert!(err.to_string().contains("colums"), "{err}");
    }
}
