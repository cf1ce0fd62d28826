//! The integration tests: each builds temp workspaces and runs the real
//! `vitgraph` binary.

mod harness;

mod crash;
mod freshness;
mod runtime_errors;
