//! Group commit: record many finished nodes with one flush to disk.
//!
//! Flushing costs milliseconds per call on real disks (about 9 ms per fsync
//! on the machines this was measured on), so recording each node with its own
//! fsyncs would dominate a sweep of small tasks. Instead a finished node is
//! *staged* ([`Store::stage_run`]: outputs hashed and renamed into
//! `objects/`, not yet durable nor recorded) and *materialized* into `out/`
//! ([`Store::materialize_files`]), so its dependents can start; then
//! [`Store::commit_batch`] makes a whole batch durable with one `syncfs` and
//! records it in one transaction. A crash before the commit leaves the batch
//! unrecorded (its objects are unreferenced; `gc` removes them), never half
//! recorded.

use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::TransactionBehavior;

use super::error::{IoContext, StoreError};
use super::fileio::remove_tree;
use super::fileio::{now_ns, Stat};
use super::lock::StoreLock;
use super::objects::declared_files;
use super::open::Store;
use super::record::{AttemptId, NewRun, OutputEntry, RunRecord};
use super::stat_cache::{upsert_stat, Entry};

/// A finished attempt whose outputs are in `objects/` but not yet recorded.
pub struct StagedRun {
    attempt: AttemptId,
    /// The run as it will be recorded.
    pub run: RunRecord,
    /// The key was recorded before (by another node or process): only point the node at it.
    adopt: bool,
    /// Overwrite the record of the same key (a forced re-run).
    replace: bool,
    staging: PathBuf,
    /// Keeps `gc` from removing the staged, still unreferenced objects.
    _gc_guard: StoreLock,
}

/// Stats of materialized files, recorded with the batch so `check_outputs` need not hash them.
pub struct Materialized {
    stats: Vec<(String, Entry)>,
}

impl Materialized {
    /// Nothing materialized (a run recorded without copying it to `out/`).
    pub(super) fn none() -> Materialized {
        Materialized { stats: Vec::new() }
    }
}

impl StagedRun {
    pub fn attempt(&self) -> AttemptId {
        self.attempt
    }
}

impl Store {
    /// Checks the declared outputs, hashes them and moves them into `objects/`
    /// (not flushed). Fails naming a missing or non-file output.
    pub fn stage_run(
        &self,
        attempt: AttemptId,
        new: NewRun<'_>,
        staging: &Path,
    ) -> Result<StagedRun, StoreError> {
        let staged = declared_files(&new, staging)?;
        let guard = self.store_lock(false)?;
        let existing = if new.replace {
            None
        } else {
            self.run_for_key(&new.key)?
        };
        if let Some(mut existing) = existing {
            existing.node_id = new.node_id.to_string();
            existing.stage = new.stage.to_string();
            return Ok(StagedRun {
                attempt,
                run: existing,
                adopt: true,
                replace: false,
                staging: staging.to_path_buf(),
                _gc_guard: guard,
            });
        }
        let mut outputs = Vec::with_capacity(staged.len());
        for (name, path) in &staged {
            let (hash, size) = self.ingest(path)?;
            outputs.push(OutputEntry {
                name: name.clone(),
                hash,
                size,
            });
        }
        let log = match new.log {
            Some(path) if path.is_file() => Some(self.ingest(path)?.0),
            _ => None,
        };
        let run = RunRecord {
            node_id: new.node_id.to_string(),
            stage: new.stage.to_string(),
            key: new.key,
            key_parts: new.key_parts,
            outputs,
            env: new.env.into(),
            started_at_ms: new.started_at_ms,
            duration_ms: new.duration_ms,
            log,
        };
        Ok(StagedRun {
            attempt,
            run,
            adopt: false,
            replace: new.replace,
            staging: staging.to_path_buf(),
            _gc_guard: guard,
        })
    }

    /// Copies a run's outputs into `dest` (replacing it atomically) without
    /// touching the database; the stats are recorded by [`Store::commit_batch`].
    pub fn materialize_files(
        &self,
        run: &RunRecord,
        dest: &Path,
    ) -> Result<Materialized, StoreError> {
        self.place(run, dest)?;
        let recorded_ns = now_ns();
        let mut stats = Vec::with_capacity(run.outputs.len());
        for output in &run.outputs {
            let path = dest.join(&output.name);
            let meta = fs::symlink_metadata(&path).ctx("read metadata of", &path)?;
            stats.push((
                self.stat_key(&path),
                Entry {
                    stat: Stat::of(&meta),
                    hash: output.hash,
                    recorded_ns,
                },
            ));
        }
        Ok(Materialized { stats })
    }

    /// Makes the staged objects durable (one `syncfs`) and records every run
    /// of the batch in one transaction; then removes their staging
    /// directories. Returns the recorded runs in order.
    pub fn commit_batch(
        &self,
        batch: Vec<(StagedRun, Materialized)>,
    ) -> Result<Vec<RunRecord>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.sync_filesystem()?;
        let mut recorded = Vec::with_capacity(batch.len());
        {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            for (staged, materialized) in &batch {
                let run = if staged.adopt {
                    super::runs::point_node_at(
                        &tx,
                        &staged.run.node_id,
                        &staged.run.stage,
                        &staged.run.key,
                    )
                    .map_err(|e| self.db_err(e))?;
                    super::runs::mark_succeeded(&tx, staged.attempt).map_err(|e| self.db_err(e))?;
                    staged.run.clone()
                } else {
                    self.insert_run(&tx, staged.attempt, &staged.run, staged.replace)?
                };
                for (key, entry) in &materialized.stats {
                    upsert_stat(&tx, key, entry).map_err(|e| self.db_err(e))?;
                }
                recorded.push(run);
            }
            tx.commit().map_err(|e| self.db_err(e))?;
        }
        for (staged, materialized) in batch {
            for (key, entry) in materialized.stats {
                self.remember(key, entry, false);
            }
            let _ = remove_tree(&staged.staging);
        }
        Ok(recorded)
    }

    /// Flushes the file system holding the store (objects, their directories).
    fn sync_filesystem(&self) -> Result<(), StoreError> {
        let dir = fs::File::open(&self.cache).ctx("open", &self.cache)?;
        use std::os::fd::AsRawFd;
        // SAFETY: syncfs(2) on a valid descriptor we own for the call's duration.
        let rc = unsafe { libc::syncfs(dir.as_raw_fd()) };
        if rc != 0 {
            return Err(StoreError::io(
                "flush the file system of",
                &self.cache,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }
}
