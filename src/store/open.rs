//! The [`Store`] handle: opening `cache/`, cleaning up after dead processes,
//! and staging directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, ErrorCode, TransactionBehavior};

use super::error::{IoContext, StoreError};
use super::fileio::{now_ms, remove_tree};
use super::memo::StatCache;
use super::owner::{Liveness, Owner};
use super::schema;

/// Tells backup and archiving tools that `cache/` can be skipped.
const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file marks vitgraph's content-addressed store; it can be rebuilt.\n";

/// The content-addressed store of one workspace (`<root>/cache/`). One per
/// process; shared between threads.
pub struct Store {
    pub(super) root: PathBuf,
    pub(super) cache: PathBuf,
    pub(super) db_path: PathBuf,
    pub(super) db: Mutex<Connection>,
    pub(super) stats: Mutex<StatCache>,
    pub(super) owner: Owner,
    pub(super) read_only: bool,
    /// Files whose ctime is this close to when their stat was recorded are
    /// hashed again: a write in the same timestamp tick leaves the stat unchanged.
    pub(super) racy_window_ns: AtomicI64,
    pub(super) hashes: AtomicU64,
    pub(super) staging_seq: AtomicU64,
}

/// The no-op snapshot's file name under `cache/`.
const SNAPSHOT_FILE: &str = "noop.snapshot";

impl Store {
    /// Opens or creates `<root>/cache/`, then removes staging leftovers of dead
    /// processes and marks the attempts they left `running` as `interrupted`.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        let cache = root.join("cache");
        for dir in [
            cache.join("objects"),
            cache.join("staging"),
            cache.join("locks"),
        ] {
            fs::create_dir_all(&dir).ctx("create directory", &dir)?;
        }
        let tag = cache.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs::write(&tag, CACHEDIR_TAG).ctx("write", &tag)?;
        }
        let db_path = cache.join("state.sqlite");
        let conn = schema::open_writable(&db_path, true)?;
        let store = Store::with_connection(root, conn, false);
        store.journal().end_dead_task_groups();
        store.remove_dead_staging();
        store.remove_dead_scratch();
        store.adopt_staged_runs()?;
        store.interrupt_dead_attempts()?;
        Ok(store)
    }

    /// A view for `status` and `explain` that creates nothing; `Ok(None)` when
    /// nothing was ever recorded. Falls back to a read-only connection when the
    /// workspace is not writable.
    pub fn open_existing(root: &Path) -> Result<Option<Store>, StoreError> {
        let db_path = root.join("cache").join("state.sqlite");
        if !db_path.is_file() {
            return Ok(None);
        }
        let (conn, read_only) = match schema::open_writable(&db_path, false) {
            Ok(conn) => (conn, false),
            Err(StoreError::Database { source, .. })
                if matches!(
                    source.sqlite_error_code(),
                    Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied)
                ) =>
            {
                (schema::open_read_only(&db_path)?, true)
            }
            Err(other) => return Err(other),
        };
        let store = Store::with_connection(root, conn, read_only);
        // Before anything is judged: a killed build's tasks may still write.
        store.journal().end_dead_task_groups();
        Ok(Some(store))
    }

    fn with_connection(root: &Path, conn: Connection, read_only: bool) -> Store {
        let cache = root.join("cache");
        Store {
            root: root.to_path_buf(),
            db_path: cache.join("state.sqlite"),
            cache,
            db: Mutex::new(conn),
            stats: Mutex::new(StatCache::default()),
            owner: Owner::current(),
            read_only,
            racy_window_ns: AtomicI64::new(crate::clock::racy_window_ns()),
            hashes: AtomicU64::new(0),
            staging_seq: AtomicU64::new(0),
        }
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/cache/`.
    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    /// `cache/state.sqlite`.
    pub fn database_path(&self) -> &Path {
        &self.db_path
    }

    /// The no-op snapshot's file (`engine::noop` owns what it holds).
    pub fn snapshot_path(&self) -> PathBuf {
        self.cache.join(SNAPSHOT_FILE)
    }

    /// Whether the workspace at `root` has a no-op snapshot (asked before
    /// anything is opened or created).
    pub fn has_snapshot(root: &Path) -> bool {
        root.join("cache").join(SNAPSHOT_FILE).is_file()
    }

    /// Whether this handle cannot write (a read-only workspace opened with `open_existing`).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// How many files this handle has hashed (stat-cache misses and commits).
    pub fn hashes_computed(&self) -> u64 {
        self.hashes.load(Ordering::Relaxed)
    }

    pub(super) fn staging_host_dir(&self) -> PathBuf {
        self.cache.join("staging").join(&self.owner.host)
    }

    /// The database connection; a panic in another thread does not make it unusable.
    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.db
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn db_err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::db(&self.db_path, e)
    }

    /// Removes this host's staging directories whose owner process is dead.
    /// Best effort: a directory that cannot be removed now is retried next time.
    pub(super) fn remove_dead_staging(&self) -> u64 {
        let host_dir = self.staging_host_dir();
        let Ok(entries) = fs::read_dir(&host_dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(owner) = Owner::from_staging_name(&self.owner.host, &name.to_string_lossy())
            else {
                continue;
            };
            if owner.liveness(&self.owner.host) == Liveness::Dead
                && remove_tree(&entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// Removes the materialization folders (`out/.vitgraph-tmp/<host>/`) of
    /// this host's dead processes: what a restore killed half-way left.
    pub(super) fn remove_dead_scratch(&self) -> u64 {
        let area = self.scratch_area();
        let Ok(entries) = fs::read_dir(&area) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".old").unwrap_or(&name);
            let Some(owner) = Owner::from_staging_name(&self.owner.host, name) else {
                continue;
            };
            if owner.liveness(&self.owner.host) == Liveness::Dead
                && super::objects::remove_any(&entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// Marks attempts left `running` by dead processes of this host as `interrupted`.
    fn interrupt_dead_attempts(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let dead: Vec<(i64, Owner)> = {
            let mut stmt = conn
                .prepare_cached(
                    // An attempt with a cluster job outlives its driver: the
                    // next driver adopts it (see `jobs`).
                    "SELECT id, host, pid, pid_start FROM attempts WHERE status = 'running' AND job IS NULL",
                )
                .map_err(|e| self.db_err(e))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        Owner {
                            host: r.get(1)?,
                            pid: r.get(2)?,
                            start: r.get(3)?,
                        },
                    ))
                })
                .map_err(|e| self.db_err(e))?;
            let all: Vec<(i64, Owner)> =
                rows.collect::<Result<_, _>>().map_err(|e| self.db_err(e))?;
            all.into_iter()
                .filter(|(_, o)| o.liveness(&self.owner.host) == Liveness::Dead)
                .collect()
        };
        if dead.is_empty() {
            return Ok(());
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        for (id, owner) in &dead {
            let message = format!(
                "process {} on `{}` ended without recording a result",
                owner.pid, owner.host
            );
            tx.execute(
                "UPDATE attempts SET status = 'interrupted', finished_at_ms = ?2, message = ?3
                 WHERE id = ?1 AND status = 'running'",
                params![id, now_ms(), message],
            )
            .map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))
    }

    /// Files whose ctime is this close to when their stat was recorded are
    /// hashed again (see `stat_cache`).
    pub fn racy_window_ns(&self) -> i64 {
        self.racy_window_ns.load(Ordering::Relaxed)
    }

    /// Sets the racy-timestamp window (tests use a short one instead of sleeping a second).
    #[cfg(test)]
    pub(crate) fn set_racy_window_ns(&self, ns: i64) {
        self.racy_window_ns.store(ns, Ordering::Relaxed);
    }
}

impl Drop for Store {
    /// A safety net for a command that ends without `flush_stat_cache` (an
    /// error path): what was learned is kept. Errors here only cost re-hashing.
    fn drop(&mut self) {
        let _ = self.hasher().flush();
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::super::test_support::{key, workspace};
    use super::super::AttemptStatus;
    use super::*;

    /// A pid that existed a moment ago and has exited (and been reaped). Its
    /// start time is 1 tick after boot, so a quick reuse of the pid by another
    /// process still reads as dead.
    fn dead_owner() -> Owner {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn `true`");
        let pid = child.id();
        child.wait().expect("wait for `true`");
        Owner::local(pid, 1)
    }

    #[test]
    fn attempts_of_dead_processes_become_interrupted() {
        let (dir, store) = workspace();
        let dead = dead_owner();
        store
            .begin_attempt_as(&dead, "dead", &key("k1"), None)
            .unwrap();
        store.journal().begin_attempt("alive", &key("k2")).unwrap();
        // Read-only views report it without writing.
        let view = Store::open_existing(dir.path())
            .unwrap()
            .expect("cache exists");
        let states = view.reader().load_states().unwrap();
        assert_eq!(
            states["dead"].last_attempt.as_ref().unwrap().status,
            AttemptStatus::Interrupted
        );
        assert_eq!(
            states["alive"].last_attempt.as_ref().unwrap().status,
            AttemptStatus::Running
        );

        drop(Store::open(dir.path()).unwrap());
        let status: String = store
            .conn()
            .query_row(
                "SELECT status FROM attempts WHERE node_id = 'dead'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(status, "interrupted");
        let message: String = store
            .conn()
            .query_row(
                "SELECT message FROM attempts WHERE node_id = 'dead'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(message.contains(&dead.pid.to_string()), "{message}");
    }

    #[test]
    fn staging_leftovers_of_dead_processes_are_removed_on_open() {
        let (dir, store) = workspace();
        let mine = store.objects().new_staging_dir().unwrap();
        let other = store.objects().new_staging_dir().unwrap();
        assert_ne!(mine, other);
        let dead = dead_owner();
        let leftover = store
            .staging_host_dir()
            .join(format!("{}0", dead.staging_prefix()));
        fs::create_dir_all(leftover.join("sub")).unwrap();
        fs::write(leftover.join("sub/partial.bin"), "half").unwrap();
        let foreign = dir.path().join("cache/staging/another-host/1-1-0");
        fs::create_dir_all(&foreign).unwrap();

        drop(Store::open(dir.path()).unwrap());
        assert!(!leftover.exists(), "dead owner's staging removed");
        assert!(
            mine.exists() && other.exists(),
            "a live process's staging is kept"
        );
        assert!(foreign.exists(), "other hosts' staging is left alone");
    }

    #[test]
    fn a_store_is_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Store>();
        shared::<StoreError>();
    }

    #[test]
    fn open_existing_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Store::open_existing(dir.path()).unwrap().is_none());
        assert!(!dir.path().join("cache").exists());
        drop(Store::open(dir.path()).unwrap());
        let view = Store::open_existing(dir.path())
            .unwrap()
            .expect("exists now");
        assert!(view.reader().load_states().unwrap().is_empty());
        assert_eq!(view.root(), dir.path());
    }

    #[test]
    fn a_version_6_database_still_opens_read_only_and_its_runs_read() {
        let (dir, store) = workspace();
        super::super::test_support::commit(&store, "a", "k1", &[("results.json", "{}")]);
        store
            .conn()
            .execute_batch("DROP TABLE summaries; PRAGMA user_version = 6;")
            .unwrap();
        drop(store);
        let db = dir.path().join("cache/state.sqlite");
        let conn = super::super::schema::open_read_only(&db).expect("version 6 reads");
        let view = Store::with_connection(dir.path(), conn, true);
        let runs = view
            .reader()
            .current_runs(crate::store::Holding::Measurements)
            .unwrap();
        assert_eq!((runs.len(), runs[0].summary.as_ref()), (1, None));
        // Opened for writing, it is brought up to date.
        drop(view);
        let store = Store::open(dir.path()).unwrap();
        let runs = store
            .reader()
            .current_runs(crate::store::Holding::Measurements)
            .unwrap();
        assert_eq!(runs.len(), 1);
        store
            .journal()
            .save_summaries(&[(runs[0].results.unwrap(), vec![1])])
            .unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_with_advice() {
        let (dir, store) = workspace();
        store
            .conn()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        drop(store);
        let err = Store::open(dir.path()).err().expect("refused");
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn a_damaged_database_names_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("cache")).unwrap();
        fs::write(dir.path().join("cache/state.sqlite"), vec![0x42u8; 8192]).unwrap();
        let err = Store::open(dir.path()).err().expect("refused");
        let help = miette::Diagnostic::help(&err)
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(err.to_string().contains("state.sqlite"), "{err}");
        assert!(
            help.contains("move it and its `-wal` and `-shm` files aside"),
            "{help}"
        );
    }
}
