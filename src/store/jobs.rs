//! The journal of cluster jobs: which attempt runs as which job, kept in the
//! attempt's row so that a driver that died can be followed by one that
//! adopts its jobs instead of submitting them again (DESIGN §7).
//!
//! The attempt is recorded before `sbatch`, with the job's directory
//! (`cache/jobs/<attempt>/`, where the job writes its outputs and its result
//! record); the job id is recorded right after, with the submit time. An
//! attempt with a job stays `running` when its driver dies: `open` does not
//! mark it interrupted, the next driver (or `status`) settles it.

use rusqlite::params;

use super::error::StoreError;
use super::fileio::remove_tree;
use super::open::Store;
use super::record::{AttemptId, RawJson};
use super::roles::{Journal, Reader};
use crate::hash::ContentHash;

/// The first attempt of an array's directory `batch-<first attempt>-<n>`.
fn batch_first_attempt(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("batch-")?;
    let (first, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    first.parse().ok()
}

/// A running attempt with a cluster job.
#[derive(Debug, Clone)]
pub struct LiveJob {
    pub attempt: AttemptId,
    pub node_id: String,
    pub key: ContentHash,
    pub started_at_ms: i64,
    /// The executor's record of the job (JSON).
    pub job: RawJson,
}

/// The environment of the compute nodes a kind of job lands on, as a probe
/// job found it.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvProbeRecord {
    /// The job resources the probe asked for (partition, constraint, GPUs…).
    pub signature: String,
    /// The key-affecting facets (JSON object of strings).
    pub facets: RawJson,
    /// The whole record (host, GPUs, …), JSON.
    pub record: RawJson,
    pub probed_at_ms: i64,
}

/// The lock a cluster driver holds on its workspace while it builds; it
/// names the driver (host and pid) for the one it keeps out.
pub struct DriverLock {
    _file: std::fs::File,
}

impl Journal<'_> {
    /// Takes the workspace's driver lock (`cache/driver.lock`): Ok(Err(who))
    /// naming the driver that holds it when another one does.
    pub fn lock_driver(&self) -> Result<Result<DriverLock, String>, StoreError> {
        use std::io::{Seek, Write};
        use std::os::unix::io::AsRawFd;
        let path = self.cache.join("driver.lock");
        let io = |e| StoreError::io("open", &path, e);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock(2) on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let who = std::fs::read_to_string(&path).unwrap_or_default();
            return Ok(Err(who.trim().to_string()));
        }
        let me = format!(
            "pid {} on `{}`",
            std::process::id(),
            crate::host::env::hostname()
        );
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(me.as_bytes()));
        written.map_err(io)?;
        Ok(Ok(DriverLock { _file: file }))
    }

    /// Records (or replaces) a probe.
    pub fn record_env_probe(&self, p: &EnvProbeRecord) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO env_probes (signature, facets, record, probed_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(signature) DO UPDATE SET facets = ?2, record = ?3, probed_at_ms = ?4",
            )
            .and_then(|mut s| s.execute(params![p.signature, p.facets.0, p.record.0, p.probed_at_ms]))
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    /// Forgets a probe (its facets no longer match the nodes it stands for).
    pub fn forget_env_probe(&self, signature: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM env_probes WHERE signature = ?1", [signature])
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    /// `cache/jobs/<attempt>/`: where a cluster job of `attempt` writes.
    pub fn job_dir(&self, attempt: AttemptId) -> std::path::PathBuf {
        self.cache.join("jobs").join(attempt.0.to_string())
    }

    /// `cache/jobs/`.
    pub fn jobs_dir(&self) -> std::path::PathBuf {
        self.cache.join("jobs")
    }

    /// Records (or updates) the jobs of several attempts in one transaction.
    pub fn record_jobs(&self, jobs: &[(AttemptId, RawJson)]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.db_err(e))?;
        for (attempt, job) in jobs {
            let changed = tx
                .prepare_cached("UPDATE attempts SET job = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![attempt.0, job.0]))
                .map_err(|e| self.db_err(e))?;
            if changed == 0 {
                return Err(StoreError::UnknownAttempt {
                    id: attempt.0,
                    path: self.db_path.clone(),
                });
            }
        }
        tx.commit().map_err(|e| self.db_err(e))
    }
}

impl Reader<'_> {
    /// The probe of `signature`, if one was recorded.
    pub fn env_probe(&self, signature: &str) -> Result<Option<EnvProbeRecord>, StoreError> {
        use rusqlite::OptionalExtension;
        let conn = self.conn();
        conn.prepare_cached(
            "SELECT facets, record, probed_at_ms FROM env_probes WHERE signature = ?1",
        )
        .and_then(|mut s| {
            s.query_row([signature], |r| {
                Ok(EnvProbeRecord {
                    signature: signature.to_string(),
                    facets: RawJson(r.get(0)?),
                    record: RawJson(r.get(1)?),
                    probed_at_ms: r.get(2)?,
                })
            })
            .optional()
        })
        .map_err(|e| self.db_err(e))
    }

    /// Every running attempt with a cluster job, oldest first.
    pub fn live_jobs(&self) -> Result<Vec<LiveJob>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, node_id, key, started_at_ms, job FROM attempts
                 WHERE status = 'running' AND job IS NOT NULL ORDER BY id",
            )
            .map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.db_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let db = |e| self.db_err(e);
            out.push(LiveJob {
                attempt: AttemptId(row.get(0).map_err(db)?),
                node_id: row.get(1).map_err(db)?,
                key: self.hash_column(row.get(2).map_err(db)?)?,
                started_at_ms: row.get(3).map_err(db)?,
                job: RawJson(row.get(4).map_err(db)?),
            });
        }
        Ok(out)
    }
}

impl Store {
    /// Removes the job directories under `cache/jobs/` that no attempt needs
    /// any more (for `gc`): an attempt's directory once the attempt succeeded
    /// or was forgotten, an array's directory (manifest and SLURM logs) once
    /// none of its attempts' directories is left. Running and failed
    /// attempts keep theirs (their logs are what a failure names). Only
    /// attempts already in the database at the start are judged, so a
    /// driver starting jobs meanwhile loses nothing. How many it removed.
    pub(super) fn remove_finished_job_dirs(&self) -> Result<u64, StoreError> {
        let (keep, newest) = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT id, status FROM attempts")
                .map_err(|e| self.db_err(e))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .map_err(|e| self.db_err(e))?;
            let mut keep = std::collections::HashSet::new();
            let mut newest = 0;
            for row in rows {
                let (id, status) = row.map_err(|e| self.db_err(e))?;
                newest = newest.max(id);
                if status != "succeeded" {
                    keep.insert(id);
                }
            }
            (keep, newest)
        };
        let dir = self.journal().jobs_dir();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(0);
        };
        let mut removed = 0;
        let mut batches = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Ok(id) = name.parse::<i64>() {
                if id <= newest && !keep.contains(&id) && remove_tree(&entry.path()).is_ok() {
                    removed += 1;
                }
            } else if let Some(first) = batch_first_attempt(&name) {
                if first <= newest {
                    batches.push(entry.path());
                }
            }
        }
        for batch in batches {
            let manifest = std::fs::read_to_string(batch.join("manifest")).unwrap_or_default();
            let in_use = manifest
                .lines()
                .any(|l| !l.is_empty() && std::path::Path::new(l).exists());
            if !in_use && remove_tree(&batch).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

impl Journal<'_> {
    /// The log of a node's latest attempt: `cache/logs/<stage>/<name>.log`.
    pub fn log_path(&self, stage: &str, name: &str) -> std::path::PathBuf {
        self.cache
            .join("logs")
            .join(stage)
            .join(format!("{name}.log"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_with_a_job_outlives_its_driver() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let key = ContentHash([3; 32]);
        // Attempts of a driver that is gone (no such process).
        let dead = super::super::owner::Owner::local(u32::MAX - 7, 1);
        let with_job = store.begin_attempt_as(&dead, "a", &key, None).unwrap();
        store.begin_attempt_as(&dead, "b", &key, None).unwrap();
        store
            .journal()
            .record_jobs(&[(with_job, RawJson(r#"{"job_id":"12_3"}"#.into()))])
            .unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let live = store.reader().live_jobs().unwrap();
        assert_eq!(live.len(), 1, "the attempt with a job is still running");
        assert_eq!(live[0].node_id, "a");
        assert_eq!(live[0].job.0, r#"{"job_id":"12_3"}"#);
        let states = store.reader().load_states().unwrap();
        let b = states["b"].last_attempt.as_ref().unwrap();
        assert_eq!(b.status, crate::store::AttemptStatus::Interrupted);
        assert_eq!(
            store.journal().job_dir(with_job),
            store.cache_dir().join("jobs").join(with_job.0.to_string())
        );
        assert!(store
            .journal()
            .record_jobs(&[(AttemptId(999), RawJson("{}".into()))])
            .is_err());
    }
    #[test]
    fn gc_removes_the_job_directories_no_attempt_needs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let key = ContentHash([4; 32]);
        let ok = store.journal().begin_attempt("a", &key).unwrap();
        store
            .journal()
            .end_attempt(ok, crate::store::AttemptStatus::Succeeded, None, None)
            .unwrap();
        let failed = store.journal().begin_attempt("b", &key).unwrap();
        store.journal().commit_failure(failed, "exit 3").unwrap();
        let running = store.journal().begin_attempt("c", &key).unwrap();
        for a in [ok, failed, running] {
            std::fs::create_dir_all(store.journal().job_dir(a)).unwrap();
            std::fs::write(store.journal().job_dir(a).join("task.log"), "log").unwrap();
        }
        // A job directory of an attempt the database does not know yet (a
        // driver starting a job while gc runs) stays.
        let future = store.journal().job_dir(AttemptId(running.0 + 1));
        std::fs::create_dir_all(&future).unwrap();
        let batch = |first: i64, dirs: &[AttemptId]| {
            let b = store.journal().jobs_dir().join(format!("batch-{first}-1"));
            std::fs::create_dir_all(&b).unwrap();
            let lines: Vec<String> = dirs
                .iter()
                .map(|a| store.journal().job_dir(*a).display().to_string())
                .collect();
            std::fs::write(b.join("manifest"), lines.join("\n")).unwrap();
            std::fs::write(b.join("slurm-1_0.log"), "slurm").unwrap();
            b
        };
        let done_batch = batch(ok.0, &[ok]);
        let failed_batch = batch(failed.0, &[ok, failed]);
        assert_eq!(store.remove_finished_job_dirs().unwrap(), 2);
        assert!(!store.journal().job_dir(ok).exists());
        assert!(
            !done_batch.exists(),
            "none of its attempts' directories is left"
        );
        assert!(store.journal().job_dir(failed).join("task.log").exists());
        assert!(
            failed_batch.join("slurm-1_0.log").exists(),
            "its failed attempt names this log"
        );
        assert!(store.journal().job_dir(running).exists());
        assert!(future.exists());
        assert_eq!(batch_first_attempt("batch-17-3"), Some(17));
        assert_eq!(batch_first_attempt("probes"), None);
    }
}
