//! The process exit codes vitgraph documents (book: "Exit codes").

/// Everything asked for is built (or would be, with `-n`), or the query succeeded.
pub(crate) const SUCCESS: i32 = 0;
/// At least one node failed (or was skipped because a dependency failed).
pub(crate) const NODE_FAILED: i32 = 1;
/// A pipeline file is invalid, or the command line is wrong; nothing ran.
pub(crate) const USAGE: i32 = 2;
/// `vitgraph compare --fail-if`: a condition tripped (a significant change
/// beyond its threshold).
pub(crate) const REGRESSION: i32 = 3;
/// Interrupted by SIGINT: scheduling stopped, running tasks were terminated.
pub(crate) const INTERRUPTED: i32 = 130;
