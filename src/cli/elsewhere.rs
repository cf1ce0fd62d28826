//! Runs measured elsewhere — on another machine, with facets other than this
//! machine's — as `status` and `explain` show them (see
//! `Evaluation::elsewhere`).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::engine::plan::{measured_on, Evaluation};
use crate::graph::Graph;
use crate::hash::ContentHash;
use crate::store::RunRecord;

/// Where a run was measured: its host and its GPUs, as its environment
/// record names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(super) struct Place {
    pub host: String,
    /// The GPUs' model names, `none` on a machine without one.
    pub gpu: String,
    /// Who signed the run, when it arrived signed (see `vitgraph key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Place {
    /// Where `run` was measured, and who signed it (`signers`, from
    /// [`signers`]).
    pub(super) fn of(run: &RunRecord, signers: &HashMap<ContentHash, String>) -> Place {
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
            signed_by: signers.get(&run.key).cloned(),
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gpu.as_str() {
            "none" => write!(f, "`{}` (no GPU)", self.host)?,
            gpu => write!(f, "`{}` ({gpu})", self.host)?,
        }
        match &self.signed_by {
            Some(s) => write!(f, ", signed by {s}"),
            None => write!(f, ", unsigned"),
        }
    }
}

/// The selected nodes measured elsewhere, by place and stage.
pub(super) fn grouped(
    graph: &Graph,
    selection: &[usize],
    evals: &HashMap<usize, Evaluation>,
    signers: &HashMap<ContentHash, String>,
) -> BTreeMap<Place, BTreeMap<String, usize>> {
    let mut out: BTreeMap<Place, BTreeMap<String, usize>> = BTreeMap::new();
    for i in selection {
        if let Some(run) = evals.get(i).and_then(Evaluation::elsewhere) {
            *out.entry(Place::of(run, signers))
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
        "measured elsewhere: {n} {} on another machine, with other facets, {} for this machine's (`vitgraph build --measure-here` measures here instead)",
        if n == 1 { "run measured" } else { "runs measured" },
        if n == 1 { "stands" } else { "stand" }
    );
    for (place, stages) in groups {
        for (stage, count) in stages {
            println!("  {stage}  {count} on {place}");
        }
    }
}

/// The selected nodes whose run stands for them without its outputs (it
/// arrived in a `--results-only` bundle, see `store::left_behind`): by the
/// host that has the outputs, then stage.
pub(super) fn without_outputs(
    root: &std::path::Path,
    graph: &Graph,
    selection: &[usize],
    evals: &HashMap<usize, Evaluation>,
) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let Ok(Some(store)) = crate::store::Store::open_existing(root) else {
        return out;
    };
    let Ok(left) = store.reader().all_bytes_elsewhere() else {
        return out;
    };
    if left.is_empty() {
        return out;
    }
    for i in selection {
        let Some(e) = evals.get(i).filter(|e| e.verdict.is_fresh()) else {
            continue;
        };
        let Some(run) = e.verdict.run() else { continue };
        match left.get(&run.key) {
            Some(host) if !store.objects().holds_run(run) => {
                *out.entry(host.clone())
                    .or_default()
                    .entry(graph.nodes[*i].stage.clone())
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    out
}

/// `status --json`'s summary counts of runs that stand for others:
/// `measured_elsewhere` (`measured` of them) and `without_outputs` (in
/// `left_behind`, from [`without_outputs`]); each absent when none.
pub(super) fn count(
    summary: &mut serde_json::Value,
    measured: usize,
    left_behind: &BTreeMap<String, BTreeMap<String, usize>>,
) {
    if measured > 0 {
        summary["measured_elsewhere"] = measured.into();
    }
    let n: usize = left_behind.values().flat_map(|s| s.values()).sum();
    if n > 0 {
        summary["without_outputs"] = n.into();
    }
}

/// The text form of [`without_outputs`].
pub(super) fn print_without_outputs(groups: &BTreeMap<String, BTreeMap<String, usize>>) {
    if groups.is_empty() {
        return;
    }
    let n: usize = groups.values().flat_map(|s| s.values()).sum();
    println!();
    println!(
        "without outputs: {n} {} here without all their outputs (a bundle exported with `--results-only`); a node that must read what is missing fails until a bundle with it is imported",
        if n == 1 { "run stands" } else { "runs stand" },
    );
    for (host, stages) in groups {
        let on = crate::store::host_text(host);
        for (stage, count) in stages {
            println!("  {stage}  {count}, the rest on {on}");
        }
    }
}

/// `explain`'s line for a node whose run stands without all its outputs:
/// which are not here, and where they are.
pub(super) fn explain_without_outputs(
    root: &std::path::Path,
    verdict: &crate::engine::plan::Verdict,
) {
    let Some(run) = verdict.run() else { return };
    let Ok(Some(store)) = crate::store::Store::open_existing(root) else {
        return;
    };
    let Some(part) = store.objects().held_part(run) else {
        return;
    };
    let host = store.reader().bytes_elsewhere(&run.key).unwrap_or_default();
    let on = crate::store::host_text(&host);
    let missing: Vec<String> = run
        .outputs
        .iter()
        .filter(|o| !part.outputs.iter().any(|p| p.name == o.name))
        .map(|o| format!("`{}`", o.name))
        .collect();
    println!(
        "  without outputs: {} of its {} outputs are not here ({}), they are on {on}: the run arrived in a bundle exported with `--results-only`",
        missing.len(),
        run.outputs.len(),
        missing.join(", ")
    );
}

/// Who signed the runs of the store at `root` (none without a store).
pub(super) fn signers(root: &std::path::Path) -> HashMap<ContentHash, String> {
    match crate::store::Store::open_existing(root) {
        Ok(Some(store)) => store.reader().signers().unwrap_or_default(),
        _ => HashMap::new(),
    }
}

/// Refuses a build that would measure, on this machine, hardware nodes of
/// a stage whose other runs were measured elsewhere: the study's
/// configurations would be measured on two machines. Cheap unless the
/// store holds runs of another host.
pub(super) fn refuse_mixing(
    root: &std::path::Path,
    store: &crate::store::Store,
    graph: &Graph,
    selection: &[usize],
    env: &dyn crate::engine::plan::EnvProbe,
) -> Result<(), super::Failure> {
    let here = crate::engine::env::host_name();
    let hosts = store.reader().hosts_recorded()?;
    if !store.reader().any_arrived() && !hosts.iter().any(|h| Some(h) != here.as_ref()) {
        return Ok(());
    }
    let states = store.reader().load_states()?;
    let ev = crate::engine::plan::Evaluator {
        root,
        store: Some(store),
        observer: None,
        states: &states,
        env,
        accept_invalid: false,
    };
    let evals = crate::engine::plan::plan(&ev, graph, selection)?;
    let signers = HashMap::new();
    let mut elsewhere: HashMap<&str, Place> = HashMap::new();
    for i in selection {
        if let Some(run) = evals.get(i).and_then(Evaluation::elsewhere) {
            elsewhere
                .entry(graph.nodes[*i].stage.as_str())
                .or_insert_with(|| Place::of(run, &signers));
        }
    }
    let mixing: Vec<&str> = selection
        .iter()
        .filter(|&&i| {
            let node = &graph.nodes[i];
            node.task.measures_hardware()
                && elsewhere.contains_key(node.stage.as_str())
                && matches!(
                    evals.get(&i).map(|e| &e.verdict),
                    Some(crate::engine::plan::Verdict::Stale(_))
                )
        })
        .map(|&i| graph.nodes[i].id.as_str())
        .collect();
    let Some(first) = mixing.first() else {
        return Ok(());
    };
    let stage = graph.nodes[selection
        .iter()
        .copied()
        .find(|&i| graph.nodes[i].id == *first)
        .unwrap_or_default()]
    .stage
    .as_str();
    let place = elsewhere
        .get(stage)
        .map(ToString::to_string)
        .unwrap_or_default();
    Err(super::usage(
        format!(
            "{} {} would be measured on this machine beside runs of {} measured elsewhere (first: `{first}`; `{stage}`'s other runs were measured on {place})",
            mixing.len(),
            if mixing.len() == 1 { "node" } else { "nodes" },
            if mixing.len() == 1 { "its stage" } else { "their stages" },
        ),
        "that would measure one study on two machines: pull or import their runs from where the study is measured, or build with `--measure-here` to measure these stages here",
    ))
}
