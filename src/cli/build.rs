//! `vitgraph build`.

use std::collections::HashSet;
use std::sync::Arc;

use super::args::{is_slurm, BuildArgs};
use super::{load, usage, Failure};
use crate::engine::env::HostEnv;
use crate::engine::events::{Event, Reporter};
use crate::engine::executor::{Interrupt, Local};
use crate::engine::noop;
use crate::engine::plan::{plan, EnvProbe, Evaluator, Verdict};
use crate::engine::schedule::{BuildOptions, BuildStatus, Builder, Lane};
use crate::engine::session::{Begun, Judgement, Session, Use};
use crate::exit;
use crate::gpu::GpuId;
use crate::pipeline::Override;
use crate::report::{human::Human, json::JsonLines};
use crate::store::Store;
use crate::workspace::Workspace;

pub(super) fn build(
    ws: &Workspace,
    overrides: &[Override],
    args: BuildArgs,
) -> Result<i32, Failure> {
    let t = super::Timer::start();
    let file = crate::pipeline::load_settings(&ws.root)?;
    let slurm = is_slurm(args.executor, &file);
    if !slurm && (args.detach || args.retries > 0) {
        return Err(usage(
            "`--detach` and `--retries` apply to cluster jobs",
            "add `--executor slurm`, or leave them out",
        ));
    }
    // The no-op snapshot, then incremental judging, then the full plan
    // (`engine::session`). A forced build, `-n`, and a cluster build (its
    // hardware nodes are keyed with the compute nodes' facets) plan in full.
    let usage = if args.force || args.dry_run || slurm || args.measure_here {
        Use::Never
    } else {
        Use::Build
    };
    let env = HostEnv::measuring_here(args.measure_here);
    let sources = super::PipelineSources::new(&ws.root, overrides);
    let started = std::time::Instant::now();
    let mut session =
        match Session::begin(&ws.root, &sources, &env, usage, args.targets.is_empty())? {
            Begun::AllFresh(nodes) => {
                t.lap("check snapshot");
                report_fresh(&nodes, args.json, started);
                return Ok(exit::SUCCESS);
            }
            Begun::Judge(session) => session,
        };
    if session.checked() {
        t.lap("check snapshot");
    }
    let graph = load(ws, overrides)?;
    t.lap("load pipelines");
    let selection = crate::graph::select(&graph, &args.targets)?;
    super::refuse(ws, &graph, &selection)?;
    let incremental = match session.judge(&graph, &selection) {
        Judgement::Fresh => {
            let nodes: Vec<noop::NodeName> = selection
                .iter()
                .map(|&i| noop::NodeName {
                    id: graph.nodes[i].id.clone(),
                    stage: graph.nodes[i].stage.clone(),
                })
                .collect();
            report_fresh(&nodes, args.json, started);
            std::mem::forget(graph);
            return Ok(exit::SUCCESS);
        }
        // Only some files changed since the snapshot: judge only the
        // selected nodes they reach (a selection holds everything its
        // nodes need).
        Judgement::Reached(inc) => {
            t.lap(&format!(
                "incremental ({} of {} nodes)",
                inc.dirty.len(),
                graph.nodes.len()
            ));
            Some(inc)
        }
        Judgement::Full => None,
    };
    if args.dry_run {
        let store = Store::open_existing(&ws.root)?;
        if slurm {
            let cenv = super::slurm::stored_env(&graph, &file, &args.slurm, &env, store.as_ref())?;
            return dry_run(
                &ws.root,
                store.as_ref(),
                &graph,
                &selection,
                &cenv,
                args.verbose,
            );
        }
        return dry_run(
            &ws.root,
            store.as_ref(),
            &graph,
            &selection,
            &env,
            args.verbose,
        );
    }
    let store = Arc::new(match session.take_store() {
        Some(store) => store,
        None => Store::open(&ws.root)?,
    });
    if !slurm && !args.measure_here {
        super::elsewhere::refuse_mixing(&ws.root, &store, &graph, &selection, &env)?;
    }
    let options = options(&graph, &selection, &args)?;
    let mut cluster_run = if slurm {
        Some(super::slurm::cluster(
            ws, &graph, &selection, &store, &args, &file, &env,
        )?)
    } else {
        None
    };
    let mut lanes = vec![Lane::machine(Arc::new(Local::noting_groups(&store)))];
    let mut lane_of = Vec::new();
    if let Some(c) = cluster_run.as_mut() {
        lanes.extend(c.lane.take());
        lane_of = std::mem::take(&mut c.lane_of);
    }
    let judge_env: &dyn EnvProbe = match &cluster_run {
        Some(c) => &c.env,
        None => &env,
    };
    let builder = Builder {
        graph: &graph,
        root: ws.root.clone(),
        store: store.clone(),
        env: judge_env,
        options,
        lanes,
        lane_of,
        interrupt: Interrupt::new(),
        noop: session.snapshot(),
        incremental,
    };
    // The page written during the build reads how far it got.
    let mut reporter =
        crate::report::progress::Progress::new(reporter(args.json), &ws.root.join("cache"));
    let status = run_builder(&builder, &selection, &mut reporter)?;
    t.lap("build");
    if let Some(c) = &cluster_run {
        super::slurm::report_calls(&c.executor);
    }
    if status == BuildStatus::Success {
        session.finish(&store, &sources, &graph, &env);
    }
    drop(builder);
    // The process ends here: freeing 100,000 nodes one by one would cost
    // 50–130 ms for nothing.
    std::mem::forget(graph);
    Ok(status_code(status))
}

/// The scheduler's options from the command line: `-j`, `-k`, what
/// `--force` forces (the named targets, not what they need), and the GPUs.
fn options(
    graph: &crate::graph::Graph,
    selection: &[usize],
    args: &BuildArgs,
) -> Result<BuildOptions, Failure> {
    let force: HashSet<usize> = match (args.force, args.targets.is_empty()) {
        (false, _) => HashSet::new(),
        (true, true) => selection.iter().copied().collect(),
        (true, false) => crate::graph::select_named(graph, &args.targets)?
            .into_iter()
            .collect(),
    };
    let gpus = match &args.gpus {
        Some(flag) => crate::gpu::parse_flag(flag).map_err(|m| {
            usage(
                format!("`--gpus {flag}`: {m}"),
                "list GPU ids separated by commas, e.g. `--gpus 0,1`",
            )
        })?,
        // Asking nvidia-smi takes tens of milliseconds on a GPU host: only
        // when a node to build wants GPUs.
        None if selection
            .iter()
            .any(|&i| graph.nodes[i].task.resources().gpus > 0) =>
        {
            detect_gpus()
        }
        None => Vec::new(),
    };
    Ok(BuildOptions {
        jobs: args.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }),
        keep_going: args.keep_going,
        force,
        gpus,
        only: None,
        retries: args.retries,
        interleave: (!args.no_interleave).then(|| {
            args.interleave_seed
                .unwrap_or(crate::engine::INTERLEAVE_SEED)
        }),
        accept_invalid: args.accept_invalid,
        topology: None,
    })
}

/// Runs `builder` on a scheduler runtime, with SIGINT and SIGTERM wired to
/// its interrupt.
pub(super) fn run_builder(
    builder: &Builder<'_>,
    selection: &[usize],
    reporter: &mut dyn Reporter,
) -> Result<BuildStatus, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Failure::Report(
                miette::miette!(
                    help = "this is a system resource problem (threads, file descriptors): free some and try again",
                    "cannot start the scheduler: {e}"
                ),
                exit::NODE_FAILED,
            )
        })?;
    let status = runtime.block_on(async {
        builder.interrupt.on_signals();
        builder.build(selection, reporter).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(status)
}

pub(super) fn status_code(status: BuildStatus) -> i32 {
    match status {
        BuildStatus::Success => exit::SUCCESS,
        BuildStatus::Failed => exit::NODE_FAILED,
        BuildStatus::Interrupted => exit::INTERRUPTED,
    }
}

/// The events of a build that found every node fresh by the snapshot.
fn report_fresh(nodes: &[noop::NodeName], json: bool, started: std::time::Instant) {
    let mut reporter = reporter(json);
    reporter.event(&Event::Planned { total: nodes.len() });
    for n in nodes {
        reporter.event(&Event::Cached {
            node: n.id.clone(),
            restored: false,
            reused_from: None,
        });
    }
    reporter.event(&Event::Done {
        built: 0,
        cached: nodes.len(),
        failed: 0,
        skipped: 0,
        detached: 0,
        unneeded: 0,
        duration_ms: started.elapsed().as_millis() as u64,
    });
}

fn reporter(json: bool) -> Box<dyn Reporter> {
    if json {
        Box::new(JsonLines::new(std::io::stdout()))
    } else {
        Box::new(Human::new())
    }
}

/// `build -n`: the static plan, printed.
/// `build -n`: a line per stage (fresh, to run and to restore, by first
/// reason), then the nodes that would run or be restored with their
/// reasons grouped, ten per stage unless `verbose`.
fn dry_run(
    root: &std::path::Path,
    store: Option<&Store>,
    graph: &crate::graph::Graph,
    selection: &[usize],
    env: &dyn EnvProbe,
    verbose: bool,
) -> Result<i32, Failure> {
    use super::reasons::{counted, grouped};
    let states = match store {
        Some(s) => s.reader().load_states()?,
        None => Default::default(),
    };
    let ev = Evaluator {
        root,
        store,
        observer: None,
        states: &states,
        env,
        accept_invalid: false,
    };
    let planned = plan(&ev, graph, selection)?;
    let selected: HashSet<usize> = selection.iter().copied().collect();
    let stages: Vec<(&str, Vec<usize>)> = graph
        .stages
        .iter()
        .map(|s| {
            let nodes = s.nodes.iter().copied().filter(|i| selected.contains(i));
            (s.name.as_str(), nodes.collect::<Vec<_>>())
        })
        .filter(|(_, nodes)| !nodes.is_empty())
        .collect();
    let width = stages.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    let (mut would_run, mut would_restore) = (0, 0);
    for (stage, nodes) in &stages {
        let planned = &planned;
        let first = |restore: bool| {
            nodes.iter().filter_map(move |i| match &planned[i].verdict {
                Verdict::Restore(_, r) if restore => r.first(),
                Verdict::Stale(r) if !restore => r.first(),
                _ => None,
            })
        };
        let fresh = nodes
            .iter()
            .filter(|i| planned[i].verdict.is_fresh())
            .count();
        let unneeded = nodes
            .iter()
            .filter(|i| matches!(planned[i].verdict, Verdict::Unneeded(_)))
            .count();
        let waiting = nodes
            .iter()
            .filter(|i| matches!(planned[i].verdict, Verdict::Undecided(_)))
            .count();
        let mut line = format!("{fresh} fresh");
        if unneeded > 0 {
            line.push_str(&format!(", {unneeded} repetitions not needed"));
        }
        if waiting > 0 {
            line.push_str(&format!(
                ", {waiting} repetitions decided once the ones before them are built"
            ));
        }
        for (restore, what, count) in [
            (false, "to run", &mut would_run),
            (true, "to restore", &mut would_restore),
        ] {
            if let Some((n, detail)) = counted(first(restore)) {
                *count += n;
                line.push_str(&format!(", {n} {what} ({detail})"));
            }
        }
        println!("{stage:width$}  {line}");
    }
    let limit = if verbose { usize::MAX } else { 10 };
    if would_run + would_restore > 0 {
        println!();
    }
    for (stage, nodes) in &stages {
        let acting: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|i| planned[i].verdict.is_stale())
            .collect();
        for &i in acting.iter().take(limit) {
            let verdict = &planned[&i].verdict;
            let what = match verdict {
                Verdict::Restore(..) => "restore",
                _ => "run    ",
            };
            let reasons = grouped(verdict.reasons(), graph).join("; ");
            println!("{what}  {}  {reasons}", graph.nodes[i].id);
        }
        if acting.len() > limit {
            println!(
                "         … and {} more in `{stage}` (use -v to list all)",
                acting.len() - limit
            );
        }
    }
    let unneeded = selection
        .iter()
        .filter(|i| {
            matches!(
                planned[i].verdict,
                Verdict::Unneeded(_) | Verdict::Undecided(_)
            )
        })
        .count();
    println!(
        "{would_run} to run, {would_restore} to restore, {} fresh{}",
        selection.len() - would_run - would_restore - unneeded,
        if unneeded > 0 {
            format!(", {unneeded} repetitions not needed or not decided yet")
        } else {
            String::new()
        }
    );
    Ok(exit::SUCCESS)
}

/// GPUs visible to this process: `CUDA_VISIBLE_DEVICES` if set, else `nvidia-smi -L`.
fn detect_gpus() -> Vec<GpuId> {
    if let Some(list) = crate::gpu::visible_from_env() {
        return list;
    }
    match std::process::Command::new("nvidia-smi").arg("-L").output() {
        Ok(out) if out.status.success() => {
            let n = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.starts_with("GPU "))
                .count();
            (0..n as u32).map(GpuId::index).collect()
        }
        _ => Vec::new(),
    }
}
