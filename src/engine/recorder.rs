//! The recorder: one thread that commits finished nodes in batches.
//!
//! Nodes finish faster than a disk flushes, so while one batch is being made
//! durable the next ones queue up and are committed together (group commit):
//! one `syncfs` and one transaction per batch instead of several fsyncs per
//! node. Dependents do not wait for this; only the `finished` event does.

use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::store::{Materialized, RunRecord, StagedRun, Store};

struct Item {
    staged: StagedRun,
    materialized: Materialized,
    reply: oneshot::Sender<Result<RunRecord, String>>,
}

#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Item>,
}

impl Recorder {
    /// Starts the recorder thread; it ends when every `Recorder` clone is dropped.
    pub fn start(store: Arc<Store>) -> Recorder {
        let (tx, rx) = mpsc::channel::<Item>();
        std::thread::Builder::new()
            .name("vitgraph-recorder".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut items = vec![first];
                    while let Ok(more) = rx.try_recv() {
                        items.push(more);
                    }
                    let attempts: Vec<_> = items.iter().map(|i| i.staged.attempt()).collect();
                    let (batch, replies): (Vec<_>, Vec<_>) = items
                        .into_iter()
                        .map(|i| ((i.staged, i.materialized), i.reply))
                        .unzip();
                    match store.commit_batch(batch) {
                        Ok(runs) => {
                            for (run, reply) in runs.into_iter().zip(replies) {
                                let _ = reply.send(Ok(run));
                            }
                        }
                        Err(e) => {
                            let msg = e.to_string();
                            for (attempt, reply) in attempts.into_iter().zip(replies) {
                                let _ = store.commit_failure(attempt, &msg);
                                let _ = reply.send(Err(msg.clone()));
                            }
                        }
                    }
                }
            })
            .expect("spawn the recorder thread");
        Recorder { tx }
    }

    /// Queues a staged run; resolves once it is durable and recorded.
    pub async fn record(
        &self,
        staged: StagedRun,
        materialized: Materialized,
    ) -> Result<RunRecord, String> {
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(Item {
                staged,
                materialized,
                reply,
            })
            .map_err(|_| "the recorder stopped".to_string())?;
        wait.await.map_err(|_| "the recorder stopped".to_string())?
    }
}
