//! Runs measured elsewhere — on another host, with facets other than this
//! machine's — as `status` and `explain` show them (see
//! `Evaluation::elsewhere`).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::engine::plan::{measured_on, Evaluation};
use crate::graph::Graph;
use crate::store::RunRecord;

/// Where a run was measured: its host and its GPUs, as its environment
/// record names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(super) struct Place {
    pub host: String,
    /// The GPUs' model names, `none` on a machine without one.
    pub gpu: String,
}

impl Place {
    pub(super) fn of(run: &RunRecord) -> Place {
        let env = run.env.value();
        let mut names: Vec<String> = env
            .get("gpus")
            .and_then(|g| g.as_array())
            .map(|gpus| {
                gpus.iter()
                    .filter_map(|g| g.get("name")?.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        names.dedup();
        if names.is_empty() {
            if let Some(gpu) = env.pointer("/key_facets/gpu").and_then(|g| g.as_str()) {
                names.push(gpu.to_owned());
            }
        }
        Place {
            host: measured_on(run).unwrap_or_else(|| "an unknown host".into()),
            gpu: if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gpu.as_str() {
            "none" => write!(f, "`{}` (no GPU)", self.host),
            gpu => write!(f, "`{}` ({gpu})", self.host),
        }
    }
}

/// The selected nodes measured elsewhere, by place and stage.
pub(super) fn grouped(
    graph: &Graph,
    selection: &[usize],
    evals: &HashMap<usize, Evaluation>,
) -> BTreeMap<Place, BTreeMap<String, usize>> {
    let mut out: BTreeMap<Place, BTreeMap<String, usize>> = BTreeMap::new();
    for i in selection {
        if let Some(run) = evals.get(i).and_then(Evaluation::elsewhere) {
            *out.entry(Place::of(run))
                .or_default()
                .entry(graph.nodes[*i].stage.clone())
                .or_default() += 1;
        }
    }
    out
}

/// The text form: one line per place and stage, under a heading that says
/// what it means.
pub(super) fn print(groups: &BTreeMap<Place, BTreeMap<String, usize>>) {
    if groups.is_empty() {
        return;
    }
    let n: usize = groups.values().flat_map(|s| s.values()).sum();
    println!();
    println!(
        "measured elsewhere: {n} {} on another host, with other facets, {} for this machine's (`vitgraph build --measure-here` measures here instead)",
        if n == 1 { "run measured" } else { "runs measured" },
        if n == 1 { "stands" } else { "stand" }
    );
    for (place, stages) in groups {
        for (stage, count) in stages {
            println!("  {stage}  {count} on {place}");
        }
    }
}
