//! Loading each activity table of a [`TraceFile`] into rows, and the whole
//! file into a [`Trace`] (kernels and runtime calls on two threads: they are
//! the two big tables).

use std::path::Path;

use super::error::TraceError;
use super::reader::{
    read_nvtx, GpuRow, KernelRow, MemcpyRow, MemsetRow, NameTable, Producer, RuntimeRow, Trace,
    TraceFile, KERNEL, MEMCPY, MEMSET, RUNTIME,
};

const ACTIVITY: [&str; 5] = ["start", "end", "deviceId", "streamId", "correlationId"];

impl Trace {
    /// Reads every table analysis and conversion use.
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let main = TraceFile::open(path)?;
        let side = TraceFile::open(path)?;
        // Two threads of about equal work: the kernels (the widest table),
        // and the runtime calls with the copies and sets.
        let (runtime, rest) = std::thread::scope(|s| {
            let runtime = s.spawn(move || -> Result<_, TraceError> {
                let mut names = NameTable::default();
                let rows = read_runtime(&side, &mut names)?;
                let names = names.resolve(&side)?;
                Ok((rows, names, read_memcpys(&side)?, read_memsets(&side)?))
            });
            let rest = (|| -> Result<_, TraceError> {
                let mut names = NameTable::default();
                let kernels = read_kernels(&main, &mut names)?;
                let names = names.resolve(&main)?;
                Ok((kernels, names))
            })();
            (runtime.join(), rest)
        });
        let (mut runtime, runtime_names, memcpys, memsets) = match runtime {
            Ok(r) => r?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let (kernels, mut names) = rest?;
        // Runtime names follow the kernel names in the shared table.
        let offset = names.len() as u32;
        for r in &mut runtime {
            r.name += offset;
        }
        names.extend(runtime_names);
        Ok(Trace {
            path: path.to_path_buf(),
            kernels,
            memcpys,
            memsets,
            runtime,
            nvtx: read_nvtx(&main)?,
            gpus: read_gpus(&main)?,
            names,
            producer: read_producer(&main),
        })
    }

    /// The name of a row's `name` index.
    pub fn name(&self, index: u32) -> &str {
        self.names
            .get(index as usize)
            .map(String::as_str)
            .unwrap_or("")
    }
}

fn pid_col(file: &TraceFile, table: &str) -> String {
    file.col_or(table, "globalPid", "NULL")
}

/// An integer cell: read directly when SQLite holds an integer that fits
/// (every cell of an nsys export's big tables), through rusqlite's checked
/// conversion otherwise (which names the column on a mismatch).
#[inline]
fn int<T: rusqlite::types::FromSql + TryFrom<i64>>(
    r: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<T> {
    if let Ok(rusqlite::types::ValueRef::Integer(v)) = r.get_ref(i) {
        if let Ok(t) = T::try_from(v) {
            return Ok(t);
        }
    }
    r.get(i)
}

/// A nullable integer cell as `u32`: `None` (refused) when it does not fit.
#[inline]
fn opt_u32(cell: Option<i64>) -> Option<Option<u32>> {
    cell.map(u32::try_from).transpose().ok()
}

pub(crate) fn read_kernels(
    file: &TraceFile,
    names: &mut NameTable,
) -> Result<Vec<KernelRow>, TraceError> {
    if !file.has_table(KERNEL) {
        return Ok(Vec::new());
    }
    file.require(KERNEL, &ACTIVITY)?;
    // nsys stats names kernels by their demangled name; very old exports had only shortName.
    let name = if file.has_column(KERNEL, "demangledName") {
        "demangledName"
    } else {
        file.require(KERNEL, &["shortName"])?;
        "shortName"
    };
    let sql = format!(
        "SELECT start, end, deviceId, streamId, correlationId, {pid}, {name} FROM {KERNEL}",
        pid = pid_col(file, KERNEL)
    );
    let fast = file.int_rows(&sql, |c: &[Option<i64>; 7]| {
        Some(KernelRow {
            start: c[0]?,
            end: c[1]?,
            device: u32::try_from(c[2]?).ok()?,
            stream: u32::try_from(c[3]?).ok()?,
            correlation: opt_u32(c[4])?.unwrap_or(0),
            global_pid: c[5],
            name: names.intern(c[6]?),
        })
    });
    if let Some(rows) = fast {
        return Ok(rows);
    }
    file.rows(KERNEL, &sql, |r| {
        Ok(KernelRow {
            start: int(r, 0)?,
            end: int(r, 1)?,
            device: int(r, 2)?,
            stream: int(r, 3)?,
            correlation: r.get::<_, Option<u32>>(4)?.unwrap_or(0),
            global_pid: int(r, 5)?,
            name: names.intern(int(r, 6)?),
        })
    })
}

pub(crate) fn read_memcpys(file: &TraceFile) -> Result<Vec<MemcpyRow>, TraceError> {
    if !file.has_table(MEMCPY) {
        return Ok(Vec::new());
    }
    file.require(
        MEMCPY,
        &["start", "end", "deviceId", "streamId", "bytes", "copyKind"],
    )?;
    let sql = format!(
        "SELECT start, end, deviceId, streamId, bytes, copyKind, {src}, {dst}, {count} FROM {MEMCPY}",
        src = file.col_or(MEMCPY, "srcKind", "7"),
        dst = file.col_or(MEMCPY, "dstKind", "7"),
        count = file.col_or(MEMCPY, "copyCount", "1"),
    );
    file.rows(MEMCPY, &sql, |r| {
        Ok(MemcpyRow {
            start: int(r, 0)?,
            end: int(r, 1)?,
            device: int(r, 2)?,
            stream: int(r, 3)?,
            bytes: int::<i64>(r, 4)?.max(0) as u64,
            copy_kind: int(r, 5)?,
            src_kind: r.get::<_, Option<u32>>(6)?.unwrap_or(7),
            dst_kind: r.get::<_, Option<u32>>(7)?.unwrap_or(7),
            copy_count: r.get::<_, Option<u32>>(8)?.unwrap_or(1).max(1),
        })
    })
}

pub(crate) fn read_memsets(file: &TraceFile) -> Result<Vec<MemsetRow>, TraceError> {
    if !file.has_table(MEMSET) {
        return Ok(Vec::new());
    }
    file.require(MEMSET, &["start", "end", "deviceId", "streamId", "bytes"])?;
    let sql = format!("SELECT start, end, deviceId, streamId, bytes FROM {MEMSET}");
    file.rows(MEMSET, &sql, |r| {
        Ok(MemsetRow {
            start: int(r, 0)?,
            end: int(r, 1)?,
            device: int(r, 2)?,
            stream: int(r, 3)?,
            bytes: int::<i64>(r, 4)?.max(0) as u64,
        })
    })
}

pub(crate) fn read_runtime(
    file: &TraceFile,
    names: &mut NameTable,
) -> Result<Vec<RuntimeRow>, TraceError> {
    if !file.has_table(RUNTIME) {
        return Ok(Vec::new());
    }
    file.require(RUNTIME, &["start", "end", "correlationId", "nameId"])?;
    let sql = format!(
        "SELECT start, end, {tid}, correlationId, nameId FROM {RUNTIME}",
        tid = file.col_or(RUNTIME, "globalTid", "0")
    );
    let fast = file.int_rows(&sql, |c: &[Option<i64>; 5]| {
        Some(RuntimeRow {
            start: c[0]?,
            end: c[1]?,
            global_tid: c[2].unwrap_or(0),
            correlation: opt_u32(c[3])?.unwrap_or(0),
            name: names.intern(c[4]?),
        })
    });
    if let Some(rows) = fast {
        return Ok(rows);
    }
    file.rows(RUNTIME, &sql, |r| {
        Ok(RuntimeRow {
            start: int(r, 0)?,
            end: int(r, 1)?,
            global_tid: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            correlation: r.get::<_, Option<u32>>(3)?.unwrap_or(0),
            name: names.intern(int(r, 4)?),
        })
    })
}

pub(crate) fn read_gpus(file: &TraceFile) -> Result<Vec<GpuRow>, TraceError> {
    const GPU: &str = "TARGET_INFO_GPU";
    if !file.has_table(GPU) || !file.has_column(GPU, "id") {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT id, {name} FROM {GPU} ORDER BY id",
        name = file.col_or(GPU, "name", "NULL")
    );
    file.rows(GPU, &sql, |r| {
        Ok(GpuRow {
            id: r.get(0)?,
            name: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        })
    })
}

/// The producer rows of `META_DATA_EXPORT` (2023.3+) or `EXPORT_META_DATA`
/// (2022.x); empty for 2021 exports, which have neither.
pub(crate) fn read_producer(file: &TraceFile) -> Producer {
    let Some(table) = ["META_DATA_EXPORT", "EXPORT_META_DATA"]
        .into_iter()
        .find(|t| file.has_column(t, "name") && file.has_column(t, "value"))
    else {
        return Producer::default();
    };
    let get = |key: &str| -> Option<String> {
        file.conn()
            .query_row(
                &format!("SELECT value FROM {table} WHERE name = ?1"),
                [key],
                |r| r.get::<_, Option<String>>(0),
            )
            .ok()
            .flatten()
    };
    Producer {
        name: get("EXPORT_PRODUCT_NAME"),
        version: get("EXPORT_PRODUCT_VERSION"),
        schema_version: get("EXPORT_SCHEMA_VERSION"),
    }
}
