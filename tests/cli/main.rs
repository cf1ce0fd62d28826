//! The integration tests: each builds temp workspaces and runs the real
//! `vitgraph` binary.

mod harness;
mod support;

mod archive;
mod commands;
mod compare;
mod crash;
mod freshness;
mod graph_cache;
mod hydra;
mod noop;
mod notebook;
mod pipeline_errors;
mod promises;
mod remotes;
mod remotes_s3;
mod repetitions;
mod results_only;
mod runtime_errors;
mod software_env;
mod status_text;
mod timeline;
mod together;
mod transfer;
