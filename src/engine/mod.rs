//! Planning (fresh or stale, with reasons) and scheduling.
//!
//! - [`key`]: the key parts of a node and their canonical hash;
//! - [`plan`]: the freshness verdict of each node, with reasons;
//! - [`schedule`]: the build as a state machine: judges, starts, finishes and fails nodes, emits [`events::Event`]s;
//! - [`executor`]: where a node's task runs (local processes; a fake in tests);
//! - [`job`]: one started node, from its key lock to its record;
//! - [`record`]: recording a finished run, for every executor; [`recorder`]
//!   commits them in batches;
//! - [`slots`]: the machine's CPU and GPU slots;
//! - [`failure`]: why a node failed, as a value;
//! - [`env`]: the environment fingerprint seen by keys;
//! - [`noop`]: the no-op snapshot that lets an up-to-date workspace skip planning;
//!   [`facts`]: the files a plan judged, which the snapshot checks with one `stat` each;
//! - [`validity`]: a run whose telemetry says it is invalid is measured again;
//! - [`session`]: what a command judges: the snapshot, incremental judging or the full plan.

pub(crate) mod env;
pub(crate) mod events;
pub(crate) mod executor;
pub(crate) mod facts;
pub(crate) mod failure;
#[cfg(test)]
mod fake;
mod incremental;
pub(crate) use incremental::judge_reached;
pub(crate) mod job;
pub(crate) mod key;
mod lanes;
pub(crate) mod noop;
pub(crate) mod plan;
pub(crate) mod precision;
pub(crate) mod record;
pub(crate) mod recorder;
pub(crate) mod run;
pub(crate) mod schedule;
pub(crate) use schedule::INTERLEAVE_SEED;
pub(crate) mod session;
pub(crate) mod slots;
pub(crate) mod spawn;
pub(crate) mod standing;
#[cfg(test)]
mod tests;
pub(crate) mod validity;
