//! Where a node's task runs: the [`Executor`] trait, and [`Local`], which
//! runs it as a child process of vitgraph.
//!
//! The scheduler decides *what* runs and records it; an executor only starts
//! a [`Job`]'s task and says how it ended — as ninja's `CommandRunner` does.
//! Engine tests put a fake here (`engine::fake`) and assert exactly which
//! jobs ran; a cluster executor submits the same jobs to a batch system.
//!
//! SIGINT reaches the scheduler as an [`Interrupt`]: it stops scheduling and
//! asks the executor to stop what runs.

use std::collections::HashSet;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::failure::NodeFailure;
use super::run::{self, Job};
use super::spawn::{self, Spawn};
use crate::store::{AttemptId, Store, StoreError};
use crate::tasks::TaskSpec;

/// How a job ended: Ok when its task succeeded (its outputs are in the
/// job's staging directory, still to be checked and recorded).
pub(crate) type RunFuture = Pin<Box<dyn Future<Output = Result<Finished, NodeFailure>> + Send>>;

/// What a job that succeeded tells beyond its outputs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Finished {
    /// The environment record of the machine it ran on, when that was not
    /// this one (a cluster's compute node).
    pub env: Option<serde_json::Value>,
}

/// Where one job's outputs and log go.
#[derive(Debug, Clone)]
pub(crate) struct WorkDir {
    /// The job's `${out}`.
    pub staging: PathBuf,
    pub log: PathBuf,
    /// On the shared file system, for another machine: removed once the
    /// run is recorded; a job a driver that ended left is adopted.
    pub shared: bool,
}

/// Runs jobs.
pub(crate) trait Executor: Send + Sync {
    /// Runs `job`'s task to its end.
    fn run(&self, job: Job) -> RunFuture;
    /// Stops every job still running; each ends with an interrupted failure.
    fn interrupt(&self);
    /// Where a job's outputs and log go: for a task this machine runs, a
    /// fresh staging folder and the node's log under `cache/logs/`; an
    /// executor whose jobs run on other machines puts both in the job's
    /// directory on the shared file system.
    fn workdir(
        &self,
        store: &Store,
        attempt: AttemptId,
        log: &Path,
    ) -> Result<WorkDir, StoreError> {
        let _ = attempt;
        Ok(WorkDir {
            staging: store.objects().new_staging_dir()?,
            log: log.to_path_buf(),
            shared: false,
        })
    }
}

/// The build's interrupt flag: set once (SIGINT, SIGTERM, or a test), seen
/// by every part of a build.
#[derive(Clone, Default)]
pub(crate) struct Interrupt(Arc<(AtomicBool, Notify)>);

impl Interrupt {
    pub(crate) fn new() -> Interrupt {
        Interrupt::default()
    }

    pub(crate) fn fire(&self) {
        self.0 .0.store(true, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0 .0.load(Ordering::SeqCst)
    }

    /// Resolves once the flag is set.
    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.0 .1.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Fires on SIGINT, SIGTERM or SIGHUP (a closed terminal or SSH session)
    /// (call inside a tokio runtime). The handlers are in place when this
    /// returns, before any task can start: a signal never finds vitgraph
    /// with the default action (which would leave its tasks' children running).
    pub(crate) fn on_signals(&self) {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hup = signal(SignalKind::hangup()).ok();
        let me = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = recv(&mut int) => {}
                _ = recv(&mut term) => {}
                _ = recv(&mut hup) => {}
            }
            me.fire();
        });
    }
}

/// Runs each job as a child process of vitgraph: its own process group
/// (terminated as a whole on interrupt), dying with vitgraph
/// (`PR_SET_PDEATHSIG`), output into the job's log. See [`super::spawn`].
#[derive(Clone, Default)]
pub(crate) struct Local {
    children: Arc<Mutex<HashSet<i32>>>,
    interrupted: Arc<AtomicBool>,
    /// Where each task's process group is noted for a command that runs
    /// after this one was killed (see `store::TaskGroups`).
    groups: Option<Arc<crate::store::TaskGroups>>,
}

/// How long interrupted tasks get between SIGTERM and SIGKILL.
const KILL_AFTER: Duration = Duration::from_secs(3);

impl Local {
    pub(crate) fn new() -> Local {
        Local::default()
    }

    /// A `Local` that notes its tasks' process groups in the store, so
    /// that a later command ends what they leave if vitgraph is killed.
    pub(crate) fn noting_groups(store: &crate::store::Store) -> Local {
        Local {
            groups: Some(Arc::new(store.journal().task_groups())),
            ..Local::default()
        }
    }

    fn children(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `signal` to every running child's process group.
    fn signal_all(&self, signal: i32) {
        for &pid in self.children().iter() {
            // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
            unsafe {
                libc::kill(-pid, signal);
            }
        }
    }

    async fn run_job(self, job: Job) -> Result<Finished, NodeFailure> {
        let start = |m: String| NodeFailure::new(super::failure::FailureKind::Start, m);
        // A fresh file per attempt: whatever still holds the last attempt's
        // log open writes into that file, not into this one.
        let _ = std::fs::remove_file(&job.log);
        let log = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&job.log)
            .map_err(|e| {
                start(format!(
                    "cannot create the log file `{}`: {e}",
                    job.log.display()
                ))
            })?;
        let log2 = log
            .try_clone()
            .map_err(|e| start(format!("cannot open the log file: {e}")))?;
        let launch = run::launch(&job)?;
        let spec = Spawn {
            program: launch.program,
            args: launch.args,
            env: launch.env,
            cwd: job.root.clone(),
            stdin: spawn::dev_null().map_err(|e| start(format!("cannot open /dev/null: {e}")))?,
            stdout: log.into(),
            stderr: log2.into(),
            cores: job.cores.clone(),
            note_group: self.groups.as_ref().and_then(|g| g.fd()),
        };
        let pid = {
            // Registered under the lock that `interrupt` takes: a task never
            // starts unseen by an interrupt.
            let mut children = self.children();
            if self.interrupted.load(Ordering::SeqCst) {
                return Err(NodeFailure::interrupted());
            }
            let pid =
                spawn::spawn(&spec).map_err(|e| start(format!("cannot start the task: {e}")))?;
            children.insert(pid);
            pid
        };
        drop(spec);
        let status = tokio::task::spawn_blocking(move || spawn::wait_and_end_group(pid)).await;
        self.children().remove(&pid);
        let status = match status {
            Ok(Ok(status)) => std::process::ExitStatus::from_raw(status),
            Ok(Err(e)) => return Err(start(format!("cannot wait for the task: {e}"))),
            Err(e) => return Err(start(format!("cannot wait for the task: {e}"))),
        };
        if self.interrupted.load(Ordering::SeqCst) {
            return Err(NodeFailure::interrupted());
        }
        match run::failure_of(status, matches!(job.task, TaskSpec::Command(_))) {
            None => Ok(Finished::default()),
            Some(f) => Err(f),
        }
    }
}

impl Executor for Local {
    fn run(&self, job: Job) -> RunFuture {
        Box::pin(self.clone().run_job(job))
    }

    fn interrupt(&self) {
        {
            let _children = self.children();
            self.interrupted.store(true, Ordering::SeqCst);
        }
        self.signal_all(libc::SIGTERM);
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(KILL_AFTER).await;
            me.signal_all(libc::SIGKILL);
        });
    }
}
