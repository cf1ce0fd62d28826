//! The state database's schema and connection settings.
//!
//! - `runs`: one row per recorded key (a key is recorded once); `seq` is the
//!   commit order. Outputs are a compact binary list (`record::encode_outputs`)
//!   sorted by name; key parts are JSON; the environment is a reference into
//!   `envs`, since most runs of a study share one environment record.
//! - `node_runs`: each node id's current run (the one last committed or
//!   materialized for it). Two nodes with one key share a run.
//! - `attempts`: every start of a task, with its owner process, so that attempts
//!   left `running` by a dead process can be reported as `interrupted`.
//! - `file_stats`: the stat cache (inputs and materialized outputs): a file whose
//!   stat is unchanged since it was hashed is not hashed again.
//! - `generation`: one counter that triggers bump on every change to `runs`,
//!   `node_runs`, `attempts` and `envs`, so a reader can tell in one query
//!   whether anything a verdict depends on was recorded since it last looked
//!   (the no-op snapshot, `engine::noop`). `file_stats` is left out: it only
//!   saves hashing and never changes a verdict.
//!
//! Version 2 added `generation`; version 3 added `attempts.failure` (the
//! failure as JSON: kind, exit status, log) and `attempts.job` (the cluster
//! job an attempt runs as, JSON; see `jobs`) and `env_probes` (the
//! environment of a cluster's compute nodes, by the job resources that
//! reach them); version 5 added `staged_runs` (a finished attempt whose
//! outputs are in `objects/` and `out/` but whose run is not committed yet:
//! the next process adopts it if the one that staged it died, see
//! `batch.rs`); version 6 added `baselines` (copies of runs saved under a
//! name by `vitgraph baseline save`, for `vitgraph compare`: a copy, so
//! that a run measured again in place does not change a saved baseline);
//! version 7 added `summaries` (a measurement's headline metrics as
//! `compare` reads them, by its `results.json` object's hash: written when
//! the run is recorded or first compared, so that a comparison reads 90
//! bytes instead of the file; see `tasks::summary`). A version-6 database
//! still opens read-only: it has no summaries, and `compare` reads the
//! files. An older database is brought up
//! to date in place when opened for writing (the statements are all `IF NOT
//! EXISTS`, and a missing column is added).

use std::path::Path;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::error::StoreError;

/// How long a command waits for another one's write transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// `PRAGMA user_version` of the schema below.
pub(crate) const SCHEMA_VERSION: i64 = 7;

/// The oldest `user_version` a read-only open accepts: what 7 added
/// (`summaries`) is a cache its readers do without.
const READ_COMPATIBLE: i64 = 6;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS envs (
    hash BLOB PRIMARY KEY,
    json TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    key             BLOB NOT NULL UNIQUE,
    node_id         TEXT NOT NULL,
    stage           TEXT NOT NULL,
    key_parts       TEXT NOT NULL,
    env_hash        BLOB NOT NULL REFERENCES envs(hash),
    outputs         BLOB NOT NULL,
    log             BLOB,
    started_at_ms   INTEGER NOT NULL,
    duration_ms     INTEGER NOT NULL,
    committed_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS node_runs (
    node_id TEXT PRIMARY KEY,
    stage   TEXT NOT NULL,
    run_seq INTEGER NOT NULL REFERENCES runs(seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attempts (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id        TEXT NOT NULL,
    key            BLOB NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'interrupted')),
    host           TEXT NOT NULL,
    pid            INTEGER NOT NULL,
    pid_start      INTEGER NOT NULL,
    started_at_ms  INTEGER NOT NULL,
    finished_at_ms INTEGER,
    message        TEXT,
    failure        TEXT,
    job            TEXT,
    slot           TEXT
);
CREATE INDEX IF NOT EXISTS attempts_by_node ON attempts(node_id, id);
CREATE INDEX IF NOT EXISTS attempts_running ON attempts(status) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS file_stats (
    path        TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    ctime_ns    INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    hash        BLOB NOT NULL,
    recorded_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS env_probes (
    signature    TEXT PRIMARY KEY,
    facets       TEXT NOT NULL,
    record       TEXT NOT NULL,
    probed_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS staged_runs (
    attempt       INTEGER PRIMARY KEY,
    node_id       TEXT NOT NULL,
    stage         TEXT NOT NULL,
    key           BLOB NOT NULL,
    key_parts     TEXT NOT NULL,
    env           TEXT NOT NULL,
    outputs       BLOB NOT NULL,
    log           BLOB,
    started_at_ms INTEGER NOT NULL,
    duration_ms   INTEGER NOT NULL,
    replace_run   INTEGER NOT NULL,
    adopt_run     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS baselines (
    name          TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    stage         TEXT NOT NULL,
    key           BLOB NOT NULL,
    key_parts     TEXT NOT NULL,
    env_hash      BLOB NOT NULL REFERENCES envs(hash),
    outputs       BLOB NOT NULL,
    log           BLOB,
    started_at_ms INTEGER NOT NULL,
    duration_ms   INTEGER NOT NULL,
    saved_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (name, node_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summaries (
    object BLOB PRIMARY KEY,
    data   BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS generation (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    n  INTEGER NOT NULL
);
INSERT OR IGNORE INTO generation (id, n) VALUES (0, 0);
CREATE TRIGGER IF NOT EXISTS generation_runs_insert AFTER INSERT ON runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_runs_update AFTER UPDATE ON runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_runs_delete AFTER DELETE ON runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_node_runs_insert AFTER INSERT ON node_runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_node_runs_update AFTER UPDATE ON node_runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_node_runs_delete AFTER DELETE ON node_runs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_attempts_insert AFTER INSERT ON attempts
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_attempts_update AFTER UPDATE ON attempts
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_attempts_delete AFTER DELETE ON attempts
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_envs_insert AFTER INSERT ON envs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_envs_update AFTER UPDATE ON envs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS generation_envs_delete AFTER DELETE ON envs
    BEGIN UPDATE generation SET n = n + 1 WHERE id = 0; END;
";

/// Opens (creating if asked) the database and brings its schema up to date.
pub(crate) fn open_writable(db_path: &Path, create: bool) -> Result<Connection, StoreError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let err = |e| StoreError::db(db_path, e);
    let mut conn = Connection::open_with_flags(db_path, flags).map_err(err)?;
    configure(&conn).map_err(err)?;
    // WAL lets readers (`status`) run beside a writer. It is persistent in the
    // file. Some network file systems refuse it; SQLite then keeps its rollback
    // journal, which is slower but equally safe, so the answer is not checked.
    set_wal(&conn).map_err(err)?;
    // Closing the last connection would copy the WAL back into the database
    // and sync both: about 10 ms at the end of every command that wrote. The
    // WAL is checkpointed as it grows instead (every 1,000 pages, during a
    // commit), so it stays beside the database between commands.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(err)?;
    migrate(&mut conn, db_path)?;
    conn.execute_batch(OWN_GENERATION).map_err(err)?;
    Ok(conn)
}

/// Switches the database to WAL. On a new database another process may be
/// switching it at the same moment, and SQLite then answers "busy" at once,
/// without its busy handler: wait and try again, as the busy timeout would.
fn set_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_mode) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Counts, per connection, the bumps of `generation` this connection made
/// (TEMP objects belong to the connection, and a TEMP trigger fires only for
/// its own changes): a process that sees the counter moved by exactly its
/// own bumps knows no other process recorded anything meanwhile.
const OWN_GENERATION: &str = "
CREATE TEMP TABLE IF NOT EXISTS own_generation (n INTEGER NOT NULL);
INSERT INTO own_generation (n) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM own_generation);
CREATE TEMP TRIGGER IF NOT EXISTS own_generation_bump AFTER UPDATE ON main.generation
    BEGIN UPDATE own_generation SET n = n + 1; END;
";

/// Opens the database without writing to it (for a read-only workspace).
pub(crate) fn open_read_only(db_path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let err = |e| StoreError::db(db_path, e);
    let conn = Connection::open_with_flags(db_path, flags).map_err(err)?;
    configure(&conn).map_err(err)?;
    let found = check_version(&conn, db_path)?;
    if found < READ_COMPATIBLE {
        return Err(StoreError::SchemaTooOld {
            path: db_path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    // Two vitgraph processes share the database: wait for the other's write
    // transaction instead of failing at once.
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // In WAL mode NORMAL syncs at checkpoints only: a power cut may lose the
    // last transactions but never corrupts, and a lost run is simply rebuilt.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // `status` reads every run once per process: map the file instead of
    // copying each page through the page cache, and keep the pages read.
    conn.pragma_update(None, "mmap_size", 1i64 << 30)?;
    // Reads go through the map; the page cache holds what a write
    // transaction changes (16 MB: at 64 MB a 100,000-node build kept 47 MB
    // of pages per connection).
    conn.pragma_update(None, "cache_size", -16384)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

fn check_version(conn: &Connection, db_path: &Path) -> Result<i64, StoreError> {
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| StoreError::db(db_path, e))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            path: db_path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found)
}

fn migrate(conn: &mut Connection, db_path: &Path) -> Result<(), StoreError> {
    if check_version(conn, db_path)? == SCHEMA_VERSION {
        return Ok(());
    }
    let err = |e| StoreError::db(db_path, e);
    // IMMEDIATE: two processes creating the schema at once take turns.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    tx.execute_batch(SCHEMA).map_err(err)?;
    // A table made by an older version lacks the columns added since.
    for column in ["failure", "job", "slot"] {
        let has: bool = tx
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('attempts') WHERE name = ?1",
                [column],
                |r| r.get::<_, i64>(0),
            )
            .map_err(err)?
            > 0;
        if !has {
            tx.execute_batch(&format!("ALTER TABLE attempts ADD COLUMN {column} TEXT"))
                .map_err(err)?;
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(err)?;
    tx.commit().map_err(err)
}
