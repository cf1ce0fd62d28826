//! A fake executor for engine tests: it starts no process. Each job does
//! what the test planned for its node — write its declared outputs, fail,
//! hang until interrupted — and is logged with the GPUs it was given and
//! the nodes running beside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::executor::{Executor, Finished, RunFuture};
use super::failure::NodeFailure;
use super::run::Job;

/// What a node's job does.
#[derive(Clone, Debug)]
pub(super) enum Plan {
    /// Writes every declared output with this text.
    Write(String),
    /// Takes this long, then writes its outputs (the node id as their text).
    Sleep(Duration),
    /// Exits with this status.
    Exit(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Succeeds without writing its outputs.
    NoOutputs,
    /// Runs until interrupted.
    Hang,
}

/// One job the fake ran.
#[derive(Clone, Debug)]
pub(super) struct Ran {
    pub node: String,
    pub gpus: Vec<String>,
    /// The cores it was pinned to.
    pub cores: Option<Vec<usize>>,
    /// The nodes running when it started.
    pub beside: Vec<String>,
}

#[derive(Default)]
struct Inner {
    plans: Mutex<HashMap<String, Plan>>,
    ran: Mutex<Vec<Ran>>,
    running: Mutex<Vec<String>>,
    interrupted: AtomicBool,
    wake: Notify,
}

#[derive(Clone, Default)]
pub(super) struct Fake(Arc<Inner>);

impl Fake {
    pub(super) fn new() -> Fake {
        Fake::default()
    }

    /// Plans what `node`'s job does (by default it writes its outputs, with
    /// the node id as their text).
    pub(super) fn plan(&self, node: &str, plan: Plan) {
        self.0.plans.lock().unwrap().insert(node.into(), plan);
    }

    /// The jobs run so far, in start order.
    pub(super) fn ran(&self) -> Vec<Ran> {
        self.0.ran.lock().unwrap().clone()
    }

    /// The node ids run so far, in start order.
    pub(super) fn nodes(&self) -> Vec<String> {
        self.ran().into_iter().map(|r| r.node).collect()
    }

    /// Forgets what ran (between builds) and the interrupt.
    pub(super) fn reset(&self) {
        self.0.ran.lock().unwrap().clear();
        self.0.interrupted.store(false, Ordering::SeqCst);
    }

    async fn run_job(self, job: Job) -> Result<Finished, NodeFailure> {
        let inner = &self.0;
        {
            let mut running = inner.running.lock().unwrap();
            inner.ran.lock().unwrap().push(Ran {
                node: job.node.clone(),
                gpus: job.gpus.iter().map(|g| g.to_string()).collect(),
                cores: job.cores.clone(),
                beside: running.clone(),
            });
            running.push(job.node.clone());
        }
        let plan = inner.plans.lock().unwrap().get(&job.node).cloned();
        // As a real executor does: the job's log exists once it started.
        let _ = std::fs::write(&job.log, format!("{} ran\n", job.node));
        let result = self.act(&job, plan).await;
        inner.running.lock().unwrap().retain(|n| n != &job.node);
        result.map(|()| Finished::default())
    }

    async fn act(&self, job: &Job, plan: Option<Plan>) -> Result<(), NodeFailure> {
        let write = |text: &str| {
            for name in job.task.outputs() {
                let path = job.staging.join(&name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                // A measurement's results.json is checked as it is
                // recorded: a text that is not JSON goes in an object.
                let measured = name == crate::tasks::command::RESULTS_JSON && job.task.measures();
                if measured && serde_json::from_str::<serde_json::Value>(text).is_err() {
                    std::fs::write(path, serde_json::json!({ "text": text }).to_string()).unwrap();
                } else {
                    std::fs::write(path, text).unwrap();
                }
            }
        };
        match plan {
            None => write(&job.node),
            Some(Plan::Write(text)) => write(&text),
            Some(Plan::Sleep(d)) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => write(&job.node),
                    _ = self.interrupted() => return Err(NodeFailure::interrupted()),
                }
            }
            Some(Plan::Exit(code)) => return Err(NodeFailure::exit(code, true)),
            Some(Plan::Signal(sig)) => return Err(NodeFailure::signal(sig)),
            Some(Plan::NoOutputs) => {}
            Some(Plan::Hang) => {
                self.interrupted().await;
                return Err(NodeFailure::interrupted());
            }
        }
        Ok(())
    }

    async fn interrupted(&self) {
        loop {
            let woken = self.0.wake.notified();
            if self.0.interrupted.load(Ordering::SeqCst) {
                return;
            }
            woken.await;
        }
    }
}

impl Executor for Fake {
    fn run(&self, job: Job) -> RunFuture {
        Box::pin(self.clone().run_job(job))
    }

    fn interrupt(&self) {
        self.0.interrupted.store(true, Ordering::SeqCst);
        self.0.wake.notify_waiters();
    }
}
