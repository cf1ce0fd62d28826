//! The build graph as plain data: nodes, their upstream edges, and stages.
//!
//! No I/O, no async, no SQL. [`crate::pipeline`] builds a [`Graph`]; the engine
//! reads it. Nodes are stored in topological order: every upstream node of a
//! node has a smaller index, so one forward pass visits dependencies first.

mod select;

pub use select::{select, select_named, SelectError};

use std::collections::HashMap;
use std::path::PathBuf;

use crate::tasks::TaskSpec;
use crate::value::Value;

pub type NodeIdx = usize;

/// One unit of work: a stage instantiated with one combination of params.
#[derive(Debug, Clone)]
pub struct Node {
    /// `stage` or `stage[k1=v1,k2=v2]`, keys in the order the matrix declares them.
    pub id: String,
    pub stage: String,
    /// The params that distinguish this node (those in its id), in id order.
    pub id_params: Vec<(String, Value)>,
    /// Every param visible to the node: pipeline params, inherited and own matrix values.
    pub params: Vec<(String, Value)>,
    /// The task with params substituted; `${out}`, `${needs.S}` and `$$` are left
    /// for run time, so the spec (and the key) never holds an absolute path.
    pub task: TaskSpec,
    /// Upstream stages this node reads, each with the nodes it depends on.
    pub needs: Vec<Need>,
    /// The workspace file a `files:` stage made this node for (its `${file}`).
    pub file: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Need {
    pub stage: String,
    /// With `for_each`, the one paired node; with `needs`, every node of the stage, id-sorted.
    pub nodes: Vec<NodeIdx>,
}

impl Node {
    /// Workspace files whose content is part of the key: the task's inputs
    /// and the file of a `files:` stage's node.
    pub fn inputs(&self) -> Vec<String> {
        let mut inputs = self.task.inputs();
        if let Some(f) = &self.file {
            if !inputs.contains(f) {
                inputs.push(f.clone());
            }
        }
        inputs
    }

    /// All upstream nodes, without duplicates, in index order.
    pub fn deps(&self) -> Vec<NodeIdx> {
        let mut deps: Vec<NodeIdx> = self
            .needs
            .iter()
            .flat_map(|n| n.nodes.iter().copied())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        deps
    }

    /// The directory name under `out/<stage>/`: the id's params (`k1=v1,k2=v2`),
    /// or the stage name for a node without params.
    pub fn dir_name(&self) -> String {
        if self.id_params.is_empty() {
            return self.stage.clone();
        }
        let s = self
            .id_params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        s.replace('/', "%2F")
    }

    /// The node's output directory relative to the workspace root:
    /// `out/<stage>/<k1=v1,…>`, or `out/<stage>` for the one node of a stage
    /// without params.
    pub fn out_rel(&self) -> PathBuf {
        if self.id_params.is_empty() {
            return PathBuf::from("out").join(&self.stage);
        }
        PathBuf::from("out").join(&self.stage).join(self.dir_name())
    }

    /// Where earlier versions of vitgraph put the output directory of a node without
    /// params (`out/<stage>/<stage>`), which `build` replaces.
    pub fn old_out_rel(&self) -> Option<PathBuf> {
        self.id_params
            .is_empty()
            .then(|| PathBuf::from("out").join(&self.stage).join(&self.stage))
    }
}

/// A stage as declared in a pipeline file.
#[derive(Debug, Clone)]
pub struct Stage {
    pub name: String,
    /// The pipeline file, relative to the workspace root (`pipelines/rq2.ron`).
    pub file: PathBuf,
    /// The file's stem (`rq2`), which is also a target naming all its stages.
    pub pipeline: String,
    pub nodes: Vec<NodeIdx>,
    /// The stage's own SLURM settings (`slurm: (…)`), over the workspace's.
    pub slurm: crate::slurm::settings::Slurm,
    /// Where its nodes run under `--executor slurm` (`placement:`); None:
    /// by kind (see `slurm::placement`).
    pub placement: Option<crate::slurm::settings::Placement>,
}

/// A folder a `files:` stage listed, with the stat it had just before (so
/// the no-op snapshot can tell that no file came or went).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Relative to the workspace root (`.` for the root).
    pub rel: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    /// When the stat was taken.
    pub at_ns: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub stages: Vec<Stage>,
    index: HashMap<String, NodeIdx>,
    /// The folders `files:` stages listed.
    pub listings: Vec<Listing>,
    /// What loading noticed but did not refuse (a `files:` pattern that
    /// matched nothing), one line each with its place.
    pub warnings: Vec<String>,
}

impl Graph {
    /// Builds a graph from nodes in topological order (debug-asserted).
    pub fn new(nodes: Vec<Node>, stages: Vec<Stage>) -> Graph {
        debug_assert!(nodes
            .iter()
            .enumerate()
            .all(|(i, n)| n.deps().iter().all(|&d| d < i)));
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect();
        Graph {
            nodes,
            stages,
            index,
            listings: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn find(&self, id: &str) -> Option<NodeIdx> {
        self.index.get(id).copied()
    }

    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }

    /// For each node, the nodes that depend on it.
    pub fn dependents(&self) -> Vec<Vec<NodeIdx>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for d in n.deps() {
                out[d].push(i);
            }
        }
        out
    }
}
