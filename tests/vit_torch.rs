//! The `Vit` and `OpBench` tasks on real libtorch, on the CPU: the model's
//! parameter and FLOP counts against the closed forms, and complete
//! `results.json` files from tiny runs.
#![cfg(feature = "torch")]

use serde_json::Value;
use tch::{Device, Kind};
use vitgraph::tasks::opbench::{self, OpBenchSpec};
use vitgraph::tasks::vit::{self, formula, model::Vit, VitSpec};
use vitgraph::tasks::{TaskContext, TaskError};

/// libtorch's random generator is process-wide and tests run on parallel
/// threads: every test that draws from it holds this lock.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rng() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spec(ron_text: &str) -> VitSpec {
    ron::from_str(ron_text).unwrap_or_else(|e| panic!("{ron_text} should parse: {e}"))
}

fn context(out: &std::path::Path) -> TaskContext {
    TaskContext {
        root: out.to_owned(),
        out: out.to_owned(),
        needs: Default::default(),
        gpus: vec![],
        node: "test".into(),
        log: None,
        upstream: Default::default(),
    }
}

#[test]
fn model_parameters_and_flops_equal_the_closed_forms() {
    let _rng = rng();
    let shapes = [
        r#"(model: "vit16x12x384", device: "cpu")"#,
        r#"(model: "vit32x6x384", device: "cpu")"#,
        r#"(model: "vit16x2x128", image_size: 64, num_classes: 10, device: "cpu")"#,
        r#"(patch: 8, depth: 3, dim: 96, heads: 3, mlp_dim: 200, image_size: 40, device: "cpu")"#,
    ];
    for text in shapes {
        let config = spec(text).resolve().expect("valid");
        let model = Vit::new(&config, Kind::Float, Device::Cpu).expect("model builds");
        assert_eq!(model.param_count(), formula::params(&config), "{text}");
        assert_eq!(
            model.flops_per_image(),
            formula::flops_per_image(&config),
            "{text}"
        );
    }
    let small = spec(r#"(model: "vit16x12x384", device: "cpu")"#)
        .resolve()
        .expect("valid");
    let model = Vit::new(&small, Kind::Float, Device::Cpu).expect("model builds");
    assert_eq!(
        model.param_count(),
        22_050_664,
        "timm's vit_small_patch16_224"
    );
}

#[test]
fn forward_gives_finite_logits_of_the_right_shape_and_is_seeded() {
    let _rng = rng();
    let config =
        spec(r#"(model: "vit16x2x64", image_size: 32, num_classes: 7, device: "cpu", seed: 5)"#)
            .resolve()
            .expect("valid");
    let _guard = tch::no_grad_guard();
    let images = tch::Tensor::randn([3, 3, 32, 32], (Kind::Float, Device::Cpu));
    let a = Vit::new(&config, Kind::Float, Device::Cpu)
        .expect("builds")
        .forward(&images)
        .expect("runs");
    let b = Vit::new(&config, Kind::Float, Device::Cpu)
        .expect("builds")
        .forward(&images)
        .expect("runs");
    assert_eq!(a.size(), [3, 7]);
    assert!(bool::try_from(a.isfinite().all()).expect("bool"));
    assert!(a.allclose(&b, 0.0, 0.0, false), "same seed, same weights");
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("results.json written"))
        .expect("valid JSON")
}

#[test]
fn a_tiny_cpu_run_writes_every_normative_field() {
    let _rng = rng();
    for pipeline in ["Sync", "Async(queue: 2, workers: 2)"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = format!(
            r#"(model: "vit8x2x64", image_size: 32, num_classes: 10, batch: 2, warmup: 1, samples: 6, device: "cpu", pipeline: {pipeline})"#
        );
        vit::run(&spec(&text), &context(dir.path())).expect("tiny run succeeds");
        let r = read_json(&dir.path().join("results.json"));
        // The check examples/vit_compile_bench.py's files pass too.
        vit::results::check(&r).unwrap_or_else(|e| panic!("{pipeline}: {e}"));
        for field in [
            "config",
            "env",
            "params",
            "flops_per_image",
            "images",
            "throughput_images_per_s",
            "latency_ms",
            "stages_ms",
            "peak_memory_bytes",
        ] {
            assert!(r.get(field).is_some(), "{pipeline}: missing `{field}`");
        }
        for field in [
            "mean",
            "median",
            "p90",
            "p99",
            "min",
            "max",
            "std",
            "median_ci95",
        ] {
            assert!(
                r["latency_ms"].get(field).is_some(),
                "missing latency_ms.{field}"
            );
        }
        for field in ["preprocess", "h2d", "forward", "d2h"] {
            assert!(
                r["stages_ms"][field].is_number(),
                "missing stages_ms.{field}"
            );
        }
        for facet in ["gpu", "driver", "cuda", "libtorch", "cpu", "numa"] {
            assert!(
                r["env"]["key_facets"][facet].is_string(),
                "missing env facet {facet}"
            );
        }
        assert!(
            r["env"]["record"]["before"].is_object() && r["env"]["record"]["after"].is_object()
        );
        assert_eq!(r["images"], 6);
        assert_eq!(r["config"]["batches"], 3);
        assert_eq!(
            r["params"].as_u64(),
            Some(formula::params(&spec(&text).resolve().expect("valid")))
        );
        assert!(r["throughput_images_per_s"].as_f64().expect("number") > 0.0);
        assert!(r["latency_ms"]["min"].as_f64() <= r["latency_ms"]["median"].as_f64());
        assert!(r["stages_ms"]["forward"].as_f64().expect("number") > 0.0);
        assert!(!dir.path().join("results.json.tmp").exists());
    }
}

/// A traced run times its batches untraced (the `timing` range), then
/// records `trace_batches` more (the `measure` range the analysis reads),
/// each set exactly once and in that order.
#[test]
fn a_traced_run_times_untraced_batches_then_traces_its_own() {
    let _rng = rng();
    let dir = tempfile::tempdir().expect("temp dir");
    let text = r#"(model: "vit8x2x64", image_size: 32, num_classes: 10, batch: 2, warmup: 3, samples: 8, device: "cpu", trace: Cupti, trace_batches: 3)"#;
    vit::run(&spec(text), &context(dir.path())).expect("tiny traced run succeeds");
    let r = read_json(&dir.path().join("results.json"));
    assert_eq!(
        r["latency_samples_ms"].as_array().unwrap().len(),
        4,
        "the 4 timed batches"
    );
    assert_eq!(r["trace"]["traced_batches"], 3);
    assert!(r["trace"]["window"]
        .as_str()
        .unwrap()
        .contains("apart from the timed ones"));
    let conn = rusqlite::Connection::open(dir.path().join("trace.sqlite")).unwrap();
    let ranges: Vec<(String, i64, i64)> = conn
        .prepare("SELECT text, start, end FROM NVTX_EVENTS WHERE text IS NOT NULL AND end IS NOT NULL ORDER BY start, end DESC")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let phases: Vec<&str> = ranges
        .iter()
        .map(|r| r.0.as_str())
        .filter(|n| ["warmup", "timing", "trace_warmup", "measure"].contains(n))
        .collect();
    assert_eq!(phases, ["warmup", "timing", "trace_warmup", "measure"]);
    let inside = |phase: &str| {
        let p = ranges.iter().find(|r| r.0 == phase).unwrap();
        ranges
            .iter()
            .filter(|r| r.0.starts_with("batch ") && r.1 >= p.1 && r.2 <= p.2)
            .count()
    };
    assert_eq!(
        (
            inside("warmup"),
            inside("timing"),
            inside("trace_warmup"),
            inside("measure")
        ),
        (3, 4, 2, 3)
    );
}

#[test]
fn cuda_without_a_gpu_is_a_clear_error() {
    if tch::Cuda::is_available() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let err = vit::run(
        &spec(r#"(model: "vit8x2x64", image_size: 32, device: "cuda")"#),
        &context(dir.path()),
    )
    .expect_err("no GPU");
    assert!(matches!(err, TaskError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("`device`"), "{err}");
}

#[test]
fn opbench_on_the_cpu_reports_time_and_rates() {
    let _rng = rng();
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        ("(op: LayerNorm(batch: 2, seq: 16, dim: 64), device: \"cpu\", dtype: \"f32\", repeats: 5)", false),
        ("(op: Gemm(m: 64, n: 48, k: 107, pad_to: Some(112)), device: \"cpu\", dtype: \"f32\", repeats: 5)", true),
        ("(op: Sdpa(batch: 1, heads: 2, seq: 32, head_dim: 16, backend: Math), device: \"cpu\", dtype: \"f32\", repeats: 5)", true),
        ("(op: CrossEntropy(batch: 2, seq: 8, dim: 100), device: \"cpu\", dtype: \"f32\", repeats: 5)", false),
        ("(op: Hetero(heads: 2, head_dim: 16, seqs: [8, 16, 32]), device: \"cpu\", dtype: \"f32\", repeats: 5)", true),
    ];
    for (text, has_flops) in cases {
        let spec: OpBenchSpec = ron::from_str(text).expect("parses");
        opbench::run(&spec, &context(dir.path())).expect("runs");
        let r = read_json(&dir.path().join("results.json"));
        assert_eq!(r["status"], "ok", "{text}: {r}");
        assert!(
            r["time_ms"]["median"].as_f64().expect("median") > 0.0,
            "{text}"
        );
        assert!(r["gbps"].as_f64().expect("gbps") > 0.0, "{text}");
        assert_eq!(r["tflops"].is_number(), has_flops, "{text}");
        assert!(r["env"]["key_facets"].is_object());
        // Five repetitions are too few to summarise well, not a reason to
        // measure again; on the CPU there are no GPU readings. (A loaded
        // machine may add `intruded` from the host load: that is its
        // verdict on the machine, not on the op.)
        let flags: Vec<&str> = r["validity"]["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert!(flags.contains(&"undersampled"), "{text}: {r}");
        let host_only = flags
            .iter()
            .all(|k| *k == "undersampled" || *k == "intruded")
            && r["telemetry"]["other_processes"]
                .as_array()
                .is_none_or(Vec::is_empty);
        assert!(
            r["validity"]["verdict"] == "valid" || host_only,
            "{text}: {r}"
        );
        assert_eq!(
            r["telemetry"]["batch_sm_mhz"].as_array().map(Vec::len),
            Some(5)
        );
    }
}

/// Whether this machine has a GPU for the tests below; without one they
/// skip, saying so, unless `VITGRAPH_REQUIRE_GPU=1` (set where they must run).
fn gpu_or_skip() -> bool {
    if vitgraph::tasks::cuda::load_torch_cuda() && tch::Cuda::is_available() {
        return true;
    }
    assert!(
        std::env::var_os("VITGRAPH_REQUIRE_GPU").is_none_or(|v| v != "1"),
        "VITGRAPH_REQUIRE_GPU=1, but libtorch sees no GPU"
    );
    eprintln!("skipped: no GPU (libtorch_cuda.so or a device missing)");
    false
}

/// ‖a − b‖ / ‖b‖ in f64.
fn relative_error(a: &tch::Tensor, b: &tch::Tensor) -> f64 {
    let a = a.to_kind(Kind::Double);
    let b = b.to_kind(Kind::Double);
    (&a - &b).norm().double_value(&[]) / b.norm().double_value(&[])
}

#[test]
fn a_cuda_graph_replay_computes_the_eager_forward_pass_of_its_input() {
    use vitgraph::tasks::vit::cuda_graph::CudaGraph;
    if !gpu_or_skip() {
        return;
    }
    let _rng = rng();
    let _no_grad = tch::no_grad_guard();
    let config =
        spec(r#"(model: "vit16x4x384", batch: 4, dtype: "bf16", device: "cuda", graph: Cuda)"#)
            .resolve()
            .expect("valid");
    let device = Device::Cuda(0);
    let model = Vit::new(&config, Kind::BFloat16, device).expect("model");
    let image =
        || tch::Tensor::randn([4, 3, 224, 224], (Kind::Float, device)).to_kind(Kind::BFloat16);
    let (x1, x2) = (image(), image());
    let eager1 = model.forward(&x1).expect("eager forward");
    let eager2 = model.forward(&x2).expect("eager forward");
    let input = image();
    let mut output = None;
    let (graph, capture) = CudaGraph::capture(0, || {
        output = Some(model.forward(&input).expect("forward"));
        Ok(())
    })
    .expect("captures");
    assert!(capture.capture_ms > 0.0 && capture.side_stream_warmup == 2);
    let output = output.expect("captured output");
    let replay = |x: &tch::Tensor| {
        input.shallow_clone().copy_(x);
        graph.replay().expect("replays");
        tch::Cuda::synchronize(0);
        output.copy()
    };
    let first = replay(&x1);
    let again = replay(&x1);
    let other = replay(&x2);
    // bf16 arithmetic: the same kernels, at most rounding apart.
    let (e1, e2) = (
        relative_error(&first, &eager1),
        relative_error(&other, &eager2),
    );
    eprintln!("relative error of the replays against eager: {e1:.2e}, {e2:.2e}");
    assert!(e1 < 1e-2 && e2 < 1e-2, "{e1} {e2}");
    // A replay of the same input is exact; another input gives other logits.
    assert!(first.equal(&again), "two replays of one input differ");
    assert!(
        relative_error(&first, &other) > 1e-2,
        "the replay ignored its input"
    );
    assert_eq!(
        first.isnan().sum(Kind::Int64).int64_value(&[]),
        0,
        "NaN in the logits"
    );
}

#[test]
fn a_vit_run_with_graph_cuda_reports_its_capture() {
    if !gpu_or_skip() {
        return;
    }
    let _rng = rng();
    let dir = tempfile::tempdir().expect("temp dir");
    vit::run(
        &spec(r#"(model: "vit16x4x384", batch: 2, samples: 16, warmup: 3, dtype: "bf16", device: "cuda", graph: Cuda)"#),
        &context(dir.path()),
    )
    .expect("runs");
    let text = std::fs::read_to_string(dir.path().join("results.json")).expect("results");
    let v: Value = serde_json::from_str(&text).expect("json");
    vit::results::check(&v).expect("valid results");
    assert_eq!(v["config"]["graph"], "Cuda");
    assert_eq!(v["cuda_graph"]["replayed"], true);
    assert!(v["cuda_graph"]["capture_ms"].as_f64().expect("capture_ms") > 0.0);
    assert_eq!(
        v["forward_samples_ms"].as_array().expect("samples").len(),
        8
    );
}

#[test]
fn without_a_gpu_a_cuda_graph_capture_says_what_is_missing() {
    use vitgraph::tasks::vit::cuda_graph::CudaGraph;
    if vitgraph::tasks::cuda::load_torch_cuda() {
        eprintln!("skipped: libtorch_cuda.so is here");
        return;
    }
    let mut ran = false;
    let err = CudaGraph::capture(0, || {
        ran = true;
        Ok(())
    })
    .err()
    .expect("no capture without libtorch_cuda");
    assert!(!ran, "nothing runs before the shim is loaded");
    assert!(matches!(err, TaskError::Unavailable { .. }), "{err}");
    // The shim was compiled and embedded (an empty one says so first): what
    // is missing is libtorch_cuda.
    let report = format!("{:?}", miette::Report::new(err));
    assert!(report.contains("libtorch_cuda.so"), "{report}");
    assert!(report.contains("remove `graph: Cuda`"), "{report}");
}

#[test]
fn settle_warms_up_in_blocks_until_the_latency_holds_still_and_says_so() {
    let _rng = rng();
    let dir = tempfile::tempdir().expect("temp dir");
    let settling = spec(
        r#"(model: "vit16x1x64", image_size: 32, num_classes: 10, batch: 1, samples: 5, warmup: 1, device: "cpu", settle: 100)"#,
    );
    vit::run(&settling, &context(dir.path())).expect("runs");
    let r = read_json(&dir.path().join("results.json"));
    let settle = &r["settle"];
    let batches = settle["batches"].as_u64().expect("batches");
    assert!(
        batches.is_multiple_of(25) && (50..=100).contains(&batches),
        "{settle}"
    );
    match settle["settled"].as_bool() {
        Some(true) => assert!(settle["last_change"].as_f64().expect("a change").abs() <= 0.02),
        _ => assert!(
            settle["last_change"].is_null() && batches == 100,
            "{settle}"
        ),
    }
    assert_eq!(r["config"]["settle"], 100);
    // Without `settle` the key's spec and results.json do not mention it.
    let plain = spec(r#"(model: "vit16x1x64", device: "cpu")"#);
    assert!(!serde_json::to_string(&plain).unwrap().contains("settle"));
}
