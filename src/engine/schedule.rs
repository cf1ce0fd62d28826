//! The scheduler: runs the stale nodes of a selection, dependencies first,
//! within CPU and GPU slots, and records each one as it completes.
//!
//! Each node is judged just before it would start, once its upstream nodes
//! are done, so an upstream rebuilt with identical outputs leaves it fresh
//! (early cutoff). A per-key lock makes two `vitgraph` processes share work
//! instead of running a node twice.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::events::{Event, Reporter};
use super::plan::{EnvProbe, Evaluator, Reason, Verdict};
use super::recorder::Recorder;
use super::run::{self, Children, Job, RunError};
use crate::graph::{Graph, NodeIdx};
use crate::hash::ContentHash;
use crate::store::{NewRun, NodeState, RunRecord, Store};
use crate::tasks::{TaskSpec, UpstreamNode};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// CPU slots.
    pub jobs: usize,
    pub keep_going: bool,
    /// Nodes to run even when fresh.
    pub force: HashSet<NodeIdx>,
    /// GPU ids available to GPU nodes.
    pub gpus: Vec<u32>,
    /// When set, only these nodes may run; any other stale node fails the
    /// build ("upstream not built") — `run-node` executes exactly one node.
    pub only: Option<HashSet<NodeIdx>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStatus {
    Success,
    Failed,
    Interrupted,
}

enum Done {
    Ok(RunRecord),
    /// Fresh by an incremental build's snapshot; its run was not loaded, as
    /// no node being judged depends on it.
    Fresh,
    Failed,
    Skipped,
}

struct Pending {
    idx: NodeIdx,
    key: ContentHash,
    parts: super::key::KeyParts,
    reasons: Vec<Reason>,
}

enum Message {
    /// Outputs are in `out/`: dependents may start; the record is still being committed.
    Ready { idx: NodeIdx, run: RunRecord },
    Finished {
        idx: NodeIdx,
        result: Result<(RunRecord, Option<String>), String>,
        started: Instant,
        log: Option<PathBuf>,
        record_ms: u64,
    },
    Restored {
        idx: NodeIdx,
        result: Result<RunRecord, String>,
    },
}

/// Slots in use.
struct Slots {
    cpu_free: usize,
    gpu_free: Vec<u32>,
    running: usize,
    exclusive: bool,
}

impl Slots {
    fn release(&mut self, gpus: Vec<u32>) {
        self.gpu_free.extend(gpus);
        self.gpu_free.sort_unstable();
        self.cpu_free += 1;
        self.running -= 1;
        self.exclusive = false;
    }
}

pub struct Builder<'a> {
    pub graph: &'a Graph,
    pub root: PathBuf,
    pub store: Arc<Store>,
    pub env: &'a dyn EnvProbe,
    pub options: BuildOptions,
    /// Filled when the up-front plan finds every node of the graph fresh,
    /// for the no-op snapshot (see `noop`).
    pub noop: Option<&'a super::noop::Capture>,
    /// An incremental build: the snapshot held but for some files.
    pub incremental: Option<Incremental>,
}

/// What an incremental build starts from (see `noop::Snapshot::Changed`):
/// while the store is still at the snapshot's `generation`, every node
/// outside `dirty` is fresh with its latest successful run, so only `dirty`
/// is judged. After a successful build the dirty nodes are judged again and
/// the snapshot's `facts` updated with what they saw, for the next no-op.
pub struct Incremental {
    pub dirty: HashSet<NodeIdx>,
    pub generation: i64,
    pub facts: crate::store::FileFacts,
}

impl<'a> Builder<'a> {
    /// Builds `selection` (topologically ordered, closed under dependencies).
    pub async fn build(&self, selection: &[NodeIdx], reporter: &mut dyn Reporter) -> BuildStatus {
        let t0 = Instant::now();
        if self.noop.is_some() && self.incremental.is_none() {
            self.store.observe_files();
        }
        // An incremental build whose store has not moved since the snapshot
        // reads the states of the dirty nodes and their direct upstream only.
        let partial = match &self.incremental {
            Some(inc) => self.load_incremental(inc),
            None => Ok(None),
        };
        let loaded = match partial {
            Ok(Some((states, generation))) => Ok((states, Some(generation))),
            Ok(None) => self.store.load_states_at(),
            Err(e) => Err(e),
        };
        let (mut states, generation): (HashMap<String, NodeState>, Option<i64>) = match loaded {
            Ok(s) => s,
            Err(e) => {
                reporter.event(&Event::Failed {
                    node: String::new(),
                    error: e.to_string(),
                    log: None,
                    duration_ms: 0,
                });
                return BuildStatus::Failed;
            }
        };
        let own_at_load = self.store.own_generation();
        // An incremental build whose store has not moved since the snapshot:
        // every node the change cannot reach is fresh with its latest run.
        let incremental = self
            .incremental
            .as_ref()
            .filter(|inc| generation == Some(inc.generation));
        // Of the rest, those whose run was loaded are fresh with it; the
        // others are fresh without (nothing being judged depends on them).
        let mut fresh_only: HashSet<NodeIdx> = HashSet::new();
        let assumed: Option<HashMap<NodeIdx, RunRecord>> = incremental.map(|inc| {
            let mut runs = HashMap::new();
            for &i in selection.iter().filter(|i| !inc.dirty.contains(i)) {
                // Moved, not copied: a node the change cannot reach is never
                // judged, so its state is not read again.
                match states
                    .get_mut(&self.graph.nodes[i].id)
                    .and_then(|s| s.latest_success.take())
                {
                    Some(run) => {
                        runs.insert(i, run);
                    }
                    None => {
                        fresh_only.insert(i);
                    }
                }
            }
            runs
        });
        // Judge everything once up front (in parallel): nodes fresh now are
        // done at once; the others are judged again when their upstream is done.
        let mut fresh_now: HashMap<NodeIdx, RunRecord> = if let Some(assumed) = assumed {
            assumed
        } else {
            let ev = Evaluator {
                root: &self.root,
                store: Some(&self.store),
                states: &states,
                env: self.env,
            };
            match super::plan::plan(&ev, self.graph, selection) {
                Ok(p) => p
                    .into_iter()
                    .filter_map(|(i, e)| match e.verdict {
                        Verdict::Fresh(run) if !self.options.force.contains(&i) => Some((i, run)),
                        _ => None,
                    })
                    .collect(),
                Err(_) => HashMap::new(),
            }
        };
        // A full plan of the whole graph hands its facts to the snapshot: at
        // once when every node is fresh, or, when some must run, after the
        // build has judged those again (as an incremental build does). A file
        // written too recently to vouch for goes in as "untrusted", so the
        // next command judges its nodes again instead of planning in full.
        let mut after_full: Option<Incremental> = None;
        if let (Some(capture), None) = (self.noop, incremental) {
            let files = self.store.observed_files_lenient();
            let whole = selection.len() == self.graph.nodes.len();
            if let (true, Some(generation), Some(facts)) = (whole, generation, files) {
                let stale = selection.len() - fresh_now.len();
                if stale == 0 {
                    capture.set(generation, facts);
                } else if stale <= selection.len() / 4 {
                    // (After a larger build, such as a cold one, judging it
                    // all again would cost a plan and its memory: the next
                    // command's full plan writes the snapshot instead.)
                    let dirty = selection
                        .iter()
                        .copied()
                        .filter(|i| !fresh_now.contains_key(i))
                        .collect();
                    after_full = Some(Incremental {
                        dirty,
                        generation,
                        facts,
                    });
                }
            }
        }
        let selected: HashSet<NodeIdx> = selection.iter().copied().collect();
        let dependents = self.graph.dependents();
        let mut remaining: HashMap<NodeIdx, usize> = selection
            .iter()
            .map(|&i| (i, self.graph.nodes[i].deps().len()))
            .collect();
        let mut done: HashMap<NodeIdx, Done> = HashMap::with_capacity(selection.len());
        let mut ready: VecDeque<NodeIdx> = selection
            .iter()
            .copied()
            .filter(|i| remaining[i] == 0)
            .collect();
        // Nodes to judge first, those known fresh after: the commands start
        // before thousands of fresh nodes are passed.
        ready
            .make_contiguous()
            .sort_by_key(|i| fresh_now.contains_key(i) || fresh_only.contains(i));
        let mut queue: VecDeque<Pending> = VecDeque::new();
        let mut slots = Slots {
            cpu_free: self.options.jobs.max(1),
            gpu_free: self.options.gpus.clone(),
            running: 0,
            exclusive: false,
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        let recorder = Recorder::start(self.store.clone());
        let mut holding_slot: HashSet<NodeIdx> = HashSet::new();
        let children = Children::default();
        let mut in_flight: HashMap<NodeIdx, Vec<u32>> = HashMap::new();
        let (mut built, mut cached, mut failed, mut skipped) = (0, 0, 0, 0);
        let mut stopping = false;
        let mut interrupted = false;
        reporter.event(&Event::Planned {
            total: selection.len(),
        });

        let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
        loop {
            // Judge every node whose upstream is done.
            while let Some(i) = ready.pop_front() {
                if stopping {
                    continue;
                }
                let node = &self.graph.nodes[i];
                let fresh = match fresh_now.remove(&i) {
                    Some(run) => Some(Done::Ok(run)),
                    None => fresh_only.contains(&i).then_some(Done::Fresh),
                };
                if let Some(fresh) = fresh {
                    reporter.event(&Event::Cached {
                        node: node.id.clone(),
                        restored: false,
                        reused_from: None,
                    });
                    cached += 1;
                    done.insert(i, fresh);
                    release(i, &dependents, &selected, &mut remaining, &mut ready);
                    continue;
                }
                let deps = node.deps();
                if let Some(&bad) = deps
                    .iter()
                    .find(|d| matches!(done.get(d), Some(Done::Failed | Done::Skipped)))
                {
                    reporter.event(&Event::Skipped {
                        node: node.id.clone(),
                        because: format!("`{}` failed", self.graph.nodes[bad].id),
                    });
                    skipped += 1;
                    done.insert(i, Done::Skipped);
                    release(i, &dependents, &selected, &mut remaining, &mut ready);
                    continue;
                }
                let upstream: Vec<(String, Option<ContentHash>)> = deps
                    .iter()
                    .map(|d| {
                        let h = match done.get(d) {
                            Some(Done::Ok(run)) => Some(run.manifest_hash()),
                            _ => None,
                        };
                        (self.graph.nodes[*d].id.clone(), h)
                    })
                    .collect();
                let ev = Evaluator {
                    root: &self.root,
                    store: Some(&self.store),
                    states: &states,
                    env: self.env,
                };
                let evaluation = match ev.evaluate(node, &upstream) {
                    Ok(e) => e,
                    Err(e) => {
                        reporter.event(&Event::Failed {
                            node: node.id.clone(),
                            error: e.to_string(),
                            log: None,
                            duration_ms: 0,
                        });
                        failed += 1;
                        done.insert(i, Done::Failed);
                        stopping |= !self.options.keep_going;
                        release(i, &dependents, &selected, &mut remaining, &mut ready);
                        continue;
                    }
                };
                let forced = self.options.force.contains(&i);
                let Some((key, parts)) = evaluation.key else {
                    unreachable!("every upstream is done, so the key is known")
                };
                match evaluation.verdict {
                    Verdict::Fresh(run) if !forced => {
                        reporter.event(&Event::Cached {
                            node: node.id.clone(),
                            restored: false,
                            reused_from: None,
                        });
                        cached += 1;
                        done.insert(i, Done::Ok(run));
                        release(i, &dependents, &selected, &mut remaining, &mut ready);
                    }
                    Verdict::Restore(run, _) if !forced => {
                        let store = self.store.clone();
                        let dest = self.root.join(node.out_rel());
                        let tx = tx.clone();
                        in_flight.insert(i, Vec::new());
                        tokio::task::spawn_blocking(move || {
                            let result = store
                                .materialize(&run, &dest)
                                .map(|_| run)
                                .map_err(|e| e.to_string());
                            let _ = tx.send(Message::Restored { idx: i, result });
                        });
                    }
                    _ if self.options.only.as_ref().is_some_and(|o| !o.contains(&i)) => {
                        let error = format!("`{}` is not built; build it first (run-node executes one node whose upstream is built)", node.id);
                        reporter.event(&Event::Failed {
                            node: node.id.clone(),
                            error,
                            log: None,
                            duration_ms: 0,
                        });
                        failed += 1;
                        done.insert(i, Done::Failed);
                        stopping = true;
                        release(i, &dependents, &selected, &mut remaining, &mut ready);
                    }
                    verdict => {
                        let reasons = if forced && verdict.reasons().is_empty() {
                            vec![Reason {
                                kind: super::plan::ReasonKind::SpecChanged,
                                detail: "forced with --force".into(),
                            }]
                        } else {
                            verdict.reasons().to_vec()
                        };
                        queue.push_back(Pending {
                            idx: i,
                            key,
                            parts,
                            reasons,
                        });
                        if slots.cpu_free > 0 {
                            // Start it now: the nodes still to judge (in an
                            // incremental build, thousands found fresh) are
                            // passed while its command runs.
                            break;
                        }
                    }
                }
            }

            // Start what fits.
            if !stopping {
                let mut waiting = VecDeque::new();
                while let Some(p) = queue.pop_front() {
                    let res = self.graph.nodes[p.idx].task.resources();
                    if res.gpus as usize > self.options.gpus.len() {
                        let node = &self.graph.nodes[p.idx];
                        let error = format!(
                            "`{}` needs {} GPU(s) but {} are available; pass `--gpus 0,1,…` or run it on a machine with GPUs",
                            node.id,
                            res.gpus,
                            self.options.gpus.len()
                        );
                        reporter.event(&Event::Failed {
                            node: node.id.clone(),
                            error,
                            log: None,
                            duration_ms: 0,
                        });
                        failed += 1;
                        done.insert(p.idx, Done::Failed);
                        stopping |= !self.options.keep_going;
                        release(p.idx, &dependents, &selected, &mut remaining, &mut ready);
                        continue;
                    }
                    let fits = !slots.exclusive
                        && slots.cpu_free > 0
                        && slots.gpu_free.len() >= res.gpus as usize
                        && (!res.exclusive || slots.running == 0);
                    if !fits {
                        waiting.push_back(p);
                        continue;
                    }
                    let gpus: Vec<u32> = slots.gpu_free.drain(..res.gpus as usize).collect();
                    slots.cpu_free -= 1;
                    slots.running += 1;
                    slots.exclusive = res.exclusive;
                    in_flight.insert(p.idx, gpus.clone());
                    holding_slot.insert(p.idx);
                    let node = &self.graph.nodes[p.idx];
                    reporter.event(&Event::Started {
                        node: node.id.clone(),
                        reasons: p.reasons.clone(),
                        gpus: gpus.clone(),
                    });
                    self.spawn(p, gpus, &tx, &children, &recorder);
                }
                queue = waiting;
                if !ready.is_empty() && !in_flight.is_empty() {
                    // Let the new tasks start their commands before judging on.
                    tokio::task::yield_now().await;
                }
            }

            if in_flight.is_empty()
                && (ready.is_empty() || stopping)
                && (queue.is_empty() || stopping)
            {
                break;
            }
            // A node that failed before starting (too few GPUs) released its
            // dependents: judge them now rather than wait for a message that
            // no running node will send.
            if !stopping && !ready.is_empty() {
                continue;
            }

            recorder.set_running(holding_slot.len());
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { break };
                    match msg {
                        Message::Restored { idx, result } => {
                            in_flight.remove(&idx);
                            let node = &self.graph.nodes[idx];
                            match result {
                                Ok(run) => {
                                    reporter.event(&Event::Cached { node: node.id.clone(), restored: true, reused_from: None });
                                    cached += 1;
                                    states.entry(node.id.clone()).or_default().latest_success = Some(run.clone());
                                    done.insert(idx, Done::Ok(run));
                                }
                                Err(error) => {
                                    reporter.event(&Event::Failed { node: node.id.clone(), error, log: None, duration_ms: 0 });
                                    failed += 1;
                                    done.insert(idx, Done::Failed);
                                    stopping |= !self.options.keep_going;
                                }
                            }
                            release(idx, &dependents, &selected, &mut remaining, &mut ready);
                        }
                        Message::Ready { idx, run } => {
                            if holding_slot.remove(&idx) {
                                let gpus = in_flight.get(&idx).cloned().unwrap_or_default();
                                slots.release(gpus);
                            }
                            done.insert(idx, Done::Ok(run));
                            release(idx, &dependents, &selected, &mut remaining, &mut ready);
                        }
                        Message::Finished { idx, result, started, log, record_ms } => {
                            let gpus = in_flight.remove(&idx).unwrap_or_default();
                            let was_ready = !holding_slot.remove(&idx);
                            if !was_ready {
                                slots.release(gpus);
                            }
                            let node = &self.graph.nodes[idx];
                            let duration_ms = started.elapsed().as_millis() as u64;
                            match result {
                                Ok((run, shared)) => {
                                    if let Some(from) = shared {
                                        reporter.event(&Event::Cached { node: node.id.clone(), restored: true, reused_from: Some(from) });
                                        cached += 1;
                                    } else {
                                        reporter.event(&Event::Finished { node: node.id.clone(), duration_ms, record_ms });
                                        built += 1;
                                    }
                                    states.entry(node.id.clone()).or_default().latest_success = Some(run.clone());
                                    if !was_ready {
                                        done.insert(idx, Done::Ok(run));
                                    }
                                }
                                Err(_) if interrupted => {
                                    done.insert(idx, Done::Failed);
                                }
                                Err(error) => {
                                    reporter.event(&Event::Failed {
                                        node: node.id.clone(),
                                        error,
                                        log: log.map(|p| p.to_string_lossy().into_owned()),
                                        duration_ms,
                                    });
                                    failed += 1;
                                    if !was_ready {
                                        done.insert(idx, Done::Failed);
                                    }
                                    stopping |= !self.options.keep_going;
                                }
                            }
                            if !was_ready {
                                release(idx, &dependents, &selected, &mut remaining, &mut ready);
                            }
                        }
                    }
                }
                _ = &mut ctrl_c, if !interrupted => {
                    interrupted = true;
                    stopping = true;
                    let running: Vec<String> = in_flight.keys().map(|&i| self.graph.nodes[i].id.clone()).collect();
                    reporter.event(&Event::Interrupted { running });
                    children.interrupt();
                    let kids = children.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        kids.signal_all(libc::SIGKILL);
                    });
                }
            }
        }
        let _ = self.store.flush_stat_cache();
        if let (Some(capture), Some(inc), false, 0, 0) = (
            self.noop,
            incremental.or(after_full.as_ref()),
            interrupted,
            failed,
            skipped,
        ) {
            self.refresh_snapshot(capture, inc, &done, selection, own_at_load);
        }
        reporter.event(&Event::Done {
            built,
            cached,
            failed,
            skipped,
            duration_ms: t0.elapsed().as_millis() as u64,
        });
        if interrupted {
            BuildStatus::Interrupted
        } else if failed > 0 || skipped > 0 {
            BuildStatus::Failed
        } else {
            BuildStatus::Success
        }
    }

    /// The states an incremental build judges with (the dirty nodes' and
    /// their direct upstream's) and the change counter, read in one
    /// transaction; None when the store moved since the snapshot.
    fn load_incremental(
        &self,
        inc: &Incremental,
    ) -> Result<Option<(HashMap<String, NodeState>, i64)>, crate::store::StoreError> {
        let mut needed: HashSet<NodeIdx> = inc.dirty.clone();
        for &i in &inc.dirty {
            needed.extend(self.graph.nodes[i].deps());
        }
        let ids: Vec<&str> = needed
            .iter()
            .map(|&i| self.graph.nodes[i].id.as_str())
            .collect();
        // Only the dirty nodes' files are looked at: their stat-cache
        // entries, not all of them (13,333 rows in a 10,000-node sweep).
        let files: Vec<String> = inc
            .dirty
            .iter()
            .flat_map(|&i| {
                let node = &self.graph.nodes[i];
                let dest = self.root.join(node.out_rel());
                let inputs = node
                    .task
                    .inputs()
                    .into_iter()
                    .map(|rel| self.root.join(rel));
                let outputs = node.task.outputs().into_iter().map(|o| dest.join(o));
                inputs
                    .chain(outputs)
                    .map(|path| self.store.stat_key(&path))
                    .collect::<Vec<_>>()
            })
            .collect();
        self.store.preload_stat_cache_for(&files)?;
        self.store.begin_read()?;
        let read = (|| {
            if self.store.generation()? != Some(inc.generation) {
                return Ok(None);
            }
            let judged: Vec<&str> = inc
                .dirty
                .iter()
                .map(|&i| self.graph.nodes[i].id.as_str())
                .collect();
            let states = self.store.load_states_with_attempts_of(&ids, &judged)?;
            Ok(Some((states, inc.generation)))
        })();
        if !matches!(read, Ok(Some(_))) {
            // The full plan that follows looks at every file.
            self.store.unload_stat_cache();
        }
        let end = self.store.end_read();
        let read = read?;
        end?;
        Ok(read)
    }

    /// After a successful incremental build, or a full one that ran nodes
    /// (then `inc` holds the plan's facts and the nodes it found stale):
    /// judges the dirty nodes again,
    /// every other node as assumed, and hands `capture` the snapshot's facts
    /// updated with what they saw — when all are fresh and the change
    /// counter moved by this process's own records only (so the assumed
    /// nodes' records are still the ones the build started from).
    fn refresh_snapshot(
        &self,
        capture: &super::noop::Capture,
        inc: &Incremental,
        done: &HashMap<NodeIdx, Done>,
        selection: &[NodeIdx],
        own_at_load: i64,
    ) {
        if selection.len() != self.graph.nodes.len() {
            return;
        }
        let dirty: Vec<NodeIdx> = selection
            .iter()
            .copied()
            .filter(|i| inc.dirty.contains(i))
            .collect();
        let ids: Vec<&str> = dirty
            .iter()
            .map(|&i| self.graph.nodes[i].id.as_str())
            .collect();
        self.store.observe_files();
        let read = (|| {
            self.store.begin_read()?;
            let read = (|| {
                let generation = self.store.generation()?;
                let own = self.store.own_generation();
                Ok::<_, crate::store::StoreError>((
                    self.store.load_states_for(&ids)?,
                    generation,
                    own,
                ))
            })();
            self.store.end_read()?;
            read
        })();
        let Ok((states, Some(generation), own)) = read else {
            return;
        };
        if generation != inc.generation + (own - own_at_load) {
            return;
        }
        let ev = Evaluator {
            root: &self.root,
            store: Some(&self.store),
            states: &states,
            env: self.env,
        };
        let known = |d: NodeIdx| match done.get(&d) {
            Some(Done::Ok(run)) => Some(run.manifest_hash()),
            _ => None,
        };
        let Ok(evals) = super::plan::plan_with(&ev, self.graph, &dirty, &known) else {
            return;
        };
        let _ = self.store.flush_stat_cache();
        if evals.len() == dirty.len() && evals.values().all(|e| e.verdict.is_fresh()) {
            if let Some(files) = self.store.observed_files_lenient() {
                capture.set(generation, inc.facts.updated_with(&files));
            }
        }
    }

    fn spawn(
        &self,
        p: Pending,
        gpus: Vec<u32>,
        tx: &mpsc::UnboundedSender<Message>,
        children: &Children,
        recorder: &Recorder,
    ) {
        let node = &self.graph.nodes[p.idx];
        let mut needs: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let mut upstream: BTreeMap<String, Vec<UpstreamNode>> = BTreeMap::new();
        // A command sees its upstream only through `${needs.S}` in its
        // script: the stages it names are all it needs (a report over 3,333
        // nodes that names none skips listing them). Other tasks get every
        // upstream node with its params (a report's param columns).
        let script = match &node.task {
            TaskSpec::Command(c) => Some(c.run.as_str()),
            _ => None,
        };
        for need in &node.needs {
            if script.is_some_and(|run| !run::names_needs(run, &need.stage)) {
                continue;
            }
            let dirs: Vec<PathBuf> = need
                .nodes
                .iter()
                .map(|&d| self.root.join(self.graph.nodes[d].out_rel()))
                .collect();
            if script.is_none() {
                let ups = need
                    .nodes
                    .iter()
                    .zip(&dirs)
                    .map(|(&d, dir)| {
                        let up = &self.graph.nodes[d];
                        UpstreamNode {
                            id: up.id.clone(),
                            // The params that tell the nodes apart; pipeline-wide
                            // params are the same in every row.
                            params: up.id_params.iter().cloned().collect(),
                            dir: dir.clone(),
                        }
                    })
                    .collect();
                upstream.insert(need.stage.clone(), ups);
            }
            needs.insert(need.stage.clone(), dirs);
        }
        let recorded = super::key::RecordedParts {
            parts: p.parts,
            params: node
                .params
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
                .collect(),
        };
        let ctx = JobCtx {
            store: self.store.clone(),
            node_id: node.id.clone(),
            stage: node.stage.clone(),
            task: node.task.clone(),
            outputs: node.task.outputs(),
            dest: self.root.join(node.out_rel()),
            log_dir: self
                .store
                .root()
                .join("cache")
                .join("logs")
                .join(&node.stage),
            log_name: node.dir_name(),
            root: self.root.clone(),
            key: p.key,
            recorded: crate::store::RawJson(serde_json::to_string(&recorded).unwrap_or_default()),
            env: if node.task.measures_hardware() {
                self.env.record()
            } else {
                serde_json::Value::Null
            },
            needs,
            upstream,
            gpus,
            recorder: recorder.clone(),
            ready: tx.clone(),
            idx: p.idx,
            force: self.options.force.contains(&p.idx),
        };
        let tx = tx.clone();
        let children = children.clone();
        let idx = p.idx;
        tokio::spawn(async move {
            let started = Instant::now();
            let (result, log, record_ms) = ctx.execute(&children).await;
            let _ = tx.send(Message::Finished {
                idx,
                result,
                started,
                log,
                record_ms,
            });
        });
    }
}

/// Marks `i` done: dependents whose upstream is now all done become ready.
fn release(
    i: NodeIdx,
    dependents: &[Vec<NodeIdx>],
    selected: &HashSet<NodeIdx>,
    remaining: &mut HashMap<NodeIdx, usize>,
    ready: &mut VecDeque<NodeIdx>,
) {
    for &d in &dependents[i] {
        if !selected.contains(&d) {
            continue;
        }
        if let Some(r) = remaining.get_mut(&d) {
            *r -= 1;
            if *r == 0 {
                ready.push_back(d);
            }
        }
    }
}

/// What one running node needs, owned so it can move into a task.
struct JobCtx {
    store: Arc<Store>,
    node_id: String,
    stage: String,
    task: TaskSpec,
    outputs: Vec<String>,
    dest: PathBuf,
    log_dir: PathBuf,
    log_name: String,
    root: PathBuf,
    key: ContentHash,
    recorded: crate::store::RawJson,
    env: serde_json::Value,
    needs: BTreeMap<String, Vec<PathBuf>>,
    upstream: BTreeMap<String, Vec<UpstreamNode>>,
    gpus: Vec<u32>,
    recorder: Recorder,
    ready: mpsc::UnboundedSender<Message>,
    idx: NodeIdx,
    /// `--force`: run even if the key is recorded, and replace that record.
    force: bool,
}

/// The run (and, when an existing run was reused, whose it was), the log, the time to record.
type Outcome = (
    Result<(RunRecord, Option<String>), String>,
    Option<PathBuf>,
    u64,
);

impl JobCtx {
    /// Takes the key lock, runs the task unless another process recorded it
    /// meanwhile, records and materializes. `Ok((run, true))` means shared.
    async fn execute(self, children: &Children) -> Outcome {
        let store = self.store.clone();
        let key = self.key;
        let lock = match store.try_lock_key(&key) {
            Ok(Some(l)) => l,
            Ok(None) => {
                let s = store.clone();
                match tokio::task::spawn_blocking(move || s.lock_key(&key)).await {
                    Ok(Ok(l)) => l,
                    Ok(Err(e)) => return (Err(e.to_string()), None, 0),
                    Err(e) => return (Err(e.to_string()), None, 0),
                }
            }
            Err(e) => return (Err(e.to_string()), None, 0),
        };
        let existing = if self.force {
            None
        } else {
            store.run_for_key(&key).ok().flatten()
        };
        if let Some(run) = existing {
            let from = run.node_id.clone();
            let dest = self.dest.clone();
            let r =
                tokio::task::spawn_blocking(move || store.materialize(&run, &dest).map(|_| run))
                    .await;
            drop(lock);
            return match r {
                Ok(Ok(run)) => (Ok((run, Some(from))), None, 0),
                Ok(Err(e)) => (Err(e.to_string()), None, 0),
                Err(e) => (Err(e.to_string()), None, 0),
            };
        }
        let result = self.run_and_record(children).await;
        drop(lock);
        result
    }

    async fn run_and_record(self, children: &Children) -> Outcome {
        let store = self.store.clone();
        let attempt = match store.begin_attempt(&self.node_id, &self.key) {
            Ok(a) => a,
            Err(e) => return (Err(e.to_string()), None, 0),
        };
        let staging = match store.new_staging_dir() {
            Ok(s) => s,
            Err(e) => {
                let _ = store.commit_failure(attempt, &e.to_string());
                return (Err(e.to_string()), None, 0);
            }
        };
        if let Err(e) = std::fs::create_dir_all(&self.log_dir) {
            let msg = format!("cannot create `{}`: {e}", self.log_dir.display());
            let _ = store.commit_failure(attempt, &msg);
            return (Err(msg), None, 0);
        }
        let log = self.log_dir.join(format!("{}.log", self.log_name));
        let started_at_ms = now_ms();
        let job = Job {
            node: self.node_id.clone(),
            task: self.task.clone(),
            root: self.root.clone(),
            staging: staging.clone(),
            needs: self.needs.clone(),
            upstream: self.upstream.clone(),
            gpus: self.gpus.clone(),
            log: log.clone(),
        };
        let t = Instant::now();
        match run::run_job(&job, children).await {
            Ok(()) => {}
            Err(RunError::Interrupted) => {
                let _ = store.commit_interrupted(attempt);
                let _ = std::fs::remove_dir_all(&staging);
                return (Err("interrupted".into()), Some(log), 0);
            }
            Err(RunError::Failed(msg)) => {
                let tail = run::log_tail(&log, 15);
                let full = if tail.is_empty() {
                    msg
                } else {
                    format!("{msg}\n{tail}")
                };
                let _ = store.commit_failure(attempt, &full);
                let _ = std::fs::remove_dir_all(&staging);
                return (Err(full), Some(log), 0);
            }
        }
        let duration_ms = t.elapsed().as_millis() as i64;
        let record_start = Instant::now();
        let (recorder, ready, idx, dest) = (
            self.recorder.clone(),
            self.ready.clone(),
            self.idx,
            self.dest.clone(),
        );
        let log2 = log.clone();
        let force = self.force;
        let store_for_failure = store.clone();
        let staged = tokio::task::spawn_blocking(move || {
            let new = NewRun {
                node_id: &self.node_id,
                stage: &self.stage,
                key: self.key,
                key_parts: self.recorded.clone(),
                outputs: &self.outputs,
                env: &self.env,
                started_at_ms,
                duration_ms,
                log: Some(&log2),
                replace: force,
            };
            let staged = store
                .stage_run(attempt, new, &staging)
                .map_err(|e| (e.to_string(), staging.clone()))?;
            let materialized = store
                .materialize_files(&staged.run, &dest)
                .map_err(|e| (e.to_string(), staging.clone()))?;
            Ok::<_, (String, PathBuf)>((staged, materialized, store))
        })
        .await;
        let (staged, materialized) = match staged {
            Ok(Ok((staged, materialized, _))) => (staged, materialized),
            Ok(Err((msg, staging))) => {
                let _ = store_for_failure.commit_failure(attempt, &msg);
                let _ = std::fs::remove_dir_all(&staging);
                return (
                    Err(msg),
                    Some(log),
                    record_start.elapsed().as_millis() as u64,
                );
            }
            Err(e) => return (Err(e.to_string()), Some(log), 0),
        };
        let _ = ready.send(Message::Ready {
            idx,
            run: staged.run.clone(),
        });
        let result = recorder.record(staged, materialized).await;
        let record_ms = record_start.elapsed().as_millis() as u64;
        (result.map(|run| (run, None)), Some(log), record_ms)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
