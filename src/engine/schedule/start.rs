//! Starting nodes: admission into their lane, the job a started node runs
//! as, and restoring a stored run.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use super::super::events::{Event, Reporter};
use super::super::failure::{FailureKind, NodeFailure};
use super::super::job::{JobCtx, Progress};
use super::super::lanes::Admitted;
use super::super::slots::Lease;
use super::{Build, Done, Pending};
use crate::graph::NodeIdx;
use crate::store::RunRecord;
use crate::tasks::{TaskSpec, UpstreamNode};

/// Whether node `i` is a measurement of a stage with `isolation: Gpu`: it
/// holds its GPU and cores near it, not the machine.
pub(crate) fn isolated(graph: &crate::graph::Graph, i: NodeIdx) -> bool {
    graph.nodes[i].task.resources().exclusive && !graph.runs_alone(i)
}

impl Build<'_, '_> {
    /// Starts every queued node whose slots are free.
    pub(super) fn start_queued(&mut self, reporter: &mut dyn Reporter) {
        let mut waiting = VecDeque::new();
        loop {
            // Nothing more can start: leave the rest queued as it is (a
            // sweep queues thousands of nodes, and this runs at every event).
            if self.lanes.full() {
                break;
            }
            let Some((round, p)) = self.queue.pop_front() else {
                break;
            };
            let res = self.b.graph.nodes[p.idx].task.resources();
            let isolated = isolated(self.b.graph, p.idx);
            match self.lanes.admit(p.idx, &res, isolated) {
                Admitted::Start { lane, lease } => self.start(p, lane, lease, reporter),
                Admitted::Wait => waiting.push_back((round, p)),
                Admitted::Never { wanted, available } => {
                    let failure = NodeFailure::new(
                        FailureKind::Resources,
                        format!(
                            "`{}` needs {wanted} GPU(s) but {available} are available; pass `--gpus 0,1,…` or run it on a machine with GPUs",
                            self.b.graph.nodes[p.idx].id
                        ),
                    );
                    self.fail(p.idx, failure, 0, reporter);
                }
            }
        }
        while let Some((round, p)) = waiting.pop_back() {
            self.queue.push_front(round, p);
        }
    }

    /// Hands one node to its lane's executor.
    pub(super) fn start(
        &mut self,
        p: Pending,
        lane: usize,
        lease: Lease,
        reporter: &mut dyn Reporter,
    ) {
        let b = self.b;
        let node = &b.graph.nodes[p.idx];
        // An upstream node whose run could not be recorded since this one
        // was judged.
        if let Some(bad) = self.failed_upstream(p.idx) {
            self.lanes.free_slots(lease);
            self.lanes.leave(lane);
            self.skip(p.idx, bad, reporter);
            return;
        }
        let upstream_commits = node
            .deps()
            .into_iter()
            .filter_map(|d| {
                let rx = self.commits.get(&d)?.subscribe();
                Some((b.graph.nodes[d].id.clone(), rx))
            })
            .collect();
        let (commit, _) = tokio::sync::watch::channel(None);
        self.commits.insert(p.idx, commit);
        reporter.event(&Event::Started {
            node: node.id.clone(),
            reasons: p.reasons.clone(),
            gpus: lease.gpus.clone(),
        });
        let (needs, upstream) = self.upstream_dirs(p.idx);
        let facets = node.task.measures_hardware().then(|| p.parts.env.clone());
        let inputs = p
            .parts
            .inputs
            .iter()
            .map(|(rel, hash)| (b.root.join(rel), *hash))
            .collect();
        let recorded = recorded_parts(node, p.parts);
        let on_machine = self.lanes.on_machine(lane);
        let ctx = JobCtx {
            inputs,
            adopt: self.lanes.take_live(lane, &node.id),
            retries: b.options.retries,
            upstream_commits,
            facets,
            store: b.store.clone(),
            executor: self.lanes.executor(lane),
            interrupt: b.interrupt.clone(),
            recorder: self.recorder.clone(),
            progress: self.tx.clone(),
            idx: p.idx,
            node_id: node.id.clone(),
            stage: node.stage.clone(),
            task: node.task.clone(),
            dest: b.root.join(node.out_rel()),
            log: b.store.journal().log_path(&node.stage, &node.dir_name()),
            root: b.root.clone(),
            key: p.key,
            recorded,
            env: if node.task.measures_hardware() {
                b.env.record()
            } else {
                serde_json::Value::Null
            },
            needs,
            upstream,
            gpus: lease.gpus.clone(),
            cores: lease.cores.clone(),
            isolated: isolated(b.graph, p.idx),
            slot: on_machine.then(|| lease.slot()).flatten(),
            force: p.replace,
        };
        self.running.insert(p.idx, on_machine.then_some(lease));
        tokio::spawn(ctx.execute());
    }

    /// An upstream node of `idx` that failed or was skipped.
    fn failed_upstream(&self, idx: NodeIdx) -> Option<NodeIdx> {
        self.b.graph.nodes[idx]
            .deps()
            .into_iter()
            .find(|d| matches!(self.done.get(d), Some(Done::Failed | Done::Skipped)))
    }

    /// The node's upstream output directories by stage (`${needs.S}`), and
    /// for built-in tasks the upstream nodes with their params.
    pub(super) fn upstream_dirs(
        &self,
        i: NodeIdx,
    ) -> (
        BTreeMap<String, Vec<PathBuf>>,
        BTreeMap<String, Vec<UpstreamNode>>,
    ) {
        let b = self.b;
        let node = &b.graph.nodes[i];
        let mut needs = BTreeMap::new();
        let mut upstream = BTreeMap::new();
        // A command sees its upstream only through `${needs.S}` in its
        // script: the stages it names are all it needs (a report over 3,333
        // nodes that names none skips listing them). Other tasks get every
        // upstream node with its params (a report's param columns).
        let script = match &node.task {
            TaskSpec::Command(c) => Some(c.run.as_str()),
            _ => None,
        };
        for need in &node.needs {
            if script.is_some_and(|run| !super::super::run::names_needs(run, &need.stage)) {
                continue;
            }
            // Repetitions not needed are not there to read.
            let nodes: Vec<NodeIdx> = need
                .nodes
                .iter()
                .copied()
                .filter(|d| !matches!(self.done.get(d), Some(Done::Unneeded)))
                .collect();
            let dirs: Vec<PathBuf> = nodes
                .iter()
                .map(|&d| b.root.join(b.graph.nodes[d].out_rel()))
                .collect();
            if script.is_none() {
                let ups = nodes
                    .iter()
                    .zip(&dirs)
                    .map(|(&d, dir)| {
                        let up = &b.graph.nodes[d];
                        UpstreamNode {
                            id: up.id.clone(),
                            // The params that tell the nodes apart; pipeline-wide
                            // params are the same in every row.
                            params: up.id_params.iter().cloned().collect(),
                            dir: dir.clone(),
                            rep: up.rep,
                            together: up.task.together().cloned(),
                            aa_twin: false,
                        }
                    })
                    .collect();
                upstream.insert(need.stage.clone(), ups);
            }
            needs.insert(need.stage.clone(), dirs);
        }
        (needs, upstream)
    }

    /// Restores a stored run of the node's key into `out/`, off the
    /// scheduler's thread. Should the run prove damaged, `pending` runs the
    /// node instead.
    pub(super) fn restore(&mut self, pending: Pending, run: RunRecord) {
        let i = pending.idx;
        let store = self.b.store.clone();
        let node = &self.b.graph.nodes[i];
        let dest = self.b.root.join(node.out_rel());
        let (id, stage) = (node.id.clone(), node.stage.clone());
        let tx = self.tx.clone();
        self.running.insert(i, None);
        self.restoring.insert(i, pending);
        tokio::task::spawn_blocking(move || {
            let result = store
                .objects()
                .materialize(&id, &stage, &run, &dest)
                .map_err(|e| NodeFailure::store(&e));
            let _ = tx.send(Progress::Restored { idx: i, result });
        });
    }
}

/// The key's parts as a run records them, with the node's params (what
/// `explain` diffs against).
fn recorded_parts(
    node: &crate::graph::Node,
    parts: super::super::key::KeyParts,
) -> crate::store::RawJson {
    let recorded = super::super::key::RecordedParts {
        parts,
        params: node
            .params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
            .collect(),
    };
    crate::store::RawJson(serde_json::to_string(&recorded).unwrap_or_default())
}
