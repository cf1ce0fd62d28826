//! vitgraph: a declarative, content-hashed build graph for GPU inference studies.
//!
//! The layers, top to bottom: a module imports only modules below it (the
//! book's "Architecture" chapter; `python3 ../shared/tools/layers.py src`
//! checks it).
//!
//! - [`cli`] parses arguments, wires the layers below for one command, prints,
//!   and maps errors to exit codes once;
//! - [`page`] draws the study as one self-contained HTML page (`vitgraph report`);
//!   [`report`] turns engine events into terminal output or JSON lines;
//! - [`compare`] pairs two sets of recorded runs (builds, baselines,
//!   environments) and judges each metric's change;
//! - [`slurm`] runs nodes as SLURM jobs: an executor of the engine;
//! - [`pipeline`] reads `pipelines/**/*.ron` into a validated, expanded [`graph::Graph`];
//! - [`engine`] decides what is fresh or stale (with reasons) and schedules the
//!   stale nodes on executors;
//! - [`store`] is the only module that touches `cache/` and `cache/state.sqlite`;
//! - [`tasks`] are the node kinds; a task gets a context and returns an outcome;
//!   [`analysis`] computes a trace's metrics, [`trace`] reads and writes trace files;
//!   [`telemetry`] watches the GPU and the host while a task times its batches
//!   and gives the run its verdict;
//! - [`graph`] is plain data: node ids, edges, selection of targets;
//! - [`config`] the workspace's and stages' cluster settings, as plain data;
//!   [`host`] this machine's environment fingerprint and libtorch executable;
//! - leaves that everyone may use: [`atomic`] (whole-file writes), [`clock`]
//!   (time and the racy window), [`codec`], [`stats`] (every 95 %
//!   interval, the one generator and the verdicts), [`exit`] (exit codes), [`gpu`]
//!   (GPU ids), [`hash`], [`listing`] (a folder's stat), [`logs`] (bounded log
//!   excerpts), [`suggest`] ("did you mean"), [`tabular`] (Parquet), [`value`],
//!   [`workspace`] (finding the root).
//!
//! Modules the integration tests and the binaries do not reach into are
//! crate-private, so the compiler reports what in them nothing uses.

#![warn(unreachable_pub)]

pub mod analysis;
pub(crate) mod atomic;
pub mod cli;
pub mod clock;
pub(crate) mod codec;
pub(crate) mod compare;
pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod exit;
pub mod gpu;
pub mod graph;
pub mod hash;
pub mod host;
pub(crate) mod listing;
pub(crate) mod logs;
pub(crate) mod page;
pub mod pipeline;
pub(crate) mod report;
pub mod slurm;
pub mod stats;
pub(crate) mod store;
pub(crate) mod suggest;
pub mod tabular;
pub mod tasks;
pub mod telemetry;
pub mod trace;
pub mod value;
pub(crate) mod workspace;
