//! The content-addressed store: the only module that touches `cache/` and
//! `cache/state.sqlite`.
//!
//! - [`Store`] opens `cache/` and cleans up after dead processes (`open`),
//!   and hands out a handle per role: `Reader`, `Journal`, `Objects`,
//!   [`Hasher`] (`roles`);
//! - attempts and runs are recorded in SQLite (`runs`), outputs become
//!   read-only objects named by their blake3 hash (`objects`);
//! - the stat cache avoids hashing unchanged inputs and outputs (`stat_cache`);
//! - per-key flocks keep two processes from building one key (`lock`);
//! - `verify` and `gc` look after the objects (`maintenance`);
//! - the process groups of running tasks are noted, so the next command ends
//!   what a killed build left (`groups`);
//! - the hasher ([`Store::hasher`]) judges files through the stat cache and
//!   tells an [`Observer`] what it judged (`hasher`, `stat_cache`);
//! - reads in one transaction and the change counter (`transaction`);
//! - sets of runs (a build's, the current ones, saved baselines) for
//!   `vitgraph compare` (`runsets`);
//! - the expanded graph is kept in `cache/graph.bin` (`graph_file`);
//! - bundles and directory remotes carry runs and their objects between
//!   machines (`bundle`, `remote`), checked on arrival (`arrival`); a run
//!   may arrive without its outputs (`left_behind`).
//!
//! The book chapter "The store" describes the layout and the guarantees.

mod arrival;
mod batch;
mod bundle;
mod error;
mod fileio;
pub(crate) mod graph_file;
mod groups;
mod hasher;
mod history;
mod jobs;
mod left_behind;
mod lock;
mod maintenance;
mod memo;
mod objects;
mod open;
mod owner;
mod record;
mod remote;
mod remote_dir;
mod remote_gc;
mod remote_s3;
mod remote_state;
#[cfg(test)]
mod robustness_tests;
mod roles;
mod runs;
mod runsets;
mod schema;
mod signing;
mod stat_cache;
#[cfg(test)]
mod test_support;
mod transaction;

pub(crate) use batch::StagedRun;
pub(crate) use bundle::Carry;
pub(crate) use error::StoreError;
pub(crate) use fileio::now_ns;
pub(crate) use fileio::Stat;
pub(crate) use groups::TaskGroups;
pub(crate) use hasher::{Hasher, InputStamp, Observer};
pub(crate) use history::{BuildSummary, TimelineEntry};
pub(crate) use jobs::{DriverLock, EnvProbeRecord, LiveJob};
pub(crate) use left_behind::host_text;
pub(crate) use lock::KeyLock;
pub(crate) use memo::Probe;
pub(crate) use objects::Materialized;
pub(crate) use open::Store;
pub(crate) use record::{
    Attempt, AttemptId, AttemptStatus, DamageKind, NewRun, NodeState, OutputCheck, RawJson,
    RunRecord,
};
pub(crate) use remote::{verify_remote, Remote};
pub(crate) use remote_gc::{remote_gc, GcRoots};
pub(crate) use remote_state::{remote_state, RemoteState};
pub(crate) use runsets::{Holding, RecordedRun};
pub(crate) use signing::{SecretKey, Trust};
