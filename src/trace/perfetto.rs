//! Writes a trace as Chrome-trace JSON that ui.perfetto.dev and
//! chrome://tracing open: one process per GPU with a track per stream
//! (kernels, memcpy, memset), and the CPU threads' NVTX ranges and CUDA API
//! calls on their own tracks. Timestamps are exact µs with three decimals.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::error::TraceError;
use super::reader::Trace;
use super::records::{copy_kind_label, mem_kind_label};

/// GPU tracks get pids above every real process id.
const GPU_PID_BASE: i64 = 1 << 40;

/// Writes `trace` to `output` (through a temporary file and a rename).
pub fn write(trace: &Trace, output: &Path) -> Result<u64, TraceError> {
    let written = (|| {
        let mut file = crate::atomic::AtomicFile::create(output)?;
        let mut w = BufWriter::new(&mut file);
        let n = write_events(trace, &mut w)?;
        w.flush()?;
        drop(w);
        file.commit()?;
        Ok(n)
    })();
    written.map_err(|e| TraceError::io(output, e))
}

/// `ns` as µs text with exactly three decimals.
pub fn micros(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A complete (`ph: X`) event line.
fn span(pid: i64, tid: i64, start: i64, end: i64, cat: &str, name: &str, args: &str) -> String {
    format!(
        "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{{args}}}}}",
        quote(name),
        micros(start),
        micros((end - start).max(0)),
    )
}

fn write_events(trace: &Trace, w: &mut impl Write) -> std::io::Result<u64> {
    let mut n = 0u64;
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut emit = |w: &mut dyn Write, line: String| -> std::io::Result<()> {
        if n > 0 {
            w.write_all(b",\n")?;
        }
        n += 1;
        w.write_all(line.as_bytes())
    };
    let mut tracks = std::collections::BTreeSet::new();
    for k in &trace.kernels {
        tracks.insert((k.device, k.stream));
    }
    for m in &trace.memcpys {
        tracks.insert((m.device, m.stream));
    }
    for m in &trace.memsets {
        tracks.insert((m.device, m.stream));
    }
    let devices: std::collections::BTreeSet<u32> = tracks.iter().map(|t| t.0).collect();
    for d in &devices {
        let gpu = trace
            .gpus
            .iter()
            .find(|g| g.id == *d)
            .map(|g| g.name.as_str());
        let label = match gpu {
            Some(name) if !name.is_empty() => format!("GPU {d} ({name})"),
            _ => format!("GPU {d}"),
        };
        let pid = GPU_PID_BASE + i64::from(*d);
        emit(
            w,
            format!(
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":{}}}}}",
                quote(&label)
            ),
        )?;
    }
    for (d, s) in &tracks {
        let pid = GPU_PID_BASE + i64::from(*d);
        emit(w, format!("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{s},\"args\":{{\"name\":\"stream {s}\"}}}}"))?;
    }
    for k in &trace.kernels {
        let pid = GPU_PID_BASE + i64::from(k.device);
        let args = format!("\"correlation\":{}", k.correlation);
        emit(
            w,
            span(
                pid,
                k.stream.into(),
                k.start,
                k.end,
                "kernel",
                trace.name(k.name),
                &args,
            ),
        )?;
    }
    for m in &trace.memcpys {
        let pid = GPU_PID_BASE + i64::from(m.device);
        let name = format!(
            "Memcpy {} ({} -> {})",
            copy_kind_label(m.copy_kind),
            mem_kind_label(m.src_kind),
            mem_kind_label(m.dst_kind)
        );
        let args = format!("\"bytes\":{}", m.bytes);
        emit(
            w,
            span(
                pid,
                m.stream.into(),
                m.start,
                m.end,
                "gpu_memcpy",
                &name,
                &args,
            ),
        )?;
    }
    for m in &trace.memsets {
        let pid = GPU_PID_BASE + i64::from(m.device);
        let args = format!("\"bytes\":{}", m.bytes);
        emit(
            w,
            span(
                pid,
                m.stream.into(),
                m.start,
                m.end,
                "gpu_memset",
                "Memset",
                &args,
            ),
        )?;
    }
    for r in &trace.runtime {
        let (pid, tid) = (r.global_tid >> 24, r.global_tid & 0xFF_FFFF);
        let args = format!("\"correlation\":{}", r.correlation);
        emit(
            w,
            span(
                pid,
                tid,
                r.start,
                r.end,
                "cuda_runtime",
                trace.name(r.name),
                &args,
            ),
        )?;
    }
    for v in &trace.nvtx {
        let Some(end) = v.end else { continue };
        let (pid, tid) = (v.global_tid >> 24, v.global_tid & 0xFF_FFFF);
        let args = match &v.domain {
            Some(d) => format!("\"domain\":{}", quote(d)),
            None => String::new(),
        };
        emit(w, span(pid, tid, v.start, end, "nvtx", &v.text, &args))?;
    }
    w.write_all(b"\n]}\n")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_are_exact_with_three_decimals() {
        assert_eq!(micros(1_712_195_495_519_689_047), "1712195495519689.047");
        assert_eq!(micros(5), "0.005");
        assert_eq!(micros(-1500), "-1.500");
    }
}
