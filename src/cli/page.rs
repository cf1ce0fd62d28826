//! `vitgraph report`: the study as one HTML page, from the pipelines and
//! the store alone (it runs nothing, and works while a build runs).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use clap::Args;

use super::page_parts::{environment_lines, link, parse_age, parse_csv, shortened_key, utc};
use super::{load, status, Failure};
use crate::clock::now_ms;
use crate::engine::plan::{Evaluation, ReasonKind, Verdict};
use crate::exit;
use crate::graph::Graph;
use crate::page::{self, NodeDetails, NodeRow, ReportView, StageView, Study};
use crate::pipeline::Override;
use crate::store::{AttemptStatus, NodeState, RunRecord, Store};
use crate::tasks::TaskSpec;
use crate::workspace::Workspace;

mod builds;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Stages, node ids, globs or pipeline file stems; none means everything.
    pub targets: Vec<String>,
    /// Where to write the page (default `out/report.html`).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw build N's timeline (1 is the first the store recorded; default the latest).
    #[arg(long, value_name = "N", conflicts_with = "since")]
    pub build: Option<usize>,
    /// Draw every attempt that started within this long before now (`90m`,
    /// `12h`, `2d`), whichever build made it.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub since: Option<i64>,
    /// Add a comparison of two sets of runs (the forms of `vitgraph compare`:
    /// `baseline:main HEAD`, `build:-2 build:-1`) with its kernel diffs.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<String>>,
    #[command(flatten)]
    pub cluster: status::ClusterArgs,
}

/// Log tails kept per node, and in all (the page stays small at 10,000 nodes).
const LOG_TAIL: usize = 2048;
const LOG_BUDGET: usize = 1 << 20;
/// Bytes of measurement strips (latencies and telemetry) a page embeds.
const MEASURE_BUDGET: usize = 2 << 20;

pub(super) fn report(
    ws: &Workspace,
    overrides: &[Override],
    args: ReportArgs,
) -> Result<i32, Failure> {
    let t = super::Timer::start();
    let graph = load(ws, overrides)?;
    let mut warnings = graph.warnings.clone();
    t.lap("load pipelines");
    let (graph, selection, evals, states, store) =
        status::planned(ws, graph, &args.targets, &args.cluster)?;
    warnings.extend(
        graph
            .refusals
            .iter()
            .filter(|r| selection.binary_search(&r.node).is_ok())
            .map(|r| crate::pipeline::refusal_line(&ws.root, r)),
    );
    let output = match &args.output {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.clone()),
        None => ws.root.join("out").join("report.html"),
    };
    let page_dir = output
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| ws.root.clone());
    let mut study = Study {
        title: ws
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "study".into()),
        generated: utc(now_ms()),
        version: env!("CARGO_PKG_VERSION").into(),
        warnings,
        progress: crate::report::progress::Snapshot::of_running_build(&ws.root.join("cache"))
            .map(|p| (p.done, p.total)),
        ..Study::default()
    };
    // With targets, the stages they reach; else every stage (one whose
    // `files` matched nothing too).
    let shown: Vec<usize> = (0..graph.stages.len())
        .filter(|&i| {
            args.targets.is_empty() || graph.stages[i].nodes.iter().any(|n| selection.contains(n))
        })
        .collect();
    let gather = Gather {
        shown: &shown,
        graph: &graph,
        evals: &evals,
        states: &states,
        store: store.as_ref(),
        root: &ws.root,
        page_dir: &page_dir,
    };
    gather.stages_and_nodes(&selection, &mut study)?;
    study.precision = crate::engine::standing::standings(&graph, &ws.root, &selection, |i| {
        evals.get(&i).map(|e| &e.verdict)
    })
    .into_iter()
    .map(|s| page::PrecisionView {
        configuration: s.configuration,
        stage: s.stage,
        state: s.state.to_owned(),
        detail: s.detail,
    })
    .collect();
    t.lap("nodes");
    if let Some(store) = &store {
        let index: HashMap<&str, usize> = study
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.0.as_str(), i))
            .collect();
        let build = match args.since {
            Some(age_ms) => gather.since(store, now_ms() - age_ms, &index)?,
            None => gather.build(store, args.build, &index)?,
        };
        if let Some(shown) = build.as_ref().filter(|b| b.since.is_none()) {
            (study.builds, study.other_builds) =
                gather.other_builds(store, shown.number, &index)?;
        }
        study.build = build;
        study.reports = gather.reports(store, &selection)?;
    }
    study.nothing_built = states.is_empty();
    if let Some(sides) = &args.compare {
        // The page's targets may name pipeline files, which `compare`'s
        // filter does not know: it gets the shown stages instead.
        let stages: BTreeSet<&str> = selection
            .iter()
            .map(|&i| graph.nodes[i].stage.as_str())
            .collect();
        let targets: Vec<String> = match args.targets.is_empty() {
            true => Vec::new(),
            false => stages.into_iter().map(str::to_owned).collect(),
        };
        study.compare = Some(super::compare::page_view(
            ws, &targets, &sides[0], &sides[1],
        )?);
    }
    t.lap("store");
    let html = page::render(&study);
    t.lap("render");
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent).map_err(|e| write_failure(&output, e))?;
    }
    crate::atomic::write(&output, html.as_bytes()).map_err(|e| write_failure(&output, e))?;
    t.lap("write");
    let shown = output
        .strip_prefix(std::env::current_dir().unwrap_or_default())
        .unwrap_or(&output);
    eprintln!(
        "wrote {} ({} KB: {} nodes, {} report(s))",
        shown.display(),
        html.len().div_ceil(1024),
        study.nodes.len(),
        study.reports.len()
    );
    Ok(exit::SUCCESS)
}

fn write_failure(path: &Path, e: std::io::Error) -> Failure {
    Failure::Report(
        miette::miette!(
            help = "pass `-o FILE` with a folder you can write to",
            "cannot write `{}`: {e}",
            path.display()
        ),
        exit::NODE_FAILED,
    )
}

struct Gather<'a> {
    /// The stages on the page, by index into the graph's.
    shown: &'a [usize],
    graph: &'a Graph,
    evals: &'a HashMap<usize, Evaluation>,
    states: &'a HashMap<String, NodeState>,
    store: Option<&'a Store>,
    root: &'a Path,
    page_dir: &'a Path,
}

impl Gather<'_> {
    /// A shown stage's position on the page, by name.
    fn stage_index(&self) -> HashMap<&str, usize> {
        self.shown
            .iter()
            .enumerate()
            .map(|(pos, &i)| (self.graph.stages[i].name.as_str(), pos))
            .collect()
    }

    /// The node's state on the page: running (an attempt is under way),
    /// failed (its last attempt at the current key failed), never built,
    /// stale, fresh.
    fn state(&self, i: usize) -> &'static str {
        let node = &self.graph.nodes[i];
        let running = self
            .states
            .get(&node.id)
            .and_then(|s| s.last_attempt.as_ref())
            .is_some_and(|a| a.status == AttemptStatus::Running);
        let verdict = &self.evals[&i].verdict;
        if running {
            "running"
        } else if verdict.is_fresh() {
            "fresh"
        } else if !verdict.is_stale() {
            "not-needed"
        } else if verdict
            .reasons()
            .iter()
            .any(|r| r.kind == ReasonKind::Failed)
        {
            "failed"
        } else if verdict
            .reasons()
            .first()
            .is_some_and(|r| r.kind == ReasonKind::NeverBuilt)
        {
            "never-built"
        } else {
            "stale"
        }
    }

    fn stages_and_nodes(&self, selection: &[usize], study: &mut Study) -> Result<(), Failure> {
        let stage_index = self.stage_index();
        let selected: BTreeSet<usize> = selection.iter().copied().collect();
        study.stages = self
            .shown
            .iter()
            .map(|&i| &self.graph.stages[i])
            .map(|s| StageView {
                name: s.name.clone(),
                pipeline: s.file.display().to_string(),
                kind: s
                    .nodes
                    .first()
                    .map_or("", |&n| self.graph.nodes[n].task.kind())
                    .to_owned(),
                description: s.about.description.clone(),
                ..StageView::default()
            })
            .collect();
        // The page's title and lead: the pipelines' own, when every shown
        // stage's file carries the same one. Otherwise the workspace with
        // its pipelines named, each with its title where it has one.
        let one = |field: fn(&crate::graph::About) -> &Option<String>| -> Option<String> {
            let mut seen: Vec<&String> = Vec::new();
            for &i in self.shown {
                let v = field(&self.graph.stages[i].about).as_ref()?;
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
            (seen.len() == 1).then(|| seen[0].clone())
        };
        match one(|a| &a.pipeline_title) {
            Some(title) => {
                study.title = title;
                study.description = one(|a| &a.pipeline_description);
            }
            None => {
                let mut files: Vec<(String, Option<String>)> = Vec::new();
                for &i in self.shown {
                    let s = &self.graph.stages[i];
                    let file = s.file.display().to_string();
                    if !files.iter().any(|(f, _)| *f == file) {
                        files.push((file, s.about.pipeline_title.clone()));
                    }
                }
                if files.len() > 1 {
                    study.title = format!("{}: {} pipelines", study.title, files.len());
                    let named: Vec<String> = files
                        .iter()
                        .map(|(f, t)| match t {
                            Some(t) => format!("{f} ({t})"),
                            None => f.clone(),
                        })
                        .collect();
                    study.description = Some(format!("Pipelines: {}.", named.join("; ")));
                }
            }
        }
        let mut edges = BTreeSet::new();
        for node in &self.graph.nodes {
            for need in &node.needs {
                if let (Some(&a), Some(&b)) = (
                    stage_index.get(need.stage.as_str()),
                    stage_index.get(node.stage.as_str()),
                ) {
                    edges.insert((a, b));
                }
            }
        }
        study.edges = edges.into_iter().collect();
        let key_parts = match self.store {
            Some(s) => s.reader().current_key_parts()?,
            None => HashMap::new(),
        };
        let mut envs: HashMap<String, usize> = HashMap::new();
        let signers = super::elsewhere::signers(self.root);
        let mut log_budget = LOG_BUDGET;
        let mut measure_budget = MEASURE_BUDGET;
        let mut reason_counts: Vec<HashMap<&'static str, usize>> =
            vec![HashMap::new(); study.stages.len()];
        for &i in &selected {
            let node = &self.graph.nodes[i];
            let si = stage_index[node.stage.as_str()];
            let state = self.state(i);
            let view = &mut study.stages[si];
            match state {
                "fresh" => view.fresh += 1,
                "failed" => view.failed += 1,
                "running" => view.running += 1,
                "not-needed" => view.not_needed += 1,
                "never-built" => {
                    view.stale += 1;
                    view.never_built += 1;
                }
                _ => view.stale += 1,
            }
            let verdict = &self.evals[&i].verdict;
            if !verdict.is_fresh() {
                let mut kinds: Vec<&'static str> =
                    verdict.reasons().iter().map(|r| r.kind.as_str()).collect();
                kinds.dedup();
                if let Some(first) = kinds.first() {
                    *reason_counts[si].entry(first).or_default() += 1;
                }
            }
            let run = self
                .states
                .get(&node.id)
                .and_then(|s| s.latest_success.as_ref());
            let mut d = NodeDetails {
                params: node
                    .id_params
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
                    .collect(),
                reasons: match verdict {
                    Verdict::Fresh(_) => Vec::new(),
                    Verdict::Unneeded(why) => vec![format!("not needed: {why}")],
                    Verdict::Undecided(why) => vec![format!("undecided: {why}")],
                    _ => super::reasons::grouped(verdict.reasons(), self.graph),
                },
                ..NodeDetails::default()
            };
            if let Some(run) = run {
                d.started = Some(run.started_at_ms / 1000);
                d.duration_ms = Some(run.duration_ms);
                d.key = key_parts
                    .get(&node.id)
                    .map(shortened_key)
                    .unwrap_or(serde_json::Value::Null);
                if let Some(r) = self.evals[&i].elsewhere() {
                    let place = super::elsewhere::Place::of(r, &signers).to_string();
                    match study.elsewhere.iter_mut().find(|(p, _)| *p == place) {
                        Some((_, n)) => *n += 1,
                        None => study.elsewhere.push((place.clone(), 1)),
                    }
                    d.elsewhere = Some(format!("on {place}"));
                }
                if run.env.0 != "null" && !run.env.0.is_empty() {
                    let next = envs.len();
                    let idx = *envs.entry(run.env.0.clone()).or_insert(next);
                    if idx == next {
                        study.envs.push(run.env.value());
                    }
                    d.env = Some(idx);
                }
                let dir = self.root.join(node.out_rel());
                d.files = run
                    .outputs
                    .iter()
                    .map(|o| {
                        (
                            o.name.clone(),
                            o.size,
                            link(self.page_dir, &dir.join(&o.name)),
                        )
                    })
                    .collect();
            }
            if measure_budget > 0 && run.is_some() && node.task.measures_hardware() {
                let results = self.root.join(node.out_rel()).join("results.json");
                d.measure = super::page_parts::measurement_view(&results);
                let size = d.measure.as_ref().map_or(0, |m| m.to_string().len());
                measure_budget = measure_budget.saturating_sub(size);
            }
            if measure_budget > 0 && run.is_some() && node.task.kind() == "Analyze" {
                let dir = self.root.join(node.out_rel());
                let size = super::page_parts::analysis_view(&dir, measure_budget, &mut d);
                measure_budget = measure_budget.saturating_sub(size);
            }
            d.attempt = (self.states.get(&node.id))
                .and_then(|s| s.last_attempt.as_ref())
                .and_then(|a| super::page_parts::attempt_view(a, &node.task));
            if log_budget > 0 {
                d.log = self.log_tail(i, run, state);
                log_budget = log_budget.saturating_sub(d.log.as_ref().map_or(0, String::len));
            }
            study.nodes.push(NodeRow(
                node.id.clone(),
                si,
                state,
                run.map(|r| r.duration_ms),
            ));
            study.details.push(d);
        }
        for (view, counts) in study.stages.iter_mut().zip(reason_counts) {
            let mut list: Vec<(String, usize)> = counts
                .into_iter()
                .map(|(k, n)| (k.to_string(), n))
                .collect();
            list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            view.reasons = list;
        }
        Ok(())
    }

    /// The end of the node's log: the failed attempt's log file, or the
    /// current run's log in the store.
    fn log_tail(&self, i: usize, run: Option<&RunRecord>, state: &str) -> Option<String> {
        let node = &self.graph.nodes[i];
        let store = self.store?;
        let path = if state == "failed" || run.is_none() {
            store.journal().log_path(&node.stage, &node.dir_name())
        } else {
            store.objects().path(&run?.log?)
        };
        let (bytes, cut) = crate::logs::tail_bytes(&path, LOG_TAIL as u64).ok()?;
        if bytes.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Some(if cut {
            format!(
                "…{}",
                text.split_once('\n').map_or(text.as_str(), |(_, r)| r)
            )
        } else {
            text
        })
    }

    /// Every selected `Report` node with a run: its table, comparison,
    /// plots and environment lines, read from the store's objects.
    fn reports(&self, store: &Store, selection: &[usize]) -> Result<Vec<ReportView>, Failure> {
        let mut out = Vec::new();
        for &i in selection {
            let node = &self.graph.nodes[i];
            let TaskSpec::Report(spec) = &node.task else {
                continue;
            };
            let Some(run) = self
                .states
                .get(&node.id)
                .and_then(|s| s.latest_success.as_ref())
            else {
                continue;
            };
            let read = |name: &str| -> Option<String> {
                let o = run.outputs.iter().find(|o| o.name == name)?;
                std::fs::read_to_string(store.objects().path(&o.hash)).ok()
            };
            let table = read("table.csv").map(|t| parse_csv(&t));
            // Param columns lead the table: those the source nodes carry.
            let params: BTreeSet<&str> = node
                .deps()
                .iter()
                .flat_map(|&d| self.graph.nodes[d].params.iter().map(|(k, _)| k.as_str()))
                .collect();
            let lead = table.as_ref().map_or(0, |t| {
                t.names
                    .iter()
                    .take_while(|n| params.contains(n.as_str()))
                    .count()
            });
            let mut plots: Vec<(String, String)> = run
                .outputs
                .iter()
                .filter(|o| o.name.starts_with("plots/") && o.name.ends_with(".svg"))
                .filter_map(|o| {
                    let svg = std::fs::read_to_string(store.objects().path(&o.hash)).ok()?;
                    Some((o.name.trim_start_matches("plots/").to_string(), svg))
                })
                .collect();
            // In the spec's order (L4); a plot the spec no longer names after.
            let order = |name: &str| {
                spec.plots
                    .iter()
                    .position(|p| format!("{}.svg", p.stem()) == name)
                    .unwrap_or(usize::MAX)
            };
            plots.sort_by(|a, b| order(&a.0).cmp(&order(&b.0)).then_with(|| a.0.cmp(&b.0)));
            let md = read("report.md");
            // The spec the shown run was built with (its key's parts): a
            // stale report's findings name the param, baseline and metric
            // its numbers are of, not the edited spec's (N4). The current
            // spec where the recorded one no longer reads as a `Report`.
            let built = super::status::store_parts(store, run)
                .and_then(|r| serde_json::from_value::<TaskSpec>(r.parts.spec_value()).ok())
                .and_then(|t| match t {
                    TaskSpec::Report(r) => Some(r),
                    _ => None,
                });
            let shown = built.as_ref().unwrap_or(spec);
            // The title the shown run was built with: `report.md`'s heading.
            let built_title = md
                .as_deref()
                .and_then(|m| m.lines().next())
                .and_then(|l| l.strip_prefix("# "))
                .map(str::to_owned)
                .filter(|t| *t != spec.title);
            let state = self.state(i);
            let verdict = &self.evals[&i].verdict;
            let stale = if verdict.is_stale() {
                let grouped = super::reasons::grouped(verdict.reasons(), self.graph);
                if grouped.is_empty() {
                    vec!["its stored result is not in out/ (the next build restores it)".to_owned()]
                } else {
                    grouped
                }
            } else {
                Vec::new()
            };
            out.push(ReportView {
                node: node.id.clone(),
                built: format!(
                    "{}, in {}",
                    utc(run.started_at_ms),
                    super::page_parts::duration_words(run.duration_ms)
                ),
                built_title,
                stale,
                running: state == "running",
                refused: self
                    .graph
                    .refusals
                    .iter()
                    .find(|r| r.node == i)
                    .map(|r| crate::pipeline::refusal_line(self.root, r)),
                title: spec.title.clone(),
                table,
                compare: read("compare.csv").map(|t| parse_csv(&t)),
                compare_of: shown
                    .compare
                    .as_ref()
                    .map(|c| [c.param.clone(), c.baseline.to_string(), c.metric.clone()]),
                plots,
                env_lines: md.map(|md| environment_lines(&md)).unwrap_or_default(),
                params: lead,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::page_parts::*;
    use super::*;

    #[test]
    fn csv_links_and_dates() {
        let t = parse_csv("a,b\n1,\"x,\"\"y\"\"\"\n2,\n");
        assert_eq!(t.names, ["a", "b"]);
        assert_eq!(t.rows, [vec!["1", "x,\"y\""], vec!["2", ""]]);
        assert_eq!(
            link(
                Path::new("/w/out"),
                Path::new("/w/out/s/m=1,k=a%2Fb/r.json")
            ),
            "s/m=1,k=a%252Fb/r.json"
        );
        assert_eq!(
            link(Path::new("/w/site"), Path::new("/w/out/x")),
            "../out/x"
        );
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(parse_age("90m"), Ok(5_400_000));
        assert_eq!(parse_age("2d"), Ok(172_800_000));
        assert_eq!(parse_age("3"), Ok(10_800_000));
        assert!(parse_age("3w").unwrap_err().contains("s, m, h or d"));
        assert_eq!(utc(1_795_854_612_000), "2026-11-28 08:30:12 UTC");
    }
}
