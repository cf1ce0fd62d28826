//! `vitgraph graph`, `ls` and `show`: looking at the graph without building.

use clap::Args;

use super::{load, usage, Failure, GraphFormat};
use crate::exit;
use crate::pipeline::Override;
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct GraphArgs {
    pub targets: Vec<String>,
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub format: GraphFormat,
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// With targets, list their node ids; without, list stages.
    pub targets: Vec<String>,
    /// With targets: one JSON object, `{"nodes": [{"id", "stage", "params",
    /// "out"}]}`, the params with their types (what `vitgraph.runs` reads),
    /// and a block measured together's `together` (`axes`, `members`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    pub node: String,
}

pub(super) fn graph(
    ws: &Workspace,
    overrides: &[Override],
    args: GraphArgs,
) -> Result<i32, Failure> {
    end_dead_builds(ws);
    let graph = load(ws, overrides)?;
    let selection = crate::graph::select(&graph, &args.targets)?;
    let mut out = String::new();
    match args.format {
        GraphFormat::Dot => {
            out.push_str("digraph vitgraph {\n  rankdir=LR;\n  node [shape=box];\n");
            for &i in &selection {
                out.push_str(&format!("  n{i} [label={:?}];\n", graph.nodes[i].id));
            }
            for &i in &selection {
                for d in graph.nodes[i].deps() {
                    out.push_str(&format!("  n{d} -> n{i};\n"));
                }
            }
            out.push_str("}\n");
        }
        GraphFormat::Mermaid => {
            out.push_str("graph LR\n");
            for &i in &selection {
                out.push_str(&format!(
                    "  n{i}[\"{}\"]\n",
                    graph.nodes[i].id.replace('"', "#quot;")
                ));
            }
            for &i in &selection {
                for d in graph.nodes[i].deps() {
                    out.push_str(&format!("  n{d} --> n{i}\n"));
                }
            }
        }
        GraphFormat::Json => {
            let nodes: Vec<serde_json::Value> = selection
                .iter()
                .map(|&i| {
                    let n = &graph.nodes[i];
                    let mut node = serde_json::json!({
                        "id": n.id,
                        "stage": n.stage,
                        "params": n.id_params.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v))).collect::<serde_json::Map<_, _>>(),
                        "deps": n.deps().iter().map(|&d| graph.nodes[d].id.clone()).collect::<Vec<_>>(),
                    });
                    // A block measured together: its axes and members, as `ls --json` gives them.
                    if let Some(t) = n.task.together() {
                        node["together"] = serde_json::to_value(t).unwrap_or_default();
                    }
                    node
                })
                .collect();
            out = serde_json::json!({ "nodes": nodes }).to_string();
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(exit::SUCCESS)
}

pub(super) fn ls(ws: &Workspace, overrides: &[Override], args: LsArgs) -> Result<i32, Failure> {
    end_dead_builds(ws);
    let graph = load(ws, overrides)?;
    if args.targets.is_empty() {
        for s in &graph.stages {
            let kind = s
                .nodes
                .first()
                .map(|&i| graph.nodes[i].task.kind())
                .unwrap_or("-");
            println!(
                "{:<28} {:>6} nodes  {:<10} {}",
                s.name,
                s.nodes.len(),
                kind,
                s.file.display()
            );
        }
        return Ok(exit::SUCCESS);
    }
    let selected = crate::graph::select_named(&graph, &args.targets)?;
    if args.json {
        // Each node's current run, as the store records it (none before
        // the first build).
        let states = match crate::store::Store::open_existing(&ws.root)? {
            Some(s) => s.reader().load_states()?,
            None => Default::default(),
        };
        let nodes: Vec<serde_json::Value> = selected
            .iter()
            .map(|&i| {
                let n = &graph.nodes[i];
                let params: serde_json::Map<String, serde_json::Value> = n
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
                    .collect();
                let mut node = serde_json::json!({
                    "id": n.id,
                    "stage": n.stage,
                    "params": params,
                    "out": n.out_rel(),
                });
                // A block measured together: its axes and members.
                if let Some(t) = n.task.together() {
                    node["together"] = serde_json::to_value(t).unwrap_or_default();
                }
                if let Some(r) = states.get(&n.id).and_then(|s| s.latest_success.as_ref()) {
                    node["run"] = serde_json::json!({
                        "key": r.key.to_hex(),
                        "started_at_ms": r.started_at_ms,
                        "duration_ms": r.duration_ms,
                    });
                }
                node
            })
            .collect();
        println!("{}", serde_json::json!({ "nodes": nodes }));
        return Ok(exit::SUCCESS);
    }
    for i in selected {
        println!("{}", graph.nodes[i].id);
    }
    Ok(exit::SUCCESS)
}

pub(super) fn show(ws: &Workspace, overrides: &[Override], args: ShowArgs) -> Result<i32, Failure> {
    let graph = load(ws, overrides)?;
    let Some(i) = graph.find(&args.node) else {
        let help = match crate::pipeline::did_you_mean(
            &args.node,
            graph.nodes.iter().map(|n| n.id.as_str()),
        ) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "`vitgraph ls TARGET` lists node ids".into(),
        };
        return Err(usage(format!("unknown node `{}`", args.node), help));
    };
    let n = &graph.nodes[i];
    let stage = graph.stage(&n.stage);
    println!("node:   {}", n.id);
    println!(
        "stage:  {}  ({})",
        n.stage,
        stage
            .map(|s| s.file.display().to_string())
            .unwrap_or_default()
    );
    println!("kind:   {} v{}", n.task.kind(), n.task.version());
    println!("params:");
    for (k, v) in &n.params {
        println!("  {k} = {v}");
    }
    println!(
        "task:   {}",
        serde_json::to_string_pretty(&n.task).unwrap_or_default()
    );
    for need in &n.needs {
        let ids: Vec<&str> = need
            .nodes
            .iter()
            .map(|&d| graph.nodes[d].id.as_str())
            .collect();
        println!("needs {}: {}", need.stage, ids.join(" "));
    }
    println!("outputs: {}", n.out_rel().display());
    for o in n.task.outputs() {
        println!("  {o}");
    }
    if let Some(store) = crate::store::Store::open_existing(&ws.root)? {
        let states = store.reader().load_states()?;
        if let Some(state) = states.get(&n.id) {
            if let Some(run) = &state.latest_success {
                println!(
                    "last run: key {} took {} ms",
                    run.key.short(),
                    run.duration_ms
                );
                for o in &run.outputs {
                    println!("  {}  {} bytes  {}", o.name, o.size, o.hash.short());
                }
                if let Some(line) = aa_line(&run.env.value(), &n.task) {
                    println!("{line}");
                }
            }
            if let Some(a) = &state.last_attempt {
                println!(
                    "last attempt: {:?}{}",
                    a.status,
                    a.message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(exit::SUCCESS)
}

/// The A/A check a run of a block measured with `check: true` carries:
/// its twin's ratio to the first member and the limit its batches allow.
fn aa_line(env: &serde_json::Value, task: &crate::tasks::TaskSpec) -> Option<String> {
    let check = env.get("aa_check")?;
    let (baseline, twin) = task.aa_members()?;
    let ratio = check.get("ratio")?.as_f64()?;
    let limit = check.get("limit")?.as_f64()?;
    let within = ratio.ln().abs() <= limit;
    Some(format!(
        "A/A check: `{twin}` / `{baseline}` {} = {ratio:.4}, {} the ±{:.2} % its batches allow",
        check.get("metric")?.as_str()?,
        if within { "within" } else { "beyond" },
        100.0 * (limit.exp() - 1.0)
    ))
}

/// Ends what a killed build left running, as every command that opens the
/// store does on opening it. `ls` and `graph` read no store, so they open
/// it only where a build's notes of its task groups are
/// (`cache/tasks/<host>/`): a directory listing, when there are none.
fn end_dead_builds(ws: &Workspace) {
    let tasks = ws.root.join("cache").join("tasks");
    let noted = std::fs::read_dir(&tasks)
        .into_iter()
        .flatten()
        .flatten()
        .any(|host| std::fs::read_dir(host.path()).is_ok_and(|mut files| files.next().is_some()));
    if noted {
        // A store that cannot be opened is left to the commands that use it.
        let _ = crate::store::Store::open_existing(&ws.root);
    }
}
