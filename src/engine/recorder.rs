//! The recorder: one thread that commits finished nodes in batches.
//!
//! Nodes finish faster than a disk flushes, so while one batch is being made
//! durable the next ones queue up and are committed together (group commit):
//! one `syncfs` and one transaction per batch instead of several fsyncs per
//! node. A node's slot is free while its run waits here; its dependents
//! start once the run is committed.
//!
//! A `syncfs` costs the whole machine (it walks every inode of the file
//! system), so while nodes that could join are still running or waiting for
//! slots the recorder lingers up to [`LINGER`] after the first item for more
//! to join its batch; otherwise it commits at once, so neither the end of a
//! build nor a chain of dependent nodes (each waits for its upstream's
//! commit before its own) waits for nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::failure::{FailureKind, NodeFailure};
use crate::store::{Materialized, RunRecord, StagedRun, Store};

struct Item {
    staged: StagedRun,
    materialized: Materialized,
    reply: oneshot::Sender<Result<RunRecord, NodeFailure>>,
}

/// How long a batch waits for more finished nodes while tasks still run.
const LINGER: Duration = Duration::from_millis(20);

/// The most runs one batch commits.
const MAX_BATCH: usize = 1024;

#[derive(Clone)]
pub(crate) struct Recorder {
    tx: mpsc::Sender<Item>,
    running: Arc<AtomicUsize>,
}

impl Recorder {
    /// Starts the recorder thread; it ends when every `Recorder` clone is dropped.
    pub(crate) fn start(store: Arc<Store>) -> Recorder {
        let (tx, rx) = mpsc::channel::<Item>();
        let running = Arc::new(AtomicUsize::new(0));
        let busy = running.clone();
        std::thread::Builder::new()
            .name("vitgraph-recorder".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut items = vec![first];
                    let since = Instant::now();
                    while items.len() < MAX_BATCH {
                        // With nothing running, nothing more will come soon:
                        // what is queued joins, and the batch commits now.
                        if busy.load(Ordering::SeqCst) == 0 {
                            match rx.try_recv() {
                                Ok(more) => {
                                    items.push(more);
                                    continue;
                                }
                                Err(_) => break,
                            }
                        }
                        match rx.recv_timeout(Duration::from_millis(1)) {
                            Ok(more) => items.push(more),
                            Err(mpsc::RecvTimeoutError::Timeout)
                                if busy.load(Ordering::SeqCst) > 0 && since.elapsed() < LINGER => {}
                            Err(_) => break,
                        }
                    }
                    let attempts: Vec<_> = items.iter().map(|i| i.staged.attempt()).collect();
                    let (batch, replies): (Vec<_>, Vec<_>) = items
                        .into_iter()
                        .map(|i| ((i.staged, i.materialized), i.reply))
                        .unzip();
                    match store.objects().commit_batch(batch) {
                        Ok(runs) => {
                            // Before the replies: the build ends with its
                            // last reply, and this thread with it.
                            super::record::keep_summaries(&store, &runs);
                            for (run, reply) in runs.into_iter().zip(replies) {
                                let _ = reply.send(Ok(run));
                            }
                        }
                        Err(e) => {
                            let failure = NodeFailure::store(&e);
                            for (attempt, reply) in attempts.into_iter().zip(replies) {
                                let f = super::failure::settle(&store, attempt, failure.clone());
                                let _ = reply.send(Err(f));
                            }
                        }
                    }
                }
            })
            .expect("spawn the recorder thread");
        Recorder { tx, running }
    }

    /// Tells the recorder how many nodes could still join a batch soon (the
    /// scheduler calls it whenever it waits): while any could, a batch
    /// lingers for them.
    pub(crate) fn set_running(&self, n: usize) {
        self.running.store(n, Ordering::SeqCst);
    }

    /// Queues a staged run; resolves once it is durable and recorded.
    pub(crate) async fn record(
        &self,
        staged: StagedRun,
        materialized: Materialized,
    ) -> Result<RunRecord, NodeFailure> {
        let stopped = || NodeFailure::new(FailureKind::Store, "the recorder stopped");
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(Item {
                staged,
                materialized,
                reply,
            })
            .map_err(|_| stopped())?;
        wait.await.map_err(|_| stopped())?
    }
}
