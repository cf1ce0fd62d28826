//! One Kineto event at a time: parse the event's JSON, pick the categories a
//! trace keeps, check the fields each needs, and push the record.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{annotation, cpu_tid, micros_text_to_ns, raw_text};
use crate::trace::error::TraceError;
use crate::trace::records::global_pid;
use crate::trace::records::{copy_kind, mem_kind, Kernel, Memcpy, Memset, Runtime};
use crate::trace::writer::TraceWriter;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    ph: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    #[serde(borrow)]
    dur: Option<&'a RawValue>,
    pid: Option<Id>,
    tid: Option<Id>,
    #[serde(default)]
    args: Args,
}

#[derive(Deserialize, Default)]
struct Args {
    device: Option<u32>,
    context: Option<u32>,
    stream: Option<u32>,
    correlation: Option<u64>,
    bytes: Option<u64>,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    #[serde(rename = "registers per thread")]
    registers: Option<u32>,
    #[serde(rename = "shared memory")]
    shared_memory: Option<u32>,
}

/// A `pid` or `tid`: a number, or a string such as `"Traces"` (read as 0
/// unless it holds a number).
#[derive(Clone, Copy)]
struct Id(u32);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id(v as u32))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id(v as u32))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
                Ok(Id(v as u32))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id(v.trim().parse().unwrap_or(0)))
            }
        }
        d.deserialize_any(V)
    }
}

/// The per-file state of an import.
pub(crate) struct Importer {
    path: PathBuf,
    pub(crate) events: u64,
    /// Processes that made CUDA runtime calls.
    pub(crate) cuda_pids: BTreeSet<u32>,
    /// The first of them: GPU events (whose `pid` is their device) are
    /// written as launched by it, since a trace has almost always one, and
    /// setting the process of every GPU row at the end rewrites them all
    /// (about a sixth of an import's time). [`super::finish`] corrects the
    /// rows when the guess was missing or wrong.
    pub(crate) pid_guess: Option<u32>,
    /// Whether a GPU event was written before the first CUDA call, without
    /// a process.
    pub(crate) gpu_rows_without_pid: bool,
}

/// The fields of one kept event, checked.
struct Timed<'e, 'a> {
    ev: &'e Event<'a>,
    start: i64,
    end: i64,
}

impl Importer {
    pub(crate) fn new(path: &Path) -> Self {
        Importer {
            path: path.to_path_buf(),
            events: 0,
            cuda_pids: BTreeSet::new(),
            pid_guess: None,
            gpu_rows_without_pid: false,
        }
    }

    /// Imports one element of `traceEvents` (its JSON text starts at `offset`).
    pub(crate) fn event(
        &mut self,
        json: &[u8],
        offset: u64,
        w: &mut TraceWriter,
    ) -> Result<(), TraceError> {
        let index = self.events;
        self.events += 1;
        // Most events are CPU operators: skip those without a full parse.
        if quick_cat(json).is_some_and(|cat| !KEPT.iter().any(|k| k.as_bytes() == cat)) {
            return Ok(());
        }
        let ev: Event = serde_json::from_slice(json).map_err(|e| TraceError::Json {
            path: self.path.clone(),
            offset,
            message: format!("event {index}: {e}"),
        })?;
        if ev.ph.as_deref() != Some("X") {
            return Ok(());
        }
        let Some(cat) = ev.cat.as_deref() else {
            return Ok(());
        };
        if !KEPT.contains(&cat) {
            return Ok(());
        }
        let t = self.timed(&ev, index)?;
        match cat {
            "kernel" => self.kernel(&t, index, w),
            "gpu_memcpy" => self.memcpy(&t, index, w),
            "gpu_memset" => self.memset(&t, index, w),
            "cuda_runtime" | "cuda_driver" => self.runtime(&t, cat == "cuda_driver", index, w),
            _ => {
                let (pid, tid) = (id(ev.pid), id(ev.tid));
                let name = ev.name.as_deref().unwrap_or("");
                let gpu = cat == "gpu_user_annotation";
                w.push_nvtx(&annotation(t.start, t.end, name, gpu, pid, tid))
            }
        }
    }

    fn missing(&self, ev: &Event, index: u64, field: &'static str) -> TraceError {
        TraceError::MissingField {
            path: self.path.clone(),
            index,
            cat: ev.cat.as_deref().unwrap_or("").to_string(),
            name: ev.name.as_deref().unwrap_or("").chars().take(80).collect(),
            field,
        }
    }

    fn timed<'e, 'a>(&self, ev: &'e Event<'a>, index: u64) -> Result<Timed<'e, 'a>, TraceError> {
        let start = ev
            .ts
            .and_then(|v| micros_text_to_ns(raw_text(v)))
            .ok_or_else(|| self.missing(ev, index, "ts"))?;
        let dur = ev
            .dur
            .and_then(|v| micros_text_to_ns(raw_text(v)))
            .ok_or_else(|| self.missing(ev, index, "dur"))?;
        Ok(Timed {
            ev,
            start,
            end: start + dur.max(0),
        })
    }

    /// `device`, `stream` and `correlation` of a GPU event.
    fn gpu_ids(&self, t: &Timed, index: u64) -> Result<(u32, u32, u32), TraceError> {
        let a = &t.ev.args;
        let device = a
            .device
            .ok_or_else(|| self.missing(t.ev, index, "args.device"))?;
        let stream = a
            .stream
            .ok_or_else(|| self.missing(t.ev, index, "args.stream"))?;
        let corr = a
            .correlation
            .ok_or_else(|| self.missing(t.ev, index, "args.correlation"))?;
        Ok((device, stream, corr as u32))
    }

    fn kernel(&mut self, t: &Timed, index: u64, w: &mut TraceWriter) -> Result<(), TraceError> {
        let (device_id, stream_id, correlation_id) = self.gpu_ids(t, index)?;
        let global_pid = self.gpu_row_pid();
        let a = &t.ev.args;
        w.push_kernel(&Kernel {
            start: t.start,
            end: t.end,
            device_id,
            context_id: a.context.unwrap_or(0),
            stream_id,
            correlation_id,
            global_pid,
            grid: a.grid.unwrap_or([0; 3]),
            block: a.block.unwrap_or([0; 3]),
            static_shared_memory: a.shared_memory.unwrap_or(0),
            dynamic_shared_memory: 0,
            registers_per_thread: a.registers.unwrap_or(0),
            name: t.ev.name.as_deref().unwrap_or("").to_string(),
            short_name: None,
        })
    }

    fn memcpy(&mut self, t: &Timed, index: u64, w: &mut TraceWriter) -> Result<(), TraceError> {
        let (device_id, stream_id, correlation_id) = self.gpu_ids(t, index)?;
        let global_pid = self.gpu_row_pid();
        let bytes =
            t.ev.args
                .bytes
                .ok_or_else(|| self.missing(t.ev, index, "args.bytes"))?;
        let (copy_kind, src_kind, dst_kind) = parse_memcpy_name(t.ev.name.as_deref().unwrap_or(""));
        w.push_memcpy(&Memcpy {
            start: t.start,
            end: t.end,
            device_id,
            context_id: t.ev.args.context.unwrap_or(0),
            stream_id,
            correlation_id,
            global_pid,
            bytes,
            copy_kind,
            src_kind,
            dst_kind,
        })
    }

    fn memset(&mut self, t: &Timed, index: u64, w: &mut TraceWriter) -> Result<(), TraceError> {
        let (device_id, stream_id, correlation_id) = self.gpu_ids(t, index)?;
        let global_pid = self.gpu_row_pid();
        let bytes =
            t.ev.args
                .bytes
                .ok_or_else(|| self.missing(t.ev, index, "args.bytes"))?;
        let kind =
            t.ev.name
                .as_deref()
                .and_then(|n| n.split_once('(').map(|(_, k)| k.trim_end_matches(')')))
                .map_or(mem_kind::UNKNOWN, mem_kind_of);
        w.push_memset(&Memset {
            start: t.start,
            end: t.end,
            device_id,
            context_id: t.ev.args.context.unwrap_or(0),
            stream_id,
            correlation_id,
            global_pid,
            bytes,
            value: 0,
            mem_kind: kind,
        })
    }

    /// The process a GPU row is written with: the guess (see `pid_guess`).
    fn gpu_row_pid(&mut self) -> Option<i64> {
        self.gpu_rows_without_pid |= self.pid_guess.is_none();
        self.pid_guess.map(global_pid)
    }

    fn runtime(
        &mut self,
        t: &Timed,
        driver: bool,
        index: u64,
        w: &mut TraceWriter,
    ) -> Result<(), TraceError> {
        let pid = t.ev.pid.ok_or_else(|| self.missing(t.ev, index, "pid"))?.0;
        let tid = id(t.ev.tid);
        self.cuda_pids.insert(pid);
        self.pid_guess.get_or_insert(pid);
        w.push_runtime(&Runtime {
            start: t.start,
            end: t.end,
            global_tid: cpu_tid(pid, tid),
            correlation_id: t.ev.args.correlation.unwrap_or(0) as u32,
            name: t.ev.name.as_deref().unwrap_or("").to_string(),
            return_value: 0,
            driver,
        })
    }
}

/// The categories a trace keeps.
const KEPT: [&str; 7] = [
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "user_annotation",
    "gpu_user_annotation",
];

/// The value of the first `"cat"` key of an event's JSON, found without
/// parsing it (`None` if it is not a plain string). A `"cat"` token can only
/// be a key: inside a JSON string its quotes would be escaped.
fn quick_cat(json: &[u8]) -> Option<&[u8]> {
    let at = json.windows(5).position(|w| w == b"\"cat\"")? + 5;
    let rest = json[at..].trim_ascii_start().strip_prefix(b":")?;
    let rest = rest.trim_ascii_start().strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    (rest.get(end) == Some(&b'"')).then(|| &rest[..end])
}

fn id(v: Option<Id>) -> u32 {
    v.map_or(0, |i| i.0)
}

/// `Memcpy HtoD (Pageable -> Device)` → (copy kind, source kind, destination kind).
pub(crate) fn parse_memcpy_name(name: &str) -> (u32, u32, u32) {
    let rest = name.strip_prefix("Memcpy ").unwrap_or(name);
    let (dir, kinds) = rest.split_once(' ').unwrap_or((rest, ""));
    let kind = match dir {
        "HtoD" => copy_kind::HTOD,
        "DtoH" => copy_kind::DTOH,
        "DtoD" => copy_kind::DTOD,
        "HtoH" => copy_kind::HTOH,
        "PtoP" => copy_kind::PTOP,
        _ => 0,
    };
    let kinds = kinds.trim().trim_start_matches('(').trim_end_matches(')');
    let (src, dst) = kinds.split_once("->").unwrap_or(("", ""));
    (kind, mem_kind_of(src), mem_kind_of(dst))
}

fn mem_kind_of(label: &str) -> u32 {
    match label.trim() {
        "Pageable" => mem_kind::PAGEABLE,
        "Pinned" => mem_kind::PINNED,
        "Device" => mem_kind::DEVICE,
        "Array" => mem_kind::ARRAY,
        "Managed" => mem_kind::MANAGED,
        _ => mem_kind::UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_cat_finds_the_category_key() {
        assert_eq!(
            quick_cat(br#"{"ph": "X", "cat" : "cpu_op", "name": "a"}"#),
            Some(&b"cpu_op"[..])
        );
        assert_eq!(
            quick_cat(br#"{"name": "say \"cat\": x", "cat":"kernel"}"#),
            Some(&b"kernel"[..])
        );
        assert_eq!(quick_cat(br#"{"ph": "X"}"#), None);
        assert_eq!(quick_cat(br#"{"cat": 3}"#), None);
    }

    #[test]
    fn memcpy_names_give_direction_and_memory_kinds() {
        assert_eq!(
            parse_memcpy_name("Memcpy HtoD (Pageable -> Device)"),
            (copy_kind::HTOD, mem_kind::PAGEABLE, mem_kind::DEVICE)
        );
        assert_eq!(
            parse_memcpy_name("Memcpy DtoH (Device -> Pinned)"),
            (copy_kind::DTOH, mem_kind::DEVICE, mem_kind::PINNED)
        );
        assert_eq!(
            parse_memcpy_name("Memcpy DtoD (Device -> Device)").0,
            copy_kind::DTOD
        );
        assert_eq!(parse_memcpy_name("odd").0, 0);
    }
}
