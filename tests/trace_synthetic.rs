//! Synthetic traces written with `TraceWriter`, analysed, and checked against
//! answers worked out by hand (each number is derived in the comments).

use std::path::Path;

use vitgraph::analysis::{compute, write_outputs, Metrics, Options};
use vitgraph::tasks::analyze::{self, AnalyzeSpec};
use vitgraph::tasks::TaskContext;
use vitgraph::trace::records::{global_pid, global_tid};
use vitgraph::trace::{Gpu, Kernel, Memcpy, Memset, Nvtx, Runtime, Trace, TraceWriter};

const PID: u32 = 100;
const OTHER_PID: u32 = 200;

fn kernel(device: u32, stream: u32, corr: u32, start: i64, end: i64, name: &str) -> Kernel {
    Kernel {
        start,
        end,
        device_id: device,
        stream_id: stream,
        correlation_id: corr,
        global_pid: Some(global_pid(PID)),
        grid: [1, 1, 1],
        block: [128, 1, 1],
        name: name.to_string(),
        ..Kernel::default()
    }
}

fn memcpy(kind: u32, src: u32, dst: u32, start: i64, end: i64, bytes: u64) -> Memcpy {
    Memcpy {
        start,
        end,
        bytes,
        copy_kind: kind,
        src_kind: src,
        dst_kind: dst,
        stream_id: 3,
        global_pid: Some(global_pid(PID)),
        ..Memcpy::default()
    }
}

fn range(text: &str, start: i64, end: i64) -> Nvtx {
    Nvtx {
        start,
        end: Some(end),
        text: text.into(),
        domain: None,
        global_tid: global_tid(PID, PID),
    }
}

/// Device 0: six kernels overlap the `measure` window [1000, 300000]; two are
/// cut by its edges, two lie outside. Device 1: two kernels, no window cut.
fn write_fixture(path: &Path) {
    let mut w = TraceWriter::create(path).unwrap();
    for g in 0..2 {
        w.push_gpu(&Gpu {
            id: g,
            name: format!("Test GPU {g}"),
            ..Gpu::default()
        })
        .unwrap();
    }
    // (corr, stream, start, end, name, launch latency)
    let dev0 = [
        (1, 1, 0, 2_000, "void a<int>(int)", 1_000),
        (2, 1, 3_000, 5_000, "void a<int>(int)", 2_000),
        (3, 2, 4_000, 9_000, "b_kernel", 3_000),
        (4, 1, 20_000, 20_500, "c_kernel", 4_000),
        (5, 1, 21_000, 21_600, "c_kernel", 5_000),
        (6, 1, 250_000, 400_000, "d_kernel", 6_000),
        (7, 1, 100, 900, "outside", 1),
        (8, 1, 500_000, 501_000, "outside", 1),
    ];
    for (corr, stream, start, end, name, latency) in dev0 {
        w.push_kernel(&kernel(0, stream, corr, start, end, name))
            .unwrap();
        w.push_runtime(&Runtime {
            start: start - latency,
            end: start - latency + 700,
            global_tid: global_tid(PID, PID + 1),
            correlation_id: corr,
            name: "cudaLaunchKernel".into(),
            ..Runtime::default()
        })
        .unwrap();
    }
    // Another process reusing correlation id 2: it must not be joined.
    w.push_runtime(&Runtime {
        start: 2_999,
        end: 3_000,
        global_tid: global_tid(OTHER_PID, OTHER_PID),
        correlation_id: 2,
        name: "cudaLaunchKernel".into(),
        ..Runtime::default()
    })
    .unwrap();
    w.push_kernel(&kernel(1, 7, 20, 10_000, 12_000, "e_kernel"))
        .unwrap();
    w.push_kernel(&kernel(1, 7, 21, 15_000, 16_000, "e_kernel"))
        .unwrap();
    for m in [
        memcpy(1, 1, 2, 30_000, 40_000, 1 << 20),
        memcpy(1, 0, 2, 60_000, 61_000, 1_000),
        memcpy(2, 2, 0, 50_000, 70_000, 2 << 20),
        memcpy(8, 2, 2, 80_000, 81_000, 4_096),
        memcpy(2, 2, 1, 600_000, 601_000, 9_999),
    ] {
        w.push_memcpy(&m).unwrap();
    }
    w.push_memset(&Memset {
        start: 90_000,
        end: 90_500,
        bytes: 256,
        ..Memset::default()
    })
    .unwrap();
    for r in [
        range("measure", 1_000, 300_000),
        range("batch 0", 1_000, 100_000),
        range("batch 1", 100_000, 300_000),
        range("batch 2", 400_000, 500_000),
        range("warmup", 0, 1_000),
    ] {
        w.push_nvtx(&r).unwrap();
    }
    w.finish().unwrap();
}

fn analysed(dir: &Path) -> Metrics {
    let path = dir.join("trace.sqlite");
    write_fixture(&path);
    compute(&Trace::load(&path).unwrap(), &Options::default())
}

#[test]
fn busy_span_gaps_and_ratios_over_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    assert!(m.window.found);
    assert_eq!(
        (m.window.start_ns, m.window.end_ns),
        (Some(1_000), Some(300_000))
    );
    assert_eq!(m.devices.len(), 2);
    let d = &m.devices[0];
    assert_eq!(d.device, 0);
    assert_eq!(d.kernel_count, 6);
    assert_eq!(d.clipped_kernels, 2);
    // Clipped durations 1000 + 2000 + 5000 + 500 + 600 + 50000.
    assert_eq!(d.kernel_time_sum_ns, 59_100);
    // Union [1000,2000] [3000,9000] [20000,20500] [21000,21600] [250000,300000].
    assert_eq!(d.busy_ns, 58_100);
    assert_eq!(d.span_ns, 299_000);
    assert_eq!(d.idle_time_ns, 299_000 - 58_100);
    assert_eq!(d.gpu_utilization, 58_100.0 / 299_000.0);
    assert_eq!(d.kernel_time_ratio, 59_100.0 / 299_000.0);
    assert_eq!(d.gaps.largest_ns, vec![228_400, 11_000, 1_000, 500]);
    assert_eq!(
        (
            d.gaps.count_ge_1us,
            d.gaps.count_ge_10us,
            d.gaps.count_ge_100us
        ),
        (3, 2, 1)
    );
    assert_eq!(d.streams, 2);
    // Kernels + copies [30000,40000] [50000,70000] [80000,81000] + memset [90000,90500].
    assert_eq!(d.busy_all_ns, 58_100 + 10_000 + 20_000 + 1_000 + 500);
    assert_eq!(d.span_all_ns, 299_000);
    assert_eq!(d.gpu_utilization_all, 89_600.0 / 299_000.0);
    // Device 1's kernels lie inside the window, uncut.
    let d1 = &m.devices[1];
    assert_eq!((d1.kernel_count, d1.busy_ns, d1.span_ns), (2, 3_000, 6_000));
}

#[test]
fn kernel_summary_matches_nsys_rules() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    let k = &m.devices[0].kernels;
    let names: Vec<&str> = k.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        ["d_kernel", "b_kernel", "void a<int>(int)", "c_kernel"]
    );
    // Whole durations of the selected instances: 150000, 5000, 2×2000, 500+600.
    let total = 150_000.0 + 5_000.0 + 4_000.0 + 1_100.0;
    assert_eq!(k[0].total_ns, 150_000);
    assert_eq!(k[0].time_pct, 100.0 * 150_000.0 / total);
    // A single instance has standard deviation 0.
    assert_eq!((k[1].instances, k[1].stddev_ns), (1, 0.0));
    // An even count: the median is the mean of the middle two.
    assert_eq!(
        (k[3].instances, k[3].med_ns, k[3].avg_ns),
        (2, 550.0, 550.0)
    );
    assert!((k[3].stddev_ns - 5_000f64.sqrt()).abs() < 1e-9);
    assert_eq!((k[3].min_ns, k[3].max_ns), (500, 600));
    let pct: f64 = k.iter().map(|k| k.time_pct).sum();
    assert!((pct - 100.0).abs() < 1e-9);
}

#[test]
fn memcpy_by_direction_with_host_memory_split() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    let mc = &m.devices[0].memcpy;
    let keys: Vec<&str> = mc.keys().map(String::as_str).collect();
    assert_eq!(keys, ["DtoD", "DtoH", "HtoD"]);
    let h2d = &mc["HtoD"];
    assert_eq!(
        (h2d.count, h2d.bytes, h2d.time_ns),
        (2, (1 << 20) + 1_000, 11_000)
    );
    assert_eq!(h2d.host_memory["Pinned"].bytes, 1 << 20);
    assert_eq!(h2d.host_memory["Pageable"].bytes, 1_000);
    let d2h = &mc["DtoH"];
    // The copy at 600000 lies outside the window.
    assert_eq!((d2h.count, d2h.bytes, d2h.time_ns), (1, 2 << 20, 20_000));
    assert_eq!(d2h.bandwidth_gbps, (2 << 20) as f64 / 20_000.0);
    assert_eq!(mc["DtoD"].bytes, 4_096);
    let mem = &m.devices[0].memory_time;
    assert_eq!(mem[0].operation, "[CUDA memcpy Device-to-Host]");
    assert!(mem
        .iter()
        .any(|r| r.operation == "[CUDA memset]" && r.total == 500));
    let size = &m.devices[0].memory_size;
    let h2d_size = size
        .iter()
        .find(|r| r.operation == "[CUDA memcpy Host-to-Device]")
        .unwrap();
    assert_eq!((h2d_size.total, h2d_size.count), ((1 << 20) + 1_000, 2));
    assert_eq!(h2d_size.med, ((1 << 20) as f64 + 1_000.0) / 2.0);
}

#[test]
fn launch_latency_joins_on_correlation_and_process() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    let l = &m.devices[0].launch_latency_ns;
    // Latencies 1000..6000: the other process's call with id 2 is not used.
    assert_eq!(l.count, 6);
    assert_eq!(l.median, 3_500.0);
    assert_eq!(l.p99, 6_000);
    assert_eq!((l.min, l.max), (1_000, 6_000));
    assert_eq!(m.devices[0].cpu_api.launch_call_mean_ns, 700.0);
}

#[test]
fn batches_inside_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    let b = m.batches.unwrap();
    assert_eq!(b.count, 2);
    assert_eq!(b.median_ns, (99_000.0 + 200_000.0) / 2.0);
    assert_eq!((b.min_ns, b.max_ns), (99_000, 200_000));
}

#[test]
fn without_the_window_range_the_whole_trace_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.sqlite");
    write_fixture(&path);
    let opts = Options {
        window: "absent".into(),
        ..Options::default()
    };
    let m = compute(&Trace::load(&path).unwrap(), &opts);
    assert!(!m.window.found);
    let d = &m.devices[0];
    assert_eq!(d.kernel_count, 8);
    assert_eq!(d.clipped_kernels, 0);
    assert_eq!(d.span_ns, 501_000);
    let d1 = &m.devices[1];
    assert_eq!((d1.kernel_count, d1.busy_ns, d1.span_ns), (2, 3_000, 6_000));
    assert_eq!(d1.gpu_utilization, 0.5);
    assert_eq!(d1.gaps.largest_ns, vec![3_000]);
}

#[test]
fn analyze_task_writes_its_five_outputs() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(&dir.path().join("trace.sqlite"));
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let ctx = TaskContext {
        root: dir.path().to_path_buf(),
        out: out.clone(),
        needs: Default::default(),
        gpus: vec![],
        node: "analyze".into(),
        log: None,
        upstream: Default::default(),
    };
    // Without `perfetto`, the window's tracks but not its events.
    let plain: AnalyzeSpec = ron::from_str(r#"(trace: "trace.sqlite")"#).unwrap();
    let plain_out = dir.path().join("plain");
    std::fs::create_dir(&plain_out).unwrap();
    analyze::run(
        &plain,
        &TaskContext {
            out: plain_out.clone(),
            ..ctx.clone()
        },
    )
    .unwrap();
    assert!(plain_out.join("window.tracks.json").is_file());
    assert!(!plain_out.join("window.perfetto.json").exists());
    assert_eq!(plain.outputs().len(), 4);
    let spec: AnalyzeSpec = ron::from_str(r#"(trace: "trace.sqlite", perfetto: true)"#).unwrap();
    assert_eq!(spec.outputs().len(), 5);
    analyze::run(&spec, &ctx).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap();
    assert_eq!(json["devices"][0]["busy_ns"], 58_100);
    assert_eq!(json["source"]["file"], "trace.sqlite");
    assert_eq!(json["source"]["producer"], "vitgraph");
    let parquet = std::fs::read(out.join("kernels.parquet")).unwrap();
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));
    let text = std::fs::read_to_string(out.join("analysis.txt")).unwrap();
    assert!(text.contains("d_kernel"), "{text}");
    // The measured window for ui.perfetto.dev and the page: the fixture's
    // kernels, each on its stream's track.
    let events: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("window.perfetto.json")).unwrap()).unwrap();
    let kernels = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .count()
    };
    let tracks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("window.tracks.json")).unwrap()).unwrap();
    let shown = tracks["kernels"].as_array().unwrap();
    assert!(!shown.is_empty(), "{tracks}");
    assert_eq!(kernels(&events["traceEvents"]), shown.len(), "{tracks}");
    assert_eq!(tracks["kernels_in_window"], shown.len());
    let names = tracks["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n == "d_kernel"), "{tracks}");
    let streams = tracks["streams"].as_array().unwrap().len() as u64;
    assert!(shown
        .iter()
        .all(|k| k[0].as_u64().unwrap() < streams && k[2].as_i64().unwrap() >= 0));
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "analysis.txt",
            "kernels.parquet",
            "metrics.json",
            "window.perfetto.json",
            "window.tracks.json"
        ],
        "only the five outputs, no temporary files"
    );
}

#[test]
fn metrics_are_written_identically_twice() {
    let dir = tempfile::tempdir().unwrap();
    let m = analysed(dir.path());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        write_outputs(&m, d).unwrap();
    }
    for f in ["metrics.json", "kernels.parquet", "analysis.txt"] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f} differs between two writes: early cutoff would never hit"
        );
    }
}

#[test]
fn perfetto_export_has_a_track_per_stream_and_every_activity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.sqlite");
    write_fixture(&path);
    let trace = Trace::load(&path).unwrap();
    let out = dir.path().join("trace.json");
    let n = vitgraph::trace::perfetto::write(&trace, &out).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    assert_eq!(events.len() as u64, n);
    let count = |cat: &str| events.iter().filter(|e| e["cat"] == cat).count();
    assert_eq!(count("kernel"), 10);
    assert_eq!(count("gpu_memcpy"), 5);
    assert_eq!(count("gpu_memset"), 1);
    assert_eq!(count("cuda_runtime"), 9);
    assert_eq!(count("nvtx"), 5);
    // Tracks: device 0 streams 0 (memset), 1, 2, 3 (copies); device 1 stream 7.
    let tracks = events.iter().filter(|e| e["name"] == "thread_name").count();
    assert_eq!(tracks, 5);
    let processes: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(processes, ["GPU 0 (Test GPU 0)", "GPU 1 (Test GPU 1)"]);
    let b = events.iter().find(|e| e["name"] == "b_kernel").unwrap();
    assert_eq!(
        (b["ts"].as_f64(), b["dur"].as_f64()),
        (Some(4.0), Some(5.0))
    );
}

#[test]
fn trace_cli_imports_and_converts_a_kineto_json() {
    use vitgraph::cli::trace::{run, TraceCommand};
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.pt.trace.json");
    std::fs::write(
        &json,
        r#"{"traceEvents": [
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
           "ts": 100.250, "dur": 3, "args": {"correlation": 5}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 110.5, "dur": 2.125,
           "args": {"device": 0, "stream": 7, "correlation": 5}},
          {"ph": "X", "cat": "user_annotation", "name": "measure", "pid": 9, "tid": 9, "ts": 100, "dur": 20}
        ]}"#,
    )
    .unwrap();
    let sqlite = dir.path().join("t.sqlite");
    let code = run(TraceCommand::Import {
        file: json.clone(),
        o: sqlite.clone(),
    })
    .unwrap();
    assert_eq!(code, 0);
    let m = compute(&Trace::load(&sqlite).unwrap(), &Options::default());
    assert!(m.window.found);
    let d = &m.devices[0];
    assert_eq!((d.kernel_count, d.kernel_time_sum_ns), (1, 2_125));
    // 110.5 µs − 100.25 µs, joined through the one CUDA process.
    assert_eq!(d.launch_latency_ns.median, 10_250.0);
    let perfetto = dir.path().join("p.json");
    run(TraceCommand::Perfetto {
        file: json,
        o: perfetto.clone(),
    })
    .unwrap();
    let text = std::fs::read_to_string(&perfetto).unwrap();
    assert!(text.contains("\"ts\":110.500,\"dur\":2.125"), "{text}");
}

#[test]
fn export_task_converts_kineto_copies_sqlite_and_rejects_unknown_names() {
    use vitgraph::tasks::export::{self, ExportSpec};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let ctx = TaskContext {
        root: dir.path().to_path_buf(),
        out: out.clone(),
        needs: Default::default(),
        gpus: vec![],
        node: "export".into(),
        log: None,
        upstream: Default::default(),
    };
    std::fs::write(
        dir.path().join("prof.json"),
        r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
            "ts": 1.5, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 1}}]}"#,
    )
    .unwrap();
    let spec: ExportSpec = ron::from_str(r#"(input: "prof.json")"#).unwrap();
    export::run(&spec, &ctx).unwrap();
    let trace = Trace::load(&out.join("trace.sqlite")).unwrap();
    assert_eq!(trace.kernels.len(), 1);
    assert_eq!(
        (trace.kernels[0].start, trace.kernels[0].end),
        (1_500, 3_500)
    );

    // A trace SQLite is checked and copied.
    write_fixture(&dir.path().join("given.sqlite"));
    let spec: ExportSpec = ron::from_str(r#"(input: "given.sqlite")"#).unwrap();
    export::run(&spec, &ctx).unwrap();
    assert_eq!(
        Trace::load(&out.join("trace.sqlite"))
            .unwrap()
            .kernels
            .len(),
        10
    );

    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    let spec: ExportSpec = ron::from_str(r#"(input: "notes.txt")"#).unwrap();
    let err = export::run(&spec, &ctx).unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
    let bad = ron::from_str::<ExportSpec>(r#"(input: "a.json", fromat: Kineto)"#);
    assert!(bad.is_err(), "unknown fields are rejected");
}
