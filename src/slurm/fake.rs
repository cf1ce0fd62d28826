//! A scripted SLURM for the executor's tests: it runs no process. `sbatch`
//! queues the array's tasks (read from its manifest), each `squeue` moves
//! them one step (pending → running → ended), and a task ends as the test
//! planned for its node: with a result record (success or a failed task), or
//! vanishing in a state `sacct` then reports. Errors are scripted too: the
//! next `sbatch` answers, `squeue` failing, `sacct` absent.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use super::cmd::{Output, SlurmCtl};
use super::job::{Outcome, JOB_FILE, RESULT_FILE};
use crate::engine::failure::NodeFailure;
use crate::engine::run::Job;

/// How a node's job ends.
#[derive(Clone, Debug)]
pub(super) enum Fate {
    /// Writes its outputs and a result record saying it succeeded.
    Succeed,
    /// Its task exits with this status (a result record saying so).
    Exit(i32),
    /// Leaves the queue without a result record; `sacct` says this state.
    Vanish(&'static str),
    /// Runs until cancelled.
    Hang,
}

#[derive(Clone, Debug)]
struct Task {
    id: String,
    dir: PathBuf,
    node: String,
    comment: String,
    state: &'static str,
    /// Left the queue (squeue no longer lists it).
    gone: bool,
    /// What `sacct` says once it ended without a record.
    accounted: Option<&'static str>,
}

#[derive(Default)]
struct Cluster {
    next_id: u64,
    tasks: Vec<Task>,
    fates: HashMap<String, Fate>,
    /// Answers the next `sbatch` calls give before they accept (stderr).
    sbatch_errors: VecDeque<String>,
    squeue_failures: usize,
    no_sacct: bool,
    max_array: usize,
    /// Every call: `program args…`.
    calls: Vec<String>,
}

/// The fake cluster (see the module docs).
pub(super) struct FakeSlurm(Mutex<Cluster>);

fn ok(stdout: String) -> Result<Output, String> {
    Ok(Output {
        ok: true,
        code: Some(0),
        stdout,
        stderr: String::new(),
    })
}

fn refused(stderr: String) -> Result<Output, String> {
    Ok(Output {
        ok: false,
        code: Some(1),
        stdout: String::new(),
        stderr,
    })
}

impl FakeSlurm {
    pub(super) fn new() -> FakeSlurm {
        FakeSlurm(Mutex::new(Cluster {
            next_id: 100,
            max_array: 1001,
            ..Cluster::default()
        }))
    }

    fn cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How `node`'s job ends (by default it succeeds).
    pub(super) fn fate(&self, node: &str, fate: Fate) {
        self.cluster().fates.insert(node.into(), fate);
    }

    /// The next `sbatch` calls answer with these errors, in order.
    pub(super) fn sbatch_fails(&self, stderr: &[&str]) {
        self.cluster()
            .sbatch_errors
            .extend(stderr.iter().map(|s| s.to_string()));
    }

    /// The next `n` `squeue` calls fail (the controller is unreachable).
    pub(super) fn squeue_fails(&self, n: usize) {
        self.cluster().squeue_failures = n;
    }

    pub(super) fn without_sacct(&self) {
        self.cluster().no_sacct = true;
    }

    pub(super) fn max_array_size(&self, n: usize) {
        self.cluster().max_array = n;
    }

    /// Cancels a job as someone else would (`scancel` outside vitgraph).
    pub(super) fn cancel_from_outside(&self, node: &str) {
        for t in self.cluster().tasks.iter_mut().filter(|t| t.node == node) {
            t.state = "CANCELLED";
            t.gone = true;
            t.accounted = Some("CANCELLED by 0");
        }
    }

    /// Queues a task as an earlier driver's array would have left it.
    pub(super) fn queue_task(&self, id: &str, dir: PathBuf, node: &str, comment: &str) {
        self.cluster().tasks.push(Task {
            id: id.into(),
            dir,
            node: node.into(),
            comment: comment.into(),
            state: "RUNNING",
            gone: false,
            accounted: None,
        });
    }

    /// The calls of one program, with their arguments.
    pub(super) fn calls_of(&self, program: &str) -> Vec<String> {
        self.cluster()
            .calls
            .iter()
            .filter(|c| c.split(' ').next() == Some(program))
            .cloned()
            .collect()
    }

    /// The job ids of `node`'s tasks.
    pub(super) fn ids_of(&self, node: &str) -> Vec<String> {
        self.cluster()
            .tasks
            .iter()
            .filter(|t| t.node == node)
            .map(|t| t.id.clone())
            .collect()
    }

    fn sbatch(&self, args: &[String]) -> Result<Output, String> {
        let mut c = self.cluster();
        if let Some(err) = c.sbatch_errors.pop_front() {
            return refused(err);
        }
        let value = |flag: &str| {
            args.iter()
                .find_map(|a| a.strip_prefix(flag))
                .map(str::to_string)
        };
        let comment = value("--comment=").unwrap_or_default();
        let wrap = args.last().cloned().unwrap_or_default();
        let manifest = wrap
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .trim_matches('\'')
            .to_string();
        let dirs: Vec<PathBuf> = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("fake sbatch: cannot read {manifest}: {e}"))?
            .lines()
            .map(PathBuf::from)
            .collect();
        let array = value("--array=0-").unwrap_or_default();
        let last: usize = array.split('%').next().unwrap_or("0").parse().unwrap_or(0);
        assert_eq!(last + 1, dirs.len(), "the array spans the manifest");
        c.next_id += 1;
        let id = c.next_id;
        for (i, dir) in dirs.into_iter().enumerate() {
            let job: Job = serde_json::from_slice(&std::fs::read(dir.join(JOB_FILE)).unwrap())
                .expect("job.json");
            c.tasks.push(Task {
                id: format!("{id}_{i}"),
                dir,
                node: job.node,
                comment: comment.clone(),
                state: "PENDING",
                gone: false,
                accounted: None,
            });
        }
        ok(format!("{id}\n"))
    }

    /// One step of the cluster, then the queue as `squeue` lists it.
    fn squeue(&self) -> Result<Output, String> {
        let mut c = self.cluster();
        if c.squeue_failures > 0 {
            c.squeue_failures -= 1;
            return refused(
                "squeue: error: Unable to contact slurm controller (connect failure)".into(),
            );
        }
        let fates = c.fates.clone();
        for t in c.tasks.iter_mut().filter(|t| !t.gone) {
            match t.state {
                "PENDING" => t.state = "RUNNING",
                "RUNNING" => end(t, fates.get(&t.node).cloned().unwrap_or(Fate::Succeed)),
                _ => t.gone = true,
            }
        }
        let lines: Vec<String> = c
            .tasks
            .iter()
            .filter(|t| !t.gone)
            .map(|t| format!("{}|{}|None|fake-node|{}", t.id, t.state, t.comment))
            .collect();
        ok(lines.join("\n"))
    }

    fn sacct(&self, args: &[String]) -> Result<Output, String> {
        let c = self.cluster();
        let ids: Vec<&str> = args
            .last()
            .map(|a| a.split(',').collect())
            .unwrap_or_default();
        let lines: Vec<String> = c
            .tasks
            .iter()
            .filter(|t| ids.contains(&t.id.as_str()))
            .filter_map(|t| {
                let state = t.accounted?;
                Some(format!("{}|{state}|0:0|None|fake-node", t.id))
            })
            .collect();
        ok(lines.join("\n"))
    }

    fn scancel(&self, ids: &[String]) -> Result<Output, String> {
        for t in self.cluster().tasks.iter_mut() {
            if ids.contains(&t.id) {
                t.state = "CANCELLED";
                t.gone = true;
                t.accounted = Some("CANCELLED by 1000");
            }
        }
        ok(String::new())
    }
}

/// A running task ends by its fate.
fn end(t: &mut Task, fate: Fate) {
    let job: Job = serde_json::from_slice(&std::fs::read(t.dir.join(JOB_FILE)).unwrap()).unwrap();
    let outcome = |ok: bool, failure: Option<NodeFailure>| Outcome {
        ok,
        failure,
        duration_ms: 1,
        host: "fake-node".into(),
        job_id: Some(t.id.clone()),
        env: None,
    };
    let record = |o: &Outcome| {
        std::fs::write(t.dir.join(RESULT_FILE), serde_json::to_vec(o).unwrap()).unwrap()
    };
    match fate {
        Fate::Succeed => {
            std::fs::create_dir_all(&job.staging).unwrap();
            for name in job.task.outputs() {
                std::fs::write(job.staging.join(name), &job.node).unwrap();
            }
            record(&outcome(true, None));
            t.state = "COMPLETED";
        }
        Fate::Exit(code) => {
            record(&outcome(false, Some(NodeFailure::exit(code, true))));
            t.state = "FAILED";
        }
        Fate::Vanish(state) => {
            t.state = state;
            t.gone = true;
            t.accounted = Some(state);
        }
        Fate::Hang => {}
    }
}

impl SlurmCtl for FakeSlurm {
    fn run(&self, program: &str, args: &[String], _limit: Duration) -> Result<Output, String> {
        self.cluster()
            .calls
            .push(format!("{program} {}", args.join(" ")));
        match program {
            "sbatch" => self.sbatch(args),
            "squeue" => self.squeue(),
            "sacct" => self.sacct(args),
            "scancel" => self.scancel(args),
            "scontrol" => ok(format!("MaxArraySize = {}\n", self.cluster().max_array)),
            other => Err(format!("fake: no `{other}`")),
        }
    }

    fn available(&self, program: &str) -> bool {
        !(program == "sacct" && self.cluster().no_sacct)
    }
}
