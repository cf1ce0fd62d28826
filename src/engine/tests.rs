//! Engine tests with a fake executor (`fake`): real pipelines, a real store
//! in a temporary workspace, no process started. Each test asserts exactly
//! which nodes ran, in what order, on which GPUs, and why.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::events::{Event, Reporter};
use super::executor::Interrupt;
use super::failure::{FailureKind, NodeFailure};
use super::fake::{Fake, Plan};
use super::plan::{EnvProbe, Evaluator, Reason};
use super::schedule::{BuildOptions, BuildStatus, Builder};
use crate::graph::Graph;
use crate::pipeline::Override;
use crate::store::Store;

mod isolation;
mod precision;
mod repeat;
mod together;
mod validity;

struct FakeEnv(BTreeMap<String, String>);

impl EnvProbe for FakeEnv {
    fn facets(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    fn record(&self) -> serde_json::Value {
        serde_json::json!({ "fake": true })
    }
}

/// A temporary workspace, its graph, and the fake that runs its nodes.
struct Bench {
    dir: tempfile::TempDir,
    graph: Graph,
    fake: Fake,
    env: FakeEnv,
}

/// Which event fires the interrupt.
type When = dyn Fn(&Event) -> bool + Sync;

/// How to build.
struct Opts {
    jobs: usize,
    keep_going: bool,
    gpus: &'static str,
    force: Vec<&'static str>,
    only: Option<Vec<&'static str>>,
    retries: u32,
    /// The rounds' seed; None: `--no-interleave`.
    interleave: Option<u64>,
    /// `--accept-invalid`.
    accept_invalid: bool,
    /// A simulated machine for `isolation: Gpu`.
    topology: Option<crate::host::topology::Topology>,
    /// Fires the build's interrupt when an event matches.
    interrupt_when: Option<Box<When>>,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            jobs: 1,
            keep_going: false,
            gpus: "",
            force: Vec::new(),
            only: None,
            retries: 0,
            interleave: Some(super::INTERLEAVE_SEED),
            accept_invalid: false,
            topology: None,
            interrupt_when: None,
        }
    }
}

/// What a build did.
struct Outcome {
    status: BuildStatus,
    events: Vec<Event>,
}

/// Collects events and fires the interrupt when asked to.
struct Hooked<'a> {
    events: Vec<Event>,
    when: Option<&'a When>,
    interrupt: Interrupt,
}

impl Reporter for Hooked<'_> {
    fn event(&mut self, event: &Event) {
        if self.when.is_some_and(|w| w(event)) {
            self.interrupt.fire();
        }
        self.events.push(event.clone());
    }
}

/// A chain with a fan-out and a fan-in: gen[i] → double[i] → total.
const CHAIN: &str = r#"Pipeline(stages: {
    "gen": Stage(matrix: {"i": [0, 1, 2]},
                 task: Command(run: "gen ${i}", inputs: ["in/${i}.txt"], outputs: ["v.txt"])),
    "double": Stage(for_each: "gen", task: Command(run: "double ${needs.gen}", outputs: ["v.txt"])),
    "total": Stage(needs: ["double"], task: Command(run: "total ${needs.double}", outputs: ["sum.txt"])),
})"#;

fn chain() -> Bench {
    Bench::new(
        CHAIN,
        &[("in/0.txt", "a"), ("in/1.txt", "b"), ("in/2.txt", "c")],
    )
}

impl Bench {
    fn new(pipeline: &str, files: &[(&str, &str)]) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        std::fs::write(dir.path().join("pipelines/p.ron"), pipeline).unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let graph = crate::pipeline::load(dir.path(), &[]).unwrap();
        Bench {
            dir,
            graph,
            fake: Fake::new(),
            env: FakeEnv(BTreeMap::from([("gpu".into(), "FakeGPU".into())])),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.root().join(name), text).unwrap();
    }

    fn reload(&mut self, overrides: &[(&str, &str)]) {
        let overrides: Vec<Override> = overrides
            .iter()
            .map(|(k, v)| Override {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect();
        self.graph = crate::pipeline::load(self.root(), &overrides).unwrap();
    }

    fn idx(&self, id: &str) -> usize {
        self.graph
            .find(id)
            .unwrap_or_else(|| panic!("no node `{id}`"))
    }

    fn store(&self) -> Arc<Store> {
        Arc::new(Store::open(self.root()).unwrap())
    }

    /// Builds every node (a fresh store handle, as each command opens one).
    fn build(&self, o: Opts) -> Outcome {
        self.fake.reset();
        let store = self.store();
        let selection: Vec<usize> = (0..self.graph.nodes.len()).collect();
        let options = BuildOptions {
            jobs: o.jobs,
            keep_going: o.keep_going,
            force: o.force.iter().map(|id| self.idx(id)).collect(),
            gpus: crate::gpu::parse_visible_devices(o.gpus),
            only: o
                .only
                .as_ref()
                .map(|ids| ids.iter().map(|id| self.idx(id)).collect()),
            retries: o.retries,
            interleave: o.interleave,
            accept_invalid: o.accept_invalid,
            topology: o.topology.clone(),
        };
        let builder = Builder {
            graph: &self.graph,
            root: self.root().to_path_buf(),
            store,
            env: &self.env,
            options,
            lanes: vec![super::schedule::Lane::machine(Arc::new(self.fake.clone()))],
            lane_of: Vec::new(),
            interrupt: Interrupt::new(),
            noop: None,
            incremental: None,
        };
        let mut reporter = Hooked {
            events: Vec::new(),
            when: o.interrupt_when.as_deref(),
            interrupt: builder.interrupt.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let status = runtime.block_on(builder.build(&selection, &mut reporter));
        Outcome {
            status,
            events: reporter.events,
        }
    }

    /// Every node's evaluation, as `status` plans them.
    fn plan(&self) -> HashMap<usize, super::plan::Evaluation> {
        let store = self.store();
        let states = store.reader().load_states().unwrap();
        let ev = Evaluator {
            root: self.root(),
            store: Some(&store),
            observer: None,
            states: &states,
            env: &self.env,
            accept_invalid: false,
        };
        let selection: Vec<usize> = (0..self.graph.nodes.len()).collect();
        super::plan::plan(&ev, &self.graph, &selection).unwrap()
    }

    /// Every stale node's reasons, as `status` plans them.
    fn stale(&self) -> BTreeMap<String, Vec<Reason>> {
        self.plan()
            .into_iter()
            .filter(|(_, e)| e.verdict.is_stale())
            .map(|(i, e)| (self.graph.nodes[i].id.clone(), e.verdict.reasons().to_vec()))
            .collect()
    }

    fn out(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join("out").join(rel)).unwrap()
    }
}

impl Outcome {
    fn of(&self, pick: impl Fn(&Event) -> Option<String>) -> Vec<String> {
        self.events.iter().filter_map(pick).collect()
    }

    fn started(&self) -> Vec<String> {
        self.of(|e| match e {
            Event::Started { node, .. } => Some(node.clone()),
            _ => None,
        })
    }

    fn cached(&self) -> Vec<String> {
        self.of(|e| match e {
            Event::Cached { node, .. } => Some(node.clone()),
            _ => None,
        })
    }

    fn skipped(&self) -> Vec<String> {
        self.of(|e| match e {
            Event::Skipped { node, .. } => Some(node.clone()),
            _ => None,
        })
    }

    fn failure(&self, id: &str) -> NodeFailure {
        self.events
            .iter()
            .find_map(|e| match e {
                Event::Failed { node, failure, .. } if node == id => Some(failure.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("`{id}` did not fail: {:?}", self.events))
    }

    /// The reasons each started node was started with, as `kind: detail`.
    fn reasons(&self) -> HashMap<String, Vec<String>> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Started { node, reasons, .. } => Some((
                    node.clone(),
                    reasons
                        .iter()
                        .map(|r| format!("{}: {}", r.kind.as_str(), r.detail))
                        .collect(),
                )),
                _ => None,
            })
            .collect()
    }
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

const ALL: [&str; 7] = [
    "gen[i=0]",
    "gen[i=1]",
    "gen[i=2]",
    "double[i=0]",
    "double[i=1]",
    "double[i=2]",
    "total",
];

#[test]
fn a_cold_build_runs_every_node_once_dependencies_first() {
    let b = chain();
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    assert_eq!(o.started(), ids(&ALL), "with -j 1 in graph order");
    assert_eq!(b.fake.nodes(), ids(&ALL));
    for (id, reasons) in o.reasons() {
        assert_eq!(reasons, ["never_built: no successful run recorded"], "{id}");
    }
    assert_eq!(b.out("total/sum.txt"), "total");
    assert!(b.stale().is_empty());
}

#[test]
fn a_second_build_runs_nothing() {
    let b = chain();
    b.build(Opts::default());
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    assert!(b.fake.nodes().is_empty());
    assert_eq!(sorted(o.cached()), sorted(ids(&ALL)));
}

#[test]
fn an_edited_input_reruns_its_node_and_what_depends_on_it() {
    let b = chain();
    b.build(Opts::default());
    b.write("in/1.txt", "B");
    // Outputs that change, so the change reaches `total` (no early cutoff).
    b.fake.plan("gen[i=1]", Plan::Write("B".into()));
    b.fake.plan("double[i=1]", Plan::Write("BB".into()));
    let o = b.build(Opts::default());
    assert_eq!(b.fake.nodes(), ids(&["gen[i=1]", "double[i=1]", "total"]));
    let reasons = o.reasons();
    assert_eq!(reasons["gen[i=1]"], ["input_changed: in/1.txt"]);
    assert_eq!(reasons["double[i=1]"], ["upstream_changed: gen[i=1]"]);
    assert_eq!(reasons["total"], ["upstream_changed: double[i=1]"]);
}

#[test]
fn an_upstream_rebuilt_with_the_same_outputs_leaves_its_dependents_fresh() {
    let b = chain();
    b.fake.plan("gen[i=1]", Plan::Write("same".into()));
    b.build(Opts::default());
    b.write("in/1.txt", "B");
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    assert_eq!(b.fake.nodes(), ids(&["gen[i=1]"]), "early cutoff");
    assert!(b.stale().is_empty());
}

#[test]
fn a_changed_param_makes_its_nodes_stale_with_the_diff() {
    let mut b = chain();
    b.build(Opts::default());
    b.reload(&[("i", "[0,1,2,3]")]);
    b.write("in/3.txt", "d");
    let o = b.build(Opts::default());
    assert_eq!(b.fake.nodes(), ids(&["gen[i=3]", "double[i=3]", "total"]));
    assert_eq!(o.reasons()["total"].len(), 1);
    assert!(o.reasons()["total"][0].starts_with("upstream_changed"));
}

#[test]
fn a_failure_stops_the_build_and_is_reported_as_a_typed_value() {
    let b = chain();
    b.fake.plan("gen[i=1]", Plan::Exit(3));
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Failed);
    assert_eq!(
        b.fake.nodes(),
        ids(&["gen[i=0]", "gen[i=1]"]),
        "nothing new starts"
    );
    let f = o.failure("gen[i=1]");
    assert_eq!(f.kind, FailureKind::Exit);
    assert_eq!(f.exit_code, Some(3));
    assert!(f.log.unwrap().ends_with("cache/logs/gen/i=1.log"));
}

#[test]
fn keep_going_builds_everything_that_does_not_depend_on_a_failure() {
    let b = chain();
    b.fake.plan("gen[i=1]", Plan::Exit(3));
    let o = b.build(Opts {
        keep_going: true,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Failed);
    assert_eq!(
        b.fake.nodes(),
        ids(&[
            "gen[i=0]",
            "gen[i=1]",
            "gen[i=2]",
            "double[i=0]",
            "double[i=2]"
        ])
    );
    assert_eq!(o.skipped(), ids(&["double[i=1]", "total"]));
    let because: Vec<String> = o.of(|e| match e {
        Event::Skipped { because, .. } => Some(because.clone()),
        _ => None,
    });
    assert_eq!(because, ["`gen[i=1]` failed", "`double[i=1]` failed"]);
}

#[test]
fn a_recorded_failure_is_the_next_status_reason_with_its_kind_and_status() {
    let b = chain();
    b.fake.plan("gen[i=2]", Plan::Signal(9));
    b.build(Opts::default());
    let stale = b.stale();
    let reason = &stale["gen[i=2]"][0];
    assert_eq!(reason.kind.as_str(), "failed");
    let f = reason.failure.as_ref().expect("the failure is recorded");
    assert_eq!((f.kind, f.signal), (FailureKind::Signal, Some(9)));
    let json = serde_json::to_value(reason).unwrap();
    assert_eq!(json["failure"]["kind"], "signal");
}

#[test]
fn a_transient_failure_is_recorded_as_interrupted_not_as_the_result() {
    let b = chain();
    b.fake.plan("gen[i=0]", Plan::Exit(75));
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Failed);
    assert_eq!(o.failure("gen[i=0]").kind, FailureKind::Transient);
    let stale = b.stale();
    let reason = &stale["gen[i=0]"][0];
    assert_eq!(reason.kind.as_str(), "interrupted");
    assert!(reason.detail.contains("transient"), "{}", reason.detail);
    // It runs again on the next build, like any interrupted node.
    b.fake.plan("gen[i=0]", Plan::Write("ok".into()));
    assert_eq!(b.build(Opts::default()).status, BuildStatus::Success);
}

#[test]
fn a_task_that_writes_no_declared_output_fails_with_outputs() {
    let b = chain();
    b.fake.plan("gen[i=0]", Plan::NoOutputs);
    let o = b.build(Opts::default());
    let f = o.failure("gen[i=0]");
    assert_eq!(f.kind, FailureKind::Outputs);
    assert!(f.message.contains("v.txt"), "{}", f.message);
    assert!(!b.root().join("out/gen/i=0/v.txt").exists());
}

const GPU: &str = r#"Pipeline(stages: {
    "bench": Stage(matrix: {"m": ["a", "b", "c"]},
                   task: Command(run: "bench ${m}", outputs: ["r.txt"], resources: (gpus: 1))),
    "timing": Stage(matrix: {"t": [1, 2]},
                    task: Command(run: "time ${t}", outputs: ["r.txt"], resources: (gpus: 1, exclusive: true))),
    "cpu": Stage(matrix: {"c": [1, 2, 3, 4]}, task: Command(run: "cpu ${c}", outputs: ["r.txt"])),
})"#;

#[test]
fn gpu_nodes_get_distinct_gpus_and_exclusive_nodes_run_alone() {
    let b = Bench::new(GPU, &[]);
    for id in [
        "bench[m=a]",
        "bench[m=b]",
        "bench[m=c]",
        "cpu[c=1]",
        "cpu[c=2]",
    ] {
        b.fake.plan(id, Plan::Sleep(Duration::from_millis(30)));
    }
    let o = b.build(Opts {
        jobs: 8,
        gpus: "0,GPU-ab12",
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success);
    let ran = b.fake.ran();
    assert_eq!(ran.len(), 9);
    let gpu_of: HashMap<&str, &Vec<String>> =
        ran.iter().map(|r| (r.node.as_str(), &r.gpus)).collect();
    for r in &ran {
        if r.node.starts_with("cpu") {
            assert!(r.gpus.is_empty(), "{r:?}");
        } else {
            assert_eq!(r.gpus.len(), 1, "{r:?}");
        }
        // No two GPU nodes ran on one card at once.
        for other in &r.beside {
            if !other.starts_with("cpu") && !r.node.starts_with("cpu") {
                assert_ne!(gpu_of[other.as_str()], &r.gpus, "{r:?}");
            }
        }
        if r.node.starts_with("timing") {
            assert!(
                r.beside.is_empty(),
                "an exclusive node started beside {r:?}"
            );
        }
    }
    // Nothing started while an exclusive node ran.
    for (i, r) in ran.iter().enumerate() {
        if r.node.starts_with("timing") {
            for later in &ran[i + 1..] {
                assert!(
                    !later.beside.contains(&r.node),
                    "{later:?} beside {}",
                    r.node
                );
            }
        }
    }
}

#[test]
fn the_cpu_slots_bound_how_many_nodes_run_at_once() {
    let b = Bench::new(GPU, &[]);
    for c in 1..=4 {
        b.fake.plan(
            &format!("cpu[c={c}]"),
            Plan::Sleep(Duration::from_millis(20)),
        );
    }
    let o = b.build(Opts {
        jobs: 2,
        gpus: "0",
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success);
    let ran = b.fake.ran();
    assert!(ran.iter().all(|r| r.beside.len() < 2), "{ran:?}");
    assert!(
        ran.iter().any(|r| r.beside.len() == 1),
        "two ran at once: {ran:?}"
    );
}

#[test]
fn a_node_needing_more_gpus_than_there_are_fails_and_its_dependents_are_skipped() {
    let b = Bench::new(
        r#"Pipeline(stages: {
            "big": Stage(task: Command(run: "x", outputs: ["r"], resources: (gpus: 2))),
            "after": Stage(needs: ["big"], task: Command(run: "y", outputs: ["r"])),
            "other": Stage(task: Command(run: "z", outputs: ["r"])),
        })"#,
        &[],
    );
    let o = b.build(Opts {
        keep_going: true,
        gpus: "0",
        ..Opts::default()
    });
    let f = o.failure("big");
    assert_eq!(f.kind, FailureKind::Resources);
    assert!(f.message.contains("needs 2 GPU(s) but 1 are available"));
    assert_eq!(o.skipped(), ids(&["after"]));
    assert_eq!(b.fake.nodes(), ids(&["other"]));
}

#[test]
fn force_reruns_a_fresh_node_and_says_so() {
    let b = chain();
    b.build(Opts::default());
    let o = b.build(Opts {
        force: vec!["double[i=0]"],
        ..Opts::default()
    });
    assert_eq!(b.fake.nodes(), ids(&["double[i=0]"]));
    assert_eq!(
        o.reasons()["double[i=0]"],
        ["spec_changed: forced with --force"]
    );
}

#[test]
fn a_deleted_output_is_restored_from_the_store_without_running() {
    let b = chain();
    b.build(Opts::default());
    std::fs::remove_file(b.root().join("out/double/i=2/v.txt")).unwrap();
    let o = b.build(Opts::default());
    assert!(b.fake.nodes().is_empty());
    assert!(o.events.iter().any(|e| matches!(e,
        Event::Cached { node, restored: true, .. } if node == "double[i=2]")));
    assert_eq!(b.out("double/i=2/v.txt"), "double[i=2]");
}

#[test]
fn two_nodes_with_one_key_run_once() {
    // `unused` is not in the task, so both nodes have the same key.
    let b = Bench::new(
        r#"Pipeline(stages: {
            "s": Stage(matrix: {"unused": [1, 2]}, task: Command(run: "same", outputs: ["r"])),
        })"#,
        &[],
    );
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    assert_eq!(b.fake.nodes(), ids(&["s[unused=1]"]));
    assert!(o.events.iter().any(|e| matches!(e,
        Event::Cached { node, reused_from: Some(from), .. }
            if node == "s[unused=2]" && from == "s[unused=1]")));
}

#[test]
fn a_run_is_committed_only_after_its_upstream_runs() {
    let b = chain();
    b.build(Opts {
        jobs: 4,
        ..Opts::default()
    });
    let order = b.store().commit_order();
    assert_eq!(order.len(), 7);
    let at = |id: &str| order.iter().position(|o| o == id).unwrap();
    for node in &b.graph.nodes {
        for d in node.deps() {
            let up = &b.graph.nodes[d].id;
            assert!(
                at(up) < at(&node.id),
                "{} committed before {up}: {order:?}",
                node.id
            );
        }
    }
}

#[test]
fn a_run_whose_upstream_could_not_be_recorded_is_discarded() {
    let b = chain();
    b.store().fail_commits_of("gen[i=0]");
    // The others take longer than a commit batch waits: `gen[i=0]` is
    // committed (and fails) alone.
    for id in ["gen[i=1]", "gen[i=2]"] {
        b.fake.plan(id, Plan::Sleep(Duration::from_millis(100)));
    }
    let o = b.build(Opts {
        jobs: 4,
        keep_going: true,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Failed);
    let f = o.failure("gen[i=0]");
    assert_eq!(f.kind, FailureKind::Store);
    assert!(f.message.contains("injected failure"), "{}", f.message);
    let recorded = b.store().commit_order();
    assert!(!recorded.contains(&"gen[i=0]".to_string()));
    assert!(
        !recorded.contains(&"double[i=0]".to_string()),
        "{recorded:?}"
    );
    assert!(!recorded.contains(&"total".to_string()));
    assert!(
        recorded.contains(&"double[i=1]".to_string()),
        "{recorded:?}"
    );
    let skipped = o.skipped();
    assert!(skipped.contains(&"total".to_string()), "{skipped:?}");
    assert!(skipped.contains(&"double[i=0]".to_string()), "{skipped:?}");
    let stale = b.stale();
    assert_eq!(stale["gen[i=0]"][0].kind.as_str(), "failed");
}

#[test]
fn run_node_refuses_a_node_whose_upstream_is_not_built() {
    let b = chain();
    let o = b.build(Opts {
        only: Some(vec!["double[i=0]"]),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Failed);
    assert_eq!(o.failure("gen[i=0]").kind, FailureKind::NotBuilt);
    assert!(b.fake.nodes().is_empty());
}

/// The key `id` would be built with now (its upstream built).
fn key_of(b: &Bench, id: &str) -> (crate::hash::ContentHash, super::key::KeyParts) {
    let store = b.store();
    let states = store.reader().load_states().unwrap();
    let ev = Evaluator {
        root: b.root(),
        store: Some(&store),
        observer: None,
        states: &states,
        env: &b.env,
        accept_invalid: false,
    };
    let e = ev.evaluate(&b.graph.nodes[b.idx(id)], &[]).unwrap();
    e.key.unwrap()
}

/// Records a run of `id` for `key` as another vitgraph process would.
fn record_elsewhere(
    root: &Path,
    id: &str,
    key: crate::hash::ContentHash,
    parts: &super::key::KeyParts,
) {
    let store = Store::open(root).unwrap();
    let attempt = store.journal().begin_attempt(id, &key).unwrap();
    let staging = store.objects().new_staging_dir().unwrap();
    std::fs::write(staging.join("v.txt"), "from elsewhere").unwrap();
    let recorded = super::key::RecordedParts {
        parts: parts.clone(),
        params: BTreeMap::new(),
    };
    let outputs = vec!["v.txt".to_string()];
    let new = crate::store::NewRun {
        node_id: id,
        stage: "gen",
        key,
        key_parts: crate::store::RawJson(serde_json::to_string(&recorded).unwrap()),
        outputs: &outputs,
        env: &serde_json::Value::Null,
        started_at_ms: 0,
        duration_ms: 1,
        log: None,
        replace: false,
    };
    let staged = store.objects().stage_run(attempt, new, &staging).unwrap();
    let dest: PathBuf = root.join("out/gen/i=0");
    let m = store
        .objects()
        .materialize_files(&staged.run, &dest)
        .unwrap();
    store.objects().commit_batch(vec![(staged, m)]).unwrap();
}

#[test]
fn a_node_another_process_is_building_waits_and_reuses_its_run() {
    let b = chain();
    let (key, parts) = key_of(&b, "gen[i=0]");
    let other = b.store();
    let lock = other.journal().lock_key(&key).unwrap();
    let root = b.root().to_path_buf();
    // The other process records the run once this build has started the
    // node (and so waits for the lock), however long that takes.
    let (started, wait) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        wait.recv().unwrap();
        record_elsewhere(&root, "gen[i=0]", key, &parts);
        drop(lock);
    });
    let o = b.build(Opts {
        interrupt_when: Some(Box::new(move |e| {
            if matches!(e, Event::Started { node, .. } if node == "gen[i=0]") {
                let _ = started.send(());
            }
            false
        })),
        ..Opts::default()
    });
    worker.join().unwrap();
    assert_eq!(o.status, BuildStatus::Success);
    assert!(
        !b.fake.nodes().contains(&"gen[i=0]".to_string()),
        "ran twice"
    );
    assert!(o.events.iter().any(|e| matches!(e,
        Event::Cached { node, reused_from: Some(_), .. } if node == "gen[i=0]")));
    assert_eq!(b.out("gen/i=0/v.txt"), "from elsewhere");
}

#[test]
fn sigint_while_waiting_for_a_key_lock_starts_nothing() {
    let b = chain();
    let (key, _) = key_of(&b, "gen[i=0]");
    let other = b.store();
    let lock = other.journal().lock_key(&key).unwrap();
    let worker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(80));
        drop(lock);
    });
    let o = b.build(Opts {
        interrupt_when: Some(Box::new(
            |e| matches!(e, Event::Started { node, .. } if node == "gen[i=0]"),
        )),
        ..Opts::default()
    });
    worker.join().unwrap();
    assert_eq!(o.status, BuildStatus::Interrupted);
    assert!(
        b.fake.nodes().is_empty(),
        "ran after SIGINT: {:?}",
        b.fake.nodes()
    );
}

#[test]
fn sigint_before_anything_starts_runs_nothing() {
    let b = chain();
    let o = b.build(Opts {
        interrupt_when: Some(Box::new(|e| matches!(e, Event::Planned { .. }))),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Interrupted);
    assert!(o.started().is_empty());
    assert!(b.fake.nodes().is_empty());
}

#[test]
fn sigint_stops_running_nodes_and_they_are_interrupted_next_time() {
    let b = chain();
    b.fake.plan("gen[i=1]", Plan::Hang);
    let o = b.build(Opts {
        jobs: 4,
        interrupt_when: Some(Box::new(
            |e| matches!(e, Event::Finished { node, .. } if node == "gen[i=2]"),
        )),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Interrupted);
    let running: Vec<Vec<String>> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Interrupted { running } => Some(running.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(running.len(), 1);
    assert!(running[0].contains(&"gen[i=1]".to_string()), "{running:?}");
    assert!(!b.fake.nodes().iter().any(|n| n == "total"));
    let stale = b.stale();
    assert_eq!(stale["gen[i=1]"][0].kind.as_str(), "interrupted");
    assert!(
        !stale.contains_key("gen[i=2]"),
        "finished before SIGINT: recorded"
    );
}

#[test]
fn sigint_after_a_node_finished_keeps_it() {
    let b = chain();
    for i in 0..3 {
        b.fake.plan(&format!("double[i={i}]"), Plan::Hang);
    }
    let o = b.build(Opts {
        interrupt_when: Some(Box::new(
            |e| matches!(e, Event::Finished { node, .. } if node == "gen[i=0]"),
        )),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Interrupted);
    assert!(!b.fake.nodes().iter().any(|n| n == "total"));
    let stale = b.stale();
    assert!(
        !stale.contains_key("gen[i=0]"),
        "recorded before SIGINT: kept"
    );
    assert!(stale.contains_key("total"));
    for i in 0..3 {
        b.fake
            .plan(&format!("double[i={i}]"), Plan::Write(format!("d{i}")));
    }
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    assert!(
        !b.fake.nodes().contains(&"gen[i=0]".to_string()),
        "not run again"
    );
}

// ---- What a command judges: the session's snapshot, incremental and full
// strategies, each compared with a full plan of the same workspace. ----

/// What the graph is made from, for the snapshot's token: the pipeline
/// file's bytes (the tests edit it to change the graph).
struct TestSources(PathBuf);

impl super::noop::Sources for TestSources {
    fn hash_into(&self, h: &mut blake3::Hasher) -> Option<()> {
        h.update(&std::fs::read(self.0.join("pipelines/p.ron")).ok()?);
        Some(())
    }
}

/// How a session-driven build went: answered from the snapshot alone, or
/// judged (incrementally or in full) and built.
#[derive(Debug, PartialEq)]
enum Answered {
    AllFresh,
    Fresh,
    Built { incremental: Option<Vec<String>> },
}

impl Bench {
    /// Dates every input and output file an hour back, as if written long
    /// ago: their stats can vouch for them (no waiting out a racy window).
    fn settle(&self) {
        let past = std::time::SystemTime::now() - Duration::from_secs(3600);
        for dir in ["in", "out"] {
            for e in walkdir::WalkDir::new(self.root().join(dir))
                .into_iter()
                .flatten()
                .filter(|e| e.file_type().is_file())
            {
                std::fs::File::options()
                    .write(true)
                    .open(e.path())
                    .and_then(|f| f.set_modified(past))
                    .unwrap();
            }
        }
    }

    /// A build of `targets` (all when empty) as `vitgraph build` runs one:
    /// a session judges, the builder builds, the session writes the snapshot.
    fn build_session(&self, targets: &[&str]) -> (Answered, Option<Outcome>) {
        use super::session::{Begun, Judgement, Session, Use};
        self.fake.reset();
        let sources = TestSources(self.root().to_path_buf());
        let begun = Session::begin(
            self.root(),
            &sources,
            &self.env,
            Use::Build,
            targets.is_empty(),
        )
        .unwrap();
        let mut session = match begun {
            Begun::AllFresh(_) => return (Answered::AllFresh, None),
            Begun::Judge(s) => s,
        };
        let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        let selection = crate::graph::select(&self.graph, &targets).unwrap();
        let incremental = match session.judge(&self.graph, &selection) {
            Judgement::Fresh => return (Answered::Fresh, None),
            Judgement::Reached(inc) => Some(inc),
            Judgement::Full => None,
        };
        let dirty = incremental.as_ref().map(|inc| {
            let mut ids: Vec<String> = inc
                .dirty
                .iter()
                .map(|&i| self.graph.nodes[i].id.clone())
                .collect();
            ids.sort();
            ids
        });
        let store = Arc::new(match session.take_store() {
            Some(store) => store,
            None => Store::open(self.root()).unwrap(),
        });
        let builder = Builder {
            graph: &self.graph,
            root: self.root().to_path_buf(),
            store: store.clone(),
            env: &self.env,
            options: BuildOptions {
                jobs: 1,
                keep_going: false,
                force: Default::default(),
                gpus: Vec::new(),
                only: None,
                retries: 0,
                interleave: None,
                accept_invalid: false,
                topology: None,
            },
            lanes: vec![super::schedule::Lane::machine(Arc::new(self.fake.clone()))],
            lane_of: Vec::new(),
            interrupt: Interrupt::new(),
            noop: session.snapshot(),
            incremental,
        };
        let mut reporter = Hooked {
            events: Vec::new(),
            when: None,
            interrupt: builder.interrupt.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let status = runtime.block_on(builder.build(&selection, &mut reporter));
        if status == BuildStatus::Success {
            session.finish(&store, &sources, &self.graph, &self.env);
        }
        (
            Answered::Built { incremental: dirty },
            Some(Outcome {
                status,
                events: reporter.events,
            }),
        )
    }
}

#[test]
fn an_unchanged_workspace_is_answered_by_the_snapshot_alone() {
    let b = chain();
    let (answer, _) = b.build_session(&[]);
    assert_eq!(
        answer,
        Answered::Built { incremental: None },
        "no snapshot yet"
    );
    b.settle();
    // The full plan of a fresh workspace writes the snapshot...
    let (answer, o) = b.build_session(&[]);
    assert_eq!(answer, Answered::Built { incremental: None });
    assert!(o.unwrap().started().is_empty());
    // ...which then answers alone, as a full plan would (nothing stale).
    assert_eq!(b.build_session(&[]).0, Answered::AllFresh);
    assert!(b.stale().is_empty());
    assert_eq!(
        b.build_session(&["double[i=1]"]).0,
        Answered::Fresh,
        "a covered selection"
    );
    assert!(b.fake.nodes().is_empty());
}

#[test]
fn a_changed_input_judges_what_it_reaches_and_runs_what_a_full_plan_would() {
    let b = chain();
    b.build_session(&[]);
    b.settle();
    b.build_session(&[]);
    b.write("in/1.txt", "B");
    b.fake.plan("gen[i=1]", Plan::Write("new".into()));
    b.fake.plan("double[i=1]", Plan::Write("new".into()));
    let full: Vec<String> = b.stale().into_keys().collect();
    assert_eq!(
        sorted(full.clone()),
        ids(&["double[i=1]", "gen[i=1]", "total"])
    );
    let (answer, o) = b.build_session(&[]);
    assert_eq!(
        answer,
        Answered::Built {
            incremental: Some(ids(&["double[i=1]", "gen[i=1]", "total"]))
        }
    );
    assert_eq!(o.unwrap().status, BuildStatus::Success);
    assert_eq!(
        sorted(b.fake.nodes()),
        sorted(full),
        "exactly the full plan's stale nodes ran"
    );
    // Dated back, the files read as changed once (judged, nothing runs);
    // then the snapshot answers alone again.
    b.settle();
    let (answer, _) = b.build_session(&[]);
    assert!(
        matches!(
            answer,
            Answered::Built {
                incremental: Some(_)
            }
        ),
        "{answer:?}"
    );
    assert!(b.fake.nodes().is_empty());
    assert_eq!(b.build_session(&[]).0, Answered::AllFresh);
}

#[test]
fn an_early_cutoff_inside_an_incremental_build_runs_no_more_than_a_full_plan() {
    let b = chain();
    b.fake.plan("gen[i=2]", Plan::Write("same".into()));
    b.build_session(&[]);
    b.settle();
    b.build_session(&[]);
    // New input, same output: its dependents stay fresh (early cutoff).
    b.write("in/2.txt", "C");
    let (answer, _) = b.build_session(&[]);
    assert!(
        matches!(
            answer,
            Answered::Built {
                incremental: Some(_)
            }
        ),
        "{answer:?}"
    );
    assert_eq!(b.fake.nodes(), ids(&["gen[i=2]"]));
    assert!(b.stale().is_empty());
}

#[test]
fn a_changed_pipeline_plans_in_full() {
    let mut b = chain();
    b.build_session(&[]);
    b.settle();
    b.build_session(&[]);
    let edited = CHAIN.replace("double ${needs.gen}", "double2 ${needs.gen}");
    std::fs::write(b.root().join("pipelines/p.ron"), edited).unwrap();
    b.reload(&[]);
    let full: Vec<String> = sorted(b.stale().into_keys().collect());
    assert_eq!(
        full,
        ids(&["double[i=0]", "double[i=1]", "double[i=2]", "total"])
    );
    let (answer, _) = b.build_session(&[]);
    assert_eq!(answer, Answered::Built { incremental: None });
    // The doubles wrote what they wrote before: `total` is cut off.
    assert_eq!(
        sorted(b.fake.nodes()),
        ids(&["double[i=0]", "double[i=1]", "double[i=2]"])
    );
    assert!(b.stale().is_empty());
}

#[test]
fn a_targeted_build_after_a_change_runs_only_its_targets_reached_nodes() {
    let b = chain();
    b.build_session(&[]);
    b.settle();
    b.build_session(&[]);
    b.write("in/0.txt", "A");
    b.write("in/2.txt", "C");
    b.fake.plan("gen[i=0]", Plan::Write("new".into()));
    b.fake.plan("gen[i=2]", Plan::Write("new".into()));
    let (answer, _) = b.build_session(&["double[i=0]"]);
    assert_eq!(
        answer,
        Answered::Built {
            incremental: Some(ids(&["double[i=0]", "gen[i=0]"]))
        }
    );
    assert_eq!(b.fake.nodes(), ids(&["gen[i=0]", "double[i=0]"]));
    // What a full plan says is still stale: the other chain and the total.
    assert_eq!(
        sorted(b.stale().into_keys().collect()),
        ids(&["double[i=2]", "gen[i=2]", "total"])
    );
}

#[test]
fn status_judges_what_a_change_reached_as_a_full_plan_does() {
    use super::session::{Begun, Judgement, Session, Use};
    let b = chain();
    b.build_session(&[]);
    b.settle();
    b.build_session(&[]);
    b.write("in/2.txt", "C");
    let snapshot = std::fs::read(b.root().join("cache/noop.snapshot")).unwrap();
    let sources = TestSources(b.root().to_path_buf());
    let Begun::Judge(mut session) =
        Session::begin(b.root(), &sources, &b.env, Use::Read, true).unwrap()
    else {
        panic!("the change was missed")
    };
    let all: Vec<usize> = (0..b.graph.nodes.len()).collect();
    let Judgement::Reached(inc) = session.judge(&b.graph, &all) else {
        panic!("not judged incrementally")
    };
    let store = session
        .take_store()
        .expect("the store the snapshot was checked in");
    let reached = super::judge_reached(&b.graph, b.root(), &store, &b.env, &inc, false)
        .unwrap()
        .expect("the store did not move");
    let full = b.stale();
    let mut judged: Vec<(String, Vec<Reason>)> = reached
        .into_iter()
        .filter(|(_, e)| !e.verdict.is_fresh())
        .map(|(i, e)| (b.graph.nodes[i].id.clone(), e.verdict.reasons().to_vec()))
        .collect();
    judged.sort_by(|a, c| a.0.cmp(&c.0));
    let full: Vec<(String, Vec<Reason>)> = full.into_iter().collect();
    assert_eq!(judged, full, "the same nodes, the same reasons");
    assert_eq!(judged.len(), 3);
    assert_eq!(
        std::fs::read(b.root().join("cache/noop.snapshot")).unwrap(),
        snapshot,
        "status writes no snapshot"
    );
}
