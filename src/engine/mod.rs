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
//! - [`session`]: what a command judges: the snapshot, incremental judging or the full plan.

pub mod env;
pub mod events;
pub mod executor;
pub mod failure;
#[cfg(test)]
mod fake;
mod incremental;
pub use incremental::judge_reached;
pub(crate) mod job;
pub mod key;
mod lanes;
pub mod noop;
pub mod plan;
pub mod precision;
pub mod record;
pub mod recorder;
pub mod run;
pub mod schedule;
pub use schedule::INTERLEAVE_SEED;
pub mod session;
pub mod slots;
pub mod spawn;
pub mod standing;
#[cfg(test)]
mod tests;
