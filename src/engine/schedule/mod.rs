//! The scheduler: runs the stale nodes of a selection, dependencies first,
//! within the machine's slots, and records each one as it completes.
//!
//! A build is a small state machine ([`Build`]). Each node passes through
//! named steps: it becomes *ready* when its upstream is done, is *judged*
//! (fresh, to restore, or to run — judged just before it would start, so an
//! upstream rebuilt with identical outputs leaves it fresh: early cutoff),
//! *started* on an [`Executor`] when its slots are free, and *finished* or
//! *failed*; a failed node's dependents are *skipped*. A per-key lock makes
//! two `vitgraph` processes share work instead of running a node twice (see
//! [`super::job`]). Every step reports through [`Event`]s.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

mod end;
mod gate;
mod order;
mod start;

use super::events::{Event, Reporter};
use super::executor::Interrupt;
use super::failure::{FailureKind, NodeFailure};
pub(crate) use super::incremental::Incremental;
use super::job::Progress;
use super::lanes::Lanes;
pub(crate) use super::lanes::{Lane, Pool};
use super::plan::{EnvProbe, Evaluator, Reason, ReasonKind, Verdict};
use super::recorder::Recorder;
use super::slots::{Lease, Slots};
use crate::gpu::GpuId;
use crate::graph::{Graph, NodeIdx};
use crate::hash::ContentHash;
use crate::store::{NodeState, Store};

#[derive(Debug, Clone)]
pub(crate) struct BuildOptions {
    /// CPU slots.
    pub jobs: usize,
    pub keep_going: bool,
    /// Nodes to run even when fresh.
    pub force: HashSet<NodeIdx>,
    /// GPUs available to GPU nodes.
    pub gpus: Vec<GpuId>,
    /// When set, only these nodes may run; any other stale node fails the
    /// build ("upstream not built") — `run-node` executes exactly one node.
    pub only: Option<HashSet<NodeIdx>>,
    /// How many times a node whose cluster job failed with its node or was
    /// preempted runs again (`--retries`).
    pub retries: u32,
    /// The seed of the rounds repetitions run in (see [`order`]); None
    /// runs them as they come (`--no-interleave`).
    pub interleave: Option<u64>,
    /// `--accept-invalid`: keep invalid runs instead of measuring them again.
    pub accept_invalid: bool,
    /// The machine's cores and GPUs for `isolation: Gpu`; None: this
    /// machine's, read when a selected stage asks for it.
    pub topology: Option<crate::host::topology::Topology>,
}

pub(crate) use order::DEFAULT_SEED as INTERLEAVE_SEED;

/// The machine's slots for a build of `selection`: with a core partition
/// when a selected stage asks for `isolation: Gpu` and there are GPUs.
fn slots(b: &Builder<'_>, selection: &[NodeIdx]) -> Slots {
    let slots = Slots::new(b.options.jobs, b.options.gpus.clone());
    let isolated = selection.iter().any(|&i| {
        b.graph.stage_of(i).and_then(|s| s.isolation) == Some(crate::config::Isolation::Gpu)
    });
    if !isolated || b.options.gpus.is_empty() {
        return slots;
    }
    let gpus = &b.options.gpus;
    let topology = b
        .options
        .topology
        .clone()
        .unwrap_or_else(|| crate::host::topology::Topology::detect(gpus));
    slots.with_partition(crate::host::topology::partition(&topology, gpus))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuildStatus {
    Success,
    Failed,
    Interrupted,
}

pub(crate) struct Builder<'a> {
    pub graph: &'a Graph,
    pub root: PathBuf,
    pub store: Arc<Store>,
    pub env: &'a dyn EnvProbe,
    pub options: BuildOptions,
    /// Where stale nodes run: one lane per executor.
    pub lanes: Vec<Lane>,
    /// Each node's lane, by index; empty: every node in the first.
    pub lane_of: Vec<usize>,
    /// Set on SIGINT: scheduling stops and running nodes are stopped.
    pub interrupt: Interrupt,
    /// The no-op snapshot of this command, when it may write one (see `noop`).
    pub noop: Option<&'a super::noop::NoopSnapshot>,
    /// An incremental build: the snapshot held but for some files.
    pub incremental: Option<Incremental>,
}

/// How a node ended in this build. (Kept unboxed: most nodes of a build end
/// `Ok`, and a box each would only add an allocation per node.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Done {
    /// Its run's manifest hash: all that dependents' keys read of it (the
    /// run itself is in the store; a build of 100,000 nodes would otherwise
    /// hold every record it wrote).
    Ok(ContentHash),
    /// Fresh by an incremental build's snapshot; its run was not loaded, as
    /// no node being judged depends on it.
    Fresh,
    Failed,
    Skipped,
    /// Left running on the cluster (`--detach`), with what depends on it.
    Detached,
    /// A repetition its configuration's precision target does not call
    /// for: not run, and no one's upstream.
    Unneeded,
}

/// A judged node waiting for its slots.
struct Pending {
    idx: NodeIdx,
    key: ContentHash,
    parts: super::key::KeyParts,
    reasons: Vec<Reason>,
    /// Replace the recorded run of the key (`--force`, or a stored run that
    /// could not be restored).
    replace: bool,
}

#[derive(Default)]
struct Counts {
    built: usize,
    cached: usize,
    failed: usize,
    skipped: usize,
    detached: usize,
    unneeded: usize,
}

impl<'a> Builder<'a> {
    /// What the build's start and end (`incremental`) read of it.
    fn ctx(&self) -> super::incremental::Ctx<'_> {
        super::incremental::Ctx {
            graph: self.graph,
            root: &self.root,
            store: &self.store,
            env: self.env,
            // A build that keeps invalid runs vouches for nothing: a
            // command without the flag would find them stale.
            noop: self.noop.filter(|_| !self.options.accept_invalid),
            incremental: self.incremental.as_ref(),
            force: &self.options.force,
            accept_invalid: self.options.accept_invalid,
        }
    }

    /// Builds `selection` (topologically ordered, closed under dependencies).
    pub(crate) async fn build(
        &self,
        selection: &[NodeIdx],
        reporter: &mut dyn Reporter,
    ) -> BuildStatus {
        let t0 = Instant::now();
        let mut build = match Build::prepare(self, selection) {
            Ok(b) => b,
            Err(e) => {
                reporter.event(&Event::Failed {
                    node: String::new(),
                    failure: NodeFailure::store(&e),
                    duration_ms: 0,
                });
                return BuildStatus::Failed;
            }
        };
        reporter.event(&Event::Planned {
            total: selection.len(),
        });
        build.run(reporter).await;
        build.wrap_up(reporter, t0)
    }
}

/// One build in progress: what is done, ready, queued and running.
pub(super) struct Build<'b, 'a> {
    b: &'b Builder<'a>,
    selection: &'b [NodeIdx],
    /// Recorded states, as loaded (what judging a node reads of its own past).
    states: HashMap<String, NodeState>,
    /// Nodes the up-front plan found fresh, with their runs.
    fresh_now: HashMap<NodeIdx, ContentHash>,
    /// Nodes an incremental build knows fresh without their runs.
    fresh_only: HashSet<NodeIdx>,
    selected: HashSet<NodeIdx>,
    dependents: Vec<Vec<NodeIdx>>,
    /// Upstream nodes not yet done, per node.
    remaining: HashMap<NodeIdx, usize>,
    done: HashMap<NodeIdx, Done>,
    ready: order::Line<NodeIdx>,
    queue: order::Line<Pending>,
    lanes: Lanes<'b>,
    /// Nodes being restored, with what runs them should the restore find
    /// their stored run damaged.
    restoring: HashMap<NodeIdx, Pending>,
    /// Started nodes; the lease while their task holds the machine's slots.
    running: HashMap<NodeIdx, Option<Lease>>,
    /// Started nodes whose runs are not committed yet: their dependents'
    /// runs wait for these.
    commits: HashMap<NodeIdx, tokio::sync::watch::Sender<Option<bool>>>,
    /// Nodes whose dependents were released when they were staged.
    staged: HashSet<NodeIdx>,
    counts: Counts,
    stopping: bool,
    interrupted: bool,
    tx: mpsc::UnboundedSender<Progress>,
    rx: mpsc::UnboundedReceiver<Progress>,
    recorder: Recorder,
    /// The snapshot work left for the end (see `incremental`).
    snapshot: super::incremental::SnapshotPlan,
    /// Whether some stage has a precision target (see [`gate`]).
    gates: bool,
    /// The recorded run time (ms) of each done node of a stage with a
    /// precision target: what its time budget counts.
    durations: HashMap<NodeIdx, i64>,
    /// Whether any run in the store arrived without its outputs (a node
    /// to run then checks that what it reads is here).
    left_behind: bool,
}

impl<'b, 'a> Build<'b, 'a> {
    /// Loads the recorded states and judges what can be judged up front.
    fn prepare(
        b: &'b Builder<'a>,
        selection: &'b [NodeIdx],
    ) -> Result<Build<'b, 'a>, crate::store::StoreError> {
        let start = super::incremental::start(&b.ctx(), selection)?;
        let selected: HashSet<NodeIdx> = selection.iter().copied().collect();
        let mut remaining: HashMap<NodeIdx, usize> = selection
            .iter()
            .map(|&i| (i, b.graph.nodes[i].deps().len()))
            .collect();
        let mut dependents = b.graph.dependents();
        let gates = b.graph.stages.iter().any(|s| s.precision.is_some());
        if gates {
            gate::wait_for_earlier(b.graph, selection, &mut remaining, &mut dependents);
        }
        let interleave = b.options.interleave;
        let mut ready: order::Line<NodeIdx> = selection
            .iter()
            .copied()
            .filter(|i| remaining[i] == 0)
            .map(|i| (order::round_of(b.graph, i, interleave), i))
            .collect();
        // Nodes to judge first, those known fresh after: commands start
        // before thousands of fresh nodes are passed.
        ready
            .plain_mut()
            .make_contiguous()
            .sort_by_key(|i| start.fresh_now.contains_key(i) || start.fresh_only.contains(i));
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Build {
            b,
            selection,
            states: start.states,
            fresh_now: start.fresh_now,
            fresh_only: start.fresh_only,
            selected,
            dependents,
            remaining,
            done: HashMap::with_capacity(selection.len()),
            ready,
            queue: order::Line::new(),
            lanes: Lanes::new(&b.lanes, &b.lane_of, slots(b, selection)),
            running: HashMap::new(),
            restoring: HashMap::new(),
            commits: HashMap::new(),
            staged: HashSet::new(),
            counts: Counts::default(),
            stopping: false,
            interrupted: false,
            tx,
            rx,
            recorder: Recorder::start(b.store.clone()),
            snapshot: start.snapshot,
            gates,
            durations: HashMap::new(),
            left_behind: b.store.reader().any_bytes_elsewhere(),
        })
    }

    /// Judges, starts and finishes nodes until nothing is left to do.
    async fn run(&mut self, reporter: &mut dyn Reporter) {
        loop {
            if !self.interrupted && self.b.interrupt.is_set() {
                self.on_interrupt(reporter);
            }
            self.judge_ready(reporter);
            if !self.stopping {
                self.start_queued(reporter);
                if !self.ready.is_empty() && !self.running.is_empty() {
                    // Let the new tasks start their commands before judging on.
                    tokio::task::yield_now().await;
                }
            }
            let idle = self.queue.is_empty() && self.ready.is_empty();
            if self.running.is_empty() && (idle || self.stopping) {
                return;
            }
            // A node that failed before starting released its dependents:
            // judge them now rather than wait for a message no node will send.
            if !self.stopping && !self.ready.is_empty() {
                continue;
            }
            self.recorder.set_running(self.may_record_soon());
            let interrupt = self.b.interrupt.clone();
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(msg) => self.on_progress(msg, reporter),
                    None => return,
                },
                _ = interrupt.wait(), if !self.interrupted => self.on_interrupt(reporter),
            }
        }
    }

    /// Judges every ready node; stops early when one can start at once.
    fn judge_ready(&mut self, reporter: &mut dyn Reporter) {
        while let Some((_, i)) = self.ready.pop_front() {
            if self.stopping {
                continue;
            }
            let queued = self.judge(i, reporter);
            if queued && self.lanes.cpu_free() > 0 {
                // Start it now: the nodes still to judge (in an incremental
                // build, thousands found fresh) are passed while it runs.
                return;
            }
        }
    }

    /// Judges one node whose upstream is done; true when it was queued to run.
    fn judge(&mut self, i: NodeIdx, reporter: &mut dyn Reporter) -> bool {
        let b = self.b;
        let node = &b.graph.nodes[i];
        let known = match self.fresh_now.remove(&i) {
            Some(manifest) => Some(Done::Ok(manifest)),
            None => self.fresh_only.contains(&i).then_some(Done::Fresh),
        };
        if let Some(done) = known {
            if self.gates {
                let ms = self
                    .states
                    .get(&node.id)
                    .and_then(|s| s.latest_success.as_ref());
                self.note_run(i, ms.map_or(0, |r| r.duration_ms));
            }
            self.cached(i, done, reporter);
            return false;
        }
        let deps = node.deps();
        // Below a detached node: its upstream runs on; a later build goes on.
        if deps
            .iter()
            .any(|d| matches!(self.done.get(d), Some(Done::Detached)))
        {
            self.finish_node(i, Done::Detached);
            return false;
        }
        if let Some(&bad) = deps
            .iter()
            .find(|d| matches!(self.done.get(d), Some(Done::Failed | Done::Skipped)))
        {
            self.skip(i, bad, reporter);
            return false;
        }
        let gated = self.gates && b.graph.is_gated(i) && !b.options.force.contains(&i);
        if gated && !self.earlier_ok(i, reporter) {
            return false;
        }
        if self.gates && self.follows_unneeded(i, reporter) {
            return false;
        }
        let upstream = self.upstream_of(&deps);
        let ev = Evaluator {
            root: &b.root,
            store: Some(&b.store),
            observer: None,
            states: &self.states,
            env: b.env,
            accept_invalid: b.options.accept_invalid,
        };
        let evaluation = match ev.evaluate(node, &upstream) {
            Ok(e) => e,
            Err(e) => {
                let failure = NodeFailure::new(FailureKind::Key, e.to_string());
                self.fail(i, failure, 0, reporter);
                return false;
            }
        };
        // A gated repetition is judged even when it has a run: a build
        // under a tighter target may have run it, and whether it is needed
        // is the earlier repetitions' to say (see `plan::gated`).
        let evaluation = if gated {
            match self.gate(i, evaluation, reporter) {
                Some(e) => e,
                None => return false,
            }
        } else {
            evaluation
        };
        self.decide(i, evaluation, reporter)
    }

    /// The ids and manifests (None: not known yet) a node's key reads of its
    /// upstream. A repetition not needed is no one's upstream.
    fn upstream_of(&self, deps: &[NodeIdx]) -> Vec<(String, Option<ContentHash>)> {
        deps.iter()
            .filter(|d| !matches!(self.done.get(d), Some(Done::Unneeded)))
            .map(|&d| {
                let h = match self.done.get(&d) {
                    Some(Done::Ok(manifest)) => Some(*manifest),
                    _ => None,
                };
                (self.b.graph.nodes[d].id.clone(), h)
            })
            .collect()
    }

    /// Acts on a node's verdict: done (fresh), restored, refused, or queued
    /// to run; true when queued.
    fn decide(
        &mut self,
        i: NodeIdx,
        evaluation: super::plan::Evaluation,
        reporter: &mut dyn Reporter,
    ) -> bool {
        let b = self.b;
        let node = &b.graph.nodes[i];
        let forced = b.options.force.contains(&i);
        let Some((key, parts)) = evaluation.key else {
            unreachable!("every upstream is done, so the key is known")
        };
        match evaluation.verdict {
            Verdict::Fresh(run) if !forced => {
                self.note_run(i, run.duration_ms);
                self.cached(i, Done::Ok(run.manifest_hash()), reporter);
                false
            }
            Verdict::Restore(run, reasons) if !forced => {
                let pending = Pending {
                    idx: i,
                    key,
                    parts,
                    reasons,
                    replace: true,
                };
                self.restore(pending, run);
                false
            }
            _ if b.options.only.as_ref().is_some_and(|o| !o.contains(&i)) => {
                let failure = NodeFailure::new(
                    FailureKind::NotBuilt,
                    format!("`{}` is not built; build it first (run-node executes one node whose upstream is built)", node.id),
                );
                self.fail(i, failure, 0, reporter);
                self.stopping = true;
                false
            }
            _ if self.left_behind && self.reads_left_behind(i, reporter) => false,
            verdict => {
                let reasons = if forced && verdict.reasons().is_empty() {
                    vec![Reason::new(ReasonKind::SpecChanged, "forced with --force")]
                } else {
                    verdict.reasons().to_vec()
                };
                let round = self.round(i);
                self.queue.push_back(
                    round,
                    Pending {
                        idx: i,
                        key,
                        parts,
                        // An invalid run is measured again in its place.
                        replace: forced || reasons.iter().any(|r| r.kind == ReasonKind::Invalid),
                        reasons,
                    },
                );
                true
            }
        }
    }

    /// Fails node `i`, about to run, when an upstream run it would read
    /// arrived without its outputs (see `store::left_behind`): true then.
    fn reads_left_behind(&mut self, i: NodeIdx, reporter: &mut dyn Reporter) -> bool {
        let graph = self.b.graph;
        let reader = self.b.store.reader();
        let reads = graph.nodes[i].task.reads_of_upstream();
        let found = graph.nodes[i].deps().into_iter().find_map(|d| {
            let host = reader
                .node_bytes_elsewhere(&graph.nodes[d].id, reads)
                .ok()??;
            Some((&graph.nodes[d], host))
        });
        let Some((upstream, host)) = found else {
            return false;
        };
        let here = match upstream.task.measures_hardware() {
            true => "--measure-here",
            false => "--force",
        };
        let on = crate::store::host_text(&host);
        let failure = NodeFailure::new(
            FailureKind::NotBuilt,
            format!(
                "`{}` reads the outputs of `{up}`, whose run arrived without all of them (a bundle exported with `--results-only`; the rest are on {on}); import a bundle of `{up}` exported there without `--results-only`, or build `{up}` here with `{here}`",
                graph.nodes[i].id,
                up = upstream.id,
            ),
        );
        self.fail(i, failure, 0, reporter);
        true
    }

    /// Node `i`'s place in the rounds of repetitions, if it has one.
    fn round(&self, i: NodeIdx) -> Option<order::Round> {
        order::round_of(self.b.graph, i, self.b.options.interleave)
    }

    /// How many nodes could send a run to the recorder's next batch: those
    /// running their task whose upstream runs are all recorded, and those
    /// waiting for slots. (A node whose upstream run is still being recorded
    /// waits for that commit before its own, so no batch lingers for it.)
    fn may_record_soon(&self) -> usize {
        let graph = &self.b.graph;
        let free = self
            .running
            .iter()
            .filter(|(i, lease)| {
                // Straight over the needs: `deps()` would sort a copy of
                // them (33,333 for a summary node) on every wait.
                lease.is_some()
                    && !graph.nodes[**i]
                        .needs
                        .iter()
                        .flat_map(|n| &n.nodes)
                        .any(|d| self.staged.contains(d))
            })
            .count();
        free + self.queue.len()
    }
}
