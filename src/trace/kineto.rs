//! Imports a PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzipped,
//! into vitgraph's trace layout: `kernel`, `gpu_memcpy`, `gpu_memset`,
//! `cuda_runtime` / `cuda_driver` events with their correlation ids, and
//! `user_annotation` / `gpu_user_annotation` ranges as NVTX ranges.
//!
//! The file is streamed event by event ([`super::json_scan`]), so memory does
//! not grow with its size. Timestamps are µs with up to three decimals; they
//! are converted from the number's text, so `1695835535123.456` becomes
//! `1695835535123456` ns exactly (an `f64` would be off by up to 0.25 ns).

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::TraceError;
use super::json_scan::{ScanError, Scanner};
use super::records::{global_pid, global_tid, Gpu, Nvtx};
use super::writer::{TraceWriter, WriteSummary};

mod events;

/// The NVTX domain given to `gpu_user_annotation` ranges (the GPU-side
/// projection of `record_function` ranges), so they never mix with CPU ranges.
pub const GPU_ANNOTATION_DOMAIN: &str = "gpu_user_annotation";

/// What one import read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// Events in `traceEvents`, imported or not.
    pub events: u64,
    /// Uncompressed JSON bytes read.
    pub bytes: u64,
    pub written: WriteSummary,
}

/// Converts the Kineto trace at `input` into a trace file at `output`.
pub fn import(input: &Path, output: &Path) -> Result<ImportStats, TraceError> {
    let file = File::open(input).map_err(|e| TraceError::io(input, e))?;
    let reader: Box<dyn Read + Send> = if is_gzip(input)? {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(file)
    };
    let mut writer = TraceWriter::create(output)?;
    let mut stats = import_from(reader, input, &mut writer)?;
    stats.written = writer.finish()?;
    Ok(stats)
}

/// Whether the file at `path` is gzip-compressed (by its first two bytes,
/// whatever its name).
pub fn is_gzip(path: &Path) -> Result<bool, TraceError> {
    let mut magic = [0u8; 2];
    let mut f = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut got = 0;
    while got < 2 {
        match f.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TraceError::io(path, e)),
        }
    }
    Ok(got == 2 && magic == [0x1f, 0x8b])
}

/// Streams the Kineto JSON of `src` into `writer`; `path` names it in errors.
pub fn import_from(
    src: impl Read + Send,
    path: &Path,
    writer: &mut TraceWriter,
) -> Result<ImportStats, TraceError> {
    let mut scan = Scanner::new(src);
    let mut state = events::Importer::new(path);
    let mut value = Vec::with_capacity(4096);
    let scan_err = |e: ScanError| match e {
        ScanError::Io(e) => TraceError::io(path, e),
        ScanError::Syntax { offset, message } => TraceError::Json {
            path: path.to_path_buf(),
            offset,
            message,
        },
    };
    let not_kineto = |reason: &str| TraceError::NotKineto {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    match scan.peek_non_ws().map_err(scan_err)? {
        Some(b'{') => {}
        Some(b'[') => {
            // The Chrome "JSON array" form: the events alone.
            read_events(&mut scan, &mut value, &mut state, writer).map_err(|e| e.into(path))?;
            return finish(state, scan.offset(), writer);
        }
        Some(_) => return Err(not_kineto("it does not start with a JSON object")),
        None => return Err(not_kineto("the file is empty")),
    }
    scan.expect(b'{').map_err(scan_err)?;
    let mut saw_events = false;
    if scan.peek_non_ws().map_err(scan_err)? == Some(b'}') {
        return Err(not_kineto("the JSON object has no `traceEvents` array"));
    }
    loop {
        scan.value_into(&mut value).map_err(scan_err)?;
        let key: String = serde_json::from_slice(&value)
            .map_err(|_| scan_err(scan.syntax("expected an object key")))?;
        scan.expect(b':').map_err(scan_err)?;
        if key == "traceEvents" {
            if scan.peek_non_ws().map_err(scan_err)? != Some(b'[') {
                return Err(not_kineto("`traceEvents` is not an array"));
            }
            read_events(&mut scan, &mut value, &mut state, writer).map_err(|e| e.into(path))?;
            saw_events = true;
        } else {
            scan.value_into(&mut value).map_err(scan_err)?;
            if key == "deviceProperties" {
                for gpu in device_properties(&value) {
                    writer.push_gpu(&gpu)?;
                }
            }
        }
        if !scan.comma_or(b'}').map_err(scan_err)? {
            break;
        }
    }
    if !saw_events {
        return Err(not_kineto("the JSON object has no `traceEvents` array"));
    }
    finish(state, scan.offset(), writer)
}

fn finish(
    state: events::Importer,
    bytes: u64,
    writer: &mut TraceWriter,
) -> Result<ImportStats, TraceError> {
    // GPU events carry the device as `pid`; the launching process is the one
    // process that made CUDA calls (with several, it stays unknown). GPU rows
    // were written with the first such process (`pid_guess`): right when it
    // is the only one, wrong when there are several.
    match (state.cuda_pids.len(), state.pid_guess) {
        (1, Some(pid)) if state.gpu_rows_without_pid => {
            writer.fill_missing_global_pid(global_pid(pid))?;
        }
        (n, Some(pid)) if n > 1 => writer.clear_global_pid(global_pid(pid))?,
        _ => {}
    }
    Ok(ImportStats {
        events: state.events,
        bytes,
        written: writer.summary(),
    })
}

/// Either a scanner error or an event the importer rejected.
pub(crate) enum EventsError {
    Scan(ScanError),
    Trace(TraceError),
}

impl EventsError {
    fn into(self, path: &Path) -> TraceError {
        match self {
            EventsError::Scan(ScanError::Io(e)) => TraceError::io(path, e),
            EventsError::Scan(ScanError::Syntax { offset, message }) => TraceError::Json {
                path: path.to_path_buf(),
                offset,
                message,
            },
            EventsError::Trace(e) => e,
        }
    }
}

impl From<ScanError> for EventsError {
    fn from(e: ScanError) -> Self {
        EventsError::Scan(e)
    }
}

impl From<TraceError> for EventsError {
    fn from(e: TraceError) -> Self {
        EventsError::Trace(e)
    }
}

/// Events handed from the scanning thread to the importing one at a time.
const EVENTS_PER_BATCH: usize = 4096;

/// A run of `traceEvents` elements: their texts back to back, each with its
/// end in `text` and its offset in the file.
#[derive(Default)]
struct EventBatch {
    text: Vec<u8>,
    events: Vec<(usize, u64)>,
}

/// Reads the `traceEvents` array. One thread splits it into events (the
/// JSON scan) while this one imports them, so the two overlap (and the
/// trace writer inserts on a third).
fn read_events<R: Read + Send>(
    scan: &mut Scanner<R>,
    value: &mut Vec<u8>,
    state: &mut events::Importer,
    writer: &mut TraceWriter,
) -> Result<(), EventsError> {
    scan.expect(b'[')?;
    if scan.peek_non_ws()? == Some(b']') {
        scan.expect(b']')?;
        return Ok(());
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<EventBatch, ScanError>>(4);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<EventBatch>();
    std::thread::scope(|threads| {
        threads.spawn(move || {
            let mut batch = EventBatch::default();
            loop {
                let offset = scan.offset();
                let step = scan
                    .with_value(value, |json| batch.text.extend_from_slice(json))
                    .and_then(|()| scan.comma_or(b']'));
                let more = match step {
                    Ok(more) => more,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                batch.events.push((batch.text.len(), offset));
                if batch.events.len() == EVENTS_PER_BATCH || !more {
                    let next = spare_rx.try_recv().unwrap_or_default();
                    if tx.send(Ok(std::mem::replace(&mut batch, next))).is_err() {
                        return; // the importer stopped at an error
                    }
                }
                if !more {
                    return;
                }
            }
        });
        for batch in rx {
            let mut batch = batch?;
            let mut start = 0;
            for &(end, offset) in &batch.events {
                state.event(&batch.text[start..end], offset, writer)?;
                start = end;
            }
            batch.text.clear();
            batch.events.clear();
            let _ = spare_tx.send(batch);
        }
        Ok(())
    })
}

#[derive(Deserialize)]
struct DeviceProperties<'a> {
    id: u32,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(rename = "totalGlobalMem")]
    total_global_mem: Option<u64>,
    #[serde(rename = "numSms")]
    num_sms: Option<u32>,
    #[serde(rename = "computeMajor")]
    compute_major: Option<u32>,
    #[serde(rename = "computeMinor")]
    compute_minor: Option<u32>,
}

/// The GPUs of `deviceProperties`; a malformed list is ignored (it only names GPUs).
fn device_properties(json: &[u8]) -> Vec<Gpu> {
    let props: Vec<DeviceProperties> = serde_json::from_slice(json).unwrap_or_default();
    props
        .into_iter()
        .map(|p| Gpu {
            id: p.id,
            name: p.name.map(Cow::into_owned).unwrap_or_default(),
            total_memory: p.total_global_mem,
            sm_count: p.num_sms,
            compute_major: p.compute_major,
            compute_minor: p.compute_minor,
            ..Gpu::default()
        })
        .collect()
}

/// Converts a µs timestamp's JSON text to integer ns without rounding error:
/// digits after the third decimal are rounded half up; an exponent form falls
/// back to `f64`. Returns `None` for text that is not a number.
pub fn micros_text_to_ns(raw: &str) -> Option<i64> {
    let text = raw.trim().trim_matches('"');
    if text.contains(['e', 'E']) {
        let us: f64 = text.parse().ok()?;
        return us.is_finite().then(|| (us * 1000.0).round() as i64);
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns: i64 = 0;
    for b in int.bytes() {
        ns = ns.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
    }
    let mut frac_bytes = frac.bytes();
    for _ in 0..3 {
        let d = frac_bytes.next().map_or(0, |b| i64::from(b - b'0'));
        ns = ns.checked_mul(10)?.checked_add(d)?;
    }
    if frac_bytes.next().is_some_and(|b| b >= b'5') {
        ns = ns.checked_add(1)?;
    }
    Some(if negative { -ns } else { ns })
}

/// The thread id of a CPU event as an Nsight global id.
fn cpu_tid(pid: u32, tid: u32) -> i64 {
    global_tid(pid, tid)
}

/// An annotation range as an NVTX range.
fn annotation(start: i64, end: i64, name: &str, gpu: bool, pid: u32, tid: u32) -> Nvtx {
    Nvtx {
        start,
        end: Some(end),
        text: name.to_string(),
        domain: gpu.then(|| GPU_ANNOTATION_DOMAIN.to_string()),
        global_tid: cpu_tid(pid, tid),
    }
}

/// The raw text of a borrowed JSON value.
fn raw_text(v: &RawValue) -> &str {
    v.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzipped_trace_is_read_whatever_its_name() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let json = br#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
             "args": {"device": 0, "stream": 7, "correlation": 1}}
        ]}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(json).unwrap();
        let input = dir.path().join("trace.bin");
        std::fs::write(&input, gz.finish().unwrap()).unwrap();
        assert!(is_gzip(&input).unwrap());
        let stats = import(&input, &dir.path().join("t.sqlite")).unwrap();
        assert_eq!(stats.events, 1);
        let plain = dir.path().join("plain.json.gz");
        std::fs::write(&plain, json).unwrap();
        assert!(!is_gzip(&plain).unwrap(), "named .gz, but plain JSON");
        assert!(import(&plain, &dir.path().join("u.sqlite")).is_ok());
    }

    #[test]
    fn timestamps_keep_nanoseconds_exactly() {
        assert_eq!(
            micros_text_to_ns("1695835535123.456"),
            Some(1_695_835_535_123_456)
        );
        assert_eq!(
            micros_text_to_ns("1712195495519689.047"),
            Some(1_712_195_495_519_689_047)
        );
        assert_eq!(micros_text_to_ns("12"), Some(12_000));
        assert_eq!(micros_text_to_ns("4.928"), Some(4_928));
        assert_eq!(micros_text_to_ns("0.5"), Some(500));
        assert_eq!(micros_text_to_ns("1.0005"), Some(1_001));
        assert_eq!(micros_text_to_ns("1.0004"), Some(1_000));
        assert_eq!(micros_text_to_ns("-3.5"), Some(-3_500));
        assert_eq!(micros_text_to_ns("\"7\""), Some(7_000));
        assert_eq!(micros_text_to_ns("1.5e3"), Some(1_500_000));
        assert_eq!(micros_text_to_ns("abc"), None);
        assert_eq!(micros_text_to_ns(""), None);
        // f64 cannot hold this one exactly: the text path must.
        let f = 1712195495519689.047_f64 * 1000.0;
        assert_ne!(f as i64, 1_712_195_495_519_689_047);
    }

    /// The `globalPid` of each GPU row (kernels, then copies) after importing
    /// `events`.
    fn gpu_pids(events: &str) -> Vec<Option<i64>> {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("trace.json");
        std::fs::write(&input, format!(r#"{{"traceEvents": [{events}]}}"#)).unwrap();
        let output = dir.path().join("t.sqlite");
        import(&input, &output).unwrap();
        let conn = rusqlite::Connection::open(&output).unwrap();
        let mut pids = Vec::new();
        for table in ["KERNEL", "MEMCPY"] {
            let sql = format!("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_{table} ORDER BY start");
            let mut st = conn.prepare(&sql).unwrap();
            let rows = st.query_map([], |r| r.get::<_, Option<i64>>(0)).unwrap();
            pids.extend(rows.map(Result::unwrap));
        }
        pids
    }

    #[test]
    fn gpu_rows_get_the_launching_process_when_there_is_one() {
        let kernel = |ts: u32, corr: u32| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts}, "dur": 5,
                    "args": {{"device": 0, "stream": 7, "correlation": {corr}}}}}"#
            )
        };
        let copy = |ts: u32, corr: u32| {
            format!(
                r#"{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": {ts}, "dur": 5,
                    "args": {{"device": 0, "stream": 7, "correlation": {corr}, "bytes": 64}}}}"#
            )
        };
        let launch = |pid: u32, ts: u32, corr: u32| {
            format!(
                r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, "tid": 3, "ts": {ts}, "dur": 2,
                    "args": {{"correlation": {corr}}}}}"#
            )
        };
        let p = |pid: u32| Some(crate::trace::records::global_pid(pid));
        // The launching call first, then GPU rows written with its process.
        let calls_first = [
            launch(42, 1, 1),
            kernel(10, 1),
            copy(20, 2),
            launch(42, 2, 2),
        ];
        assert_eq!(gpu_pids(&calls_first.join(",")), [p(42), p(42)]);
        // GPU rows before any call are filled in at the end.
        let gpu_first = [kernel(10, 1), launch(42, 1, 1), kernel(30, 2), copy(20, 3)];
        assert_eq!(gpu_pids(&gpu_first.join(",")), [p(42), p(42), p(42)]);
        // Two processes made CUDA calls: whose the GPU rows are stays unknown,
        // the rows written with the first one's included.
        let two = [
            launch(42, 1, 1),
            kernel(10, 1),
            launch(43, 2, 2),
            kernel(30, 2),
            copy(40, 3),
        ];
        assert_eq!(gpu_pids(&two.join(",")), [None, None, None]);
        // No CUDA calls at all.
        assert_eq!(gpu_pids(&kernel(10, 1)), [None]);
    }
}
