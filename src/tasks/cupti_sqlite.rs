//! Writes recorded CUDA activity ([`Activity`]) as `trace.sqlite` through the
//! trace layer's [`TraceWriter`], in the table layout of
//! `nsys export --type sqlite`, so that one analyser reads both.

use std::path::Path;

use crate::trace::records::{global_pid, global_tid};
use crate::trace::{Gpu, Kernel, Memcpy, Memset, Nvtx, Runtime, TraceWriter};

use super::cupti::Activity;
use super::error::TaskError;

fn trace_error(e: crate::trace::TraceError) -> TaskError {
    TaskError::Trace(e)
}

/// Writes `activity` to `path`; `gpus` are (CUDA device id, name, UUID).
pub fn write(
    activity: &Activity,
    gpus: &[(u32, String, String)],
    path: &Path,
) -> Result<(), TaskError> {
    let pid = std::process::id();
    let gpid = global_pid(pid);
    let mut w = TraceWriter::create(path).map_err(trace_error)?;
    for k in &activity.kernels {
        let dim = |v: [i32; 3]| v.map(|x| x.max(0) as u32);
        w.push_kernel(&Kernel {
            start: k.start as i64,
            end: k.end as i64,
            device_id: k.device_id,
            context_id: k.context_id,
            stream_id: k.stream_id,
            correlation_id: k.correlation_id,
            global_pid: Some(gpid),
            grid: dim(k.grid),
            block: dim(k.block),
            static_shared_memory: k.static_shared_memory.max(0) as u32,
            dynamic_shared_memory: k.dynamic_shared_memory.max(0) as u32,
            registers_per_thread: u32::from(k.registers_per_thread),
            name: k.name.clone(),
            short_name: None,
        })
        .map_err(trace_error)?;
    }
    for m in &activity.memcpys {
        w.push_memcpy(&Memcpy {
            start: m.start as i64,
            end: m.end as i64,
            device_id: m.device_id,
            context_id: m.context_id,
            stream_id: m.stream_id,
            correlation_id: m.correlation_id,
            global_pid: Some(gpid),
            bytes: m.bytes,
            copy_kind: u32::from(m.copy_kind),
            src_kind: u32::from(m.src_kind),
            dst_kind: u32::from(m.dst_kind),
        })
        .map_err(trace_error)?;
    }
    for m in &activity.memsets {
        w.push_memset(&Memset {
            start: m.start as i64,
            end: m.end as i64,
            device_id: m.device_id,
            context_id: m.context_id,
            stream_id: m.stream_id,
            correlation_id: m.correlation_id,
            global_pid: Some(gpid),
            bytes: m.bytes,
            value: m.value,
            mem_kind: u32::from(m.dst_kind),
        })
        .map_err(trace_error)?;
    }
    for a in &activity.runtime {
        w.push_runtime(&Runtime {
            start: a.start as i64,
            end: a.end as i64,
            global_tid: global_tid(a.process_id, a.thread_id),
            correlation_id: a.correlation_id,
            name: a.name.clone(),
            return_value: a.return_value as i32,
            driver: a.driver,
        })
        .map_err(trace_error)?;
    }
    let main_tid = global_tid(pid, pid);
    for r in &activity.ranges {
        w.push_nvtx(&Nvtx {
            start: r.start_ns as i64,
            end: Some(r.end_ns as i64),
            text: r.name.clone(),
            domain: None,
            global_tid: main_tid,
        })
        .map_err(trace_error)?;
    }
    for (id, name, uuid) in gpus {
        w.push_gpu(&Gpu {
            id: *id,
            name: name.clone(),
            uuid: Some(uuid.clone()),
            ..Gpu::default()
        })
        .map_err(trace_error)?;
    }
    w.finish().map_err(trace_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::cupti::{ApiCall, Kernel, Memory};
    use crate::tasks::nvtx::Range;
    use rusqlite::Connection;

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
                driver: false,
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
