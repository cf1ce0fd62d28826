//! Writes recorded CUDA activity ([`Activity`]) as `trace.sqlite` in the
//! table layout of `nsys export --type sqlite` (StringIds,
//! CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET / _RUNTIME, NVTX_EVENTS,
//! TARGET_INFO_GPU), so that one analyser reads both. Only the columns the
//! analyser uses are written; the rest are absent, as in older exports.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{params, Connection};

use super::cupti::Activity;
use super::error::TaskError;

/// NVTX push/pop range, as nsys numbers event types.
const NVTX_PUSH_POP_RANGE: i64 = 59;

const SCHEMA: &str = "
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    srcKind INTEGER, dstKind INTEGER, copyCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
    memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
    uuid TEXT, cuDevice INTEGER);
";

fn sql_error(e: rusqlite::Error) -> TaskError {
    TaskError::Trace {
        message: format!("writing trace.sqlite: {e}"),
    }
}

/// nsys packs the process id into bits 24.. of `globalPid` and the thread
/// into the low 24 bits of `globalTid`.
fn global_pid(pid: u32) -> i64 {
    i64::from(pid) << 24
}

/// Writes `activity` to `path` (through a temporary file and a rename).
pub fn write(
    activity: &Activity,
    gpus: &[(u32, String, String)],
    path: &Path,
) -> Result<(), TaskError> {
    let tmp = path.with_extension("sqlite.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut db = Connection::open(&tmp).map_err(sql_error)?;
    db.execute_batch(SCHEMA).map_err(sql_error)?;
    let tx = db.transaction().map_err(sql_error)?;
    let pid = std::process::id();
    let gpid = global_pid(pid);
    let mut strings: HashMap<String, i64> = HashMap::new();
    {
        let mut intern = tx
            .prepare("INSERT INTO StringIds (id, value) VALUES (?1, ?2)")
            .map_err(sql_error)?;
        let mut id_of = |s: &str| -> Result<i64, TaskError> {
            if let Some(id) = strings.get(s) {
                return Ok(*id);
            }
            let id = strings.len() as i64 + 1;
            intern.execute(params![id, s]).map_err(sql_error)?;
            strings.insert(s.to_owned(), id);
            Ok(id)
        };
        let mut kernel = tx.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)").map_err(sql_error)?;
        for k in &activity.kernels {
            let name = id_of(&k.name)?;
            kernel
                .execute(params![
                    k.start as i64,
                    k.end as i64,
                    k.device_id,
                    k.context_id,
                    k.stream_id,
                    k.correlation_id,
                    gpid,
                    name,
                    name,
                    name,
                    k.registers_per_thread,
                    k.grid[0],
                    k.grid[1],
                    k.grid[2],
                    k.block[0],
                    k.block[1],
                    k.block[2],
                    k.static_shared_memory,
                    k.dynamic_shared_memory
                ])
                .map_err(sql_error)?;
        }
        let mut memcpy = tx.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,1)").map_err(sql_error)?;
        for m in &activity.memcpys {
            memcpy
                .execute(params![
                    m.start as i64,
                    m.end as i64,
                    m.device_id,
                    m.context_id,
                    m.stream_id,
                    m.correlation_id,
                    gpid,
                    m.bytes as i64,
                    m.copy_kind,
                    m.src_kind,
                    m.dst_kind
                ])
                .map_err(sql_error)?;
        }
        let mut memset = tx
            .prepare(
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
            )
            .map_err(sql_error)?;
        for m in &activity.memsets {
            memset
                .execute(params![
                    m.start as i64,
                    m.end as i64,
                    m.device_id,
                    m.context_id,
                    m.stream_id,
                    m.correlation_id,
                    gpid,
                    m.value,
                    m.bytes as i64,
                    m.dst_kind
                ])
                .map_err(sql_error)?;
        }
        let mut runtime = tx
            .prepare("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1,?2,0,?3,?4,?5,?6)")
            .map_err(sql_error)?;
        for a in &activity.runtime {
            let name = id_of(&a.name)?;
            let tid = global_pid(a.process_id) | i64::from(a.thread_id & 0xFF_FFFF);
            runtime
                .execute(params![
                    a.start as i64,
                    a.end as i64,
                    tid,
                    a.correlation_id,
                    name,
                    a.return_value
                ])
                .map_err(sql_error)?;
        }
        let main_tid = gpid | i64::from(pid & 0xFF_FFFF);
        let mut nvtx = tx.prepare("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, domainId) VALUES (?1,?2,?3,?4,?5,?5,0)").map_err(sql_error)?;
        for r in &activity.ranges {
            nvtx.execute(params![
                r.start_ns as i64,
                r.end_ns as i64,
                NVTX_PUSH_POP_RANGE,
                r.name,
                main_tid
            ])
            .map_err(sql_error)?;
        }
        let mut gpu = tx
            .prepare("INSERT INTO TARGET_INFO_GPU VALUES (0, ?1, ?2, ?3, ?1)")
            .map_err(sql_error)?;
        for (id, name, uuid) in gpus {
            gpu.execute(params![id, name, uuid]).map_err(sql_error)?;
        }
    }
    tx.commit().map_err(sql_error)?;
    drop(db);
    std::fs::rename(&tmp, path).map_err(|source| TaskError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::cupti::{ApiCall, Kernel, Memory};
    use crate::tasks::nvtx::Range;

    fn kernel(start: u64, name: &str, correlation_id: u32) -> Kernel {
        Kernel {
            start,
            end: start + 100,
            device_id: 0,
            context_id: 1,
            stream_id: 7,
            correlation_id,
            grid: [4, 1, 1],
            block: [128, 1, 1],
            registers_per_thread: 32,
            static_shared_memory: 0,
            dynamic_shared_memory: 1024,
            name: name.to_owned(),
        }
    }

    #[test]
    fn activity_reads_back_through_the_nsys_layout() {
        let memcpy = Memory {
            start: 10,
            end: 60,
            bytes: 4096,
            copy_kind: 1,
            src_kind: 2,
            dst_kind: 3,
            device_id: 0,
            context_id: 1,
            stream_id: 7,
            correlation_id: 1,
            value: 0,
        };
        let activity = Activity {
            kernels: vec![
                kernel(100, "ampere_gemm", 2),
                kernel(300, "layer_norm", 3),
                kernel(500, "ampere_gemm", 4),
            ],
            memcpys: vec![memcpy],
            memsets: vec![],
            runtime: vec![ApiCall {
                start: 90,
                end: 95,
                cbid: 211,
                process_id: 42,
                thread_id: 43,
                correlation_id: 2,
                return_value: 0,
                name: "cudaLaunchKernel_v7000".into(),
            }],
            ranges: vec![Range {
                name: "measure".into(),
                start_ns: 50,
                end_ns: 700,
            }],
            dropped: 0,
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("trace.sqlite");
        write(
            &activity,
            &[(0, "NVIDIA H200".into(), "GPU-1".into())],
            &path,
        )
        .expect("writes");
        let db = Connection::open(&path).expect("opens");
        let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).expect("query") };
        assert_eq!(count("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 3);
        assert_eq!(
            count("SELECT COUNT(*) FROM StringIds"),
            3,
            "names are interned once"
        );
        assert_eq!(
            count("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName WHERE s.value = 'ampere_gemm'"),
            2
        );
        assert_eq!(count("SELECT copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"), 1);
        let launch: String = db
            .query_row(
                "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k USING (correlationId) JOIN StringIds s ON s.id = r.nameId",
                [],
                |r| r.get(0),
            )
            .expect("runtime joins kernel");
        assert_eq!(launch, "cudaLaunchKernel_v7000");
        let (text, event_type): (String, i64) = db
            .query_row("SELECT text, eventType FROM NVTX_EVENTS", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("nvtx row");
        assert_eq!((text.as_str(), event_type), ("measure", 59));
        assert_eq!(
            count("SELECT COUNT(*) FROM TARGET_INFO_GPU WHERE name = 'NVIDIA H200'"),
            1
        );
        assert!(!dir.path().join("trace.sqlite.tmp").exists());
    }
}
