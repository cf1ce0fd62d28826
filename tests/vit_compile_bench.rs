//! `examples/vit_compile_bench.py`, the Python benchmark of the RQ3 study's
//! torch.compile runs, on the CPU: its `results.json` passes the `Vit` task's
//! schema check (`vit::results::check`), its model has the task's parameter
//! count, its PyTorch-profiler trace reads as a trace whose `measure` window
//! vitgraph's Kineto importer finds, and bad arguments fail clearly.
//!
//! PyTorch comes from `$VITGRAPH_PYTHON` (default `python3`) with
//! `$VITGRAPH_PYTHONPATH` prepended to `PYTHONPATH` (what
//! `scripts/setup-pytorch.sh` prints). Where it cannot import torch the tests
//! that need it are skipped with the reason, except under `CI=true`, where
//! that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use vitgraph::stats::latency::LatencyStats;
use vitgraph::tasks::vit::results;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vit_compile_bench.py")
}

fn python() -> Command {
    let interpreter = std::env::var("VITGRAPH_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let mut cmd = Command::new(interpreter);
    if let Ok(extra) = std::env::var("VITGRAPH_PYTHONPATH") {
        let path = match std::env::var("PYTHONPATH") {
            Ok(old) if !old.is_empty() => format!("{extra}:{old}"),
            _ => extra,
        };
        cmd.env("PYTHONPATH", path);
    }
    cmd
}

/// `None` when torch imports; otherwise why not. Under `CI=true` a missing
/// torch fails the test instead.
fn torch_missing() -> Option<String> {
    let out = python()
        .args(["-c", "import torch; print(torch.__version__)"])
        .output();
    let reason = match out {
        Ok(out) if out.status.success() => return None,
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("")
            .to_owned(),
        Err(e) => format!("cannot run the interpreter: {e}"),
    };
    let reason = format!(
        "PyTorch is not importable ({reason}); run `eval \"$(scripts/setup-pytorch.sh)\"` first"
    );
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason}");
    }
    eprintln!("skipped: {reason}");
    Some(reason)
}

fn bench(args: &[&str], cache: &Path) -> Output {
    python()
        .arg(script())
        .args(args)
        // Inductor's caches go into the test's temporary folder, not $HOME.
        .env("TORCHINDUCTOR_CACHE_DIR", cache.join("inductor"))
        .env("TRITON_CACHE_DIR", cache.join("triton"))
        .output()
        .expect("python runs")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} should exist: {e}", path.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

/// A tiny CPU run of `mode`: checked results, returned with the run's folder.
fn tiny_run(mode: &str, warmup: &str, trace: bool) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("results.json");
    let trace_path = dir.path().join("trace.json");
    let mut args = vec![
        "--model",
        "vit16x1x64",
        "--image-size",
        "32",
        "--num-classes",
        "10",
        "--batch",
        "2",
        "--warmup",
        warmup,
        "--samples",
        "5",
        "--device",
        "cpu",
        "--dtype",
        "f32",
        "--seed",
        "3",
        "--compile",
        mode,
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    if trace {
        args.extend(["--trace", trace_path.to_str().expect("utf-8 path")]);
    }
    let run = bench(&args, dir.path());
    assert!(
        run.status.success(),
        "--compile {mode} failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let value = read_json(&out);
    let checked = results::check(&value).unwrap_or_else(|e| panic!("--compile {mode}: {e}"));
    assert_eq!(checked.config.model, "vit16x1x64");
    assert_eq!((checked.config.heads, checked.config.mlp_dim), (1, 256));
    // 5 images in batches of 2: three batches, six images.
    assert_eq!((checked.config.batches, checked.images), (3, 6));
    assert_eq!(value["compile"], mode);
    assert!(value["compile_s"].as_f64().expect("compile_s") > 0.0);
    assert_eq!(
        value["latency_samples_ms"].as_array().map(Vec::len),
        Some(3),
        "one latency per measured batch"
    );
    // The statistics are the Rust task's, bootstrap included, on the same samples.
    let samples: Vec<f64> = value["latency_samples_ms"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let rust = LatencyStats::from_samples(&samples, 3).expect("samples");
    let py = &checked.latency_ms;
    let pairs = [
        (py.mean, rust.mean),
        (py.median, rust.median),
        (py.p90, rust.p90),
        (py.p99, rust.p99),
        (py.std, rust.std),
        (py.median_ci95[0], rust.median_ci95[0]),
        (py.median_ci95[1], rust.median_ci95[1]),
    ];
    for (a, b) in pairs {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "{py:?} vs {rust:?}"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listable")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    (value, dir)
}

#[test]
fn eager_results_pass_the_vit_schema_check_and_the_trace_has_the_measure_window() {
    if torch_missing().is_some() {
        return;
    }
    let (value, dir) = tiny_run("none", "1", true);
    // vit16x1x64 at 32 px: 4 patches, 5 tokens, 10 classes.
    assert_eq!(
        value["params"],
        3 * 256 * 64
            + 64
            + 64
            + 5 * 64
            + (4 * 64 * 64 + 2 * 64 * 256 + 9 * 64 + 256)
            + 2 * 64
            + 64 * 10
            + 10
    );
    assert_eq!(value["trace"]["kernels"], 0, "no GPU, no kernels");
    // The Kineto importer turns the `measure` user_annotation into the NVTX
    // window that `Analyze` cuts, with one `batch N` range per measured batch.
    let summary = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
        .args(["trace", "summary", "--json"])
        .arg(dir.path().join("trace.json"))
        .output()
        .expect("vitgraph runs");
    assert!(
        summary.status.success(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    let metrics: Value = serde_json::from_slice(&summary.stdout).expect("metrics JSON");
    assert_eq!(metrics["window"]["name"], "measure", "{metrics}");
    assert_eq!(metrics["window"]["found"], true, "{metrics}");
    assert_eq!(metrics["window"]["ranges"], 1, "{metrics}");
    assert_eq!(
        metrics["batches"]["count"], 3,
        "one `batch N` range per batch"
    );
    let window_ms = metrics["window"]["duration_ns"].as_f64().expect("duration") / 1e6;
    let batches_ms: f64 = value["latency_samples_ms"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(Value::as_f64)
        .sum();
    assert!(
        window_ms >= batches_ms * 0.9,
        "the window ({window_ms} ms) holds the measured batches ({batches_ms} ms)"
    );
}

#[test]
fn compiled_default_mode_results_pass_the_vit_schema_check() {
    if torch_missing().is_some() {
        return;
    }
    let (eager, _dir) = tiny_run("none", "1", false);
    let (compiled, _dir2) = tiny_run("default", "3", false);
    assert_eq!(compiled["params"], eager["params"]);
    assert_eq!(compiled["flops_per_image"], eager["flops_per_image"]);
    // Compiling (dynamo, inductor, a C++ compiler) takes far longer than an
    // eager first call of this tiny model.
    assert!(
        compiled["compile_s"].as_f64() > eager["compile_s"].as_f64(),
        "compile {} s vs eager first call {} s",
        compiled["compile_s"],
        eager["compile_s"]
    );
}

#[test]
fn bad_arguments_fail_with_status_2_naming_the_flag() {
    // Arguments are checked before torch is imported, so these run anywhere
    // python3 does.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("r.json");
    let out = out.to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 6] = [
        (&["--model", "vit16x12", "--out", out], "--model"),
        (
            &["--model", "vit16x2x64", "--image-size", "30", "--out", out],
            "--image-size",
        ),
        (
            &["--model", "vit16x2x64", "--heads", "5", "--out", out],
            "--heads",
        ),
        (
            &["--model", "vit16x2x64", "--compile", "fast", "--out", out],
            "--compile",
        ),
        (
            &[
                "--model",
                "vit16x2x64",
                "--compile",
                "reduce-overhead",
                "--warmup",
                "1",
                "--out",
                out,
            ],
            "--warmup",
        ),
        (
            &["--model", "vit16x2x64", "--out", "/nonexistent/dir/r.json"],
            "--out",
        ),
    ];
    for (args, flag) in cases {
        let run = bench(args, dir.path());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
        assert!(!Path::new(out).exists(), "{args:?} wrote an output");
    }
}

/// A `results.json` as the `Vit` task writes it, for a tiny CPU config.
fn task_results() -> Value {
    use vitgraph::tasks::vit::{formula, VitSpec};
    let spec: VitSpec = ron::from_str(
        r#"(model: "vit16x1x64", image_size: 32, num_classes: 10, batch: 2, samples: 5, device: "cpu")"#,
    )
    .expect("parses");
    let config = spec.resolve().expect("valid");
    let env = vitgraph::host::env::probe();
    let m = results::Measurement {
        params: formula::params(&config),
        flops_per_image: formula::flops_per_image(&config),
        images: 6,
        window_s: 0.5,
        batch_ms: vec![150.0, 160.0, 170.0],
        stage_sum_ms: [3.0, 0.3, 470.0, 0.6],
        forward_ms: vec![150.0, 155.0, 165.0],
        forward_device_ms: Vec::new(),
        peak_memory_bytes: Some(1 << 20),
        copy_stream: false,
        traced_batches: 0,
        cuda_graph: None,
        spans: vec![(0.0, 150.0), (150.0, 310.0), (310.0, 480.0)],
        recording: Default::default(),
        settled: None,
    };
    serde_json::to_value(results::VitResults::new(&config, env.clone(), env, &m))
        .expect("serializes")
}

/// What two measured batches of 2 images on a GPU give back, untraced.
fn two_gpu_batches(config: &vitgraph::tasks::vit::VitConfig) -> results::Measurement {
    use vitgraph::tasks::vit::formula;
    results::Measurement {
        params: formula::params(config),
        flops_per_image: formula::flops_per_image(config),
        images: 4,
        window_s: 0.1,
        batch_ms: vec![1.0, 1.0],
        stage_sum_ms: [0.2, 0.2, 1.4, 0.2],
        forward_ms: vec![0.7, 0.7],
        forward_device_ms: Vec::new(),
        peak_memory_bytes: None,
        copy_stream: false,
        traced_batches: 0,
        cuda_graph: None,
        spans: vec![(0.0, 1.0), (1.0, 2.0)],
        recording: Default::default(),
        settled: None,
    }
}

#[test]
fn batches_taken_while_throttled_leave_the_summary_and_are_counted() {
    use vitgraph::tasks::vit::VitSpec;
    use vitgraph::telemetry::{Reading, Recording, Sample};
    let spec: VitSpec = ron::from_str(
        r#"(model: "vit16x1x64", image_size: 32, batch: 2, samples: 6, device: "cuda")"#,
    )
    .expect("parses");
    let config = spec.resolve().expect("valid");
    let env = vitgraph::host::env::probe();
    let at = |t_ms: f64, reasons: u64| Sample {
        t_ms,
        reading: Reading {
            sm_mhz: 1980,
            reasons,
            processes: vec![std::process::id()],
            ..Reading::default()
        },
    };
    let m = results::Measurement {
        images: 6,
        batch_ms: vec![1.0, 9.0, 1.2],
        forward_ms: vec![0.7, 8.0, 0.8],
        forward_device_ms: Vec::new(),
        spans: vec![(0.0, 1.0), (1.0, 10.0), (10.0, 11.2)],
        // A power cap (reason 0x4) read only while the second batch ran.
        recording: Recording {
            source: "script".into(),
            samples: vec![
                at(-0.5, 0),
                at(0.9, 0),
                at(5.0, 0x4),
                at(10.5, 0),
                at(11.5, 0),
            ],
            host: None,
            pid: std::process::id(),
            read_us: Vec::new(),
            waited: None,
        },
        ..two_gpu_batches(&config)
    };
    let v = serde_json::to_value(results::VitResults::new(&config, env.clone(), env, &m))
        .expect("serializes");
    assert_eq!(v["latency_samples_ms"], serde_json::json!([1.0, 1.2]));
    assert_eq!(v["forward_samples_ms"], serde_json::json!([0.7, 0.8]));
    assert_eq!(v["latency_ms"]["max"], 1.2);
    let validity = &v["validity"];
    assert_eq!(validity["verdict"], "invalid");
    assert_eq!(validity["excluded_batches"], serde_json::json!([1]));
    assert_eq!(validity["excluded_latency_ms"], serde_json::json!([9.0]));
    assert_eq!(validity["flags"][0]["kind"], "throttled");
    assert_eq!(
        v["telemetry"]["batch_reasons"],
        serde_json::json!([0, 4, 0])
    );
    assert_eq!(
        v["telemetry"]["reasons_seen"],
        serde_json::json!(["sw_power_cap"])
    );
    results::check(&v).expect("a run with excluded batches still passes the schema check");
}

#[test]
fn results_say_where_the_copies_ran_on_a_gpu_only() {
    use vitgraph::tasks::vit::VitSpec;
    assert!(
        task_results().get("h2d_on").is_none(),
        "a CPU run has no copies"
    );
    let spec: VitSpec = ron::from_str(
        r#"(model: "vit16x1x64", image_size: 32, batch: 2, samples: 4, device: "cuda:0", pipeline: Async(queue: 2, workers: 2))"#,
    )
    .expect("parses");
    let config = spec.resolve().expect("valid");
    let env = vitgraph::host::env::probe();
    for (copy_stream, said) in [(true, "copy_stream"), (false, "compute_stream")] {
        let m = results::Measurement {
            copy_stream,
            ..two_gpu_batches(&config)
        };
        let v = serde_json::to_value(results::VitResults::new(
            &config,
            env.clone(),
            env.clone(),
            &m,
        ))
        .expect("serializes");
        assert_eq!(v["h2d_on"], said);
    }
}

/// The forward pass timed on the device is written beside the host-timed
/// one when every batch has its time, and not at all otherwise (a CPU
/// run, or events that failed part way: never misaligned with batches).
#[test]
fn results_carry_the_device_timed_forward_when_every_batch_has_one() {
    use vitgraph::tasks::vit::VitSpec;
    assert!(
        task_results().get("forward_device_ms").is_none(),
        "a CPU run has no events"
    );
    let spec: VitSpec = ron::from_str(
        r#"(model: "vit16x1x64", image_size: 32, batch: 2, samples: 4, device: "cuda:0")"#,
    )
    .expect("parses");
    let config = spec.resolve().expect("valid");
    let env = vitgraph::host::env::probe();
    let json = |device: Vec<f64>| {
        let m = results::Measurement {
            forward_device_ms: device,
            ..two_gpu_batches(&config)
        };
        serde_json::to_value(results::VitResults::new(
            &config,
            env.clone(),
            env.clone(),
            &m,
        ))
        .expect("serializes")
    };
    let v = json(vec![0.50, 0.52]);
    assert_eq!(v["forward_device_ms"]["median"], 0.51, "{v}");
    assert_eq!(
        v["forward_device_samples_ms"],
        serde_json::json!([0.50, 0.52])
    );
    let v = json(vec![0.50]);
    assert!(v.get("forward_device_ms").is_none(), "{v}");
    assert!(v.get("forward_device_samples_ms").is_none(), "{v}");
}

#[test]
fn results_say_whether_a_cuda_graph_was_replayed_and_what_its_capture_cost() {
    use vitgraph::tasks::vit::{Graph, VitSpec};
    let plain = task_results();
    assert_eq!(plain["config"]["graph"], "None");
    assert!(
        plain.get("cuda_graph").is_none(),
        "no graph, no account of one"
    );
    let spec: VitSpec = ron::from_str(
        r#"(model: "vit16x1x64", image_size: 32, batch: 2, samples: 4, device: "cuda", graph: Cuda)"#,
    )
    .expect("parses");
    let config = spec.resolve().expect("valid");
    assert_eq!(config.graph, Graph::Cuda);
    let env = vitgraph::host::env::probe();
    let m = results::Measurement {
        cuda_graph: Some(results::CudaGraphUse {
            replayed: true,
            side_stream_warmup: 2,
            side_stream_warmup_ms: 3.5,
            capture_ms: 12.25,
        }),
        ..two_gpu_batches(&config)
    };
    let v = serde_json::to_value(results::VitResults::new(&config, env.clone(), env, &m))
        .expect("serializes");
    assert_eq!(v["config"]["graph"], "Cuda");
    assert_eq!(
        v["cuda_graph"],
        serde_json::json!({"replayed": true, "side_stream_warmup": 2,
            "side_stream_warmup_ms": 3.5, "capture_ms": 12.25})
    );
    let back = results::check(&v).expect("passes the schema check");
    assert_eq!(back.cuda_graph.map(|g| g.capture_ms), Some(12.25));
    // Files from before the field (no `graph` in config) still read.
    let mut old = plain.clone();
    old["config"]
        .as_object_mut()
        .expect("config")
        .remove("graph");
    let back = results::check(&old).expect("old results pass");
    assert_eq!(back.config.graph, Graph::None);
}

#[test]
fn the_check_accepts_the_tasks_own_results_and_names_what_is_wrong() {
    let good = task_results();
    results::check(&good).expect("the task's own results pass");
    let broken = |path: &[&str], value: Value| {
        let mut v = good.clone();
        let (last, parents) = path.split_last().expect("non-empty path");
        let mut slot = &mut v;
        for p in parents {
            slot = &mut slot[*p];
        }
        match value {
            Value::Null => {
                slot.as_object_mut().expect("object").remove(*last);
            }
            other => slot[*last] = other,
        }
        results::check(&v).expect_err("broken results fail")
    };
    let params = good["params"].as_u64().expect("params");
    assert!(broken(&["params"], (params + 1).into()).contains("`params`"));
    assert!(broken(&["images"], 5.into()).contains("`images`"));
    assert!(broken(&["latency_ms", "min"], 500.0.into()).contains("`latency_ms`"));
    assert!(broken(&["stages_ms", "forward"], (-1.0).into()).contains("`stages_ms.forward`"));
    assert!(broken(&["stages_ms"], Value::Null).contains("stages_ms"));
    assert!(broken(&["env", "key_facets", "gpu"], Value::Null).contains("`env.key_facets.gpu`"));
    assert!(broken(&["config", "dtype"], "f64".into()).contains("schema"));
}

#[test]
fn rq3_report_specs_survive_the_job_file_round_trip() {
    // Built-in tasks reach `exec-task` as JSON; a `Plot` without `name`
    // must not be written as `null`, which its bare-value field cannot read.
    use vitgraph::tasks::TaskSpec;
    let task: TaskSpec = ron::from_str(
        r#"Report((title: "t", sources: ["a"], columns: ["x"],
            plots: [Plot(x: "params", y: "x", series: "compile", log_x: true)],
            compare: Some(Compare(param: "compile", baseline: "none", metric: "x"))))"#,
    )
    .expect("parses");
    let json = serde_json::to_string(&task).expect("serializes");
    let back: TaskSpec = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(back, task);
}

#[test]
fn kernels_and_their_gpu_time_per_forward_come_from_the_forward_ranges() {
    // Two measured forward ranges (GPU projections) with 2 and 1 kernels,
    // one kernel outside; durations in µs, as Chrome traces write them.
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.json");
    let events = serde_json::json!({"traceEvents": [
        {"cat": "gpu_user_annotation", "name": "forward", "ts": 100, "dur": 50},
        {"cat": "gpu_user_annotation", "name": "forward", "ts": 200, "dur": 50},
        {"cat": "kernel", "name": "a", "ts": 110, "dur": 10},
        {"cat": "kernel", "name": "b", "ts": 130, "dur": 20},
        {"cat": "kernel", "name": "c", "ts": 210, "dur": 30},
        {"cat": "kernel", "name": "d", "ts": 400, "dur": 99},
    ]});
    std::fs::write(&trace, events.to_string()).expect("write");
    let dir_of_script = script().parent().expect("examples/").to_owned();
    let out = python()
        .arg("-c")
        .arg(format!(
            "import sys; sys.path.insert(0, {:?}); import vit_compile_bench as b; print(b.kernels_per_forward({:?}, 2))",
            dir_of_script.display().to_string(),
            trace.display().to_string()
        ))
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 3 kernels over 2 forwards; (10 + 20 + 30) µs / 2 = 0.03 ms; 4 in all.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "(1.5, 0.03, 4)"
    );
}
