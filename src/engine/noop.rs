//! The no-op snapshot: how `build` and `status` on an up-to-date workspace
//! answer without loading the pipelines or the recorded states.
//!
//! When a `build`'s full plan finds every node it selected fresh, the command
//! writes `cache/noop.snapshot`: what the verdicts depended on, and the nodes
//! it vouches for (the whole graph, or the targets and what they need). The
//! next `build` or `status` checks, in order (with targets, after loading
//! the pipelines to select them, and only when the snapshot vouches for
//! every selected node):
//!
//! 1. the *token*: blake3 over vitgraph's version, the executable's identity
//!    (size, mtime, ctime, inode: a rebuilt or replaced binary misses), every
//!    pipeline file's path and bytes, the `-p` overrides and
//!    `VITGRAPH_FAKE_ENV` — everything the graph and its specs come from;
//! 2. the store: the database file's identity and its change counter
//!    ([`Store::generation`]), which every recorded run, attempt or `out/`
//!    restore bumps — so the recorded states are the ones the plan saw;
//! 3. the environment facets, for graphs that have nodes measuring hardware
//!    (and the nsys facet, for graphs that export nsys reports);
//! 4. one `stat` per input and per output file the plan judged: each must
//!    still have the stat it had, or still be absent. The plan only vouches
//!    for files whose mtime was a racy window older than the moment they were
//!    looked at, so any write since then changes the stat (see `facts`).
//!
//! If all hold, the plan would find every node fresh again for the same
//! reasons, and the command reports that; otherwise it runs the full plan
//! (which writes a new snapshot when it finds everything fresh). Graphs with
//! directory inputs are never snapshotted: a stat cannot vouch for a tree.
//! A snapshot is written only when the pipeline files read the same before
//! and after the plan loaded them.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::facts::{FactLog, FileFacts};
use super::plan::EnvProbe;
use crate::codec::take;
use crate::graph::Graph;
use crate::store::Store;

const MAGIC: &[u8; 8] = b"VGNOOP04";

/// What the graph is made from (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token([u8; 32]);

/// What a workspace's graph is made from, as the layer that reads pipeline
/// files hashes it: vitgraph's version and executable, the pipeline files,
/// the `-p` overrides (the command line hands it in; the engine never reads
/// pipelines itself).
pub(crate) trait Sources {
    /// Feeds them into `h`; None when a pipeline file cannot be read (the
    /// full load then reports it).
    fn hash_into(&self, h: &mut blake3::Hasher) -> Option<()>;
}

/// Hashes what the graph comes from, and the environment variables that
/// enter keys. None when a pipeline file cannot be read.
pub(crate) fn token(sources: &dyn Sources) -> Option<Token> {
    let mut h = blake3::Hasher::new();
    h.update(b"vitgraph-noop-token-v1\0");
    sources.hash_into(&mut h)?;
    // The diagnostic switches enter the keys of the experiments they change.
    for name in crate::tasks::diagnostics::VARS {
        if let Some(v) = std::env::var_os(name) {
            h.update(b"\0diag\0");
            h.update(name.as_bytes());
            h.update(&[0]);
            h.update(v.as_encoded_bytes());
        }
    }
    match std::env::var_os("VITGRAPH_FAKE_ENV") {
        Some(v) => {
            h.update(b"\0fake-env\0");
            h.update(v.as_encoded_bytes());
        }
        None => {
            h.update(b"\0host-env\0");
        }
    }
    Some(Token(*h.finalize().as_bytes()))
}

/// One node as the snapshot lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeName {
    pub id: String,
    pub stage: String,
}

/// The nodes a snapshot vouches for: every node of the graph, or the nodes
/// a build of some targets selected (by index in the graph the token
/// stands for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    Whole,
    Nodes(Vec<usize>),
}

/// The nodes a snapshot lists, and whether they are the whole graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vouched {
    pub whole: bool,
    /// The store holds runs measured on another host: some nodes may be
    /// fresh as measured elsewhere, which `status` says only after a full
    /// plan (a build needs no more than that they are fresh).
    pub elsewhere: bool,
    pub nodes: Vec<NodeName>,
}

impl Vouched {
    /// Whether every node of `selection` (indices into `graph`) is vouched for.
    pub(crate) fn covers(&self, graph: &Graph, selection: &[usize]) -> bool {
        if self.whole {
            return true;
        }
        let ids: std::collections::HashSet<&str> =
            self.nodes.iter().map(|n| n.id.as_str()).collect();
        selection
            .iter()
            .all(|&i| ids.contains(graph.nodes[i].id.as_str()))
    }

    /// The vouched nodes as a scope of `graph` (the graph the token stands
    /// for); None when one is not in it.
    pub(crate) fn scope(&self, graph: &Graph) -> Option<Scope> {
        if self.whole {
            return Some(Scope::Whole);
        }
        let index: std::collections::HashMap<&str, usize> = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), i))
            .collect();
        self.nodes
            .iter()
            .map(|n| index.get(n.id.as_str()).copied())
            .collect::<Option<Vec<usize>>>()
            .map(Scope::Nodes)
    }
}

/// The no-op snapshot as one command sees it: the token of the workspace
/// when the command started, what the command's plan hands over, and the
/// snapshot file read and written through the store. `build` and `status`
/// check it; only `build` writes it.
pub(crate) struct NoopSnapshot {
    token: Token,
    /// What this command's plan judged, told by the store's hasher.
    log: FactLog,
    captured: Mutex<Option<(i64, FileFacts, Scope)>>,
}

impl NoopSnapshot {
    /// The snapshot of a command over the whole workspace; None when a
    /// pipeline file cannot be read (the full load then reports it).
    pub(crate) fn for_workspace(sources: &dyn Sources) -> Option<NoopSnapshot> {
        Some(NoopSnapshot {
            token: token(sources)?,
            log: FactLog::default(),
            captured: Mutex::new(None),
        })
    }

    /// Whether a snapshot was ever written in the workspace at `root`
    /// (nothing is opened or created when none was).
    pub(crate) fn exists(root: &Path) -> bool {
        Store::has_snapshot(root)
    }

    /// What the snapshot says about the workspace now.
    pub(crate) fn check(&self, store: &Store, env: &dyn EnvProbe) -> Snapshot {
        check(store, self.token, env)
    }

    /// The log the plan's judging notes its files in.
    pub(crate) fn log(&self) -> &FactLog {
        &self.log
    }

    /// A plan found every node of `scope` fresh having read the states at
    /// `generation` and judged `files`: the snapshot to write at the end.
    pub(crate) fn capture(&self, generation: i64, files: FileFacts, scope: Scope) {
        *self.captured.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, files, scope));
    }

    /// After a successful build: writes what the build captured, if the
    /// pipelines read the same now as when the command started.
    pub(crate) fn write_captured(
        &self,
        store: &Store,
        sources: &dyn Sources,
        graph: &Graph,
        env: &dyn EnvProbe,
    ) {
        let captured = self
            .captured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((generation, files, scope)) = captured {
            if token(sources) == Some(self.token) {
                write(store, self.token, generation, &files, graph, &scope, env);
            }
        }
    }
}

/// The facets a snapshot must see unchanged, beyond the token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facets {
    /// The key-affecting environment facets, when a node measures hardware.
    env: Option<String>,
    /// The nsys facet, when a node exports an nsys report.
    nsys: Option<String>,
}

/// The facets `graph`'s keys depend on; None when a node depends on a tool
/// facet the snapshot cannot check.
fn facets(graph: &Graph, env: &dyn EnvProbe) -> Option<Facets> {
    let hardware = graph.nodes.iter().any(|n| n.task.measures_hardware());
    let mut tools: BTreeMap<String, String> = BTreeMap::new();
    for n in &graph.nodes {
        tools.extend(n.task.tool_facets());
    }
    let nsys = tools.remove("nsys");
    // The diagnostic switches are part of the token; constants of this
    // vitgraph (`const.…`) are covered by the token's executable identity.
    tools.retain(|k, _| !k.starts_with("diag.") && !k.starts_with("const."));
    if !tools.is_empty() {
        return None;
    }
    Some(Facets {
        env: hardware.then(|| serde_json::to_string(env.facets()).unwrap_or_default()),
        nsys,
    })
}

/// The database file's identity: a store replaced by another one misses.
fn database_identity(store: &Store) -> Option<(u64, u64)> {
    let meta = fs::metadata(store.database_path()).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Writes the snapshot (best effort: it only saves time, so a failure to
/// write it is not reported). `generation` and `files` come from the plan
/// that found every node of `scope` fresh.
fn write(
    store: &Store,
    token: Token,
    generation: i64,
    files: &FileFacts,
    graph: &Graph,
    scope: &Scope,
    env: &dyn EnvProbe,
) {
    if store.is_read_only() {
        return;
    }
    let (Some(facets), Some((dev, ino))) = (facets(graph, env), database_identity(store)) else {
        return;
    };
    let mut out = Vec::with_capacity(64 + graph.nodes.len() * 48 + files.len() * 72);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&token.0);
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&dev.to_le_bytes());
    out.extend_from_slice(&ino.to_le_bytes());
    for f in [&facets.env, &facets.nsys] {
        match f {
            Some(s) => {
                out.push(1);
                put_str(&mut out, s);
            }
            None => out.push(0),
        }
    }
    // Stages once, nodes by stage index.
    out.extend_from_slice(&(graph.stages.len() as u32).to_le_bytes());
    let mut stage_index: BTreeMap<&str, u32> = BTreeMap::new();
    for (i, s) in graph.stages.iter().enumerate() {
        put_str(&mut out, &s.name);
        stage_index.insert(&s.name, i as u32);
    }
    let all: Vec<usize>;
    let nodes: &[usize] = match scope {
        Scope::Whole => {
            all = (0..graph.nodes.len()).collect();
            &all
        }
        Scope::Nodes(nodes) => nodes,
    };
    let elsewhere = store.reader().any_arrived()
        || store.reader().hosts_recorded().is_ok_and(|hosts| {
            let here = super::env::host_name();
            hosts.iter().any(|h| Some(h) != here.as_ref())
        });
    out.push(u8::from(*scope == Scope::Whole) | (u8::from(elsewhere) << 1));
    out.extend_from_slice(&(nodes.len() as u64).to_le_bytes());
    for n in nodes.iter().filter_map(|&i| graph.nodes.get(i)) {
        let Some(&s) = stage_index.get(n.stage.as_str()) else {
            return;
        };
        out.extend_from_slice(&s.to_le_bytes());
        put_str(&mut out, &n.id);
    }
    files.encode(&mut out);
    let _ = crate::atomic::write(&store.snapshot_path(), &out);
}

/// What the snapshot says about the workspace now.
#[derive(Debug, PartialEq)]
pub(crate) enum Snapshot {
    /// Every node it vouches for is fresh.
    Fresh(Vouched),
    /// Everything the snapshot depends on still holds except the stats of
    /// `changed` files: only the nodes that read or write them, and their
    /// dependents, need judging (see [`dirty`]). `facts` and `generation`
    /// are the snapshot's.
    Changed {
        facts: FileFacts,
        generation: i64,
        changed: Vec<String>,
        vouched: Vouched,
    },
    /// The full plan must decide.
    Miss,
}

/// What a snapshot that held, entirely or but for some files, vouches for.
pub(crate) fn vouched(snapshot: &Snapshot) -> Option<&Vouched> {
    match snapshot {
        Snapshot::Fresh(v) | Snapshot::Changed { vouched: v, .. } => Some(v),
        Snapshot::Miss => None,
    }
}

/// The nodes of the workspace, every one fresh — when the snapshot still
/// holds (see the module docs); otherwise which files changed, or a miss.
fn check(store: &Store, token: Token, env: &dyn EnvProbe) -> Snapshot {
    check_parts(store, token, env).unwrap_or(Snapshot::Miss)
}

fn check_parts(store: &Store, token: Token, env: &dyn EnvProbe) -> Option<Snapshot> {
    let bytes = fs::read(store.snapshot_path()).ok()?;
    let mut b: &[u8] = &bytes;
    if take(&mut b, 8)? != MAGIC || take(&mut b, 32)? != token.0 {
        return None;
    }
    let generation = i64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?);
    let dev = u64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?);
    let ino = u64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?);
    if database_identity(store)? != (dev, ino) || store.reader().generation().ok()?? != generation {
        return None;
    }
    let mut facets = [None, None];
    for f in &mut facets {
        if take(&mut b, 1)?[0] == 1 {
            *f = Some(get_str(&mut b)?);
        }
    }
    let [env_facets, nsys] = facets;
    if let Some(recorded) = env_facets {
        if serde_json::to_string(env.facets()).ok()? != recorded {
            return None;
        }
    }
    if let Some(recorded) = nsys {
        if crate::trace::nsys::key_facet() != recorded {
            return None;
        }
    }
    let stages = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
    let mut stage_names = Vec::with_capacity(stages.min(1 << 20));
    for _ in 0..stages {
        stage_names.push(get_str(&mut b)?);
    }
    // Bit 0: the whole graph; bit 1: runs measured elsewhere.
    let flags = take(&mut b, 1)?[0];
    if flags > 3 {
        return None;
    }
    let (whole, elsewhere) = (flags & 1 == 1, flags & 2 == 2);
    let n = u64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?) as usize;
    let mut nodes = Vec::with_capacity(n.min(1 << 24));
    for _ in 0..n {
        let s = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
        nodes.push(NodeName {
            stage: stage_names.get(s)?.clone(),
            id: get_str(&mut b)?,
        });
    }
    let files = FileFacts::decode(&mut b)?;
    if !b.is_empty() {
        return None;
    }
    let vouched = Vouched {
        whole,
        elsewhere,
        nodes,
    };
    let changed = files.changed(store.root());
    if changed.is_empty() {
        return Some(Snapshot::Fresh(vouched));
    }
    Some(Snapshot::Changed {
        facts: files,
        generation,
        changed,
        vouched,
    })
}

/// The nodes a change to `changed` files can make stale: those that read
/// one as an input or wrote one as an output, and everything downstream of
/// them. None when a changed file belongs to no node (the full plan decides).
pub(crate) fn dirty(graph: &Graph, changed: &[String]) -> Option<std::collections::HashSet<usize>> {
    use std::collections::HashSet;
    let normal = |p: &Path| p.components().collect::<PathBuf>();
    let changed: HashSet<PathBuf> = changed.iter().map(|c| normal(Path::new(c))).collect();
    let mut owned: HashSet<&PathBuf> = HashSet::new();
    let mut dirty: HashSet<usize> = HashSet::new();
    // Outputs live in `out/<stage>/…`: only nodes of those stages can own one.
    let stages: HashSet<&std::ffi::OsStr> = changed
        .iter()
        .filter_map(|c| {
            let mut parts = c.components();
            (parts.next()?.as_os_str() == "out").then(|| parts.next().map(|s| s.as_os_str()))?
        })
        .collect();
    for (i, node) in graph.nodes.iter().enumerate() {
        let mut files: Vec<PathBuf> = node
            .inputs()
            .into_iter()
            .map(|rel| normal(Path::new(&rel)))
            .collect();
        if stages.contains(std::ffi::OsStr::new(&node.stage)) {
            let out = node.out_rel();
            files.extend(
                node.task
                    .outputs()
                    .into_iter()
                    .map(|o| normal(&out.join(o))),
            );
        }
        for f in files {
            if let Some(c) = changed.get(&f) {
                owned.insert(c);
                dirty.insert(i);
            }
        }
    }
    if owned.len() != changed.len() {
        return None;
    }
    let dependents = graph.dependents();
    let mut stack: Vec<usize> = dirty.iter().copied().collect();
    while let Some(i) = stack.pop() {
        for &d in &dependents[i] {
            if dirty.insert(d) {
                stack.push(d);
            }
        }
    }
    Some(dirty)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn get_str(b: &mut &[u8]) -> Option<String> {
    let len = u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize;
    Some(std::str::from_utf8(take(b, len)?).ok()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_or_foreign_snapshot_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let token = Token([7; 32]);
        let env = super::super::env::HostEnv::new();
        assert_eq!(check(&store, token, &env), Snapshot::Miss, "none written");
        let graph = Graph::default();
        let log = FactLog::default();
        log.start();
        let files = log.take(store.racy_window_ns(), false).unwrap();
        let generation = store.reader().generation().unwrap().unwrap();
        write(
            &store,
            token,
            generation,
            &files,
            &graph,
            &Scope::Whole,
            &env,
        );
        assert_eq!(
            check(&store, token, &env),
            Snapshot::Fresh(Vouched {
                whole: true,
                elsewhere: false,
                nodes: Vec::new()
            })
        );
        assert_eq!(
            check(&store, Token([8; 32]), &env),
            Snapshot::Miss,
            "another token"
        );
        let path = store.snapshot_path();
        let bytes = fs::read(&path).unwrap();
        for cut in [0, 7, 40, bytes.len() - 1] {
            fs::write(&path, &bytes[..cut]).unwrap();
            assert_eq!(check(&store, token, &env), Snapshot::Miss, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        fs::write(&path, &longer).unwrap();
        assert_eq!(check(&store, token, &env), Snapshot::Miss, "trailing bytes");
    }
}
