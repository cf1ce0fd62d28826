//! Why a cluster job ended without a result record: the failure taxonomy.
//!
//! The job's own result record (written by `vitgraph slurm-job`) is the
//! only sign of success. A job that leaves the queue without one is
//! classified from what is known — the last state `squeue` showed, `sacct`
//! when it answers, and the lines SLURM itself writes into the job's log
//! (`*** JOB 12 ON vm CANCELLED AT … DUE TO TIME LIMIT ***`) — and never
//! counted as a success, whatever state it reports.

use std::path::Path;

use super::cmd::Accounted;
use crate::engine::failure::{FailureKind, NodeFailure};

/// What is known of a job that ended without a result.
pub struct Vanished<'a> {
    pub job_id: &'a str,
    /// The last state `squeue` showed (None: never seen, or gone).
    pub squeue_state: Option<&'a str>,
    pub sacct: Option<&'a Accounted>,
    /// The job's SLURM log (its batch script's output).
    pub log: Option<&'a Path>,
    /// Whether this driver cancelled it.
    pub cancelled_by_us: bool,
}

/// The failure of a job that ended without a result record.
pub fn classify(v: &Vanished<'_>) -> NodeFailure {
    let tail = v.log.map(crate::logs::excerpt).unwrap_or_default();
    let state = v
        .sacct
        .map(|a| a.state.as_str())
        .filter(|s| !s.is_empty())
        .or(v.squeue_state);
    let exit = v.sacct.map(|a| a.exit_code.as_str());
    let lower = tail.to_ascii_lowercase();
    let kind = if v.cancelled_by_us {
        FailureKind::Interrupted
    } else if state == Some("OUT_OF_MEMORY")
        || lower.contains("exceeded job memory limit")
        || lower.contains("oom-kill")
        || lower.contains("out of memory")
    {
        FailureKind::Memory
    } else if matches!(state, Some("TIMEOUT" | "DEADLINE")) || lower.contains("due to time limit") {
        FailureKind::Time
    } else if state == Some("PREEMPTED") || lower.contains("due to preemption") {
        FailureKind::Preempted
    } else if matches!(state, Some("NODE_FAIL" | "BOOT_FAIL"))
        || lower.contains("due to node failure")
        || v.sacct
            .is_some_and(|a| a.reason == "JobLaunchFailure" && a.exit_code == "0:0")
    {
        FailureKind::Infra
    } else if state == Some("CANCELLED") || lower.contains("cancelled at") {
        FailureKind::Cancelled
    } else {
        FailureKind::Lost
    };
    let what = match kind {
        FailureKind::Memory => "ran out of memory (raise `mem`)",
        FailureKind::Time => "reached its time limit (raise `time`)",
        FailureKind::Preempted => "was preempted",
        FailureKind::Infra => "failed with its node (node or launch failure)",
        FailureKind::Cancelled => "was cancelled outside vitgraph",
        FailureKind::Interrupted => "was cancelled by this build",
        _ => "ended without writing its result record (never taken for success: check the job's log and the shared file system)",
    };
    let mut message = format!("SLURM job {} {what}", v.job_id);
    match (state, exit) {
        (Some(s), Some(e)) => message.push_str(&format!(" [state {s}, exit code {e}]")),
        (Some(s), None) => message.push_str(&format!(" [state {s}]")),
        _ => message.push_str(" [state unknown: the job left the queue and sacct has no record]"),
    }
    if !tail.is_empty() {
        message.push('\n');
        message.push_str(&tail);
    }
    let mut failure = NodeFailure::new(kind, message);
    failure.log = v.log.map(Path::to_path_buf);
    if let Some((code, sig)) = exit.and_then(|e| e.split_once(':')) {
        failure.exit_code = code.parse().ok().filter(|c| *c != 0);
        failure.signal = sig.parse().ok().filter(|s| *s != 0);
    }
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct(state: &str, exit: &str, reason: &str) -> Accounted {
        Accounted {
            id: "9".into(),
            state: state.into(),
            exit_code: exit.into(),
            reason: reason.into(),
            node: "vm".into(),
        }
    }

    fn kind(state: Option<&str>, sacct: Option<&Accounted>, log: &str) -> NodeFailure {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slurm.log");
        std::fs::write(&path, log).unwrap();
        classify(&Vanished {
            job_id: "9",
            squeue_state: state,
            sacct,
            log: Some(&path),
            cancelled_by_us: false,
        })
    }

    #[test]
    fn each_way_a_job_dies_has_its_kind() {
        let oom = acct("FAILED", "0:9", "JobLaunchFailure");
        let f = kind(
            None,
            Some(&oom),
            "slurmstepd: error: Exceeded job memory limit\n",
        );
        assert_eq!((f.kind, f.signal), (FailureKind::Memory, Some(9)));
        assert_eq!(
            kind(Some("OUT_OF_MEMORY"), None, "").kind,
            FailureKind::Memory
        );
        let f = kind(
            Some("TIMEOUT"),
            None,
            "*** JOB 9 ON vm CANCELLED AT 2026 DUE TO TIME LIMIT ***",
        );
        assert_eq!(f.kind, FailureKind::Time);
        assert!(
            f.message.contains("SLURM job 9 reached its time limit"),
            "{}",
            f.message
        );
        assert!(
            f.message.contains("DUE TO TIME LIMIT"),
            "the log tail is quoted"
        );
        assert_eq!(
            kind(None, None, "*** JOB 9 CANCELLED AT x DUE TO TIME LIMIT ***").kind,
            FailureKind::Time
        );
        assert_eq!(
            kind(Some("PREEMPTED"), None, "").kind,
            FailureKind::Preempted
        );
        assert_eq!(kind(Some("NODE_FAIL"), None, "").kind, FailureKind::Infra);
        assert_eq!(
            kind(Some("CANCELLED"), None, "").kind,
            FailureKind::Cancelled
        );
        // COMPLETED without a result is lost, never a success.
        let f = kind(Some("COMPLETED"), None, "");
        assert_eq!(f.kind, FailureKind::Lost);
        assert!(f.message.contains("never taken for success"));
        assert_eq!(kind(None, None, "").kind, FailureKind::Lost);
    }
}
