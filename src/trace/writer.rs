//! [`TraceWriter`]: writes trace records into a SQLite file with the table
//! layout of `nsys export --type sqlite`, so one reader serves Nsight exports,
//! CUPTI recordings and imported PyTorch-profiler traces.
//!
//! The file is written under a temporary name in the destination's folder in
//! one transaction, and renamed into place by [`TraceWriter::finish`]; a
//! writer dropped before `finish` removes its temporary file, so a reader
//! never sees a half-written trace.
//!
//! SQLite runs on a thread of its own: the producer (an importer parsing
//! JSON, a CUPTI buffer callback) fills batches of rows and hands them over
//! through a bounded queue, so parsing and inserting overlap. Statements run
//! in the order they were queued; the first failure is reported by the next
//! call after it, and at the latest by `finish`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::{params, Connection};

use super::error::TraceError;
use super::records::{short_name, Gpu, Kernel, Memcpy, Memset, Nvtx, Runtime};
use super::schema;

/// The producer named in `META_DATA_EXPORT`.
pub const PRODUCER: &str = "vitgraph";

/// How many rows of each kind a finished trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteSummary {
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
    pub runtime: u64,
    pub nvtx: u64,
    pub gpus: u64,
}

/// Work for the SQLite thread.
type Job = Box<dyn FnOnce(&Connection) -> rusqlite::Result<()> + Send>;

/// The SQLite thread: it runs queued jobs until the queue closes, skipping
/// the rest after the first failure, and hands back the connection and that
/// failure.
struct Sink {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<(Connection, rusqlite::Result<()>)>>,
    /// Set by the thread at its first failure, so the producer stops early.
    failed: Arc<AtomicBool>,
}

/// Batches queued ahead of the SQLite thread (each up to `BATCH_ROWS` rows).
const QUEUE: usize = 8;

impl Sink {
    fn start(conn: Connection) -> Sink {
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let failed = Arc::new(AtomicBool::new(false));
        let flag = failed.clone();
        let thread = std::thread::spawn(move || {
            let mut result = Ok(());
            for job in rx {
                if result.is_ok() {
                    result = job(&conn);
                    if result.is_err() {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
            }
            (conn, result)
        });
        Sink {
            tx: Some(tx),
            thread: Some(thread),
            failed,
        }
    }

    /// Queues a job; false once the thread has failed (or is gone).
    fn send(&self, job: Job) -> bool {
        !self.failed.load(Ordering::Relaxed)
            && self.tx.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Closes the queue and waits: the connection and the first failure
    /// (None when the thread is gone: joined before, or it panicked).
    fn join(&mut self) -> Option<(Connection, rusqlite::Result<()>)> {
        drop(self.tx.take());
        self.thread.take().and_then(|t| t.join().ok())
    }
}

/// The error when the SQLite thread is gone without a failure of its own.
fn thread_gone() -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(std::io::Error::other(
        "the trace writer's SQLite thread ended early",
    )))
}

/// Writes one trace file. `create`, then `push_*` in any order, then `finish`.
pub struct TraceWriter {
    sink: Sink,
    dest: PathBuf,
    tmp: PathBuf,
    strings: HashMap<String, i64>,
    domains: HashMap<String, i64>,
    summary: WriteSummary,
    kernels: Batch,
    memcpys: Batch,
    memsets: Batch,
    runtime: Batch,
}

/// Rows of one table waiting to be inserted, flattened: binding a batch
/// through one prepared statement is several times faster than a statement
/// lookup per row.
struct Batch {
    sql: &'static str,
    width: usize,
    cells: Vec<Option<i64>>,
}

/// Rows buffered per table before they are inserted.
const BATCH_ROWS: usize = 4096;

impl Batch {
    fn new(sql: &'static str, width: usize) -> Self {
        Batch {
            sql,
            width,
            cells: Vec::with_capacity(width * BATCH_ROWS),
        }
    }

    fn is_full(&self) -> bool {
        self.cells.len() >= self.width * BATCH_ROWS
    }

    /// The buffered rows as a job for the SQLite thread (None when empty).
    fn take(&mut self) -> Option<Job> {
        if self.cells.is_empty() {
            return None;
        }
        let cells = std::mem::replace(&mut self.cells, Vec::with_capacity(self.width * BATCH_ROWS));
        let (sql, width) = (self.sql, self.width);
        Some(Box::new(move |conn: &Connection| {
            let mut st = conn.prepare_cached(sql)?;
            for row in cells.chunks_exact(width) {
                for (i, v) in row.iter().enumerate() {
                    st.raw_bind_parameter(i + 1, v)?;
                }
                st.raw_execute()?;
            }
            Ok(())
        }))
    }
}

const INSERT_KERNEL: &str = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, \
    contextId, streamId, correlationId, globalPid, demangledName, shortName, mangledName, \
    registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, \
    dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, 0, 0, 0)";
const INSERT_MEMCPY: &str = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, \
    contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind, copyCount) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1)";
const INSERT_MEMSET: &str = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, \
    contextId, streamId, correlationId, globalPid, value, bytes, memKind) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
const INSERT_RUNTIME: &str = "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, \
    globalTid, correlationId, nameId, returnValue) VALUES (?1, ?2, ?7, ?3, ?4, ?5, ?6)";
const INSERT_NVTX: &str = "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, \
    domainId) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_STRING: &str = "INSERT INTO StringIds (id, value) VALUES (?1, ?2)";

impl TraceWriter {
    /// Starts a trace that `finish` will place at `path` (replacing any file there).
    pub fn create(path: &Path) -> Result<Self, TraceError> {
        let dest = path.to_path_buf();
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace.sqlite".into());
        let tmp = dest.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let conn = Connection::open(&tmp).map_err(|e| TraceError::write(&dest, e))?;
        // The temporary file is discarded on any failure, so no journal is needed.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; \
             PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = -65536;",
        )
        .and_then(|_| conn.execute_batch(&schema::create_sql()))
        .and_then(|_| conn.execute_batch("BEGIN"))
        .map_err(|e| TraceError::write(&dest, e))?;
        Ok(TraceWriter {
            sink: Sink::start(conn),
            dest,
            tmp,
            strings: HashMap::new(),
            domains: HashMap::new(),
            summary: WriteSummary::default(),
            kernels: Batch::new(INSERT_KERNEL, 18),
            memcpys: Batch::new(INSERT_MEMCPY, 11),
            memsets: Batch::new(INSERT_MEMSET, 10),
            runtime: Batch::new(INSERT_RUNTIME, 7),
        })
    }

    fn err(&self, e: rusqlite::Error) -> TraceError {
        TraceError::write(&self.dest, e)
    }

    /// Queues a job for the SQLite thread. Once the thread has failed, its
    /// failure (the file is removed, and the writer is unusable).
    fn run(&mut self, job: Job) -> Result<(), TraceError> {
        if self.sink.send(job) {
            return Ok(());
        }
        let error = match self.sink.join() {
            Some((conn, result)) => {
                drop(conn);
                result.err().unwrap_or_else(thread_gone)
            }
            None => thread_gone(),
        };
        let _ = std::fs::remove_file(&self.tmp);
        Err(self.err(error))
    }

    /// The `StringIds` id of `s`, inserting it on first use.
    pub fn string_id(&mut self, s: &str) -> Result<i64, TraceError> {
        if let Some(&id) = self.strings.get(s) {
            return Ok(id);
        }
        let id = self.strings.len() as i64;
        let value = s.to_owned();
        self.run(Box::new(move |conn: &Connection| {
            conn.prepare_cached(INSERT_STRING)
                .and_then(|mut st| st.execute(params![id, value]))
                .map(drop)
        }))?;
        self.strings.insert(s.to_owned(), id);
        Ok(id)
    }

    pub fn push_kernel(&mut self, k: &Kernel) -> Result<(), TraceError> {
        let name = self.string_id(&k.name)?;
        let short = match &k.short_name {
            Some(s) => self.string_id(s)?,
            None => self.string_id(short_name(&k.name))?,
        };
        let n = |v: u32| Some(i64::from(v));
        self.kernels.cells.extend_from_slice(&[
            Some(k.start),
            Some(k.end),
            n(k.device_id),
            n(k.context_id),
            n(k.stream_id),
            n(k.correlation_id),
            k.global_pid,
            Some(name),
            Some(short),
            n(k.registers_per_thread),
            n(k.grid[0]),
            n(k.grid[1]),
            n(k.grid[2]),
            n(k.block[0]),
            n(k.block[1]),
            n(k.block[2]),
            n(k.static_shared_memory),
            n(k.dynamic_shared_memory),
        ]);
        self.summary.kernels += 1;
        self.flush_if_full()
    }

    pub fn push_memcpy(&mut self, m: &Memcpy) -> Result<(), TraceError> {
        let n = |v: u32| Some(i64::from(v));
        self.memcpys.cells.extend_from_slice(&[
            Some(m.start),
            Some(m.end),
            n(m.device_id),
            n(m.context_id),
            n(m.stream_id),
            n(m.correlation_id),
            m.global_pid,
            Some(m.bytes as i64),
            n(m.copy_kind),
            n(m.src_kind),
            n(m.dst_kind),
        ]);
        self.summary.memcpys += 1;
        self.flush_if_full()
    }

    pub fn push_memset(&mut self, m: &Memset) -> Result<(), TraceError> {
        let n = |v: u32| Some(i64::from(v));
        self.memsets.cells.extend_from_slice(&[
            Some(m.start),
            Some(m.end),
            n(m.device_id),
            n(m.context_id),
            n(m.stream_id),
            n(m.correlation_id),
            m.global_pid,
            n(m.value),
            Some(m.bytes as i64),
            n(m.mem_kind),
        ]);
        self.summary.memsets += 1;
        self.flush_if_full()
    }

    pub fn push_runtime(&mut self, r: &Runtime) -> Result<(), TraceError> {
        let name = self.string_id(&r.name)?;
        self.runtime.cells.extend_from_slice(&[
            Some(r.start),
            Some(r.end),
            Some(r.global_tid),
            Some(i64::from(r.correlation_id)),
            Some(name),
            Some(i64::from(r.return_value)),
            Some(i64::from(r.driver)),
        ]);
        self.summary.runtime += 1;
        self.flush_if_full()
    }

    fn flush_if_full(&mut self) -> Result<(), TraceError> {
        let full = self.kernels.is_full()
            || self.memcpys.is_full()
            || self.memsets.is_full()
            || self.runtime.is_full();
        if full {
            self.flush()?;
        }
        Ok(())
    }

    /// Queues every buffered row.
    fn flush(&mut self) -> Result<(), TraceError> {
        let jobs: Vec<Job> = [
            self.kernels.take(),
            self.memcpys.take(),
            self.memsets.take(),
            self.runtime.take(),
        ]
        .into_iter()
        .flatten()
        .collect();
        for job in jobs {
            self.run(job)?;
        }
        Ok(())
    }

    pub fn push_nvtx(&mut self, n: &Nvtx) -> Result<(), TraceError> {
        let domain = match &n.domain {
            Some(d) => Some(self.domain_id(d, n.start, n.global_tid)?),
            None => None,
        };
        let event_type = if n.end.is_some() {
            schema::NVTX_PUSH_POP_RANGE
        } else {
            schema::NVTX_MARK
        };
        let (start, end, text, tid) = (n.start, n.end, n.text.clone(), n.global_tid);
        self.run(Box::new(move |conn: &Connection| {
            conn.prepare_cached(INSERT_NVTX)
                .and_then(|mut st| st.execute(params![start, end, event_type, text, tid, domain]))
                .map(drop)
        }))?;
        self.summary.nvtx += 1;
        Ok(())
    }

    /// The `domainId` of an NVTX domain, recording its creation on first use
    /// as Nsight does (an `NvtxDomainCreate` event whose `text` is the name).
    fn domain_id(&mut self, domain: &str, at: i64, tid: i64) -> Result<i64, TraceError> {
        if let Some(&id) = self.domains.get(domain) {
            return Ok(id);
        }
        let id = self.domains.len() as i64 + 1;
        let name = domain.to_owned();
        self.run(Box::new(move |conn: &Connection| {
            conn.prepare_cached(INSERT_NVTX)
                .and_then(|mut st| {
                    st.execute(params![
                        at,
                        None::<i64>,
                        schema::NVTX_DOMAIN_CREATE,
                        name,
                        tid,
                        id
                    ])
                })
                .map(drop)
        }))?;
        self.domains.insert(domain.to_owned(), id);
        Ok(id)
    }

    pub fn push_gpu(&mut self, g: &Gpu) -> Result<(), TraceError> {
        let g = g.clone();
        self.run(Box::new(move |conn: &Connection| {
            conn.execute(
                "INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, totalMemory, smCount, \
                 uuid, computeMajor, computeMinor, cuDevice) \
                 VALUES (0, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?1)",
                params![
                    g.id,
                    g.name,
                    g.bus_location,
                    g.total_memory.map(|m| m as i64),
                    g.sm_count,
                    g.uuid,
                    g.compute_major,
                    g.compute_minor
                ],
            )
            .map(drop)
        }))?;
        self.summary.gpus += 1;
        Ok(())
    }

    /// Sets `globalPid` of every kernel, memcpy and memset written without one.
    /// Importers use it once the launching process is known.
    pub fn fill_missing_global_pid(&mut self, global_pid: i64) -> Result<(), TraceError> {
        self.update_gpu_rows("globalPid = ?1 WHERE globalPid IS NULL", global_pid)
    }

    /// Sets `globalPid` of every kernel, memcpy and memset written with
    /// `global_pid` back to NULL (unknown). Importers use it when the process
    /// they wrote GPU rows with turns out not to be the only one.
    pub fn clear_global_pid(&mut self, global_pid: i64) -> Result<(), TraceError> {
        self.update_gpu_rows("globalPid = NULL WHERE globalPid = ?1", global_pid)
    }

    /// `UPDATE <table> SET <set_where>` on the kernel, memcpy and memset
    /// tables, with `?1` bound to `global_pid`.
    fn update_gpu_rows(
        &mut self,
        set_where: &'static str,
        global_pid: i64,
    ) -> Result<(), TraceError> {
        self.flush()?;
        self.run(Box::new(move |conn: &Connection| {
            for table in ["KERNEL", "MEMCPY", "MEMSET"] {
                let sql = format!("UPDATE CUPTI_ACTIVITY_KIND_{table} SET {set_where}");
                conn.execute(&sql, [global_pid])?;
            }
            Ok(())
        }))
    }

    /// Commits, closes and renames the file into place.
    pub fn finish(mut self) -> Result<WriteSummary, TraceError> {
        self.flush()?;
        let meta = schema::export_metadata();
        self.run(Box::new(move |conn: &Connection| {
            let mut st =
                conn.prepare("INSERT INTO META_DATA_EXPORT (name, value) VALUES (?1, ?2)")?;
            for (name, value) in &meta {
                st.execute(params![name, value])?;
            }
            drop(st);
            conn.execute_batch("COMMIT")
        }))?;
        let Some((conn, committed)) = self.sink.join() else {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(self.err(thread_gone()));
        };
        let result = committed
            .and_then(|()| conn.close().map_err(|(_, e)| e))
            .map_err(|e| self.err(e))
            .and_then(|()| {
                std::fs::rename(&self.tmp, &self.dest).map_err(|e| TraceError::io(&self.dest, e))
            });
        if result.is_err() {
            // Drop no longer owns the connection: remove the partial file here.
            let _ = std::fs::remove_file(&self.tmp);
        }
        result.map(|()| self.summary)
    }

    /// The rows pushed so far.
    pub fn summary(&self) -> WriteSummary {
        self.summary
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        // Unfinished: stop the SQLite thread, close the connection, then
        // remove the partial file.
        if let Some((conn, _)) = self.sink.join() {
            drop(conn);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
