//! What the engine reports while it builds. Reporters (terminal progress,
//! JSON lines) are consumers of this one stream; the engine never prints.

use serde::Serialize;

use super::failure::NodeFailure;
use super::plan::Reason;
use crate::gpu::GpuId;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// The build begins with `total` selected nodes (fresh ones included).
    Planned { total: usize },
    /// A node started running.
    Started {
        node: String,
        reasons: Vec<Reason>,
        gpus: Vec<GpuId>,
    },
    /// A node ran and was recorded.
    Finished {
        node: String,
        duration_ms: u64,
        record_ms: u64,
    },
    /// A node was fresh, or its stored run was restored into `out/` without
    /// running. `reused_from` names the node whose run (same key) was reused
    /// when that run was recorded during this build, here or by another process.
    Cached {
        node: String,
        restored: bool,
        reused_from: Option<String>,
    },
    /// A node failed: its kind, message (`error`), log, exit status.
    Failed {
        node: String,
        #[serde(flatten)]
        failure: NodeFailure,
        duration_ms: u64,
    },
    /// A node did not run because an upstream node failed.
    Skipped { node: String, because: String },
    /// A repetition its configuration's precision target does not call
    /// for did not run: `why` says where the interval stands.
    Unneeded { node: String, why: String },
    /// SIGINT: scheduling stopped and running tasks were terminated.
    Interrupted { running: Vec<String> },
    /// A node was submitted to a cluster with `build --detach`: its job
    /// runs on, and a later `build` collects it.
    Detached { node: String, job: String },
    /// The build ended. `detached`: nodes left running on a cluster.
    Done {
        built: usize,
        cached: usize,
        failed: usize,
        skipped: usize,
        #[serde(skip_serializing_if = "is_zero")]
        detached: usize,
        /// Repetitions not needed (see `Unneeded`).
        #[serde(skip_serializing_if = "is_zero")]
        unneeded: usize,
        duration_ms: u64,
    },
}

/// The end of the `why` of a repetition not needed because the one
/// before it was not (`repetition 4 was not needed either`).
pub(crate) const NOT_NEEDED_EITHER: &str = "was not needed either";

/// The end of the `why` of a node that follows a repetition not needed
/// (`follows bench[n=1,rep=4], which was not needed`).
pub(crate) const NOT_NEEDED_WITH: &str = "which was not needed";

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A consumer of engine events.
pub(crate) trait Reporter: Send {
    fn event(&mut self, event: &Event);
}
