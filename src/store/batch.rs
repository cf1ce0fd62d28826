//! Group commit: record many finished nodes with one flush to disk.
//!
//! Flushing costs milliseconds per call on real disks (about 9 ms per fsync
//! on the machines this was measured on), so recording each node with its own
//! fsyncs would dominate a sweep of small tasks. Instead a finished node is
//! *staged* ([`Store::stage_run`]: outputs copied into `objects/` and
//! hashed, not yet durable nor recorded) and *materialized* into `out/`
//! ([`Store::materialize_files`]), so its dependents can start; then
//! [`Store::commit_batch`] makes a whole batch durable with one `syncfs` and
//! records it in one transaction. A crash before the commit leaves the batch
//! unrecorded, never half recorded.
//!
//! A staged run is noted in `staged_runs` as soon as its objects are in
//! place (a write to the database's log, no flush), and the note is removed
//! in the transaction that records the run. A driver killed between the two
//! loses no finished work: the next process to open the store finds the
//! notes of dead processes' attempts, checks every object they name against
//! its hash (a power cut may have lost unflushed bytes), and records those
//! that hold ([`Store::adopt_staged_runs`]). So a kill re-runs at most the
//! nodes whose tasks were running, never one that had finished.

use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{params, TransactionBehavior};

use super::error::{IoContext, StoreError};
use super::fileio::remove_tree;
use super::fileio::{now_ns, Stat};
use super::lock::StoreLock;
use super::objects::{declared_files, Materialized};
use super::open::Store;
use super::owner::{Liveness, Owner};
use super::record::{
    decode_outputs, encode_outputs, AttemptId, NewRun, OutputEntry, RawJson, RunRecord,
};
use super::roles::Objects;
use super::stat_cache::{upsert_stat, Entry};
use crate::hash::ContentHash;

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

/// A staged run as `staged_runs` notes it.
struct StagedNote {
    attempt: AttemptId,
    run: RunRecord,
    replace: bool,
    adopt: bool,
}

impl StagedRun {
    pub fn attempt(&self) -> AttemptId {
        self.attempt
    }
}

impl Objects<'_> {
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
            self.reader().run_for_key(&new.key)?
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
            let (hash, size) = self.ingest(path, staging)?;
            outputs.push(OutputEntry {
                name: name.clone(),
                hash,
                size,
            });
        }
        let log = match new.log {
            Some(path) if path.is_file() => Some(self.ingest(path, staging)?.0),
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
        let staged = StagedRun {
            attempt,
            run,
            adopt: false,
            replace: new.replace,
            staging: staging.to_path_buf(),
            _gc_guard: guard,
        };
        self.note_staged(&staged)?;
        Ok(staged)
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
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if self.left_out(run, &e) => continue,
                Err(e) => return Err(StoreError::io("read metadata of", &path, e)),
            };
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
                tx.prepare_cached("DELETE FROM staged_runs WHERE attempt = ?1")
                    .and_then(|mut stmt| stmt.execute([staged.attempt.0]))
                    .map_err(|e| self.db_err(e))?;
                let run = self.record_staged(
                    &tx,
                    staged.attempt,
                    &staged.run,
                    staged.adopt,
                    staged.replace,
                )?;
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
}

impl Store {
    /// Notes a staged run in `staged_runs`, so the next process can record it
    /// should this one die before its commit.
    fn note_staged(&self, staged: &StagedRun) -> Result<(), StoreError> {
        let run = &staged.run;
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO staged_runs (attempt, node_id, stage, key, key_parts, env, outputs, log,
                 started_at_ms, duration_ms, replace_run, adopt_run) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    staged.attempt.0,
                    run.node_id,
                    run.stage,
                    &run.key.0[..],
                    run.key_parts.0,
                    run.env.0,
                    encode_outputs(&run.outputs),
                    run.log.map(|h| h.0.to_vec()),
                    run.started_at_ms,
                    run.duration_ms,
                    staged.replace,
                    staged.adopt
                ])
            })
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    /// Records the staged runs that processes of this host noted and died
    /// before committing, when every object they name is intact (checked
    /// against its hash); forgets the others, and the notes of attempts
    /// that ended otherwise. Returns how many runs were recorded.
    pub(super) fn adopt_staged_runs(&self) -> Result<usize, StoreError> {
        let notes = self.dead_staged_runs()?;
        if notes.is_empty() {
            return Ok(0);
        }
        // Keeps `gc` from removing the objects while they are unreferenced.
        let _gc_guard = self.store_lock(false)?;
        let intact: Vec<&StagedNote> = notes
            .iter()
            .filter(|staged| {
                let run = &staged.run;
                run.outputs
                    .iter()
                    .map(|o| o.hash)
                    .chain(run.log)
                    .all(|h| self.object_is_intact(&h))
            })
            .collect();
        self.sync_filesystem()?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        for staged in &intact {
            // Still running in the database: nobody settled it meanwhile.
            let running: bool = tx
                .query_row(
                    "SELECT status = 'running' FROM attempts WHERE id = ?1",
                    [staged.attempt.0],
                    |r| r.get(0),
                )
                .map_err(|e| self.db_err(e))?;
            if !running {
                continue;
            }
            self.record_staged(
                &tx,
                staged.attempt,
                &staged.run,
                staged.adopt,
                staged.replace,
            )?;
        }
        for staged in &notes {
            tx.execute(
                "DELETE FROM staged_runs WHERE attempt = ?1",
                [staged.attempt.0],
            )
            .map_err(|e| self.db_err(e))?;
        }
        tx.execute(
            "DELETE FROM staged_runs WHERE attempt NOT IN (SELECT id FROM attempts WHERE status = 'running')",
            [],
        )
        .map_err(|e| self.db_err(e))?;
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(intact.len())
    }

    /// The staged-run notes of `running` attempts whose owner, a process of
    /// this host, is dead; with each attempt's id.
    fn dead_staged_runs(&self) -> Result<Vec<StagedNote>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT s.attempt, s.node_id, s.stage, s.key, s.key_parts, s.env, s.outputs, s.log,
                        s.started_at_ms, s.duration_ms, s.replace_run, s.adopt_run, a.host, a.pid, a.pid_start
                 FROM staged_runs s JOIN attempts a ON a.id = s.attempt
                 WHERE a.status = 'running' AND a.job IS NULL",
            )
            .map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.db_err(e))?;
        let mut notes = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let db = |e| self.db_err(e);
            let owner = Owner {
                host: row.get(12).map_err(db)?,
                pid: row.get(13).map_err(db)?,
                start: row.get::<_, i64>(14).map_err(db)? as u64,
            };
            if owner.liveness(&self.owner.host) != Liveness::Dead {
                continue;
            }
            let attempt: i64 = row.get(0).map_err(db)?;
            let outputs: Vec<u8> = row.get(6).map_err(db)?;
            let log: Option<Vec<u8>> = row.get(7).map_err(db)?;
            let run = RunRecord {
                node_id: row.get(1).map_err(db)?,
                stage: row.get(2).map_err(db)?,
                key: self.hash_column(row.get(3).map_err(db)?)?,
                key_parts: RawJson(row.get(4).map_err(db)?),
                env: RawJson(row.get(5).map_err(db)?),
                outputs: decode_outputs(&outputs)
                    .ok_or_else(|| self.damaged("a staged output list".into()))?,
                log: log.map(|b| self.hash_column(b)).transpose()?,
                started_at_ms: row.get(8).map_err(db)?,
                duration_ms: row.get(9).map_err(db)?,
            };
            notes.push(StagedNote {
                attempt: AttemptId(attempt),
                run,
                replace: row.get(10).map_err(db)?,
                adopt: row.get(11).map_err(db)?,
            });
        }
        Ok(notes)
    }

    /// Whether the object named `hash` exists and its bytes hash to it.
    fn object_is_intact(&self, hash: &ContentHash) -> bool {
        let path = self.objects().path(hash);
        let Ok(meta) = fs::metadata(&path) else {
            return false;
        };
        self.hash_uncached(&path, meta.len())
            .is_ok_and(|h| h == *hash)
    }

    /// Flushes the file system holding the store (objects, their directories).
    pub(super) fn sync_filesystem(&self) -> Result<(), StoreError> {
        super::fileio::sync_filesystem_of(&self.cache)
    }
}

impl Objects<'_> {
    /// A fresh, empty staging directory for one attempt:
    /// `cache/staging/<host>/<pid>-<start>-<seq>/`. The owner is in the name so
    /// that leftovers of a dead process can be told from a live one's.
    pub fn new_staging_dir(&self) -> Result<PathBuf, StoreError> {
        let host_dir = self.staging_host_dir();
        fs::create_dir_all(&host_dir).ctx("create directory", &host_dir)?;
        loop {
            let seq = self
                .staging_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = host_dir.join(format!("{}{seq}", self.owner.staging_prefix()));
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                // Another handle in this process used the same number.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create staging directory", &dir, e)),
            }
        }
    }
}

impl Store {
    /// Records a staged run in `tx`: an adopted one (its record already
    /// written) becomes its node's current run and its attempt succeeds;
    /// any other is inserted as new.
    fn record_staged(
        &self,
        tx: &rusqlite::Connection,
        attempt: AttemptId,
        run: &RunRecord,
        adopt: bool,
        replace: bool,
    ) -> Result<RunRecord, StoreError> {
        if !adopt {
            return self.insert_run(tx, attempt, run, replace);
        }
        super::runs::point_node_at(tx, &run.node_id, &run.stage, &run.key)
            .map_err(|e| self.db_err(e))?;
        super::runs::mark_succeeded(tx, attempt).map_err(|e| self.db_err(e))?;
        Ok(run.clone())
    }
}
