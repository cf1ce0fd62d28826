//! Freshness: for each node, fresh or stale, and why (DESIGN §3).
//!
//! [`Evaluator::evaluate`] judges one node given its upstream manifests; the
//! static [`plan`] runs it over a selection in topological order (for
//! `status`, `build -n` and `explain`), and the scheduler runs it again just
//! before each node would start, so a rebuilt upstream whose outputs did not
//! change leaves its dependents fresh (early cutoff).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Serialize;

mod diff;
mod elsewhere;
mod gated;
mod inputs;

use super::failure::{FailureKind, NodeFailure};
use super::key::{KeyParts, RecordedParts};
use crate::graph::{Graph, Node, NodeIdx};
use crate::hash::ContentHash;
use crate::store::{AttemptStatus, NodeState, Observer, OutputCheck, RunRecord, Store, StoreError};
use diff::diff_parts;
pub(crate) use elsewhere::measured_on;
use gated::gated;
pub(crate) use gated::imprecise;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReasonKind {
    NeverBuilt,
    Failed,
    Interrupted,
    SpecChanged,
    InputChanged,
    UpstreamChanged,
    TaskVersionChanged,
    EnvChanged,
    OutputMissing,
    OutputModified,
    /// The run for the current key is stored, but a restore found one of
    /// its objects damaged or missing: the node runs again.
    ObjectDamaged,
    /// A repetition of a configuration whose interval is still wider than
    /// its stage's precision target, with budget left.
    Imprecise,
    /// The recorded run's telemetry says it is invalid (throttled,
    /// intruded, warming), and it may be measured again.
    Invalid,
}

impl ReasonKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReasonKind::NeverBuilt => "never_built",
            ReasonKind::Failed => "failed",
            ReasonKind::Interrupted => "interrupted",
            ReasonKind::SpecChanged => "spec_changed",
            ReasonKind::InputChanged => "input_changed",
            ReasonKind::UpstreamChanged => "upstream_changed",
            ReasonKind::TaskVersionChanged => "task_version_changed",
            ReasonKind::EnvChanged => "env_changed",
            ReasonKind::OutputMissing => "output_missing",
            ReasonKind::OutputModified => "output_modified",
            ReasonKind::ObjectDamaged => "object_damaged",
            ReasonKind::Imprecise => "imprecise",
            ReasonKind::Invalid => "invalid",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Reason {
    pub kind: ReasonKind,
    pub detail: String,
    /// For `failed` (and a transient `interrupted`): the last attempt's failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<NodeFailure>,
}

impl Reason {
    pub(crate) fn new(kind: ReasonKind, detail: impl Into<String>) -> Reason {
        Reason {
            kind,
            detail: detail.into(),
            failure: None,
        }
    }

    /// Why the last attempt for the current key did not produce a run.
    fn of_attempt(attempt: &crate::store::Attempt) -> Option<Reason> {
        let failure = attempt
            .failure
            .as_ref()
            .and_then(|f| f.parse::<NodeFailure>());
        let (kind, detail) = match attempt.status {
            AttemptStatus::Failed => (
                ReasonKind::Failed,
                attempt
                    .message
                    .clone()
                    .unwrap_or_else(|| "the last attempt failed".into()),
            ),
            AttemptStatus::Interrupted => match &failure {
                Some(f) if f.kind != FailureKind::Interrupted => (
                    ReasonKind::Interrupted,
                    format!(
                        "the last attempt {}: {}",
                        if f.kind == FailureKind::Transient {
                            "hit a transient failure"
                        } else {
                            "ended without a result"
                        },
                        f.message.lines().next().unwrap_or("")
                    ),
                ),
                _ => (
                    ReasonKind::Interrupted,
                    "the last attempt was interrupted".into(),
                ),
            },
            _ => return None,
        };
        Some(Reason {
            kind,
            detail,
            failure,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    /// Recorded for the current key, outputs intact — or measured
    /// elsewhere (see [`Evaluation::elsewhere`]): recorded on another host
    /// for the key the node has there.
    Fresh(RunRecord),
    /// A run for the current key is stored; only `out/` needs restoring.
    Restore(RunRecord, Vec<Reason>),
    /// Must run.
    Stale(Vec<Reason>),
    /// A repetition its configuration's precision target does not call
    /// for (see [`super::precision`]), and why: it does not run, and what
    /// depends on its stage does not see it.
    Unneeded(String),
    /// A gated repetition whose need is decided once the repetitions
    /// before it are built (some are stale), and which: it waits, and
    /// what depends on its stage is judged without it until then.
    Undecided(String),
}

impl Verdict {
    pub(crate) fn is_fresh(&self) -> bool {
        matches!(self, Verdict::Fresh(_))
    }

    /// Whether the node must run or be restored.
    pub(crate) fn is_stale(&self) -> bool {
        matches!(self, Verdict::Restore(..) | Verdict::Stale(_))
    }

    pub(crate) fn reasons(&self) -> &[Reason] {
        match self {
            Verdict::Fresh(_) | Verdict::Unneeded(_) | Verdict::Undecided(_) => &[],
            Verdict::Restore(_, r) | Verdict::Stale(r) => r,
        }
    }

    /// The stored run whose outputs dependents see, if any.
    pub(crate) fn run(&self) -> Option<&RunRecord> {
        match self {
            Verdict::Fresh(r) | Verdict::Restore(r, _) => Some(r),
            Verdict::Stale(_) | Verdict::Unneeded(_) | Verdict::Undecided(_) => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Evaluation {
    /// The key and its parts, when every upstream node's outputs are known.
    pub key: Option<(ContentHash, KeyParts)>,
    pub verdict: Verdict,
}

impl Evaluation {
    /// The run that stands for this node though it was measured on another
    /// host, with facets other than this machine's (its key is not the
    /// node's key here); None for every other verdict.
    pub(crate) fn elsewhere(&self) -> Option<&RunRecord> {
        let run = self.verdict.run()?;
        match &self.key {
            Some((key, _)) if *key != run.key => Some(run),
            _ => None,
        }
    }
}

/// Key-affecting facets of the environment, probed at most once per process.
pub trait EnvProbe: Sync {
    fn facets(&self) -> &BTreeMap<String, String>;
    fn record(&self) -> serde_json::Value;
    /// Why the facets cannot be trusted, when they cannot: then no
    /// hardware-measuring node can be keyed.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The facets `node`'s key is computed with: this machine's, unless the
    /// node runs on other machines (a cluster's compute nodes).
    fn facets_of(&self, node: &Node) -> Result<&BTreeMap<String, String>, String> {
        let _ = node;
        self.check()?;
        Ok(self.facets())
    }

    /// Where [`EnvProbe::facets_of`] comes from, for `explain`.
    fn source_of(&self, node: &Node) -> String {
        let _ = node;
        "this machine".into()
    }

    /// The host `node` would be measured on here, when a run measured on
    /// another host may stand for it (see [`Evaluator::elsewhere`]): None
    /// where none may — a cluster's compute nodes, `build --measure-here`.
    fn here(&self, node: &Node) -> Option<String> {
        let _ = node;
        None
    }
}

/// Why a node could not be judged.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum JudgeError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] StoreError),
    /// The environment fingerprint a hardware-measuring node's key needs
    /// could not be taken.
    #[error("cannot key `{node}`: {message}")]
    #[diagnostic(code(vitgraph::engine::environment))]
    Environment { node: String, message: String },
}

/// Judges nodes against the store.
pub(crate) struct Evaluator<'a> {
    pub root: &'a Path,
    pub store: Option<&'a Store>,
    /// Told of every file judged (the no-op snapshot's fact log), if any.
    pub observer: Option<&'a dyn Observer>,
    pub states: &'a HashMap<String, NodeState>,
    pub env: &'a dyn EnvProbe,
    /// `--accept-invalid`: an invalid run is kept as it is.
    pub accept_invalid: bool,
}

impl<'a> Evaluator<'a> {
    /// The key parts of `node` given its upstream manifests.
    pub(crate) fn key_parts(
        &self,
        node: &Node,
        upstream: BTreeMap<String, ContentHash>,
    ) -> Result<KeyParts, JudgeError> {
        let (inputs, cells) = self.hash_inputs(node)?;
        let mut env = if node.task.measures_hardware() {
            let mut facets = self
                .env
                .facets_of(node)
                .map_err(|message| JudgeError::Environment {
                    node: node.id.clone(),
                    message,
                })?
                .clone();
            facets.retain(|f, _| node.task.keyed_facet(f));
            facets
        } else {
            BTreeMap::new()
        };
        env.extend(node.task.tool_facets());
        env.extend(node.task.software_facets(self.root).map_err(|message| {
            JudgeError::Environment {
                node: node.id.clone(),
                message,
            }
        })?);
        Ok(KeyParts {
            kind: node.task.kind().to_string(),
            version: node.task.version(),
            spec: super::key::raw_json(&node.task),
            inputs,
            cells,
            upstream,
            env,
            repetition: node.rep.filter(|&r| r > 1),
        })
    }

    /// Judges `node`. `upstream` holds each upstream node's manifest hash, or
    /// `Err(id)` for an upstream node that is stale (its outputs unknown yet).
    pub(crate) fn evaluate(
        &self,
        node: &Node,
        upstream: &[(String, Option<ContentHash>)],
    ) -> Result<Evaluation, JudgeError> {
        let state = self.states.get(&node.id);
        let last = state.and_then(|s| s.latest_success.as_ref());
        let pending: Vec<&String> = upstream
            .iter()
            .filter(|(_, h)| h.is_none())
            .map(|(id, _)| id)
            .collect();
        // The recorded parts are parsed only when needed: to compare parts of a
        // stale node, or to fill in the manifests of upstream nodes still pending.
        let mut recorded: Option<RecordedParts> = None;
        if !pending.is_empty() {
            recorded = last.and_then(|r| self.recorded_parts(r));
        }
        let parts = self.key_parts(node, manifests(upstream, recorded.as_ref()))?;
        let key = parts.key();

        let mut reasons: Vec<Reason> = state
            .and_then(|s| last_attempt_reason(s, &key))
            .into_iter()
            .collect();
        for id in &pending {
            reasons.push(Reason::new(
                ReasonKind::UpstreamChanged,
                format!("{id} (stale)"),
            ));
        }

        let Some(last) = last else {
            if reasons
                .iter()
                .all(|r| r.kind == ReasonKind::UpstreamChanged)
            {
                reasons.insert(
                    0,
                    Reason::new(ReasonKind::NeverBuilt, "no successful run recorded"),
                );
            }
            return Ok(self.finish(node, parts, key, pending.is_empty(), reasons));
        };
        if last.key == key && pending.is_empty() {
            return Ok(Evaluation {
                key: Some((key, parts)),
                verdict: self.judge_run(node, last)?,
            });
        }
        if recorded.is_none() {
            recorded = self.recorded_parts(last);
        }
        if let Some(rec) = &recorded {
            diff_parts(node, rec, &parts, &pending, &mut reasons);
        }
        if let Some(verdict) = self.elsewhere(node, last, &key, &reasons)? {
            return Ok(Evaluation {
                key: Some((key, parts)),
                verdict,
            });
        }
        if reasons.is_empty() {
            // Different key with identical parts: the encoding itself changed.
            reasons.push(Reason::new(
                ReasonKind::TaskVersionChanged,
                "the key encoding changed",
            ));
        }
        Ok(self.finish(node, parts, key, pending.is_empty(), reasons))
    }

    /// The verdict on the node's run for its current key: stale when the
    /// run is invalid and may be measured again (see `validity`), to
    /// restore when its outputs are not intact, else fresh.
    fn judge_run(&self, node: &Node, run: &RunRecord) -> Result<Verdict, StoreError> {
        let invalid =
            super::validity::of_run(run).and_then(|i| i.stale_reason(self.accept_invalid));
        if let Some(detail) = invalid {
            return Ok(Verdict::Stale(vec![Reason::new(
                ReasonKind::Invalid,
                detail,
            )]));
        }
        self.intact_or_restore(node, run)
    }

    /// The parts recorded with a run (fetched from the store when not loaded).
    fn recorded_parts(&self, run: &RunRecord) -> Option<RecordedParts> {
        match self.store {
            Some(store) => store.reader().key_parts(run).ok()?.parse(),
            None => run.key_parts.parse(),
        }
    }

    /// A stale node whose key is known may still have a stored run for it
    /// (built under another node id, by another process, or an earlier spec).
    fn finish(
        &self,
        _node: &Node,
        parts: KeyParts,
        key: ContentHash,
        key_known: bool,
        reasons: Vec<Reason>,
    ) -> Evaluation {
        if !key_known {
            return Evaluation {
                key: None,
                verdict: Verdict::Stale(reasons),
            };
        }
        let stored = self
            .store
            .and_then(|s| s.reader().run_for_key(&key).ok().flatten());
        let verdict = match stored {
            Some(run) => Verdict::Restore(run, reasons),
            None => Verdict::Stale(reasons),
        };
        Evaluation {
            key: Some((key, parts)),
            verdict,
        }
    }

    fn check_outputs(&self, node: &Node, run: &RunRecord) -> Result<Option<Reason>, StoreError> {
        let Some(hasher) = self.hasher() else {
            return Ok(None);
        };
        let dest = self.root.join(node.out_rel());
        Ok(match hasher.check_outputs(run, &dest)? {
            OutputCheck::Intact => None,
            OutputCheck::Missing(f) => {
                let mut detail = rel_display(&node.out_rel().join(&f));
                // A workspace built before the output directory of a node
                // without params moved up a level.
                if let Some(old) = node.old_out_rel().map(|o| o.join(&f)) {
                    if self.root.join(&old).is_file() {
                        detail = format!(
                            "{detail} (it is at {}, where earlier versions of vitgraph put it: `vitgraph build` restores it from the store at the new place and removes the old folder)",
                            rel_display(&old)
                        );
                    }
                }
                Some(Reason::new(ReasonKind::OutputMissing, detail))
            }
            OutputCheck::Modified(f) => Some(Reason::new(
                ReasonKind::OutputModified,
                rel_display(&node.out_rel().join(f)),
            )),
        })
    }
}

fn rel_display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Each upstream node's manifest hash: known, or for a node still pending,
/// the one the run was recorded with (zero when unknown).
fn manifests(
    upstream: &[(String, Option<ContentHash>)],
    recorded: Option<&RecordedParts>,
) -> BTreeMap<String, ContentHash> {
    upstream
        .iter()
        .map(|(id, h)| {
            let value = h
                .or_else(|| recorded.and_then(|r| r.parts.upstream.get(id).copied()))
                .unwrap_or(ContentHash([0; 32]));
            (id.clone(), value)
        })
        .collect()
}

/// Why the last attempt of the node (for `key`) did not produce a run, if it
/// did not: not when a run of that key was recorded since.
fn last_attempt_reason(state: &NodeState, key: &ContentHash) -> Option<Reason> {
    let attempt = state.last_attempt.as_ref()?;
    let superseded = state
        .latest_success
        .as_ref()
        .is_some_and(|r| r.key == attempt.key && attempt.status == AttemptStatus::Succeeded);
    if attempt.key != *key || superseded {
        return None;
    }
    Reason::of_attempt(attempt)
}

/// The static plan of a selection: every node judged in topological order.
/// A node below a stale node is stale with `upstream_changed`; the build may
/// still find it fresh once that upstream is rebuilt with identical outputs.
///
/// Nodes of one stage never depend on each other, so each stage's nodes are
/// judged in parallel once the earlier stages are done.
pub(crate) fn plan(
    ev: &Evaluator<'_>,
    graph: &Graph,
    selection: &[NodeIdx],
) -> Result<HashMap<NodeIdx, Evaluation>, JudgeError> {
    plan_with(ev, graph, selection, &|_| None)
}

/// [`plan`], with the manifest hashes of upstream nodes outside the
/// selection given by `known`: an incremental build judges only the nodes a
/// change reached.
pub(crate) fn plan_with(
    ev: &Evaluator<'_>,
    graph: &Graph,
    selection: &[NodeIdx],
    known: &(dyn Fn(NodeIdx) -> Option<ContentHash> + Sync),
) -> Result<HashMap<NodeIdx, Evaluation>, JudgeError> {
    use rayon::prelude::*;
    let selected: std::collections::HashSet<NodeIdx> = selection.iter().copied().collect();
    let mut out: HashMap<NodeIdx, Evaluation> = HashMap::with_capacity(selection.len());
    for stage in &graph.stages {
        let nodes: Vec<NodeIdx> = stage
            .nodes
            .iter()
            .copied()
            .filter(|i| selected.contains(i))
            .collect();
        // Repetitions a precision target gates are judged after those
        // before them, one round at a time.
        let mut levels: BTreeMap<u32, Vec<NodeIdx>> = BTreeMap::new();
        for &i in &nodes {
            let level = if graph.is_gated(i) {
                graph.nodes[i].rep.unwrap_or(0)
            } else {
                0
            };
            levels.entry(level).or_default().push(i);
        }
        for (level, nodes) in levels {
            let judged: Vec<Result<(NodeIdx, Evaluation), JudgeError>> = nodes
                .par_iter()
                .map(|&i| judge_one(ev, graph, &out, known, i, level > 0))
                .collect();
            for r in judged {
                let (i, e) = r?;
                out.insert(i, e);
            }
        }
    }
    Ok(out)
}

/// One node of [`plan_with`], its upstream judged in `out`; `gate`: it is
/// a repetition a precision target gates.
fn judge_one(
    ev: &Evaluator<'_>,
    graph: &Graph,
    out: &HashMap<NodeIdx, Evaluation>,
    known: &(dyn Fn(NodeIdx) -> Option<ContentHash> + Sync),
    i: NodeIdx,
    gate: bool,
) -> Result<(NodeIdx, Evaluation), JudgeError> {
    let node = &graph.nodes[i];
    // A repetition not needed is no one's upstream.
    let upstream: Vec<(String, Option<ContentHash>)> = node
        .deps()
        .into_iter()
        .filter(|d| {
            !matches!(
                out.get(d).map(|e| &e.verdict),
                Some(Verdict::Unneeded(_) | Verdict::Undecided(_))
            )
        })
        .map(|d| {
            let h = out
                .get(&d)
                .and_then(|e| e.verdict.run())
                .map(RunRecord::manifest_hash)
                .or_else(|| known(d));
            (graph.nodes[d].id.clone(), h)
        })
        .collect();
    let e = ev.evaluate(node, &upstream)?;
    if let Some(verdict) = gated::follows(graph, out, i) {
        return Ok((
            i,
            Evaluation {
                key: e.key,
                verdict,
            },
        ));
    }
    Ok((i, if gate { gated(ev, graph, out, i, e) } else { e }))
}
