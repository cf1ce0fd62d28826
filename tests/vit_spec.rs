//! The `Vit` spec as pipeline files write it: RON forms, defaults, and the
//! messages bad configs fail with (each names its field).

use vitgraph::tasks::vit::{self, Graph, Pipeline, Preprocess, Trace, VitSpec};
use vitgraph::tasks::{TaskContext, TaskError, TaskSpec};

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
fn enums_parse_as_ron_writes_them() {
    let s = spec(
        r#"(model: "vit32x6x384", batch: 64, dtype: "bf16", pipeline: Async(queue: 4, workers: 2),
            preprocess: Gpu, trace: Cupti, numa: Some(1), seed: 3)"#,
    );
    assert_eq!(
        s.pipeline,
        Pipeline::Async {
            queue: 4,
            workers: 2
        }
    );
    assert_eq!(s.preprocess, Preprocess::Gpu);
    assert_eq!(s.trace, Trace::Cupti);
    assert_eq!(s.numa, Some(1));
    let none = spec(r#"(model: "vit32x6x384", trace: None, pipeline: Sync)"#);
    assert_eq!(none.trace, Trace::None);
    assert_eq!(none.numa, None);
}

#[test]
fn model_string_and_explicit_fields_resolve_with_defaults() {
    let c = spec(r#"(model: "vit16x12x768")"#).resolve().expect("valid");
    assert_eq!(
        (c.patch, c.depth, c.dim, c.heads, c.mlp_dim),
        (16, 12, 768, 12, 3072)
    );
    assert_eq!(
        (c.image_size, c.source_size, c.num_classes),
        (224, 256, 1000)
    );
    let c = spec("(patch: 8, depth: 2, dim: 96, heads: 3, mlp_dim: 200, image_size: 32, samples: 10, batch: 4)")
        .resolve()
        .expect("valid");
    assert_eq!((c.patch, c.heads, c.mlp_dim, c.batches), (8, 3, 200, 3));
    assert_eq!(c.model, "vit8x2x96");
}

#[test]
fn trace_batches_default_to_the_timed_batches_and_stay_out_of_the_key_unless_given() {
    let plain = spec(r#"(model: "vit16x12x768", batch: 4, samples: 10, trace: Cupti)"#);
    assert_eq!(plain.resolve().unwrap().trace_batches, 3);
    assert!(!serde_json::to_string(&plain)
        .unwrap()
        .contains("trace_batches"));
    let given =
        spec(r#"(model: "vit16x12x768", batch: 4, samples: 10, trace: Cupti, trace_batches: 7)"#);
    assert_eq!(given.resolve().unwrap().trace_batches, 7);
    assert!(serde_json::to_string(&given)
        .unwrap()
        .contains("\"trace_batches\":7"));
}

#[test]
fn unknown_fields_are_rejected() {
    let err = ron::from_str::<VitSpec>(r#"(model: "vit16x12x768", batchsize: 8)"#)
        .expect_err("unknown field");
    assert!(err.to_string().contains("batchsize"), "{err}");
}

#[test]
fn bad_configs_fail_with_a_message_naming_the_field() {
    let cases = [
        (
            r#"(model: "vit16x12x768", heads: 5)"#,
            "`dim` (768) is not divisible by `heads` (5)",
        ),
        (
            r#"(model: "vit16x12x768", image_size: 200)"#,
            "`image_size` (200) is not divisible by `patch` (16)",
        ),
        (
            r#"(model: "vit16x12x768", dtype: "f64")"#,
            "`dtype` \"f64\" is unknown",
        ),
        (
            r#"(model: "vitb16")"#,
            "`model` \"vitb16\" is not of the form",
        ),
        (
            r#"(model: "vit16x12x768", batch: 0)"#,
            "`batch` must be at least 1",
        ),
        (
            r#"(model: "vit16x12x768", device: "gpu")"#,
            "`device` \"gpu\" is unknown",
        ),
        (r#"(patch: 16, depth: 12)"#, "`dim` is missing"),
        (
            r#"(model: "vit16x12x768", pipeline: Async(queue: 0, workers: 2))"#,
            "`pipeline`",
        ),
        (
            r#"(model: "vit16x12x768", pipeline: Async(queue: 0, workers: 2))"#,
            "`pipeline`: Async needs `queue` and `workers` of at least 1",
        ),
        (
            r#"(model: "vit16x12x768", trace_batches: 4)"#,
            "`trace_batches` is for `trace: Cupti`",
        ),
        (
            r#"(model: "vit16x12x768", trace: Cupti, trace_batches: 0)"#,
            "`trace_batches` must be at least 1",
        ),
        (
            r#"(model: "vit16x12x768", device: "cpu", graph: Cuda)"#,
            "`graph: Cuda` captures the forward pass into a CUDA graph, which needs a GPU, but `device` is \"cpu\"",
        ),
        (
            r#"(model: "vit16x12x768", device: "cpu", graph: Cuda, trace: Cupti)"#,
            "set `device: \"cuda\"` or remove `graph`",
        ),
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    for (text, expected) in cases {
        let s = spec(text);
        let message = s.validate().expect_err(text);
        assert!(message.contains(expected), "{text}: {message}");
        // The task reports the same message at node start.
        let err = vit::run(&s, &context(dir.path())).expect_err(text);
        assert!(
            matches!(err, TaskError::InvalidSpec { kind: "Vit", .. }),
            "{err}"
        );
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn task_spec_knows_the_kind_and_its_outputs() {
    let task: TaskSpec =
        ron::from_str(r#"Vit((model: "vit32x6x384", trace: Cupti))"#).expect("parses");
    assert_eq!(task.kind(), "Vit");
    assert_eq!(task.outputs(), ["results.json", "trace.sqlite"]);
    assert_eq!(task.resources().gpus, 1);
    assert!(task.measures_hardware());
    let cpu: TaskSpec =
        ron::from_str(r#"Vit((model: "vit32x6x384", device: "cpu"))"#).expect("parses");
    assert_eq!(cpu.resources().gpus, 0);
}

#[cfg(not(feature = "torch"))]
#[test]
fn without_libtorch_a_vit_node_says_how_to_enable_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let err = vit::run(
        &spec(r#"(model: "vit32x6x384", device: "cpu")"#),
        &context(dir.path()),
    )
    .expect_err("no torch");
    let report = format!("{:?}", miette::Report::new(err));
    assert!(report.contains("scripts/setup-libtorch.sh"), "{report}");
    assert!(report.contains("--features torch"), "{report}");
}

/// Loads a pipeline whose `Vit` stage sweeps `pipeline` over `values`.
fn load_sweep(values: &str) -> Result<Vec<(String, Pipeline)>, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("pipelines")).expect("pipelines/");
    let text = format!(
        r#"Pipeline(stages: {{ "runs": Stage(matrix: {{ "p": {values} }},
            task: Vit((model: "vit32x6x384", device: "cpu", pipeline: "${{p}}"))) }})"#
    );
    std::fs::write(dir.path().join("pipelines/sweep.ron"), text).expect("write");
    let graph = vitgraph::pipeline::load(dir.path(), &[]).map_err(|e| format!("{e:?}"))?;
    Ok(graph
        .nodes
        .iter()
        .map(|n| match &n.task {
            TaskSpec::Vit(v) => (n.id.clone(), v.pipeline),
            other => panic!("not a Vit task: {other:?}"),
        })
        .collect())
}

#[test]
fn pipeline_string_forms_sweep_as_scalars() {
    let nodes = load_sweep(r#"["sync", "async:4", "async:16:3", "Async:2"]"#).expect("loads");
    let got: Vec<Pipeline> = nodes.iter().map(|(_, p)| *p).collect();
    let want = [
        Pipeline::Sync,
        Pipeline::Async {
            queue: 4,
            workers: 2,
        },
        Pipeline::Async {
            queue: 16,
            workers: 3,
        },
        Pipeline::Async {
            queue: 2,
            workers: 2,
        },
    ];
    assert_eq!(got, want, "{nodes:?}");
    assert_eq!(nodes[1].0, "runs[p=async:4]");
    for p in want {
        // JSON (a job file, `results.json`'s config) reads back to the same value.
        let json = serde_json::to_string(&p).expect("serializes");
        let back: Pipeline = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, p, "{json}");
    }
    for bad in ["async", "async:x", "sync:1", "pipelined"] {
        let err = load_sweep(&format!("[\"{bad}\"]")).expect_err(bad);
        assert!(err.contains("async:QUEUE"), "{bad}: {err}");
    }
    let err = ron::from_str::<VitSpec>("(pipeline: Async(queue: 2))").expect_err("workers missing");
    assert!(err.to_string().contains("workers"), "{err}");
}

#[test]
fn a_spec_with_unset_optional_fields_survives_the_job_file_round_trip() {
    // `exec-task` reads the spec back from JSON: unset optional fields must
    // not be written as `null`, which the bare-value fields cannot read.
    let task: TaskSpec =
        ron::from_str(r#"Vit((model: "vit32x2x256", image_size: 64, batch: 2, device: "cpu"))"#)
            .expect("parses");
    let json = serde_json::to_string(&task).expect("serializes");
    let back: TaskSpec = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(back, task);
}

#[test]
fn only_traced_runs_are_keyed_by_how_tracing_measures() {
    let facets = |text: &str| TaskSpec::Vit(spec(text)).tool_facets();
    let traced = facets(r#"(model: "vit16x12x768", trace: Cupti)"#);
    assert_eq!(
        traced.get("const.vit_cupti").map(String::as_str),
        Some(vit::CUPTI_METHOD)
    );
    assert!(!facets(r#"(model: "vit16x12x768")"#).contains_key("const.vit_cupti"));
    assert!(!facets(r#"(model: "vit16x12x768", trace: Nsys)"#).contains_key("const.vit_cupti"));
}

#[test]
fn graph_parses_as_a_variant_or_a_string_and_stays_out_of_the_key_when_none() {
    for (text, want) in [
        ("graph: Cuda", Graph::Cuda),
        ("graph: None", Graph::None),
        ("", Graph::None),
    ] {
        let s = spec(&format!(r#"(model: "vit16x12x768", {text})"#));
        assert_eq!(s.graph, want, "{text}");
        assert_eq!(s.resolve().expect("valid").graph, want, "{text}");
        // A spec without a graph serializes (and so keys) as before the field.
        let json = serde_json::to_string(&s).expect("serializes");
        assert_eq!(json.contains("graph"), want == Graph::Cuda, "{json}");
        let back: VitSpec = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, s);
    }
    let err = ron::from_str::<VitSpec>(r#"(model: "vit16x12x768", graph: Cudagraph)"#)
        .expect_err("unknown")
        .to_string();
    assert!(
        err.contains("unknown `graph` \"Cudagraph\"; use `None`, `Cuda`, \"none\" or \"cuda\""),
        "{err}"
    );
}

#[test]
fn graph_sweeps_as_a_matrix_axis_of_strings() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("pipelines")).expect("pipelines/");
    let bad = r#"Pipeline(stages: { "runs": Stage(matrix: { "g": ["none", "yes"] },
        task: Vit((model: "vit32x6x384", graph: "${g}"))) })"#;
    std::fs::write(dir.path().join("pipelines/sweep.ron"), bad).expect("write");
    let err = vitgraph::pipeline::load(dir.path(), &[])
        .expect_err("unknown graph")
        .to_string();
    assert!(
        err.contains("unknown `graph` \"yes\"; use `None`, `Cuda`, \"none\" or \"cuda\""),
        "{err}"
    );
    let text = r#"Pipeline(stages: { "runs": Stage(matrix: { "g": ["none", "CUDA"] },
        task: Vit((model: "vit32x6x384", graph: "${g}"))) })"#;
    std::fs::write(dir.path().join("pipelines/sweep.ron"), text).expect("write");
    let graph = vitgraph::pipeline::load(dir.path(), &[]).expect("loads");
    let got: Vec<(String, Graph)> = graph
        .nodes
        .iter()
        .map(|n| match &n.task {
            TaskSpec::Vit(v) => (n.id.clone(), v.graph),
            other => panic!("not a Vit task: {other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("runs[g=none]".to_owned(), Graph::None),
            ("runs[g=CUDA]".to_owned(), Graph::Cuda)
        ]
    );
    // On the CPU the same sweep fails at load time, naming the field.
    let cpu = text.replace("graph:", "device: \"cpu\", graph:");
    std::fs::write(dir.path().join("pipelines/sweep.ron"), cpu).expect("write");
    let err = format!(
        "{:?}",
        vitgraph::pipeline::load(dir.path(), &[]).expect_err("graph on the CPU")
    );
    assert!(err.contains("`graph: Cuda`"), "{err}");
    assert!(err.contains("sweep.ron"), "{err}");
}
