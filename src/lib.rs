//! vitgraph: a declarative, content-hashed build graph for GPU inference studies.
//!
//! The layers, in the order data flows through them:
//! - [`pipeline`] reads `pipelines/**/*.ron` into a validated, expanded [`graph::Graph`];
//! - [`graph`] is plain data: node ids, edges, selection of targets, cycles;
//! - [`engine`] decides what is fresh or stale (with reasons) and schedules the stale nodes;
//! - [`store`] is the only module that touches `cache/` and `cache/state.sqlite`;
//! - [`tasks`] are the node kinds; a task gets a context and returns an outcome;
//! - [`report`] turns engine events into terminal output or JSON lines;
//! - [`page`] draws the study as one self-contained HTML page (`vitgraph report`);
//! - [`cli`] parses arguments and maps errors to exit codes once.

pub mod analysis;
pub mod atomic;
pub mod cli;
pub mod clock;
pub mod codec;
pub mod config;
pub mod engine;
pub mod exit;
pub mod gpu;
pub mod graph;
pub mod hash;
pub mod host;
pub mod listing;
pub mod logs;
pub mod page;
pub mod pipeline;
pub mod report;
pub mod slurm;
pub mod store;
pub mod suggest;
pub mod tabular;
pub mod tasks;
pub mod trace;
pub mod value;
pub mod workspace;
