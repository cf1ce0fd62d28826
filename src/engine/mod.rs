//! Planning (fresh or stale, with reasons) and scheduling.
//!
//! - [`key`]: the key parts of a node and their canonical hash;
//! - [`plan`]: the freshness verdict of each node, with reasons;
//! - [`schedule`]: runs stale nodes with CPU/GPU slots, records them, emits [`events::Event`]s;
//! - [`env`]: the environment fingerprint seen by keys;
//! - [`noop`]: the no-op snapshot that lets an up-to-date workspace skip planning.

pub mod env;
pub mod events;
pub mod key;
pub mod noop;
pub mod plan;
pub mod recorder;
pub mod run;
pub mod schedule;
pub mod spawn;
