//! The build graph as plain data: nodes, their upstream edges, and stages.
//!
//! No I/O, no async, no SQL. [`crate::pipeline`] builds a [`Graph`]; the engine
//! reads it. Nodes are stored in topological order: every upstream node of a
//! node has a smaller index, so one forward pass visits dependencies first.

mod select;

pub use crate::listing::Listing;
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
    /// Which repetition of its configuration this node is (1, 2, …): for
    /// a node of a stage with `repeat`, and for a node that follows one
    /// with `for_each` (an analysis of that repetition); None for every
    /// other node. Its id carries it as the param `rep`.
    pub rep: Option<u32>,
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

    /// The params that name the node's configuration: its id params less
    /// the repetition's `rep` (all of them for a node that is not repeated).
    pub fn configuration(&self) -> impl Iterator<Item = &(String, Value)> {
        let repeated = self.rep.is_some();
        self.id_params
            .iter()
            .filter(move |(k, _)| !(repeated && k == REP_PARAM))
    }

    /// The directory name under `out/<stage>/`: the id's params (`k1=v1,k2=v2`),
    /// or the stage name for a node without params. The encoding is
    /// injective: `%` is written `%25`, `/` `%2F`, `~` `%7E` and NUL `%00`,
    /// so two nodes never share a folder. A name longer than [`MAX_DIR_NAME`]
    /// bytes keeps its first part and ends in `~` and 16 hex digits of its
    /// full text's hash, so every node's folder and log can be created.
    pub fn dir_name(&self) -> String {
        if self.id_params.is_empty() {
            return self.stage.clone();
        }
        let mut s = String::new();
        for (i, (k, v)) in self.id_params.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            for c in format!("{k}={v}").chars() {
                match c {
                    '%' => s.push_str("%25"),
                    '/' => s.push_str("%2F"),
                    // `~` marks a shortened name: never in a whole one.
                    '~' => s.push_str("%7E"),
                    '\0' => s.push_str("%00"),
                    c => s.push(c),
                }
            }
        }
        shorten(s)
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

pub use crate::tasks::REP_PARAM;

/// The longest node folder name: a file name takes 255 bytes, and the log
/// beside it (`<name>.log`, `<name>.job.json`) needs room for its suffix.
pub const MAX_DIR_NAME: usize = 200;

/// `name`, or for a longer one its first bytes, `~` and a hash of the whole.
fn shorten(name: String) -> String {
    if name.len() <= MAX_DIR_NAME {
        return name;
    }
    let hash = blake3::hash(name.as_bytes()).to_hex();
    let mut keep = MAX_DIR_NAME - 17;
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}~{}", &name[..keep], &hash[..16])
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
    pub slurm: crate::config::Slurm,
    /// Where its nodes run under `--executor slurm` (`placement:`); None:
    /// by kind (see `slurm::placement`).
    pub placement: Option<crate::config::Placement>,
    /// `isolation: Host | Gpu`: what its measuring nodes hold on this
    /// machine; None: `Host`.
    pub isolation: Option<crate::config::Isolation>,
    /// The stage's `description`, and its pipeline file's `title` and
    /// `description`, for people.
    pub about: About,
    /// `repeat:`: processes per configuration (1 without it); with
    /// `precision`, the fewest.
    pub repeat: u32,
    /// `precision: (…)`: repetitions beyond `repeat` run only while the
    /// interval is too wide (see [`Precision`]).
    pub precision: Option<Precision>,
}

/// What a stage and its pipeline file say about themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct About {
    pub description: Option<String>,
    pub pipeline_title: Option<String>,
    pub pipeline_description: Option<String>,
}

/// A stage's precision target: after its first `repeat` repetitions, a
/// configuration gets one more repetition at a time, in rounds, while the
/// 95 % interval of `metric` over its repetitions is wider than ±`ci_rel`
/// of the value, until `max_repeat` repetitions or `max_seconds` of runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Precision {
    /// A dotted path into each repetition's `results.json` (`latency_ms.median`).
    pub metric: String,
    /// The widest acceptable half-width of the 95 % interval, relative to
    /// the value (0.02: ±2 %).
    pub ci_rel: f64,
    /// The most repetitions a configuration gets.
    #[serde(default = "default_max_repeat")]
    pub max_repeat: u32,
    /// The most time a configuration's repetitions may take together, in
    /// seconds of their recorded runs; none: no time budget.
    #[serde(default)]
    pub max_seconds: Option<f64>,
    /// On a stage measured together (`together`), the member the others
    /// are compared with: the target is met when every member's paired
    /// ratio to it is within ±`ci_rel`. The block's first member when left
    /// out (filled in as the stage expands); an error on any other stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

fn default_max_repeat() -> u32 {
    10
}

impl Graph {
    /// Whether every command judges this graph in full, never from the
    /// no-op snapshot: its precision targets are judged from repetitions'
    /// numbers, and its commands' declared software is probed, which no
    /// file fact vouches for.
    pub fn judged_in_full(&self) -> bool {
        self.stages.iter().any(|s| s.precision.is_some())
            || self.nodes.iter().any(|n| n.task.software_env().is_some())
    }

    /// The stage a node belongs to.
    pub fn stage_of(&self, i: NodeIdx) -> Option<&Stage> {
        self.stage(&self.nodes[i].stage)
    }

    /// Whether node `i` holds the whole machine while it runs: a measuring
    /// node of a stage with `isolation: Host` (the default). A measurement of
    /// `isolation: Gpu` holds its GPU and the cores near it instead.
    pub fn runs_alone(&self, i: NodeIdx) -> bool {
        let res = self.nodes[i].task.resources();
        let per_gpu = res.gpus > 0
            && self.stage_of(i).and_then(|s| s.isolation) == Some(crate::config::Isolation::Gpu);
        res.exclusive && !per_gpu
    }

    /// Whether node `i` is a repetition that runs only while its
    /// configuration is imprecise: beyond the `repeat` of a stage with
    /// `precision`.
    pub fn is_gated(&self, i: NodeIdx) -> bool {
        let Some(rep) = self.nodes[i].rep else {
            return false;
        };
        self.stage_of(i)
            .is_some_and(|s| s.precision.is_some() && rep > s.repeat)
    }

    /// The repetitions before node `i` of its configuration (1 to rep − 1),
    /// for a node of a repeated stage: they sit right before it.
    pub fn earlier_repetitions(&self, i: NodeIdx) -> Vec<NodeIdx> {
        let node = &self.nodes[i];
        let Some(rep) = node.rep else {
            return Vec::new();
        };
        let first = (i + 1).saturating_sub(rep as usize);
        (first..i)
            .filter(|&j| self.nodes[j].stage == node.stage)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(params: &[(&str, &str)]) -> Node {
        Node {
            id: String::new(),
            stage: "c".into(),
            id_params: params
                .iter()
                .map(|(k, v)| (k.to_string(), Value::Str(v.to_string())))
                .collect(),
            params: Vec::new(),
            task: TaskSpec::Command(crate::tasks::command::CommandSpec {
                run: String::new(),
                inputs: Vec::new(),
                outputs: Vec::new(),
                resources: Default::default(),
                measure: false,
                env: None,
                together: None,
            }),
            needs: Vec::new(),
            file: None,
            rep: None,
        }
    }

    #[test]
    fn folder_names_are_injective() {
        let names: Vec<String> = ["a/b", "a%2Fb", "a%252Fb", "a%b"]
            .iter()
            .map(|v| node(&[("v", v)]).dir_name())
            .collect();
        assert_eq!(names, ["v=a%2Fb", "v=a%252Fb", "v=a%25252Fb", "v=a%25b"]);
        // A whole name never takes the form of a shortened one (F-T4-7: an
        // id of exactly 200 bytes spelling `…~<16 hex>` shared its folder).
        let h = "y".repeat(100);
        let long = node(&[("a", &h), ("b", &h), ("c", &h)]).dir_name();
        let (head, tail) = long.rsplit_once('~').unwrap();
        let b = format!("{}~{tail}", &head["a=,b=".len() + h.len()..]);
        assert_eq!(format!("a={h},b={b}"), long, "the id spells the short form");
        let crafted = node(&[("a", &h), ("b", &b)]);
        assert_ne!(crafted.dir_name(), long);
        assert!(crafted.dir_name().len() <= MAX_DIR_NAME);
    }

    #[test]
    fn long_folder_names_are_shortened_apart() {
        let h = "y".repeat(100);
        let a = node(&[("a", &h), ("b", &h), ("c", &h)]).dir_name();
        let b = node(&[("a", &h), ("b", &h), ("c", &format!("{h}z"))]).dir_name();
        assert!(a.len() <= MAX_DIR_NAME && b.len() <= MAX_DIR_NAME, "{a}");
        assert_ne!(a, b);
        assert!(a.starts_with("a=yyy") && a.contains('~'), "{a}");
        let short = node(&[("a", "1")]).dir_name();
        assert_eq!(short, "a=1");
    }
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
    /// Nodes that cannot run as their pipeline writes them, refused when a
    /// command selects one (a plot whose line would zig-zag).
    pub refusals: Vec<Refusal>,
}

/// Why a node is refused, and where its pipeline says what is wrong: the
/// error as the pipeline loader would show it, kept as data so the graph
/// cache holds it too.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub node: NodeIdx,
    pub message: String,
    pub help: String,
    /// The pipeline file, relative to the workspace, and the byte range.
    pub file: String,
    pub start: u32,
    pub end: u32,
    pub label: String,
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
            refusals: Vec::new(),
        }
    }

    /// The first refusal of a node in `selection` (sorted node indices).
    pub fn refusal(&self, selection: &[NodeIdx]) -> Option<&Refusal> {
        self.refusals
            .iter()
            .find(|r| selection.binary_search(&r.node).is_ok())
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
