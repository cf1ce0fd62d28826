//! What the engine reports while it builds. Reporters (terminal progress,
//! JSON lines) are consumers of this one stream; the engine never prints.

use serde::Serialize;

use super::failure::NodeFailure;
use super::plan::Reason;
use crate::gpu::GpuId;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
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
        duration_ms: u64,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A consumer of engine events.
pub trait Reporter: Send {
    fn event(&mut self, event: &Event);
}
