//! Real traces recorded by others (`../shared/external-traces`): every file
//! reads, and the analysis agrees with independent SQL over the same file and
//! with the PyTorch-profiler JSON's own events. Skipped, with a printed
//! reason, where the folder is absent. Nothing here prints or stores the
//! files' metadata rows (host names, users, paths).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::Deserialize;
use serde_json::value::RawValue;
use vitgraph::analysis::{compute, Options};
use vitgraph::trace::{kineto, Trace};

fn external() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/external-traces");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

const SQLITE: [&str; 4] = [
    "nsys-ai/h100_2gpu_1s.sqlite",
    "Mordred-Deprecated/report1.sqlite",
    "aws_gpu/report2.sqlite",
    "test-cuda/report1.sqlite",
];

/// No window: these recordings have no `measure` range; compare whole files.
fn whole() -> Options {
    Options {
        window: "no such range".into(),
        ..Options::default()
    }
}

fn has_table(conn: &Connection, t: &str) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [t],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

fn has_column(conn: &Connection, t: &str, c: &str) -> bool {
    let sql = format!("SELECT count(*) FROM pragma_table_info('{t}') WHERE name = ?1");
    conn.query_row(&sql, [c], |r| r.get::<_, i64>(0)).unwrap() > 0
}

/// Per device: kernel count and Σ durations, straight from SQL.
fn sql_kernels(conn: &Connection) -> BTreeMap<u32, (u64, i64)> {
    if !has_table(conn, "CUPTI_ACTIVITY_KIND_KERNEL") {
        return BTreeMap::new();
    }
    let mut st = conn
        .prepare("SELECT deviceId, count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Per (device, copyKind): copies, bytes, Σ durations.
fn sql_memcpy(conn: &Connection) -> BTreeMap<(u32, u32), (u64, u64, i64)> {
    if !has_table(conn, "CUPTI_ACTIVITY_KIND_MEMCPY") {
        return BTreeMap::new();
    }
    let count = if has_column(conn, "CUPTI_ACTIVITY_KIND_MEMCPY", "copyCount") {
        "sum(coalesce(copyCount, 1))"
    } else {
        "count(*)"
    };
    let sql = format!(
        "SELECT deviceId, copyKind, {count}, sum(bytes), sum(end - start) \
         FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY deviceId, copyKind"
    );
    let mut st = conn.prepare(&sql).unwrap();
    let rows = st
        .query_map([], |r| {
            Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?, r.get(4)?)))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// Per device, per kernel name: the sorted durations.
fn sql_kernel_durations(conn: &Connection, device: u32) -> BTreeMap<String, Vec<i64>> {
    let mut st = conn
        .prepare(
            "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             JOIN StringIds s ON s.id = k.demangledName WHERE k.deviceId = ?1 ORDER BY 2",
        )
        .unwrap();
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let rows = st
        .query_map([device], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .unwrap();
    for row in rows {
        let (name, d) = row.unwrap();
        out.entry(name).or_default().push(d);
    }
    out
}

fn direction(kind: u32) -> &'static str {
    vitgraph::trace::records::copy_kind_label(kind)
}

#[test]
fn every_nsys_export_matches_independent_sql() {
    let Some(dir) = external() else { return };
    for rel in SQLITE {
        let path = dir.join(rel);
        let trace = Trace::load(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let m = compute(&trace, &whole());
        let conn =
            Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let kernels = sql_kernels(&conn);
        for (device, (count, sum)) in &kernels {
            let d = m.devices.iter().find(|d| d.device == *device).unwrap();
            assert_eq!(d.kernel_count, *count, "{rel} device {device} kernel count");
            assert_eq!(
                d.kernel_time_sum_ns, *sum,
                "{rel} device {device} kernel time"
            );
            let total: i64 = d.kernels.iter().map(|k| k.total_ns).sum();
            assert_eq!(total, *sum, "{rel}: kern_sum totals add up");
        }
        for ((device, kind), (count, bytes, time)) in sql_memcpy(&conn) {
            let d = m.devices.iter().find(|d| d.device == device).unwrap();
            let got = &d.memcpy[direction(kind)];
            assert_eq!(
                (got.count, got.bytes, got.time_ns),
                (count, bytes, time),
                "{rel} device {device} copy kind {kind}"
            );
        }
        for device in kernels.keys() {
            check_kern_sum(rel, &conn, &m, *device);
        }
    }
}

/// The `cuda_gpu_kern_sum` rows equal statistics computed here from SQL rows.
fn check_kern_sum(rel: &str, conn: &Connection, m: &vitgraph::analysis::Metrics, device: u32) {
    let d = m.devices.iter().find(|d| d.device == device).unwrap();
    let expected = sql_kernel_durations(conn, device);
    assert_eq!(d.kernels.len(), expected.len(), "{rel}: one row per name");
    let grand: i64 = expected.values().flatten().sum();
    for row in &d.kernels {
        let durs = &expected[&row.name];
        let n = durs.len();
        let total: i64 = durs.iter().sum();
        let mean = total as f64 / n as f64;
        let med = if n % 2 == 1 {
            durs[n / 2] as f64
        } else {
            (durs[n / 2 - 1] + durs[n / 2]) as f64 / 2.0
        };
        let var = if n > 1 {
            durs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        assert_eq!(row.instances, n as u64, "{rel} {}", row.name);
        assert_eq!(row.total_ns, total);
        assert_eq!((row.min_ns, row.max_ns), (durs[0], durs[n - 1]));
        assert_eq!(row.med_ns, med);
        assert!((row.avg_ns - mean).abs() < 1e-6);
        assert!((row.stddev_ns - var.sqrt()).abs() < 1e-6 * (1.0 + var.sqrt()));
        assert!((row.time_pct - 100.0 * total as f64 / grand as f64).abs() < 1e-9);
    }
    let totals: Vec<i64> = d.kernels.iter().map(|k| k.total_ns).collect();
    assert!(
        totals.windows(2).all(|w| w[0] >= w[1]),
        "{rel}: by total time descending"
    );
}

#[test]
fn launch_latency_is_found_in_real_exports() {
    let Some(dir) = external() else { return };
    let trace = Trace::load(&dir.join("test-cuda/report1.sqlite")).unwrap();
    let m = compute(&trace, &whole());
    let d = &m.devices[0];
    assert_eq!(d.launch_latency_ns.count, d.kernel_count);
    assert!(d.launch_latency_ns.median > 0.0);
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    ph: Option<String>,
    cat: Option<String>,
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    #[serde(borrow)]
    dur: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawDoc<'a> {
    #[serde(borrow, rename = "traceEvents")]
    trace_events: Vec<RawEvent<'a>>,
}

/// µs text → ns, written independently of the importer for this test.
fn ns(text: &str) -> i64 {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let frac3: String = frac.chars().chain("000".chars()).take(3).collect();
    int.parse::<i64>().unwrap() * 1000 + frac3.parse::<i64>().unwrap()
}

const KINETO: [&str; 2] = [
    "HolisticTraceAnalysis/benchmark_result_2869224_1695835535_trace.json.gz",
    "HolisticTraceAnalysis/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
];

#[test]
fn kineto_imports_keep_every_gpu_event_and_exact_times() {
    let Some(dir) = external() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for rel in KINETO {
        let path = dir.join(rel);
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let count = |cat: &str| {
            value["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X" && e["cat"] == cat)
                .count() as i64
        };
        let doc: RawDoc = serde_json::from_str(&text).unwrap();
        let exact = |cat: &str| -> (i64, i64) {
            let evs = doc
                .trace_events
                .iter()
                .filter(|e| e.ph.as_deref() == Some("X") && e.cat.as_deref() == Some(cat));
            let durs: i64 = evs.clone().map(|e| ns(e.dur.unwrap().get())).sum();
            let first = evs.map(|e| ns(e.ts.unwrap().get())).min().unwrap_or(0);
            (durs, first)
        };
        let out = tmp.path().join("trace.sqlite");
        kineto::import(&path, &out).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let conn = Connection::open(&out).unwrap();
        for (cat, table) in [
            ("kernel", "KERNEL"),
            ("gpu_memcpy", "MEMCPY"),
            ("gpu_memset", "MEMSET"),
        ] {
            let sql = format!(
                "SELECT count(*), coalesce(sum(end - start), 0), coalesce(min(start), 0) \
                 FROM CUPTI_ACTIVITY_KIND_{table}"
            );
            let got: (i64, i64, i64) = conn
                .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            let (durs, first) = exact(cat);
            assert_eq!(got, (count(cat), durs, first), "{rel} {cat}");
        }
        let runtime: i64 = conn
            .query_row(
                "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            runtime,
            count("cuda_runtime") + count("cuda_driver"),
            "{rel}"
        );
        // The analysis joins every kernel to its launch (one process per file).
        let m = compute(&Trace::load(&out).unwrap(), &whole());
        let kernels: u64 = m.devices.iter().map(|d| d.kernel_count).sum();
        let matched: u64 = m.devices.iter().map(|d| d.launch_latency_ns.count).sum();
        assert_eq!(kernels as i64, count("kernel"));
        assert!(
            matched * 10 >= kernels * 9,
            "{rel}: {matched} of {kernels} launches found"
        );
    }
}

#[test]
fn kineto_sub_microsecond_timestamps_survive() {
    let Some(dir) = external() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.sqlite");
    kineto::import(&dir.join(KINETO[1]), &out).unwrap();
    let conn = Connection::open(&out).unwrap();
    // Timestamps with a fractional µs part keep it: not all are multiples of 1000 ns.
    let frac: i64 = conn
        .query_row(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start % 1000 != 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(frac > 0);
}
