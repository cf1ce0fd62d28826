//! One owner of what a command judges. `build` and `status` ask a
//! [`Session`]; the no-op snapshot, incremental judging and the full plan
//! are its strategies, tried in that order:
//!
//! 1. [`Session::begin`], before the pipelines are loaded: when the snapshot
//!    holds for the whole workspace and the whole workspace was asked for,
//!    the answer is [`Begun::AllFresh`] and nothing more is read.
//! 2. [`Session::judge`], once the graph is loaded and the targets
//!    selected: every selected node fresh by the snapshot
//!    ([`Judgement::Fresh`]); only the selected nodes a change reached to
//!    judge ([`Judgement::Reached`]); or a full plan ([`Judgement::Full`]).
//!
//! A session that may write the snapshot (a build) keeps it
//! ([`Session::snapshot`]) for the builder's capture and
//! [`Session::finish`]; `status` only reads.

use std::collections::HashSet;
use std::path::Path;

use super::incremental::Incremental;
use super::noop::{self, NodeName, NoopSnapshot, Sources};
use super::plan::EnvProbe;
use crate::graph::{Graph, NodeIdx};
use crate::store::{Store, StoreError};

/// How a command may use the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// Not at all: `--force`, `-n`, and cluster builds (their hardware nodes
    /// are keyed with the compute nodes' facets) plan in full.
    Never,
    /// Read it (`status`): the store is opened read-only, nothing written.
    Read,
    /// Read it, and hand the builder what to write at the end (`build`).
    Build,
}

/// A command's judging, from its first look at `cache/` to its end.
pub(crate) struct Session {
    snapshot: Option<NoopSnapshot>,
    held: Option<noop::Snapshot>,
    store: Option<Store>,
    checked: bool,
}

/// What [`Session::begin`] found. (One per command: the session is kept
/// unboxed.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Begun {
    /// The snapshot holds for the whole workspace, and it was asked for:
    /// every node is fresh (the pipelines need not be loaded).
    AllFresh(Vec<NodeName>),
    /// Load the pipelines, select the targets, and [`Session::judge`].
    Judge(Session),
}

/// What a command judges for its selection.
pub(crate) enum Judgement {
    /// Every selected node is fresh by the snapshot.
    Fresh,
    /// Only these selected nodes, which a change since the snapshot
    /// reached, are judged; every other one is fresh with its latest run.
    Reached(Incremental),
    /// The full plan decides.
    Full,
}

impl Session {
    /// A session with no snapshot to go by: the full plan decides.
    pub(crate) fn full() -> Session {
        Session {
            snapshot: None,
            held: None,
            store: None,
            checked: false,
        }
    }

    /// Checks the snapshot of the workspace at `root` (`whole`: the command
    /// asks for every node). Nothing is opened or created unless a snapshot
    /// exists.
    pub(crate) fn begin(
        root: &Path,
        sources: &dyn Sources,
        env: &dyn EnvProbe,
        usage: Use,
        whole: bool,
    ) -> Result<Begun, StoreError> {
        let mut session = Session::full();
        if usage == Use::Never {
            return Ok(Begun::Judge(session));
        }
        let Some(snapshot) = NoopSnapshot::for_workspace(sources) else {
            return Ok(Begun::Judge(session));
        };
        if NoopSnapshot::exists(root) {
            let store = match usage {
                Use::Build => Some(Store::open(root)?),
                // A damaged or unreadable store: the full plan reports it.
                _ => Store::open_existing(root).ok().flatten(),
            };
            if let Some(store) = store {
                session.checked = true;
                match snapshot.check(&store, env) {
                    // `status` says where runs measured elsewhere were
                    // measured: a full plan.
                    held if usage == Use::Read
                        && noop::vouched(&held).is_some_and(|v| v.elsewhere) => {}
                    noop::Snapshot::Fresh(vouched) if whole && vouched.whole => {
                        return Ok(Begun::AllFresh(vouched.nodes))
                    }
                    noop::Snapshot::Miss => {}
                    held => session.held = Some(held),
                }
                session.store = Some(store);
            }
        }
        if usage == Use::Build {
            session.snapshot = Some(snapshot);
        }
        Ok(Begun::Judge(session))
    }

    /// What `selection` of `graph` needs judged: the snapshot answers only
    /// for the nodes it vouches for; a change it saw reaches only some.
    pub(crate) fn judge(&mut self, graph: &Graph, selection: &[NodeIdx]) -> Judgement {
        let held = self
            .held
            .take()
            .filter(|h| noop::vouched(h).is_some_and(|v| v.covers(graph, selection)));
        match held {
            Some(noop::Snapshot::Fresh(_)) => Judgement::Fresh,
            Some(changed) => match reached(graph, changed, selection) {
                Some(inc) => Judgement::Reached(inc),
                None => Judgement::Full,
            },
            None => Judgement::Full,
        }
    }

    /// Whether a snapshot was checked (there was one to check).
    pub(crate) fn checked(&self) -> bool {
        self.checked
    }

    /// The store the snapshot was checked against, if one was opened.
    pub(crate) fn take_store(&mut self) -> Option<Store> {
        self.store.take()
    }

    /// The snapshot a build may capture into (see `schedule::Builder::noop`).
    pub(crate) fn snapshot(&self) -> Option<&NoopSnapshot> {
        self.snapshot.as_ref()
    }

    /// After a successful build: writes what it captured, if the pipelines
    /// read the same now as when the command began.
    pub(crate) fn finish(
        &self,
        store: &Store,
        sources: &dyn Sources,
        graph: &Graph,
        env: &dyn EnvProbe,
    ) {
        if let Some(snapshot) = &self.snapshot {
            snapshot.write_captured(store, sources, graph, env);
        }
    }
}

/// The incremental judging of `selection` a snapshot that held but for some
/// files allows: the selected nodes the change reaches. (When the selection
/// leaves out some the snapshot vouches for, the build cannot vouch for them
/// after: it is not `complete`.)
fn reached(graph: &Graph, snapshot: noop::Snapshot, selection: &[NodeIdx]) -> Option<Incremental> {
    let noop::Snapshot::Changed {
        facts,
        generation,
        changed,
        vouched,
    } = snapshot
    else {
        return None;
    };
    let scope = vouched.scope(graph)?;
    let mut dirty = noop::dirty(graph, &changed)?;
    let mut complete = true;
    if selection.len() != graph.nodes.len() {
        let selected: HashSet<NodeIdx> = selection.iter().copied().collect();
        // Complete when every node the snapshot vouches for that the change
        // reached is selected: the build judges them all again.
        complete = match &scope {
            noop::Scope::Whole => dirty.iter().all(|i| selected.contains(i)),
            noop::Scope::Nodes(nodes) => nodes
                .iter()
                .all(|i| !dirty.contains(i) || selected.contains(i)),
        };
        dirty.retain(|i| selected.contains(i));
    }
    Some(Incremental {
        dirty,
        generation,
        facts,
        scope,
        complete,
    })
}
