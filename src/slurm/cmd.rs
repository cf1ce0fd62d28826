//! The SLURM commands vitgraph runs — `sbatch`, `squeue`, `sacct`,
//! `scancel`, `scontrol` — each with a time limit, and their answers parsed.
//!
//! A command that cannot run, times out or fails is an error value; callers
//! treat a failed query as "unknown, keep waiting", never as success.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How many times each command ran (for `build --json`'s summary and the
/// benchmark): sbatch, squeue, sacct, scancel, scontrol.
#[derive(Debug, Default)]
pub struct Calls {
    pub sbatch: AtomicU64,
    pub squeue: AtomicU64,
    pub sacct: AtomicU64,
    pub scancel: AtomicU64,
    pub scontrol: AtomicU64,
}

impl Calls {
    pub fn count(&self, program: &str) {
        let c = match program {
            "sbatch" => &self.sbatch,
            "squeue" => &self.squeue,
            "sacct" => &self.sacct,
            "scancel" => &self.scancel,
            _ => &self.scontrol,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> [u64; 5] {
        [
            &self.sbatch,
            &self.squeue,
            &self.sacct,
            &self.scancel,
            &self.scontrol,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

pub use crate::host::process::Output;

/// How SLURM's commands are run: [`Real`] runs them; the executor's tests
/// script a cluster behind this.
pub trait SlurmCtl: Send + Sync {
    /// Runs `program args…` (`sbatch`, `squeue`, `sacct`, `scancel`,
    /// `scontrol`), killing it after `limit`.
    fn run(&self, program: &str, args: &[String], limit: Duration) -> Result<Output, String>;
    /// Whether `program` can be run at all.
    fn available(&self, program: &str) -> bool;
}

/// The SLURM on `PATH`.
pub struct Real;

impl SlurmCtl for Real {
    fn run(&self, program: &str, args: &[String], limit: Duration) -> Result<Output, String> {
        run_process(program, args, limit)
    }

    fn available(&self, program: &str) -> bool {
        available(program)
    }
}

/// Runs `program args…`, counted in `calls`, killing it after `limit`.
pub fn run(
    calls: &Calls,
    program: &str,
    args: &[String],
    limit: Duration,
) -> Result<Output, String> {
    calls.count(program);
    run_process(program, args, limit)
}

/// Runs `program args…`, killing it after `limit`.
fn run_process(program: &str, args: &[String], limit: Duration) -> Result<Output, String> {
    crate::host::process::run(program.as_ref(), program, args, None, limit)
}

/// Whether a program is on `PATH`.
pub fn available(program: &str) -> bool {
    crate::engine::spawn::find_program(std::ffi::OsStr::new(program)).is_ok()
}

/// The job id `sbatch --parsable` printed (`123` or `123;cluster`).
pub fn parse_sbatch(stdout: &str) -> Option<String> {
    let line = stdout.lines().find(|l| !l.trim().is_empty())?;
    let id = line.split(';').next()?.trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit())).then(|| id.to_string())
}

/// Whether an `sbatch` failure may pass if tried again later (a busy or
/// restarting controller, munge down or too busy to answer, a submit limit),
/// not a refusal of the request.
pub fn sbatch_error_is_transient(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    is_unreachable(&s)
        || [
            "qosmaxsubmitjobperuserlimit",
            "assocmaxsubmitjoblimit",
            "maxsubmitjobs",
            "transient",
            "try again",
        ]
        .iter()
        .any(|p| s.contains(p))
}

/// Whether a SLURM command's error says the controller or the
/// authentication service (munge) could not be reached, rather than that
/// the request was refused.
pub fn is_unreachable(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    [
        "socket timed out",
        "temporarily unable",
        "unexpected message",
        "resource temporarily unavailable",
        "unable to contact slurm controller",
        "connection refused",
        "slurm_persist_conn",
        "munge",
        "authentication error",
        "zero bytes were transmitted",
        "communication connection failure",
    ]
    .iter()
    .any(|p| s.contains(p))
}

/// One job as `squeue` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// `123` or `123_4` (an array task).
    pub id: String,
    pub state: String,
    pub reason: String,
    pub node: String,
    /// `--comment` (vitgraph writes `vitgraph:<manifest>`).
    pub comment: String,
}

/// The `squeue` arguments vitgraph polls with: every job of this user, array
/// tasks one per line, finished ones too (while SLURM still lists them).
pub fn squeue_args() -> Vec<String> {
    ["-h", "-r", "-t", "all", "--me", "-o", "%i|%T|%r|%N|%k"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Parses `squeue -o '%i|%T|%r|%N|%k'` lines by job id.
pub fn parse_squeue(stdout: &str) -> HashMap<String, Queued> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut f = line.split('|');
            let id = f.next()?.trim().to_string();
            let state = f.next()?.trim().to_string();
            let reason = f.next().unwrap_or("").trim().to_string();
            let node = f.next().unwrap_or("").trim().to_string();
            // The comment is last: it may hold `|` itself.
            let comment = f.collect::<Vec<_>>().join("|").trim().to_string();
            (!id.is_empty()).then(|| {
                (
                    id.clone(),
                    Queued {
                        id,
                        state,
                        reason,
                        node,
                        comment,
                    },
                )
            })
        })
        .collect()
}

/// States after which a job will not run again (requeued jobs go back to
/// `PENDING`, so `PREEMPTED` is final only when SLURM does not requeue).
pub fn is_final(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "OUT_OF_MEMORY"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "SPECIAL_EXIT"
            | "REVOKED"
    )
}

/// One job as `sacct -X -P -n -D --format=JobID,State,ExitCode,Reason,NodeList` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accounted {
    pub id: String,
    pub state: String,
    pub exit_code: String,
    pub reason: String,
    pub node: String,
}

pub fn sacct_args(ids: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "-X",
        "-P",
        "-n",
        "-D",
        "--format=JobID,State,ExitCode,Reason,NodeList",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push("-j".into());
    a.push(ids.join(","));
    a
}

/// Parses `sacct` rows by job id; of several rows for one id (a reused id,
/// a requeue), the last.
pub fn parse_sacct(stdout: &str) -> HashMap<String, Accounted> {
    let mut out = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 3 || f[0].is_empty() {
            continue;
        }
        // `CANCELLED by 0` → `CANCELLED`.
        let state = f[1].split_whitespace().next().unwrap_or("").to_string();
        out.insert(
            f[0].to_string(),
            Accounted {
                id: f[0].to_string(),
                state,
                exit_code: f[2].to_string(),
                reason: f.get(3).unwrap_or(&"").to_string(),
                node: f.get(4).unwrap_or(&"").to_string(),
            },
        );
    }
    out
}

/// `MaxArraySize` from `scontrol show config` (array indexes stay below it).
pub fn parse_max_array_size(stdout: &str) -> Option<usize> {
    stdout.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_prints_the_id_and_maybe_the_cluster() {
        assert_eq!(parse_sbatch("123\n").as_deref(), Some("123"));
        assert_eq!(parse_sbatch("77;big\n").as_deref(), Some("77"));
        assert_eq!(parse_sbatch("Submitted batch job 5\n"), None);
        assert!(sbatch_error_is_transient(
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
        ));
        assert!(!sbatch_error_is_transient(
            "sbatch: error: Batch job submission failed: Requested node configuration is not available"
        ));
        // munge stopped, or too busy to answer: as seen from Debian's slurm-wlm 22.05.
        for munge in [
            "sbatch: error: If munged is up, restart with --num-threads=10\nsbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or directory (Did you start munged?)\nsbatch: error: slurm_send_node_msg: auth_g_create: REQUEST_SUBMIT_BATCH_JOB has authentication error\nsbatch: error: Batch job submission failed: Protocol authentication error",
            "sbatch: error: Batch job submission failed: Zero Bytes were transmitted or received",
        ] {
            assert!(sbatch_error_is_transient(munge), "{munge}");
        }
        assert!(!sbatch_error_is_transient(
            "sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: Invalid partition name specified"
        ));
    }

    #[test]
    fn squeue_and_sacct_lines() {
        let q =
            parse_squeue("1_0|PENDING|None|\n1_1|RUNNING|None|vm\n7|FAILED|NonZeroExitCode|vm\n");
        assert_eq!(q.len(), 3);
        assert_eq!(q["1_1"].state, "RUNNING");
        assert_eq!(q["7"].reason, "NonZeroExitCode");
        assert!(is_final("TIMEOUT") && !is_final("PENDING"));
        let a = parse_sacct("12|FAILED|3:0|NonZeroExitCode|vm\n13_2|CANCELLED by 0|0:15|None|vm\n");
        assert_eq!(a["12"].exit_code, "3:0");
        assert_eq!(a["13_2"].state, "CANCELLED");
        assert_eq!(
            parse_max_array_size("MaxArraySize            = 10001\nMinJobAge = 300 sec\n"),
            Some(10001)
        );
    }

    #[test]
    fn a_command_that_hangs_is_stopped_and_one_that_is_missing_says_so() {
        let calls = Calls::default();
        let e = run(&calls, "sleep", &["5".into()], Duration::from_millis(100)).unwrap_err();
        assert!(e.contains("did not answer"), "{e}");
        let e = run(
            &calls,
            "vitgraph-no-such-sbatch",
            &[],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.contains("could not start"), "{e}");
        let out = run(
            &calls,
            "sh",
            &["-c".into(), "echo hi; echo oh >&2; exit 3".into()],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            (out.ok, out.code, out.stdout.as_str(), out.stderr.as_str()),
            (false, Some(3), "hi\n", "oh\n")
        );
    }
}
