//! Benchmark of the trace layer (prints figures; not a timed test):
//!
//! 1. writes an nsys-layout SQLite of 1,000,000 kernels on two streams,
//!    100,000 memcpy and 1,000,000 runtime calls with `TraceWriter`;
//! 2. runs Analyze on it in a child process (median wall time of several
//!    runs, peak RSS from `getrusage`);
//! 3. runs the pandas reference `scripts/bench_analyze_pandas.py` on the same
//!    file and checks it agrees;
//! 4. imports a large synthetic PyTorch-profiler JSON (MB/s).
//!
//! Run: `cargo bench --bench bench_analyze` (release profile).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use vitgraph::analysis::{compute, write_outputs, Options};
use vitgraph::trace::records::{global_pid, global_tid};
use vitgraph::trace::{kineto, Kernel, Memcpy, Nvtx, Runtime, Trace, TraceWriter};

const KERNELS: i64 = 1_000_000;
const MEMCPYS: i64 = 100_000;
const PID: u32 = 4242;

/// A small deterministic generator (xorshift), so every run writes the same file.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

fn generate_sqlite(path: &Path) -> f64 {
    generate_sqlite_seeded(path, 0)
}

/// The benchmark trace; `variant` 1 draws other durations and shifts the
/// kernel names by ten (ten kernels removed, ten added), for a trace diff.
fn generate_sqlite_seeded(path: &Path, variant: u64) -> f64 {
    let t = Instant::now();
    let shift = 10 * variant as usize;
    let names: Vec<String> = (shift..200 + shift)
        .map(|i| {
            format!(
                "void kernel_{i}<float, {}>(float const*, float*, int)",
                i % 7
            )
        })
        .collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ variant);
    let mut w = TraceWriter::create(path).expect("create bench trace");
    let mut clock = [1_000_000i64, 1_000_000i64];
    let mut rows = 0u64;
    for i in 0..KERNELS {
        let stream = (i % 2) as usize;
        let start = clock[stream] + rng.below(3_000);
        let end = start + 1_000 + rng.below(20_000);
        clock[stream] = end;
        let corr = i as u32 + 1;
        let name = names[rng.below(names.len() as u64) as usize].clone();
        w.push_kernel(&Kernel {
            start,
            end,
            stream_id: 7 + stream as u32,
            correlation_id: corr,
            global_pid: Some(global_pid(PID)),
            grid: [128, 1, 1],
            block: [256, 1, 1],
            name,
            ..Kernel::default()
        })
        .unwrap();
        let api = start - 5_000 - rng.below(10_000);
        w.push_runtime(&Runtime {
            start: api,
            end: api + 2_000 + rng.below(3_000),
            global_tid: global_tid(PID, PID),
            correlation_id: corr,
            name: "cudaLaunchKernel".into(),
            ..Runtime::default()
        })
        .unwrap();
        rows += 2;
        if i % (KERNELS / MEMCPYS) == 0 {
            let kind = [1, 2, 8][rng.below(3) as usize];
            w.push_memcpy(&Memcpy {
                start: end,
                end: end + 2_000 + rng.below(5_000),
                stream_id: 20,
                bytes: 4_096 + rng.below(1 << 20) as u64,
                copy_kind: kind,
                src_kind: if kind == 1 { rng.below(2) as u32 } else { 2 },
                dst_kind: if kind == 2 { rng.below(2) as u32 } else { 2 },
                global_pid: Some(global_pid(PID)),
                ..Memcpy::default()
            })
            .unwrap();
            rows += 1;
        }
    }
    let end = clock[0].max(clock[1]);
    let range = |text: String, start: i64, end: i64| Nvtx {
        start,
        end: Some(end),
        text,
        domain: None,
        global_tid: global_tid(PID, PID),
    };
    let (lo, hi) = (
        1_000_000 + (end - 1_000_000) / 20,
        end - (end - 1_000_000) / 20,
    );
    w.push_nvtx(&range("measure".into(), lo, hi)).unwrap();
    let step = (hi - lo) / 1_000;
    for b in 0..1_000 {
        w.push_nvtx(&range(
            format!("batch {b}"),
            lo + b * step,
            lo + (b + 1) * step,
        ))
        .unwrap();
    }
    w.finish().unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "wrote {rows} rows in {secs:.2} s ({:.2} M rows/s)",
        rows as f64 / secs / 1e6
    );
    secs
}

/// The children's CPU time (user + system, s) and peak RSS (MB) so far.
fn children_usage() -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs(u.ru_utime) + secs(u.ru_stime),
        u.ru_maxrss as f64 / 1024.0,
    )
}

/// Runs this binary with `args` as a child; returns (wall s, CPU s, peak RSS MB of all children).
fn child(args: &[&Path]) -> (f64, f64, f64) {
    let exe = std::env::current_exe().unwrap();
    let (cpu0, _) = children_usage();
    let t = Instant::now();
    let status = Command::new(exe).args(args).status().unwrap();
    let wall = t.elapsed().as_secs_f64();
    assert!(status.success());
    let (cpu1, rss) = children_usage();
    (wall, cpu1 - cpu0, rss)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn pandas(trace: &Path) -> Option<(f64, f64, serde_json::Value)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_analyze_pandas.py");
    let has_pandas = Command::new("python3")
        .args(["-c", "import pandas"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pandas {
        println!("installing pandas for the reference (pip install pandas)");
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "pandas"])
            .status();
    }
    let (cpu0, _) = children_usage();
    let t = Instant::now();
    let out = Command::new("python3")
        .arg(script)
        .arg(trace)
        .output()
        .ok()?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = children_usage().0 - cpu0;
    if !out.status.success() {
        println!(
            "pandas reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some((secs, cpu, serde_json::from_slice(&out.stdout).ok()?))
}

/// A Kineto-like JSON with CPU ops, runtime calls, kernels and copies; returns its size.
fn generate_kineto(path: &Path, kernels: u64) -> u64 {
    let mut f = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut rng = Rng(12345);
    writeln!(f, "{{\"schemaVersion\": 1, \"deviceProperties\": [{{\"id\": 0, \"name\": \"Bench GPU\"}}],\n\"traceEvents\": [").unwrap();
    let mut ts = 1_712_195_495_000_000_000i64;
    for i in 0..kernels {
        let (us, ns) = (ts / 1000, ts % 1000);
        let d = 2_000 + rng.below(20_000);
        writeln!(f, "  {{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 77, \"tid\": 77, \"ts\": {us}.{ns:03}, \"dur\": {}.{:03}, \"args\": {{\"External id\": {i}, \"Input Dims\": [[32, 197, 768], [768, 768], [768]], \"Input type\": [\"float\", \"float\", \"float\"]}}}},", d / 1000, d % 1000).unwrap();
        writeln!(f, "  {{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 77, \"tid\": 77, \"ts\": {us}.{ns:03}, \"dur\": 4.123, \"args\": {{\"External id\": {i}, \"cbid\": 211, \"correlation\": {i}}}}},").unwrap();
        let k = ts + 9_000;
        writeln!(f, "  {{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_kernel_{}<float>(float*, float const*, int)\", \"pid\": 0, \"tid\": 7, \"ts\": {}.{:03}, \"dur\": {}.{:03}, \"args\": {{\"External id\": {i}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {i}, \"registers per thread\": 32, \"shared memory\": 0, \"blocks per SM\": 5.3, \"warps per SM\": 21.2, \"grid\": [4, 106, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 33}}}},", i % 50, k / 1000, k % 1000, d / 1000, d % 1000).unwrap();
        if i % 10 == 0 {
            writeln!(f, "  {{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pinned -> Device)\", \"pid\": 0, \"tid\": 7, \"ts\": {}.{:03}, \"dur\": 1.280, \"args\": {{\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {i}, \"bytes\": 1048576, \"memory bandwidth (GB/s)\": 12.5}}}},", (k + d) / 1000, (k + d) % 1000).unwrap();
        }
        ts += d + 10_000;
    }
    writeln!(
        f,
        "  {{\"ph\": \"i\", \"name\": \"end\", \"pid\": 0, \"tid\": 0, \"ts\": {}}}\n]}}",
        ts / 1000
    )
    .unwrap();
    f.flush().unwrap();
    drop(f);
    std::fs::metadata(path).unwrap().len()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--write-child") {
        // `--write-child PATH [VARIANT]`: scripts/bench_compare.py writes two.
        let variant = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
        generate_sqlite_seeded(Path::new(&args[2]), variant);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--write-kineto-child") {
        // For profiling the import on its own: the JSON the benchmark imports.
        generate_kineto(Path::new(&args[2]), 400_000);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--import-child") {
        kineto::import(Path::new(&args[2]), Path::new(&args[3])).unwrap();
        return;
    }
    if args.get(1).map(String::as_str) == Some("--analyze-child") {
        // Phase times go to stderr when asked for (BENCH_PHASES=1).
        let t = Instant::now();
        let trace = Trace::load(Path::new(&args[2])).unwrap();
        let loaded = t.elapsed().as_secs_f64();
        let m = compute(&trace, &Options::default());
        let computed = t.elapsed().as_secs_f64();
        write_outputs(&m, Path::new(&args[3])).unwrap();
        if std::env::var_os("BENCH_PHASES").is_some() {
            eprintln!(
                "load {loaded:.3} s, compute {:.3} s, write {:.3} s",
                computed - loaded,
                t.elapsed().as_secs_f64() - computed
            );
        }
        return;
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("vitgraph-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("bench.sqlite");
    let write_secs = generate_sqlite(&trace);
    let size = std::fs::metadata(&trace).unwrap().len();
    println!("trace: {:.1} MB", size as f64 / 1e6);

    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut times = Vec::new();
    let mut cpus = Vec::new();
    let mut rss = 0.0f64;
    for _ in 0..5 {
        let (wall, cpu, peak) = child(&[Path::new("--analyze-child"), &trace, &out]);
        times.push(wall);
        cpus.push(cpu);
        rss = rss.max(peak);
    }
    let analyze = median(times.clone());
    let analyze_cpu = median(cpus);
    println!("analyze runs: {times:.3?}");
    let ours: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("metrics.json")).unwrap()).unwrap();

    let reference = pandas(&trace);
    if let Some((_, _, theirs)) = &reference {
        for key in [
            "kernel_count",
            "kernel_time_sum_ns",
            "busy_ns",
            "span_ns",
            "busy_all_ns",
        ] {
            assert_eq!(
                ours["devices"][0][key], theirs["devices"][0][key],
                "pandas disagrees on {key}"
            );
        }
        assert_eq!(
            ours["devices"][0]["kernels"][0]["total_ns"],
            theirs["devices"][0]["kernels"][0]["total_ns"]
        );
        println!("pandas reference agrees on counts, sums, busy and span");
    }

    let json = dir.join("kineto.json");
    let json_bytes = generate_kineto(&json, 400_000);
    let mut import_times = Vec::new();
    let mut import_cpus = Vec::new();
    for _ in 0..3 {
        let (wall, cpu, _) = child(&[
            Path::new("--import-child"),
            &json,
            &dir.join("kineto.sqlite"),
        ]);
        import_times.push(wall);
        import_cpus.push(cpu);
    }
    let import = median(import_times);
    let import_cpu = median(import_cpus);
    let mb = json_bytes as f64 / 1e6;

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load: Vec<&str> = load.split(' ').take(3).collect();
    println!("machine: {cpus} CPUs, load average {}", load.join(" "));
    println!();
    println!("| measurement | wall | CPU (user + system) |");
    println!("|---|---|---|");
    println!(
        "| write 2.1 M rows with TraceWriter | {write_secs:.2} s ({:.2} M rows/s) | |",
        2.1 / write_secs
    );
    println!(
        "| Analyze, 1 M kernels + 100 k memcpy + 1 M runtime (median of 5) | {analyze:.3} s | {analyze_cpu:.3} s |"
    );
    println!("| Analyze peak RSS | {rss:.0} MB | |");
    match reference {
        Some((secs, cpu, _)) => {
            println!("| pandas reference, same metrics | {secs:.2} s | {cpu:.2} s |");
            println!(
                "| speed-up over pandas | {:.1}× | {:.1}× |",
                secs / analyze,
                cpu / analyze_cpu
            );
        }
        None => println!("| pandas reference | not run | |"),
    }
    println!(
        "| Kineto import, {mb:.0} MB JSON (median of 3) | {import:.2} s ({:.0} MB/s) | {import_cpu:.2} s ({:.0} MB/s) |",
        mb / import,
        mb / import_cpu
    );
    if std::env::var_os("BENCH_KEEP").is_some() {
        println!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
