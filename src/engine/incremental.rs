//! How a build starts from what it knows, and what it leaves for the next
//! command's no-op snapshot (see `noop`).
//!
//! - An *incremental* build (the snapshot held but for some files) reads the
//!   states of the dirty nodes and their direct upstream only; every other
//!   node is fresh with its latest run.
//! - A *full* build judges every selected node up front, in parallel; nodes
//!   fresh now are done at once, the others are judged again when their
//!   upstream is done.
//! - At the end of a successful build that covered the whole graph, the
//!   nodes it ran are judged again and the snapshot's file facts updated
//!   with what they saw, so the next command is a no-op.

use std::collections::{HashMap, HashSet};

use std::path::Path;

use super::noop::Scope;
use super::plan::{EnvProbe, Evaluation, Evaluator, JudgeError, Verdict};
use crate::graph::{Graph, NodeIdx};
use crate::hash::ContentHash;
use crate::store::{NodeState, Observer, Store, StoreError};

/// What a build's start and end read of its builder.
pub(super) struct Ctx<'a> {
    pub graph: &'a Graph,
    pub root: &'a Path,
    pub store: &'a Store,
    pub env: &'a dyn EnvProbe,
    pub noop: Option<&'a super::noop::NoopSnapshot>,
    pub incremental: Option<&'a Incremental>,
    /// Nodes `--force` runs even when fresh.
    pub force: &'a HashSet<NodeIdx>,
    /// `--accept-invalid`.
    pub accept_invalid: bool,
}

/// What an incremental build starts from (see `noop::Snapshot::Changed`):
/// while the store is still at the snapshot's `generation`, every node of
/// its `scope` outside `dirty` is fresh with its latest successful run, so
/// only `dirty` is judged. After a successful build the dirty nodes are
/// judged again and the snapshot's `facts` updated with what they saw, for
/// the next no-op — when `dirty` holds every node of the scope the change
/// reached (`complete`: none of them left out by a build's targets).
pub(crate) struct Incremental {
    pub dirty: HashSet<NodeIdx>,
    pub generation: i64,
    pub facts: super::facts::FileFacts,
    pub scope: super::noop::Scope,
    pub complete: bool,
}

/// What an incremental build reads: the judged nodes' recorded states, the
/// manifests of their upstream nodes that are not judged, and the change
/// counter both were read at.
struct Loaded {
    states: HashMap<String, NodeState>,
    manifests: HashMap<String, ContentHash>,
    generation: i64,
}

/// What a build starts from.
pub(super) struct Start {
    pub states: HashMap<String, NodeState>,
    /// Fresh now, with their runs' manifest hashes.
    pub fresh_now: HashMap<NodeIdx, ContentHash>,
    /// Fresh by the snapshot, runs not loaded.
    pub fresh_only: HashSet<NodeIdx>,
    pub snapshot: SnapshotPlan,
}

/// The snapshot work a build leaves for its end.
#[derive(Default)]
pub(super) struct SnapshotPlan {
    /// This process's own change count when the states were loaded.
    own_at_load: i64,
    /// Judge these nodes again at the end and update the facts: the
    /// incremental build's dirty nodes, or the nodes a full plan found stale.
    refresh: Option<Refresh>,
}

enum Refresh {
    /// The builder's own incremental set.
    Incremental,
    /// A full plan's: the stale nodes, the generation and facts it saw.
    AfterFull(Incremental),
}

/// Loads the states the build judges with, and judges what it can up front.
pub(super) fn start(b: &Ctx<'_>, selection: &[NodeIdx]) -> Result<Start, StoreError> {
    if let (Some(snapshot), None) = (b.noop, b.incremental) {
        snapshot.log().start();
        snapshot.log().note_listings(&b.graph.listings);
    }
    // An incremental build whose store has not moved since the snapshot
    // reads the states of the dirty nodes and their direct upstream only.
    let partial = match b.incremental {
        Some(inc) => load_incremental(b, inc)?,
        None => None,
    };
    let (states, mut manifests, generation) = match partial {
        Some(l) => (l.states, l.manifests, Some(l.generation)),
        None => {
            let (states, generation) = b.store.reader().load_states_at()?;
            (states, HashMap::new(), generation)
        }
    };
    let own_at_load = b.store.reader().own_generation();
    let incremental = b
        .incremental
        .filter(|inc| generation == Some(inc.generation));
    let mut fresh_only = HashSet::new();
    let mut snapshot = SnapshotPlan {
        own_at_load,
        refresh: None,
    };
    let fresh_now = if let Some(inc) = incremental {
        snapshot.refresh = Some(Refresh::Incremental);
        // Every node the change cannot reach is fresh with its latest run;
        // those upstream of a judged node come with their manifests. The
        // others are fresh without one (nothing being judged depends on them).
        let mut runs = HashMap::new();
        for &i in selection.iter().filter(|i| !inc.dirty.contains(i)) {
            match manifests.remove(&b.graph.nodes[i].id) {
                Some(manifest) => {
                    runs.insert(i, manifest);
                }
                None => {
                    fresh_only.insert(i);
                }
            }
        }
        runs
    } else {
        let fresh = plan_up_front(b, selection, &states);
        snapshot.refresh = after_full(b, selection, &fresh, generation).map(Refresh::AfterFull);
        fresh
    };
    drop(manifests);
    Ok(Start {
        states,
        fresh_now,
        fresh_only,
        snapshot,
    })
}

/// Judges every selected node once up front (in parallel): the ones fresh now.
fn plan_up_front(
    b: &Ctx<'_>,
    selection: &[NodeIdx],
    states: &HashMap<String, NodeState>,
) -> HashMap<NodeIdx, ContentHash> {
    let ev = Evaluator {
        root: b.root,
        store: Some(b.store),
        observer: b.noop.map(|s| s.log() as &dyn Observer),
        states,
        env: b.env,
        accept_invalid: b.accept_invalid,
    };
    match super::plan::plan(&ev, b.graph, selection) {
        Ok(p) => p
            .into_iter()
            .filter_map(|(i, e)| match e.verdict {
                Verdict::Fresh(run) if !b.force.contains(&i) => Some((i, run.manifest_hash())),
                _ => None,
            })
            .collect(),
        // Each node is judged again before it starts, and that judgement
        // reports the error against the node it concerns.
        Err(_) => HashMap::new(),
    }
}

/// A full plan hands its facts to the snapshot, which then vouches for the
/// selection (the whole graph, or a build's targets and what they need): at
/// once when every selected node is fresh, or, when some must run, after the
/// build has judged those again (as an incremental build does). A file
/// written too recently to vouch for goes in as "untrusted", so the next
/// command judges its nodes again instead of planning in full.
fn after_full(
    b: &Ctx<'_>,
    selection: &[NodeIdx],
    fresh: &HashMap<NodeIdx, ContentHash>,
    generation: Option<i64>,
) -> Option<Incremental> {
    let snapshot = b.noop?;
    // See `Graph::judged_in_full`.
    if b.graph.judged_in_full() {
        return None;
    }
    let facts = snapshot.log().take(b.store.racy_window_ns(), true)?;
    let generation = generation?;
    let scope = if selection.len() == b.graph.nodes.len() {
        Scope::Whole
    } else {
        Scope::Nodes(selection.to_vec())
    };
    let stale = selection.len() - fresh.len();
    if stale == 0 {
        snapshot.capture(generation, facts, scope);
        return None;
    }
    // After a larger build, such as a cold one, judging it all again would
    // cost a plan and its memory: the next command's full plan writes the
    // snapshot instead.
    if stale > selection.len() / 4 {
        return None;
    }
    let dirty = selection
        .iter()
        .copied()
        .filter(|i| !fresh.contains_key(i))
        .collect();
    Some(Incremental {
        dirty,
        generation,
        facts,
        scope,
        complete: true,
    })
}

/// The states an incremental build judges with (the dirty nodes' and their
/// direct upstream's) and the change counter, read in one transaction; None
/// when the store moved since the snapshot.
fn load_incremental(b: &Ctx<'_>, inc: &Incremental) -> Result<Option<Loaded>, StoreError> {
    load_reached(b.graph, b.root, b.store, inc)
}

/// [`load_incremental`] for any reader of the store.
fn load_reached(
    graph: &Graph,
    root: &Path,
    store: &Store,
    inc: &Incremental,
) -> Result<Option<Loaded>, StoreError> {
    let mut upstream: HashSet<NodeIdx> = HashSet::new();
    for &i in &inc.dirty {
        upstream.extend(graph.nodes[i].deps());
    }
    let upstream_ids: Vec<&str> = upstream
        .iter()
        .filter(|i| !inc.dirty.contains(i))
        .map(|&i| graph.nodes[i].id.as_str())
        .collect();
    // Only the dirty nodes' files are looked at: their stat-cache entries,
    // not all of them (13,333 rows in a 10,000-node sweep).
    let files: Vec<String> = inc
        .dirty
        .iter()
        .flat_map(|&i| {
            let node = &graph.nodes[i];
            let dest = root.join(node.out_rel());
            let inputs = node.inputs().into_iter().map(|rel| root.join(rel));
            let outputs = node.task.outputs().into_iter().map(|o| dest.join(o));
            inputs
                .chain(outputs)
                .map(|path| store.stat_key(&path))
                .collect::<Vec<_>>()
        })
        .collect();
    store.hasher().preload_for(&files)?;
    let read = store.read(|r| {
        if r.generation()? != Some(inc.generation) {
            return Ok(None);
        }
        let judged: Vec<&str> = inc
            .dirty
            .iter()
            .map(|&i| graph.nodes[i].id.as_str())
            .collect();
        let states = r.load_states_with_attempts_of(&judged, &judged)?;
        let manifests = r.manifests_of(&upstream_ids)?;
        Ok(Some(Loaded {
            states,
            manifests,
            generation: inc.generation,
        }))
    });
    if !matches!(read, Ok(Some(_))) {
        // The full plan that follows looks at every file.
        store.hasher().unload();
    }
    read
}

/// What `status` (or any reader) learns of a graph whose no-op snapshot held
/// but for the files of `inc`: the verdicts of the nodes the change reaches
/// (`inc.dirty`), every other node being fresh with its latest run; None
/// when the store moved since the snapshot, and a full plan must decide.
pub(crate) fn judge_reached(
    graph: &Graph,
    root: &Path,
    store: &Store,
    env: &dyn EnvProbe,
    inc: &Incremental,
    accept_invalid: bool,
) -> Result<Option<HashMap<NodeIdx, Evaluation>>, JudgeError> {
    let Some(loaded) = load_reached(graph, root, store, inc).map_err(JudgeError::from)? else {
        return Ok(None);
    };
    let ev = Evaluator {
        root,
        store: Some(store),
        observer: None,
        states: &loaded.states,
        env,
        accept_invalid,
    };
    let known = |d: NodeIdx| loaded.manifests.get(&graph.nodes[d].id).copied();
    // The nodes in stage order, as a full plan would judge them.
    let mut dirty: Vec<NodeIdx> = inc.dirty.iter().copied().collect();
    dirty.sort_unstable();
    let evals = super::plan::plan_with(&ev, graph, &dirty, &known)?;
    // The hashes it computed save the next command hashing again.
    let _ = store.hasher().flush();
    Ok(Some(evals))
}

/// After a successful build that has nodes to judge again (see
/// [`SnapshotPlan`]) and judged every node the change reached (a build of
/// the whole graph, or of targets that hold them): judges them, every other
/// node as assumed,
/// and hands the snapshot the facts updated with what they saw — when all
/// are fresh and the change counter moved by this process's own records
/// only (so the assumed nodes' records are still the ones the build started
/// from). The snapshot only saves time, so any error here just skips it.
pub(super) fn refresh_snapshot(
    b: &Ctx<'_>,
    selection: &[NodeIdx],
    plan: SnapshotPlan,
    known: &(dyn Fn(NodeIdx) -> Option<ContentHash> + Sync),
) {
    let Some(snapshot) = b.noop else { return };
    if b.graph.judged_in_full() {
        return;
    }
    let inc = match &plan.refresh {
        Some(Refresh::Incremental) => match b.incremental {
            Some(inc) => inc,
            None => return,
        },
        Some(Refresh::AfterFull(inc)) => inc,
        None => return,
    };
    let dirty: Vec<NodeIdx> = selection
        .iter()
        .copied()
        .filter(|i| inc.dirty.contains(i))
        .collect();
    // Every node the change reached must be judged again: a build of some
    // targets that left one of them out leaves the snapshot as it was.
    if !inc.complete || dirty.len() != inc.dirty.len() {
        return;
    }
    let ids: Vec<&str> = dirty
        .iter()
        .map(|&i| b.graph.nodes[i].id.as_str())
        .collect();
    snapshot.log().start();
    let read = b.store.read(|r| {
        let generation = r.generation()?;
        let own = r.own_generation();
        Ok((r.load_states_for(&ids)?, generation, own))
    });
    let Ok((states, Some(generation), own)) = read else {
        return;
    };
    if generation != inc.generation + (own - plan.own_at_load) {
        return;
    }
    let ev = Evaluator {
        root: b.root,
        store: Some(b.store),
        observer: Some(snapshot.log()),
        states: &states,
        env: b.env,
        accept_invalid: b.accept_invalid,
    };
    let Ok(evals) = super::plan::plan_with(&ev, b.graph, &dirty, known) else {
        return;
    };
    let _ = b.store.hasher().flush();
    if evals.len() == dirty.len() && evals.values().all(|e| e.verdict.is_fresh()) {
        if let Some(files) = snapshot.log().take(b.store.racy_window_ns(), true) {
            snapshot.capture(
                generation,
                inc.facts.updated_with(&files),
                inc.scope.clone(),
            );
        }
    }
}
