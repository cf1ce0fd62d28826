//! [`NodeFailure`]: why a node did not produce a run, as a value.
//!
//! A failure is cheap to clone, so the scheduler can hand it to the event
//! stream, record it with the attempt, and name it when dependents are
//! skipped. Its [`FailureKind`] says what kind of thing went wrong; only
//! [`FailureKind::Transient`] and [`FailureKind::Interrupted`] failures may
//! go away by themselves, so they are recorded as interrupted attempts,
//! never as the node's failed result.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// The exit status [`FailureKind::Transient`] is read from: a task (or a
/// `Command`) that exits with it says its failure may go away on a retry
/// (`EX_TEMPFAIL` of `sysexits.h`).
pub(crate) const EXIT_TRANSIENT: i32 = 75;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The task exited with a non-zero status.
    Exit,
    /// The task was killed by a signal it did not ask for.
    Signal,
    /// The task succeeded but did not write a declared output.
    Outputs,
    /// The failure may go away on a retry: CUDA out of memory, a busy
    /// device (a task exits with [`EXIT_TRANSIENT`]).
    Transient,
    /// The task could not be started (log file, job file, executable).
    Start,
    /// The store could not hash, record or materialize.
    Store,
    /// A stored run could not be restored: one of its objects is damaged
    /// or missing (the node runs again instead).
    Damaged,
    /// A declared input changed after the node was judged or while its task
    /// ran: its outputs may come from either version, so they are not
    /// recorded (the node runs again on the next build).
    InputChanged,
    /// The node's key could not be computed (an input cannot be read).
    Key,
    /// The node needs resources this build does not have (GPUs).
    Resources,
    /// `run-node` was asked for a node whose upstream is not built.
    NotBuilt,
    /// Stopped by SIGINT.
    Interrupted,
    /// A cluster job ran out of memory (killed at its memory limit).
    Memory,
    /// A cluster job reached its time limit.
    Time,
    /// A cluster node or the batch system failed (node failure, boot or
    /// launch failure): may pass on another node.
    Infra,
    /// A cluster job was preempted by a job of higher priority.
    Preempted,
    /// A cluster job was cancelled by someone else (`scancel` outside vitgraph).
    Cancelled,
    /// A cluster job ended without a result record and without a cause the
    /// batch system could name (never taken for success).
    Lost,
    /// The batch system refused the job (`sbatch` failed).
    Unschedulable,
    /// Submitted with `--detach`: the job runs on, a later build collects it.
    Detached,
    /// An upstream node's run could not be recorded: this node's run, made
    /// from its outputs, is discarded (reported as skipped).
    Upstream,
}

impl FailureKind {
    /// Whether an attempt that ended this way says nothing about the node:
    /// it is recorded as interrupted, not failed.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            FailureKind::Transient
                | FailureKind::Interrupted
                | FailureKind::Infra
                | FailureKind::Preempted
                | FailureKind::Cancelled
                | FailureKind::Lost
                | FailureKind::Upstream
                | FailureKind::InputChanged
        )
    }

    /// Whether `--retries` runs the node again at once: failures of the
    /// cluster, not of the task.
    pub fn is_retried(self) -> bool {
        matches!(self, FailureKind::Infra | FailureKind::Preempted)
    }
}

/// Why a node failed. Serialized into `build --json`'s `failed` events (the
/// message as `error`, as before) and recorded with the attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFailure {
    pub kind: FailureKind,
    /// What happened, then the last lines of the log when there is one.
    #[serde(rename = "error")]
    pub message: String,
    /// The task's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    /// The task's exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

impl NodeFailure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> NodeFailure {
        NodeFailure {
            kind,
            message: message.into(),
            log: None,
            exit_code: None,
            signal: None,
        }
    }

    pub fn interrupted() -> NodeFailure {
        NodeFailure::new(FailureKind::Interrupted, "interrupted")
    }

    pub fn store(e: &StoreError) -> NodeFailure {
        let kind = if e.is_damaged_object() {
            FailureKind::Damaged
        } else {
            FailureKind::Store
        };
        NodeFailure::new(kind, e.to_string())
    }

    /// Adds the log path, and its last lines to the message.
    pub fn with_log(mut self, log: PathBuf, tail: &str) -> NodeFailure {
        if !tail.is_empty() {
            self.message = format!("{}\n{tail}", self.message);
        }
        self.log = Some(log);
        self
    }

    /// Appends a second problem met while handling this one (recording the
    /// failure itself failed): both are reported, neither is lost.
    pub fn also(mut self, e: &StoreError) -> NodeFailure {
        self.message = format!(
            "{}\n(and the failure could not be recorded: {e})",
            self.message
        );
        self
    }

    /// The failure of a task that exited with `code`.
    pub fn exit(code: i32, is_command: bool) -> NodeFailure {
        let (kind, message) = match code {
            EXIT_TRANSIENT => (
                FailureKind::Transient,
                format!("the task exited with status {code}: a transient failure (out of memory, busy device); it was not recorded as the node's result, build again to retry"),
            ),
            127 if is_command => (
                FailureKind::Exit,
                "the command exited with status 127 (command not found: check the program name and PATH)".to_string(),
            ),
            _ => (FailureKind::Exit, format!("the task exited with status {code}")),
        };
        NodeFailure {
            exit_code: Some(code),
            ..NodeFailure::new(kind, message)
        }
    }

    /// The failure of a task killed by `signal`.
    pub fn signal(signal: i32) -> NodeFailure {
        NodeFailure {
            signal: Some(signal),
            ..NodeFailure::new(
                FailureKind::Signal,
                format!("the task was killed by signal {signal}"),
            )
        }
    }
}

impl std::fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Records how `attempt` ended: failed, or interrupted for a failure that
/// may go away by itself. A failure to record it is added to the failure.
pub(crate) fn settle(
    store: &crate::store::Store,
    attempt: crate::store::AttemptId,
    failure: NodeFailure,
) -> NodeFailure {
    let status = if failure.kind.is_transient() {
        crate::store::AttemptStatus::Interrupted
    } else {
        crate::store::AttemptStatus::Failed
    };
    let detail = crate::store::RawJson(serde_json::to_string(&failure).unwrap_or_default());
    match store
        .journal()
        .end_attempt(attempt, status, Some(&failure.message), Some(&detail))
    {
        Ok(()) => failure,
        Err(e) => failure.also(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_serializes_with_its_message_as_error() {
        let f = NodeFailure::exit(3, true).with_log(PathBuf::from("/l/a.log"), "boom");
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["kind"], "exit");
        assert_eq!(json["error"], "the task exited with status 3\nboom");
        assert_eq!(json["log"], "/l/a.log");
        assert_eq!(json["exit_code"], 3);
        assert!(json.get("signal").is_none());
        let back: NodeFailure = serde_json::from_value(json).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn exit_75_is_transient_and_127_names_the_missing_command() {
        assert_eq!(NodeFailure::exit(75, false).kind, FailureKind::Transient);
        assert!(NodeFailure::exit(75, false).kind.is_transient());
        assert!(NodeFailure::exit(127, true).message.contains("not found"));
        assert!(!NodeFailure::exit(127, false).message.contains("not found"));
        assert!(!NodeFailure::exit(1, false).kind.is_transient());
    }
}
