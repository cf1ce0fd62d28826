//! `vitgraph compare A B`: two sets of recorded runs (builds, baselines,
//! environments, dates, other workspaces), paired by configuration, with
//! each metric's ratio, interval, verdict, and the facets that differ; and
//! the regression gate (`--fail-if`).
//!
//! The flow: [`select`] turns each side's text into runs from a store,
//! [`measure`] reads their `results.json`, [`pair`] groups and pairs them
//! and judges each metric with [`stats`], [`gate`] checks `--fail-if`, and
//! [`output`] prints the table, JSON or CSV.

pub(crate) mod gate;
pub(crate) mod kernels;
pub(crate) mod measure;
pub(crate) mod members;
pub(crate) mod output;
pub(crate) mod pair;
pub(crate) mod select;

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::store::RecordedRun;

/// A whole comparison, as printed and as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Comparison {
    pub a: SideInfo,
    pub b: SideInfo,
    /// The smallest relative change called a change (0.02 for ±2 %).
    pub threshold: f64,
    #[serde(flatten)]
    pub pairing: pair::Pairing,
    /// With `--kernels`: per traced configuration (an analysis's), the
    /// kernel-level diff.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelPair>,
}

/// The kernel diff of one analysed configuration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KernelPair {
    pub config: String,
    pub diff: kernels::KernelDiff,
}

/// What a side named and how many runs it found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SideInfo {
    pub name: String,
    pub description: String,
    /// Runs with a `results.json` (measurements), after the targets filter.
    pub runs: usize,
}

/// The options of one comparison.
pub(crate) struct Options<'a> {
    pub targets: &'a [String],
    pub metrics: &'a [measure::Metric],
    pub threshold: f64,
    /// Also diff the kernels of paired analyses.
    pub kernels: bool,
}

/// Resolves both sides in the workspace at `root` and compares them.
/// Why a comparison could not be made: a side that names nothing (the
/// user's to fix), or a store that cannot be read (a damaged database, a
/// missing object).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompareError {
    Side(String),
    Store(String),
}

impl From<String> for CompareError {
    fn from(message: String) -> CompareError {
        CompareError::Side(message)
    }
}

impl std::fmt::Display for CompareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompareError::Side(m) | CompareError::Store(m) => f.write_str(m),
        }
    }
}

pub(crate) fn compare(
    root: &Path,
    a: &select::Side,
    b: &select::Side,
    options: &Options<'_>,
) -> Result<Comparison, CompareError> {
    let targets = Targets::new(options.targets)?;
    let chosen = !options.metrics.is_empty();
    let metrics: Vec<measure::Metric> = if chosen {
        options.metrics.to_vec()
    } else {
        measure::HEADLINE
            .iter()
            .flat_map(|group| group.iter())
            .filter_map(|h| measure::Metric::parse(h).ok())
            .collect()
    };
    type Read = (Vec<measure::Run>, HashMap<String, kernels::Profile>, String);
    let builds = select::Builds::default();
    let read = |side: &select::Side| -> Result<Read, CompareError> {
        let holding = if options.kernels {
            crate::store::Holding::MeasurementsAndAnalyses
        } else {
            crate::store::Holding::Measurements
        };
        timing("resolving");
        let (store, runs, description) = select::resolve(side, root, &builds, holding)?;
        timing("resolved");
        let runs: Vec<RecordedRun> = runs.into_iter().filter(|r| targets.keep(r)).collect();
        let analyses = if options.kernels {
            read_analyses(&store, &runs).map_err(CompareError::Store)?
        } else {
            HashMap::new()
        };
        let measured = measure::read_runs(&store, runs, &metrics).map_err(CompareError::Store)?;
        Ok((measured, analyses, description))
    };
    // The two sides are read at once (each opens its own connection).
    let (side_a, side_b) = rayon::join(|| read(a), || read(b));
    let ((ra, ka, da), (rb, kb, db)) = (side_a?, side_b?);
    timing("sides read");
    let pairing = pair::pair(&ra, &rb, &metrics, chosen, options.threshold);
    timing("paired");
    let kernels = kernel_pairs(ka, kb);
    Ok(Comparison {
        a: SideInfo {
            name: a.text.clone(),
            description: da,
            runs: ra.len(),
        },
        b: SideInfo {
            name: b.text.clone(),
            description: db,
            runs: rb.len(),
        },
        threshold: options.threshold,
        pairing,
        kernels,
    })
}

/// Each configuration's analyses (the runs with a `metrics.json`), read in
/// parallel and summed into one kernel profile per configuration.
fn read_analyses(
    store: &crate::store::Store,
    runs: &[RecordedRun],
) -> Result<HashMap<String, kernels::Profile>, String> {
    use rayon::prelude::*;
    runs.par_iter()
        .filter_map(|run| Some((run, store.objects().path(&run.metrics?))))
        .try_fold(
            || (HashMap::new(), kernels::Names::default()),
            |(mut acc, mut names): (HashMap<String, kernels::Profile>, kernels::Names),
             (run, path)| {
                let text = std::fs::read(&path).map_err(|e| {
                    format!(
                        "{}: cannot read its metrics.json ({}): {e}",
                        run.node_id,
                        path.display()
                    )
                })?;
                let metrics: crate::analysis::Metrics =
                    serde_json::from_slice(&text).map_err(|e| {
                        format!(
                            "{}: its metrics.json ({}) does not read as an analysis: {e}",
                            run.node_id,
                            path.display()
                        )
                    })?;
                acc.entry(measure::config_of(&run.node_id))
                    .or_default()
                    .add(&metrics, &mut names);
                Ok((acc, names))
            },
        )
        .map(|folded| folded.map(|(acc, _)| acc))
        .try_reduce(HashMap::new, |mut a, b| {
            for (config, profile) in b {
                a.entry(config).or_default().merge(profile);
            }
            Ok(a)
        })
}

/// Pairs analysed configurations and diffs each pair's kernels.
fn kernel_pairs(
    mut a: HashMap<String, kernels::Profile>,
    mut b: HashMap<String, kernels::Profile>,
) -> Vec<KernelPair> {
    let mut configs: Vec<String> = a.keys().filter(|c| b.contains_key(*c)).cloned().collect();
    configs.sort();
    configs
        .into_iter()
        .filter_map(|config| {
            let (pa, pb) = (a.remove(&config)?, b.remove(&config)?);
            Some(KernelPair {
                diff: kernels::diff(pa.finish(), pb.finish()),
                config,
            })
        })
        .collect()
}

/// `[TARGETS]`: stage names, configurations, node ids, or globs over them
/// (a target with `*` or `?`).
pub(crate) struct Targets {
    literal: Vec<String>,
    set: Option<globset::GlobSet>,
}

impl Targets {
    pub(crate) fn new(targets: &[String]) -> Result<Targets, String> {
        let (globs, literal): (Vec<&String>, Vec<&String>) =
            targets.iter().partition(|t| t.contains(['*', '?']));
        let literal = literal.into_iter().cloned().collect();
        if globs.is_empty() {
            return Ok(Targets { literal, set: None });
        }
        let mut builder = globset::GlobSetBuilder::new();
        for t in globs {
            let glob = globset::GlobBuilder::new(t)
                .literal_separator(false)
                .build()
                .map_err(|e| format!("target `{t}` is not a valid glob: {e}"))?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        Ok(Targets {
            literal,
            set: Some(set),
        })
    }

    pub(crate) fn keep(&self, run: &RecordedRun) -> bool {
        if self.literal.is_empty() && self.set.is_none() {
            return true;
        }
        let config = measure::config_of(&run.node_id);
        let names = [&*run.stage, run.node_id.as_str(), config.as_str()];
        names.iter().any(|n| self.literal.iter().any(|t| t == n))
            || self
                .set
                .as_ref()
                .is_some_and(|set| names.iter().any(|n| set.is_match(n)))
    }
}

/// `2%`, `2 %` or `0.02` as a fraction.
pub(crate) fn parse_threshold(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|n| (0.0..1.0).contains(n))
        .ok_or_else(|| {
            format!("`--threshold {text}` is not a change between 0 and 100 % (`2%` or `0.02`)")
        })
}

/// Where a comparison's time and memory go, on stderr when
/// `VITGRAPH_TIMINGS` is set.
fn timing(what: &str) {
    if std::env::var_os("VITGRAPH_TIMINGS").is_some() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let pick = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .unwrap_or("")
                .to_owned()
        };
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let t = START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64();
        eprintln!(
            "timing: compare {what} at {t:.2} s ({}, {})",
            pick("VmRSS"),
            pick("VmHWM")
        );
    }
}
