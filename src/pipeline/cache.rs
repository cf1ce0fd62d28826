//! The expanded graph kept between commands: `cache/graph.bin`.
//!
//! Expanding the pipelines costs time in proportion to the node count (about
//! 0.4 s at 100,000 nodes on two cores), and most commands run on pipelines
//! that have not changed since the one before. [`load`] encodes the graph it
//! expanded (the CLI keeps the bytes in `cache/graph.bin` through
//! `store::graph_file`), and the next command decodes them instead of
//! expanding, when
//!
//! 1. the *source token* is the same: blake3 over vitgraph's version, the
//!    executable's identity (a rebuilt or replaced binary misses), every
//!    pipeline file's path and bytes (a file added, removed or edited
//!    misses) and the `-p` overrides — everything expansion reads except
//!    the workspace folders that `files:` stages list;
//! 2. every folder a `files:` stage listed still has the stat it had before
//!    it was read (a file added or removed changes its folder's mtime). A
//!    graph is only written when each of those stats was *settled* — its
//!    mtime more than the racy window ([`crate::clock::racy_window_ns`]) older than the moment it was taken —
//!    so any later change gives the folder another stat.
//!
//! Anything unreadable, truncated or of another format is a miss, and a
//! miss only costs the expansion it replaces. The cache is written only in
//! a workspace that has a `cache/` folder (one that a command has built or
//! judged in), never created by a read-only command on a fresh workspace.
//!
//! Tasks are kept as their JSON (the form keys are hashed from), once per
//! distinct spec: a stage whose task names no param shares one.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Override, PipelineError};
use crate::graph::{Graph, Listing, Need, Node, Stage};
use crate::tasks::TaskSpec;
use crate::value::Value;

const MAGIC: &[u8; 8] = b"VGGRAPH5";
/// Nodes per independently decoded chunk.
const CHUNK: usize = 2048;

/// A graph, and whether it came from the cache.
pub struct Loaded {
    pub graph: Graph,
    pub from_cache: bool,
    /// The bytes to keep for the next command, when the graph was expanded
    /// and its files are settled (the store writes them to `cache/`).
    pub keep: Option<Vec<u8>>,
}

/// The workspace's graph: from `cached` (the bytes of `cache/graph.bin`)
/// when they still hold (see the module docs), else expanded from the
/// pipelines, with the bytes to keep in their place.
pub fn load(
    root: &Path,
    overrides: &[Override],
    cached: Option<&[u8]>,
) -> Result<Loaded, PipelineError> {
    let token = std::env::current_exe()
        .ok()
        .and_then(|exe| token(&exe, root, overrides));
    if let (Some(token), Some(bytes)) = (&token, cached) {
        if let Some(graph) = read(bytes, root, token) {
            return Ok(Loaded {
                graph,
                from_cache: true,
                keep: None,
            });
        }
    }
    let graph = super::load(root, overrides)?;
    let keep = token
        .filter(|_| settled(&graph.listings))
        .map(|token| encode(&graph, &token));
    Ok(Loaded {
        graph,
        from_cache: false,
        keep,
    })
}

/// Feeds what the graph is made from into `h`: vitgraph's version and
/// executable `exe`, the pipeline files, the overrides. None when a
/// pipeline file cannot be read (the full load then reports it).
pub fn hash_sources(
    h: &mut blake3::Hasher,
    exe: &Path,
    root: &Path,
    overrides: &[Override],
) -> Option<()> {
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.update(&[0]);
    let meta = fs::metadata(exe).ok()?;
    for n in [
        meta.len(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        // Not settable: a binary copied over in place with its mtime kept still misses.
        meta.ctime() as u64,
        meta.ctime_nsec() as u64,
        meta.ino(),
        meta.dev(),
    ] {
        h.update(&n.to_le_bytes());
    }
    for rel in super::pipeline_files(root).ok()? {
        let bytes = fs::read(root.join(&rel)).ok()?;
        let name = rel.to_string_lossy();
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    h.update(b"\0overrides\0");
    for o in overrides {
        for part in [&o.key, &o.value] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
    }
    Some(())
}

fn token(exe: &Path, root: &Path, overrides: &[Override]) -> Option<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    h.update(b"vitgraph-graph-cache-v2\0");
    hash_sources(&mut h, exe, root, overrides)?;
    Some(*h.finalize().as_bytes())
}

/// Whether every listed folder's stat can vouch for its content.
fn settled(listings: &[Listing]) -> bool {
    listings
        .iter()
        .all(|l| l.mtime_ns < l.at_ns - crate::clock::racy_window_ns())
}

/// Whether a listed folder still has the stat it had.
fn unchanged(root: &Path, l: &Listing) -> bool {
    let Ok(m) = fs::metadata(root.join(&l.rel)) else {
        return false;
    };
    let now = Listing::of(&m, 0);
    m.is_dir()
        && (now.size, now.mtime_ns, now.ctime_ns, now.inode)
            == (l.size, l.mtime_ns, l.ctime_ns, l.inode)
}

// ---------------------------------------------------------------- encoding

fn encode(graph: &Graph, token: &[u8; 32]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + graph.nodes.len() * 96));
    w.0.extend_from_slice(MAGIC);
    w.0.extend_from_slice(token);
    w.u64(graph.listings.len() as u64);
    for l in &graph.listings {
        w.str(&l.rel);
        for n in [
            l.size,
            l.mtime_ns as u64,
            l.ctime_ns as u64,
            l.inode,
            l.at_ns as u64,
        ] {
            w.u64(n);
        }
    }
    w.u64(graph.warnings.len() as u64);
    for s in &graph.warnings {
        w.str(s);
    }
    w.u64(graph.refusals.len() as u64);
    for f in &graph.refusals {
        w.u64(f.node as u64);
        for text in [&f.message, &f.help, &f.file, &f.label] {
            w.str(text);
        }
        w.u64(u64::from(f.start));
        w.u64(u64::from(f.end));
    }
    let stage_index: HashMap<&str, u64> = graph
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i as u64))
        .collect();
    w.u64(graph.stages.len() as u64);
    for s in &graph.stages {
        w.str(&s.name);
        w.str(&s.file.to_string_lossy());
        w.str(&s.pipeline);
        w.str(
            &serde_json::to_string(&(&s.slurm, &s.placement, &s.precision, &s.isolation, &s.about))
                .unwrap_or_default(),
        );
        w.u64(u64::from(s.repeat));
        w.u64(s.nodes.len() as u64);
        for &n in &s.nodes {
            w.u64(n as u64);
        }
    }
    // Each distinct task once.
    let mut specs: Vec<String> = Vec::new();
    let mut spec_index: HashMap<String, u64> = HashMap::new();
    let mut node_spec = Vec::with_capacity(graph.nodes.len());
    for n in &graph.nodes {
        let json = serde_json::to_string(&n.task).unwrap_or_default();
        let i = *spec_index.entry(json).or_insert_with_key(|json| {
            specs.push(json.clone());
            specs.len() as u64 - 1
        });
        node_spec.push(i);
    }
    w.u64(specs.len() as u64);
    for s in &specs {
        w.str(s);
    }
    // Nodes in chunks, each prefixed with its length, so they decode in parallel.
    w.u64(graph.nodes.len() as u64);
    for (nodes, specs) in graph.nodes.chunks(CHUNK).zip(node_spec.chunks(CHUNK)) {
        let mut c = Writer(Vec::with_capacity(nodes.len() * 96));
        for (n, &spec) in nodes.iter().zip(specs) {
            c.node(n, spec, &stage_index);
        }
        w.u64(c.0.len() as u64);
        w.0.extend_from_slice(&c.0);
    }
    w.0
}

/// The cached graph, if the file is for `token` and its listings hold.
fn read(bytes: &[u8], root: &Path, token: &[u8; 32]) -> Option<Graph> {
    let mut r = Reader(bytes);
    if r.take(8)? != MAGIC || r.take(32)? != token {
        return None;
    }
    let mut listings = Vec::new();
    for _ in 0..r.len()? {
        let rel = r.str()?.to_string();
        let [size, mtime, ctime, inode, at] = [r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        listings.push(Listing {
            rel,
            size,
            mtime_ns: mtime as i64,
            ctime_ns: ctime as i64,
            inode,
            at_ns: at as i64,
        });
    }
    if !listings.iter().all(|l| unchanged(root, l)) {
        return None;
    }
    let mut warnings = Vec::new();
    for _ in 0..r.len()? {
        warnings.push(r.str()?.to_string());
    }
    let mut refusals = Vec::new();
    for _ in 0..r.len()? {
        let node = r.len()?;
        let mut text = || Some(r.str()?.to_string());
        let (message, help, file, label) = (text()?, text()?, text()?, text()?);
        refusals.push(crate::graph::Refusal {
            node,
            message,
            help,
            file,
            label,
            start: u32::try_from(r.u64()?).ok()?,
            end: u32::try_from(r.u64()?).ok()?,
        });
    }
    let mut stages = Vec::new();
    for _ in 0..r.len()? {
        let name = r.str()?.to_string();
        let file = PathBuf::from(r.str()?);
        let pipeline = r.str()?.to_string();
        let (slurm, placement, precision, isolation, about) =
            serde_json::from_str(r.str()?).ok()?;
        let repeat = u32::try_from(r.u64()?).ok()?;
        let mut nodes = Vec::new();
        for _ in 0..r.len()? {
            nodes.push(r.u64()? as usize);
        }
        stages.push(Stage {
            name,
            file,
            pipeline,
            nodes,
            slurm,
            placement,
            isolation,
            about,
            repeat,
            precision,
        });
    }
    let mut texts = Vec::new();
    for _ in 0..r.len()? {
        texts.push(r.str()?);
    }
    let specs: Vec<TaskSpec> = {
        use rayon::prelude::*;
        texts
            .par_iter()
            .map(|t| serde_json::from_str(t).ok())
            .collect::<Option<Vec<_>>>()?
    };
    let n = r.len()?;
    let mut chunks = Vec::with_capacity(n / CHUNK + 1);
    for first in (0..n).step_by(CHUNK) {
        let len = r.u64()? as usize;
        chunks.push((first, (n - first).min(CHUNK), r.take(len)?));
    }
    let nodes: Vec<Node> = {
        use rayon::prelude::*;
        let decoded = chunks
            .par_iter()
            .map(|&(first, count, bytes)| {
                let mut c = Reader(bytes);
                let nodes = (first..first + count)
                    .map(|i| c.node(i, &stages, &specs))
                    .collect::<Option<Vec<Node>>>()?;
                c.0.is_empty().then_some(nodes)
            })
            .collect::<Option<Vec<Vec<Node>>>>()?;
        decoded.into_iter().flatten().collect()
    };
    if !r.0.is_empty() || stages.iter().flat_map(|s| &s.nodes).any(|&i| i >= n) {
        return None;
    }
    let mut graph = Graph::new(nodes, stages);
    if refusals.iter().any(|f| f.node >= graph.nodes.len()) {
        return None;
    }
    graph.listings = listings;
    graph.warnings = warnings;
    graph.refusals = refusals;
    Some(graph)
}

struct Writer(Vec<u8>);

impl Writer {
    fn node(&mut self, n: &Node, spec: u64, stage_index: &HashMap<&str, u64>) {
        self.str(&n.id);
        self.u64(
            stage_index
                .get(n.stage.as_str())
                .copied()
                .unwrap_or(u64::MAX),
        );
        self.params(&n.id_params);
        self.params(&n.params);
        self.u64(spec);
        self.u64(n.needs.len() as u64);
        for need in &n.needs {
            self.u64(
                stage_index
                    .get(need.stage.as_str())
                    .copied()
                    .unwrap_or(u64::MAX),
            );
            self.u64(need.nodes.len() as u64);
            for &d in &need.nodes {
                self.u64(d as u64);
            }
        }
        match &n.file {
            Some(f) => {
                self.0.push(1);
                self.str(f);
            }
            None => self.0.push(0),
        }
        self.u64(n.rep.map_or(0, u64::from));
    }

    fn u64(&mut self, n: u64) {
        // LEB128: most numbers here are small.
        let mut n = n;
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn params(&mut self, params: &[(String, Value)]) {
        self.u64(params.len() as u64);
        for (k, v) in params {
            self.str(k);
            self.value(v);
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Bool(b) => self.0.extend_from_slice(&[0, *b as u8]),
            Value::Int(i) => {
                self.0.push(1);
                self.0.extend_from_slice(&i.to_le_bytes());
            }
            Value::Float(x) => {
                self.0.push(2);
                self.0.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Value::Str(s) => {
                self.0.push(3);
                self.str(s);
            }
            Value::List(items) => {
                self.0.push(4);
                self.u64(items.len() as u64);
                for v in items {
                    self.value(v);
                }
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// Node `i` (its upstream nodes must come before it).
    fn node(&mut self, i: usize, stages: &[Stage], specs: &[TaskSpec]) -> Option<Node> {
        let id = self.str()?.to_string();
        let stage = stages.get(self.u64()? as usize)?.name.clone();
        let id_params = self.params()?;
        let params = self.params()?;
        let task = specs.get(self.u64()? as usize)?.clone();
        let mut needs = Vec::new();
        for _ in 0..self.len()? {
            let stage = stages.get(self.u64()? as usize)?.name.clone();
            let mut up = Vec::new();
            for _ in 0..self.len()? {
                let d = self.u64()? as usize;
                // Upstream nodes come first: the graph stays topologically ordered.
                if d >= i {
                    return None;
                }
                up.push(d);
            }
            needs.push(Need { stage, nodes: up });
        }
        let file = match self.take(1)?[0] {
            0 => None,
            1 => Some(self.str()?.to_string()),
            _ => return None,
        };
        let rep = match self.u64()? {
            0 => None,
            r => Some(u32::try_from(r).ok()?),
        };
        Some(Node {
            id,
            stage,
            id_params,
            params,
            task,
            needs,
            file,
            rep,
        })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        crate::codec::take(&mut self.0, n)
    }

    fn u64(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    /// A count of things that follow, each at least one byte long.
    fn len(&mut self) -> Option<usize> {
        let n = self.u64()? as usize;
        (n <= self.0.len()).then_some(n)
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.u64()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn params(&mut self) -> Option<Vec<(String, Value)>> {
        let n = self.len()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push((self.str()?.to_string(), self.value(0)?));
        }
        Some(out)
    }

    fn value(&mut self, depth: u32) -> Option<Value> {
        Some(match self.take(1)?[0] {
            0 => Value::Bool(self.take(1)?[0] != 0),
            1 => Value::Int(i64::from_le_bytes(self.take(8)?.try_into().ok()?)),
            2 => Value::Float(f64::from_bits(u64::from_le_bytes(
                self.take(8)?.try_into().ok()?,
            ))),
            3 => Value::Str(self.str()?.to_string()),
            4 if depth < 64 => {
                let n = self.len()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Value::List(items)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(key: &str, value: &str) -> Override {
        Override {
            key: key.into(),
            value: value.into(),
        }
    }

    /// What the no-op snapshot's token and the graph cache's key hash.
    fn sources(exe: &Path, root: &Path, overrides: &[Override]) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        hash_sources(&mut h, exe, root, overrides).unwrap();
        *h.finalize().as_bytes()
    }

    #[test]
    fn the_sources_hash_follows_the_executable_the_pipelines_and_the_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("pipelines/sub")).unwrap();
        fs::write(root.join("pipelines/a.ron"), "Pipeline(stages: {})").unwrap();
        let exe = root.join("vitgraph-exe");
        fs::write(&exe, "build 1").unwrap();
        let t = |overrides: &[Override]| sources(&exe, root, overrides);
        let base = t(&[]);
        assert_eq!(base, t(&[]), "stable");

        // The executable: replaced by another file, or rewritten in place.
        let other = root.join("other-exe");
        fs::write(&other, "build 1").unwrap();
        assert_ne!(sources(&other, root, &[]), base);
        fs::write(&exe, "build 2").unwrap();
        let rebuilt = t(&[]);
        assert_ne!(rebuilt, base);

        // Pipeline files: edited, added in a subfolder, renamed. Other files do not count.
        fs::write(root.join("pipelines/a.ron"), "Pipeline(stages: { })").unwrap();
        let edited = t(&[]);
        assert_ne!(edited, rebuilt);
        fs::write(root.join("pipelines/notes.txt"), "not a pipeline").unwrap();
        assert_eq!(t(&[]), edited);
        fs::write(root.join("pipelines/sub/b.ron"), "Pipeline(stages: {})").unwrap();
        let added = t(&[]);
        assert_ne!(added, edited);
        fs::rename(
            root.join("pipelines/sub/b.ron"),
            root.join("pipelines/sub/c.ron"),
        )
        .unwrap();
        assert_ne!(t(&[]), added);

        // Overrides: present, different, split differently.
        let now = t(&[]);
        assert_ne!(t(&[over("res", "224")]), now);
        assert_ne!(t(&[over("res", "224")]), t(&[over("res", "512")]));
        assert_ne!(t(&[over("ab", "c")]), t(&[over("a", "bc")]));
    }

    /// Every pipeline of the repository (every task kind, matrices, needs,
    /// for_each, SLURM settings) reads back from the cache as it was expanded.
    #[test]
    fn the_repository_pipelines_read_back_the_same() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let graph = super::super::load(root, &[]).unwrap();
        assert!(graph.nodes.len() > 100);
        let token = [7u8; 32];
        let bytes = encode(&graph, &token);
        let back = read(&bytes, root, &token).expect("the cache reads back");
        assert_eq!(format!("{:?}", back.nodes), format!("{:?}", graph.nodes));
        assert_eq!(format!("{:?}", back.stages), format!("{:?}", graph.stages));
        for n in &graph.nodes {
            assert_eq!(back.find(&n.id), graph.find(&n.id));
        }
        // Another token, a truncated file or trailing bytes: a miss.
        assert!(read(&bytes, root, &[8u8; 32]).is_none());
        for cut in [9, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(read(&bytes[..cut], root, &token).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer, root, &token).is_none());
    }

    /// A workspace of the one pipeline `text`, and its graph as loaded.
    fn loaded(text: &str) -> (tempfile::TempDir, Graph) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        fs::write(dir.path().join("pipelines/p.ron"), text).unwrap();
        let graph = super::super::load(dir.path(), &[]).unwrap();
        (dir, graph)
    }

    #[test]
    fn repetitions_read_back() {
        let (dir, graph) = loaded(
            r#"Pipeline(stages: {
                "b": Stage(matrix: {"x": [1, 2]}, repeat: 3,
                           task: Command(run: "m ${x}", measure: true, outputs: ["results.json"])),
                "t": Stage(for_each: "b", task: Command(run: "t", outputs: ["t.txt"])),
            })"#,
        );
        let root = dir.path();
        let token = [3u8; 32];
        let bytes = encode(&graph, &token);
        let back = read(&bytes, root, &token).expect("the cache reads back");
        assert_eq!(format!("{:?}", back.nodes), format!("{:?}", graph.nodes));
        assert_eq!(format!("{:?}", back.stages), format!("{:?}", graph.stages));
        assert_eq!(back.nodes[5].rep, Some(3));
        assert_eq!(back.stage("b").unwrap().repeat, 3);
    }

    #[test]
    fn blocks_measured_together_read_back() {
        let (dir, graph) = loaded(
            r#"Pipeline(stages: {
                "b": Stage(matrix: {"m": ["a", "b"], "n": [1, 2], "k": [7]}, together: ["m", "n"], repeat: 2,
                           task: Command(run: "m ${m} ${n} ${k}", measure: true, outputs: ["results.json"])),
            })"#,
        );
        let ids: Vec<&str> = graph.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["b[k=7,rep=1]", "b[k=7,rep=2]"]);
        let crate::tasks::TaskSpec::Command(c) = &graph.nodes[0].task else {
            panic!("a command")
        };
        assert_eq!(c.run, "m a,b 1,2 7");
        let keys = c.together.as_ref().unwrap().keys();
        assert_eq!(keys, ["a,1", "a,2", "b,1", "b,2"]);
        let token = [5u8; 32];
        let back = read(&encode(&graph, &token), dir.path(), &token).expect("the cache reads back");
        assert_eq!(format!("{:?}", back.nodes), format!("{:?}", graph.nodes));
    }

    #[test]
    fn refusals_read_back() {
        let (dir, graph) = loaded(
            r#"Pipeline(stages: {
                "b": Stage(matrix: {"x": [1, 2], "y": ["a", "b"]},
                           task: Command(run: "m ${x} ${y}", outputs: ["results.json"])),
                "r": Stage(needs: ["b"], task: Report(title: "r", sources: ["b"], columns: ["t"],
                                                      plots: [Plot(x: "x", y: "t")])),
            })"#,
        );
        let root = dir.path();
        assert_eq!(graph.refusals.len(), 1);
        assert_eq!(graph.refusals[0].node, graph.find("r").unwrap());
        let token = [4u8; 32];
        let back = read(&encode(&graph, &token), root, &token).expect("the cache reads back");
        assert_eq!(back.refusals, graph.refusals);
    }

    #[test]
    fn values_read_back_exactly() {
        let params = vec![
            ("b".to_string(), Value::Bool(true)),
            ("i".to_string(), Value::Int(-3)),
            ("f".to_string(), Value::Float(0.1 + 0.2)),
            ("s".to_string(), Value::Str("ä/b".into())),
            (
                "l".to_string(),
                Value::List(vec![
                    Value::Int(1),
                    Value::List(vec![Value::Str("x".into())]),
                ]),
            ),
        ];
        let mut w = Writer(Vec::new());
        w.params(&params);
        w.u64(u64::MAX);
        let mut r = Reader(&w.0);
        assert_eq!(r.params().unwrap(), params);
        assert_eq!(r.u64(), Some(u64::MAX));
        assert!(r.0.is_empty());
    }
}
