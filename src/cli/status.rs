//! `vitgraph status` and `vitgraph explain`.

use std::collections::{BTreeMap, HashMap};

use clap::Args;
use serde::Serialize;

use super::{load, usage, Failure};
use crate::engine::env::HostEnv;
use crate::engine::key::{json_diff, RecordedParts};
use crate::engine::noop;
use crate::engine::plan::{plan, EnvProbe, Evaluation, Evaluator, Reason, Verdict};
use crate::engine::session::{Begun, Judgement, Session, Use};
use crate::exit;
use crate::graph::Graph;
use crate::pipeline::Override;
use crate::store::{NodeState, Store};
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Stages, node ids, globs or pipeline file stems; none means everything.
    pub targets: Vec<String>,
    /// Print one JSON object: {"nodes": [...], "summary": {...}}, and "precision": [...] where a stage has a precision target.
    #[arg(long)]
    pub json: bool,
    /// List every stale node (by default long stages are abbreviated).
    #[arg(short, long)]
    pub verbose: bool,
    /// Also say which runs a remote holds too, which only this workspace,
    /// and which only the remote (NAME: one of `vitgraph.ron`'s remotes;
    /// without it, the only one).
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "")]
    pub remote: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// How nodes are judged: as a local build or a cluster build would
/// (`--executor slurm` keys hardware nodes with the compute nodes' probed
/// facets). Give the same SLURM flags as to `build`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Judge as `build --executor EXECUTOR` would (default: `executor:` in vitgraph.ron).
    #[arg(long, value_enum)]
    pub executor: Option<super::args::Executor>,
    #[command(flatten)]
    pub slurm: super::args::SlurmFlags,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// A node id, e.g. 'rq2_runs[model=vit32x6x384,res=512]'.
    pub node: String,
    /// Print the key's parts and their diff as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Serialize)]
struct NodeStatus<'a> {
    id: &'a str,
    stage: &'a str,
    state: &'static str,
    reasons: &'a [Reason],
    /// For a repetition not needed: why (`precise at ±1.4 % after 4 runs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
    /// For a run measured on another machine that stands for this machine's:
    /// where it was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    measured_elsewhere: Option<super::elsewhere::Place>,
}

/// The graph, the selection, each selected node's verdict, the recorded
/// states they were judged against, and the store they came from (None
/// before the first build).
pub(super) type Planned = (
    Graph,
    Vec<usize>,
    HashMap<usize, Evaluation>,
    HashMap<String, NodeState>,
    Option<Store>,
);

/// Loads the store and plans the selection of `graph`.
pub(super) fn planned(
    ws: &Workspace,
    graph: Graph,
    targets: &[String],
    cluster: &ClusterArgs,
) -> Result<Planned, Failure> {
    let t = super::Timer::start();
    let selection = crate::graph::select(&graph, targets)?;
    let store = Store::open_existing(&ws.root)?;
    t.lap("open store");
    let states = match &store {
        Some(s) => s.reader().load_states()?,
        None => HashMap::new(),
    };
    t.lap("load states");
    let host = HostEnv::new();
    let cluster_env = judged_on_cluster(ws, &graph, cluster, &host, store.as_ref())?;
    let env: &dyn EnvProbe = match &cluster_env {
        Some(c) => c,
        None => &host,
    };
    let ev = Evaluator {
        root: &ws.root,
        store: store.as_ref(),
        observer: None,
        states: &states,
        env,
        accept_invalid: false,
    };
    let evals = plan(&ev, &graph, &selection)?;
    t.lap("plan");
    if let Some(s) = &store {
        // The hashes it computed save the next command hashing again.
        let _ = s.hasher().flush();
    }
    t.lap("flush stat cache");
    Ok((graph, selection, evals, states, store))
}

/// The environment of a cluster build, when the nodes are judged as one.
fn judged_on_cluster<'a>(
    ws: &Workspace,
    graph: &Graph,
    cluster: &ClusterArgs,
    host: &'a HostEnv,
    store: Option<&Store>,
) -> Result<Option<crate::slurm::probe::ClusterEnv<'a>>, Failure> {
    let file = crate::pipeline::load_settings(&ws.root)?;
    if !super::args::is_slurm(cluster.executor, &file) {
        return Ok(None);
    }
    super::slurm::stored_env(graph, &file, &cluster.slurm, host, store).map(Some)
}

/// Prints `status` of every node fresh, as the no-op snapshot vouches.
fn print_all_fresh(nodes: &[noop::NodeName], json: bool) {
    if json {
        let list: Vec<NodeStatus> = nodes
            .iter()
            .map(|n| NodeStatus {
                id: &n.id,
                stage: &n.stage,
                state: "fresh",
                reasons: &[],
                why: None,
                measured_elsewhere: None,
            })
            .collect();
        let out =
            serde_json::json!({ "nodes": list, "summary": { "fresh": nodes.len(), "stale": 0 } });
        println!("{out}");
        return;
    }
    let mut stages: Vec<(&str, usize)> = Vec::new();
    for n in nodes.iter() {
        match stages.iter_mut().find(|(s, _)| *s == n.stage.as_str()) {
            Some((_, count)) => *count += 1,
            None => stages.push((n.stage.as_str(), 1)),
        }
    }
    let width = stages.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    for (stage, count) in &stages {
        println!("{stage:width$}  {count} fresh");
    }
    println!("{} fresh, 0 stale", nodes.len());
}

/// The verdicts of the selected nodes a change since the snapshot reached,
/// every other node being fresh with its latest run (as an incremental build
/// judges); None when a full plan must decide.
fn judged_by_session(
    ws: &Workspace,
    graph: &Graph,
    selection: &[usize],
    session: &mut Session,
) -> Result<Option<HashMap<usize, Evaluation>>, Failure> {
    let t = super::Timer::start();
    let inc = match session.judge(graph, selection) {
        Judgement::Fresh => return Ok(Some(HashMap::new())),
        Judgement::Reached(inc) => inc,
        Judgement::Full => return Ok(None),
    };
    let Some(store) = session.take_store() else {
        return Ok(None);
    };
    t.lap("what the change reaches");
    let judged =
        crate::engine::judge_reached(graph, &ws.root, &store, &HostEnv::new(), &inc, false)?;
    t.lap(&format!(
        "judge the changed ({} of {} nodes)",
        inc.dirty.len(),
        graph.nodes.len()
    ));
    Ok(judged)
}

pub(super) fn status(
    ws: &Workspace,
    overrides: &[Override],
    args: StatusArgs,
) -> Result<i32, Failure> {
    let file = crate::pipeline::load_settings(&ws.root)?;
    let on_cluster = super::args::is_slurm(args.cluster.executor, &file);
    // A cluster's hardware nodes are judged with the compute nodes' facets:
    // always a full plan.
    let usage = if on_cluster || args.remote.is_some() {
        Use::Never
    } else {
        Use::Read
    };
    let t = super::Timer::start();
    let sources = super::PipelineSources::new(&ws.root, overrides);
    let begun = Session::begin(
        &ws.root,
        &sources,
        &HostEnv::new(),
        usage,
        args.targets.is_empty(),
    )
    .unwrap_or(Begun::Judge(Session::full()));
    let mut session = match begun {
        Begun::AllFresh(nodes) => {
            t.lap("check snapshot");
            print_all_fresh(&nodes, args.json);
            return Ok(exit::SUCCESS);
        }
        Begun::Judge(session) => session,
    };
    if session.checked() {
        t.lap("check snapshot");
    }
    let jobs = super::slurm::jobs_for_status(ws, args.json)?;
    let graph = load(ws, overrides)?;
    t.lap("load pipelines");
    let selection = crate::graph::select(&graph, &args.targets)?;
    super::refuse(ws, &graph, &selection)?;
    let reached =
        judged_by_session(ws, &graph, &selection, &mut session)?.map(|evals| (selection, evals));
    // Judged: every selected node (a full plan), or only those a change
    // reached (the others are fresh).
    let (graph, selection, evals) = match reached {
        Some((selection, evals)) => (graph, selection, evals),
        None => {
            let (graph, selection, evals, states, _) =
                planned(ws, graph, &args.targets, &args.cluster)?;
            std::mem::forget(states);
            (graph, selection, evals)
        }
    };
    let stale_of = |i: &usize| stale_reasons(&evals, *i);
    let stale = selection.iter().filter(|i| stale_of(i).is_some()).count();
    let waiting = selection.iter().filter(|i| undecided(&evals, **i)).count();
    let unneeded = selection
        .iter()
        .filter(|i| unneeded_why(&evals, **i).is_some())
        .count()
        - waiting;
    let fresh = selection.len() - stale - unneeded - waiting;
    let signers = super::elsewhere::signers(&ws.root);
    let remote = (args.remote.as_deref())
        .map(|name| super::remote_status::of(ws, name, &graph, &selection, &evals))
        .transpose()?;
    let standings = crate::engine::standing::standings(&graph, &ws.root, &selection, |i| {
        evals.get(&i).map(|e| &e.verdict)
    });
    let left_behind = super::elsewhere::without_outputs(&ws.root, &graph, &selection, &evals);
    if args.json {
        let nodes: Vec<NodeStatus> = selection
            .iter()
            .map(|i| {
                let n = &graph.nodes[*i];
                let reasons = stale_of(i);
                let why = unneeded_why(&evals, *i);
                NodeStatus {
                    id: &n.id,
                    stage: &n.stage,
                    state: match (reasons.is_some(), why.is_some()) {
                        (true, _) => "stale",
                        (_, true) if undecided(&evals, *i) => "undecided",
                        (_, true) => "not_needed",
                        _ => "fresh",
                    },
                    reasons: reasons.unwrap_or(&[]),
                    why,
                    measured_elsewhere: evals
                        .get(i)
                        .and_then(Evaluation::elsewhere)
                        .map(|r| super::elsewhere::Place::of(r, &signers)),
                }
            })
            .collect();
        let mut summary = serde_json::json!({ "fresh": fresh, "stale": stale });
        let elsewhere = nodes
            .iter()
            .filter(|n| n.measured_elsewhere.is_some())
            .count();
        super::elsewhere::count(&mut summary, elsewhere, &left_behind);
        if unneeded > 0 {
            summary["not_needed"] = unneeded.into();
        }
        if waiting > 0 {
            summary["undecided"] = waiting.into();
        }
        let mut out = serde_json::json!({ "nodes": nodes, "summary": summary });
        if !standings.is_empty() {
            out["precision"] = serde_json::to_value(&standings).unwrap_or_default();
        }
        if !jobs.is_empty() {
            out["jobs"] = serde_json::to_value(&jobs).unwrap_or_default();
        }
        if let Some(r) = &remote {
            out["remote"] = super::remote_status::json(r);
        }
        println!("{out}");
        // Freeing 100,000 nodes' graph, verdicts and records one by one
        // costs more than 0.1 s; the process ends right after printing.
        std::mem::forget((graph, evals));
        return Ok(exit::SUCCESS);
    }
    print_stages(&graph, &selection, &evals, args.verbose);
    super::elsewhere::print(&super::elsewhere::grouped(
        &graph, &selection, &evals, &signers,
    ));
    super::elsewhere::print_without_outputs(&left_behind);
    if let Some(r) = &remote {
        super::remote_status::print(r);
    }
    print_standings(&standings);
    super::slurm::print_jobs(&jobs);
    let mut line = format!("{fresh} fresh, {stale} stale");
    if unneeded > 0 {
        line.push_str(&format!(", {unneeded} repetitions not needed"));
    }
    if waiting > 0 {
        line.push_str(&format!(
            ", {waiting} repetitions decided once the ones before them are built"
        ));
    }
    println!("{line}");
    std::mem::forget((graph, evals));
    Ok(exit::SUCCESS)
}

/// Why node `i` is stale; None when it is fresh, not needed, or was not
/// judged because no change reached it.
fn stale_reasons(evals: &HashMap<usize, Evaluation>, i: usize) -> Option<&[Reason]> {
    evals
        .get(&i)
        .filter(|e| e.verdict.is_stale())
        .map(|e| e.verdict.reasons())
}

/// Why repetition `i` is not needed, or not decided yet; None for every
/// other node.
fn unneeded_why(evals: &HashMap<usize, Evaluation>, i: usize) -> Option<&str> {
    match evals.get(&i).map(|e| &e.verdict) {
        Some(Verdict::Unneeded(why) | Verdict::Undecided(why)) => Some(why),
        _ => None,
    }
}

fn undecided(evals: &HashMap<usize, Evaluation>, i: usize) -> bool {
    matches!(
        evals.get(&i).map(|e| &e.verdict),
        Some(Verdict::Undecided(_))
    )
}

/// The configurations whose precision target was not met: their budget
/// is spent (a flag that stays while they are fresh), or they still wait
/// for repetitions.
fn print_standings(standings: &[crate::engine::standing::Standing]) {
    let flagged: Vec<_> = standings
        .iter()
        .filter(|s| matches!(s.state, "budget_spent" | "imprecise"))
        .collect();
    if flagged.is_empty() {
        return;
    }
    let precise = standings.iter().filter(|s| s.state == "precise").count();
    println!();
    for s in &flagged {
        let detail = if s.state == "imprecise" {
            format!("imprecise: {}", s.detail)
        } else {
            s.detail.clone()
        };
        println!("precision  {}  {detail}", s.configuration);
    }
    println!(
        "precision: {precise} of {} configurations within their target",
        standings.len()
    );
    println!();
}

/// The text form of `status`: a line per stage (fresh and stale counts, the
/// stale ones by reason), then the stale nodes with their grouped reasons,
/// at most ten per stage unless `verbose`.
fn print_stages(
    graph: &Graph,
    selection: &[usize],
    evals: &HashMap<usize, Evaluation>,
    verbose: bool,
) {
    let mut per_stage: BTreeMap<&str, (usize, Vec<usize>)> = BTreeMap::new();
    let mut unneeded: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for &i in selection {
        let stage = graph.nodes[i].stage.as_str();
        let entry = per_stage.entry(stage).or_default();
        match stale_reasons(evals, i) {
            None if undecided(evals, i) => unneeded.entry(stage).or_default().1 += 1,
            None if unneeded_why(evals, i).is_some() => unneeded.entry(stage).or_default().0 += 1,
            None => entry.0 += 1,
            Some(_) => entry.1.push(i),
        }
    }
    let stages: Vec<(&str, &(usize, Vec<usize>))> = graph
        .stages
        .iter()
        .filter_map(|s| {
            per_stage
                .get_key_value(s.name.as_str())
                .map(|(k, v)| (*k, v))
        })
        .collect();
    let width = stages.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    for (stage, (fresh, stale)) in &stages {
        let firsts = stale
            .iter()
            .filter_map(|&i| stale_reasons(evals, i).and_then(|r| r.first()));
        let mut line = super::reasons::stage_summary(*fresh, firsts);
        if let Some((not_needed, waiting)) = unneeded.get(stage) {
            if *not_needed > 0 {
                line.push_str(&format!(", {not_needed} repetitions not needed"));
            }
            if *waiting > 0 {
                line.push_str(&format!(", {waiting} repetitions undecided"));
            }
        }
        println!("{stage:width$}  {line}");
    }
    let limit = if verbose { usize::MAX } else { 10 };
    if stages.iter().any(|(_, (_, stale))| !stale.is_empty()) {
        println!();
    }
    for (stage, (_, stale)) in &stages {
        if stale.is_empty() {
            continue;
        }
        for &i in stale.iter().take(limit) {
            let reasons = super::reasons::grouped(stale_reasons(evals, i).unwrap_or(&[]), graph);
            println!("stale  {}  {}", graph.nodes[i].id, reasons.join("; "));
        }
        if stale.len() > limit {
            println!(
                "       … and {} more stale nodes in `{stage}` (use -v or --json to list all)",
                stale.len() - limit,
            );
        }
    }
}

/// The key parts recorded with a run, fetched from the store.
/// The key parts recorded with `run`, parsed.
pub(super) fn store_parts(store: &Store, run: &crate::store::RunRecord) -> Option<RecordedParts> {
    store.reader().key_parts(run).ok()?.parse()
}

pub(super) fn explain(
    ws: &Workspace,
    overrides: &[Override],
    args: ExplainArgs,
) -> Result<i32, Failure> {
    let graph = load(ws, overrides)?;
    let Some(idx) = graph.find(&args.node) else {
        let ids = graph.nodes.iter().map(|n| n.id.as_str());
        let help = match crate::pipeline::did_you_mean(&args.node, ids) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "`vitgraph ls TARGET` lists node ids".into(),
        };
        return Err(usage(format!("unknown node `{}`", args.node), help));
    };
    let (graph, _, evals, states, store) =
        planned(ws, graph, std::slice::from_ref(&args.node), &args.cluster)?;
    let node = &graph.nodes[idx];
    let env_source = if node.task.measures_hardware() {
        let host = HostEnv::new();
        let cluster = judged_on_cluster(ws, &graph, &args.cluster, &host, store.as_ref())?;
        Some(match &cluster {
            Some(c) => c.source_of(node),
            None => host.source_of(node),
        })
    } else {
        None
    };
    let e = &evals[&idx];
    let signers = super::elsewhere::signers(&ws.root);
    let last = states.get(&node.id).and_then(|s| s.latest_success.as_ref());
    let recorded: Option<RecordedParts> = last.and_then(|r| store_parts(store.as_ref()?, r));
    let state = match &e.verdict {
        Verdict::Fresh(_) => "fresh",
        Verdict::Unneeded(_) => "not needed",
        Verdict::Undecided(_) => "undecided",
        _ => "stale",
    };
    let current = e.key.as_ref().map(|(_, p)| p);
    let mut diff = Vec::new();
    if let (Some(cur), Some(rec)) = (current, &recorded) {
        json_diff(
            "",
            &serde_json::to_value(&rec.parts).unwrap_or_default(),
            &serde_json::to_value(cur).unwrap_or_default(),
            &mut diff,
        );
    }
    let evidence = node
        .task
        .measures_hardware()
        .then(|| super::evidence::of(&ws.root, &node.out_rel().join("results.json")))
        .flatten();
    if args.json {
        let out = serde_json::json!({
            "measurement": evidence.as_ref().map(|(v, _)| v),
            "id": node.id,
            "stage": node.stage,
            "state": state,
            "reasons": e.verdict.reasons(),
            "why": match &e.verdict { Verdict::Unneeded(why) | Verdict::Undecided(why) => Some(why), _ => None },
            "key": { "current": e.key.as_ref().map(|(k, _)| k.to_hex()), "recorded": last.map(|r| r.key.to_hex()) },
            "parts": { "current": current, "recorded": recorded.as_ref().map(|r| &r.parts) },
            "diff": diff,
            "env_source": env_source,
            "measured_elsewhere": e.elsewhere().map(|r| super::elsewhere::Place::of(r, &signers)),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(exit::SUCCESS);
    }
    println!("{}  ({state})", node.id);
    println!("  stage: {}", node.stage);
    if let Some(source) = &env_source {
        println!("  environment facets from: {source}");
    }
    if let Some(run) = e.elsewhere() {
        println!(
            "  measured elsewhere: on {}; its environment facets differ from this machine's (below), and it stands for this machine's run (`vitgraph build --measure-here {}` measures it here)",
            super::elsewhere::Place::of(run, &signers),
            node.id
        );
    }
    super::elsewhere::explain_without_outputs(&ws.root, &e.verdict);
    for r in super::reasons::grouped(e.verdict.reasons(), &graph) {
        println!("  stale: {r}");
    }
    match &e.verdict {
        Verdict::Unneeded(why) => println!("  not needed: {why}"),
        Verdict::Undecided(why) => println!("  undecided: {why}"),
        _ => {}
    }
    match &e.key {
        Some((k, _)) => println!("  key: {}", k.to_hex()),
        None => println!("  key: not known until upstream nodes are rebuilt"),
    }
    match last {
        Some(r) => println!("  recorded key: {}", r.key.to_hex()),
        None => println!("  recorded key: none"),
    }
    if let Some(p) = current {
        println!("  parts:");
        println!("    kind: {} v{}", p.kind, p.version);
        println!("    spec: {}", p.spec);
        for (path, h) in &p.inputs {
            println!("    input {path}: {}", h.short());
        }
        for (id, h) in &p.upstream {
            println!("    upstream {id}: {}", h.short());
        }
        for (f, v) in &p.env {
            println!("    env {f}: {v}");
        }
    }
    if !diff.is_empty() {
        println!("  changed since the recorded run:");
        for d in &diff {
            println!("    {d}");
        }
    }
    for line in evidence.iter().flat_map(|(_, lines)| lines) {
        println!("  {line}");
    }
    Ok(exit::SUCCESS)
}
