//! The `Report` task on fixture upstream directories: the joined table, the
//! errors for bad upstream files, environment flags, the bootstrap and plots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};
use vitgraph::tasks::report::{run, ReportSpec};
use vitgraph::tasks::{TaskContext, TaskError, UpstreamNode};
use vitgraph::value::Value;

/// A workspace of fixture nodes under a temporary directory.
struct Fixture {
    dir: tempfile::TempDir,
    upstream: BTreeMap<String, Vec<UpstreamNode>>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            upstream: BTreeMap::new(),
        }
    }

    /// Adds node `stage[k=v,…]` with the given files (name → JSON text).
    fn node(&mut self, stage: &str, params: &[(&str, Value)], files: &[(&str, String)]) -> PathBuf {
        let cell: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let id = format!("{stage}[{}]", cell.join(","));
        let dir = self.dir.path().join("out").join(stage).join(cell.join("_"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        self.upstream
            .entry(stage.to_owned())
            .or_default()
            .push(UpstreamNode {
                id,
                params: params
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
                dir: dir.clone(),
                rep: None,
                together: None,
                aa_twin: false,
            });
        dir
    }

    /// Adds repetition `rep` of a configuration: node `stage[…,rep=N]`.
    fn repetition(
        &mut self,
        stage: &str,
        params: &[(&str, Value)],
        rep: u32,
        files: &[(&str, String)],
    ) {
        let mut with_rep = params.to_vec();
        with_rep.push(("rep", int(i64::from(rep))));
        self.node(stage, &with_rep, files);
        let last = self.upstream.get_mut(stage).unwrap().last_mut().unwrap();
        last.rep = Some(rep);
    }

    fn context(&self, out: &str) -> TaskContext {
        let out = self.dir.path().join(out);
        std::fs::create_dir_all(&out).unwrap();
        TaskContext {
            root: self.dir.path().to_owned(),
            out,
            needs: BTreeMap::new(),
            gpus: Vec::new(),
            node: "report".to_owned(),
            log: None,
            upstream: self.upstream.clone(),
        }
    }
}

fn facets(gpu: &str) -> Json {
    json!({"gpu": gpu, "driver_major": "570", "cuda": "12.8", "libtorch": "2.11.0",
           "cpu": "AMD EPYC 9454", "numa": "none"})
}

/// A `results.json` whose throughput and latency agree with its samples.
fn results(samples: &[f64], gpu: &str) -> String {
    let batch = 8.0;
    let total_ms: f64 = samples.iter().sum();
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = vitgraph::stats::Statistic::Quantile(0.5).of(&mut sorted);
    json!({
        "config": {"batch_size": 8},
        "env": {"key_facets": facets(gpu), "host": "gpu-01", "gpu_uuid": "GPU-1234"},
        "params": 5_717_416,
        "flops_per_image": 1.1e9,
        "images": (batch as usize) * samples.len(),
        "throughput_images_per_s": batch * samples.len() as f64 / (total_ms / 1000.0),
        "latency_ms": {"median": median, "mean": total_ms / samples.len() as f64},
        "latency_samples_ms": samples,
    })
    .to_string()
}

fn metrics(utilization: f64) -> String {
    json!({
        "source": {"kind": "cupti"},
        "window": {"range": "measure"},
        "devices": [{"device": 0, "kernel_count": 120, "gpu_utilization": utilization,
                     "kernel_time_ratio": utilization * 1.5,
                     "gaps": {"count_ge_1us": 4, "largest_ns": [900, 400]}}],
    })
    .to_string()
}

fn spec(ron_text: &str) -> ReportSpec {
    ron::from_str(ron_text).unwrap()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn text(s: &str) -> Value {
    Value::Str(s.to_owned())
}

#[test]
fn joins_metrics_and_results_by_params_into_an_exact_csv() {
    let mut fx = Fixture::new();
    for (dim, util, ms) in [(384, 0.5, 4.0), (192, 0.25, 2.0)] {
        let p = [("dim", int(dim)), ("patch", int(16))];
        fx.node("runs", &p, &[("results.json", results(&[ms, ms], "H100"))]);
        fx.node("analysis", &p, &[("metrics.json", metrics(util))]);
    }
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "RQ1", sources: ["analysis", "runs"],
            columns: ["gpu_utilization", "throughput_images_per_s", "latency_ms.median", "gaps.largest_ns.0"])"#,
    );
    run(&spec, &ctx).unwrap();
    assert_eq!(
        read(&ctx.out, "table.csv"),
        "dim,patch,gpu_utilization,throughput_images_per_s,latency_ms.median,gaps.largest_ns.0,reps,interval,samples,env_group,nodes\n\
         192,16,0.25,4000.0,2.0,900,1,,2,env1,\"analysis[dim=192,patch=16] runs[dim=192,patch=16]\"\n\
         384,16,0.5,2000.0,4.0,900,1,,2,env1,\"analysis[dim=384,patch=16] runs[dim=384,patch=16]\"\n"
    );
    let parquet = std::fs::read(ctx.out.join("table.parquet")).unwrap();
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));
    let md = read(&ctx.out, "report.md");
    assert!(md.starts_with("# RQ1\n"), "{md}");
    assert!(
        md.contains("host gpu-01; GPU H100, driver 570, CUDA 12.8, libtorch 2.11.0"),
        "{md}"
    );
    assert!(
        md.contains("2 row(s) joined from 4 node(s) of `analysis`, `runs`"),
        "{md}"
    );
    assert!(
        md.contains("| 192 | 16 | 0.2500 | 4000 | 2.000 | 900 | 1 |  | 2 | env1 |"),
        "{md}"
    );
    assert!(!md.contains("Warning"), "{md}");
}

/// `answer` names the metric that answers the study's question: under the
/// title, with what it measures (an end-to-end latency is labelled as
/// host-paced and CPU-bound where the CPU preprocesses); a metric the
/// table lacks is an error naming it, before anything is written.
#[test]
fn the_answering_metric_is_named_with_what_it_measures() {
    let one_run = |fx: &mut Fixture| {
        fx.node(
            "runs",
            &[("dim", int(192))],
            &[("results.json", results(&[2.0, 2.0], "H100"))],
        );
        fx.context("report")
    };
    let mut fx = Fixture::new();
    let ctx = one_run(&mut fx);
    run(
        &spec(r#"(title: "RQ", sources: ["runs"], columns: ["latency_ms.median"], answer: Some("latency_ms.median"))"#),
        &ctx,
    )
    .unwrap();
    let md = read(&ctx.out, "report.md");
    assert!(
        md.starts_with("# RQ\n\n**Answered by** `latency_ms.median`: the end-to-end batch latency")
            && md.contains("CPU-bound where the CPU preprocesses"),
        "{md}"
    );
    let mut fx = Fixture::new();
    let ctx = one_run(&mut fx);
    let err = run(
        &spec(r#"(title: "RQ", sources: ["runs"], columns: ["latency_ms.median"], answer: Some("forward_device_ms.median"))"#),
        &ctx,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`answer` names `forward_device_ms.median`"),
        "{err}"
    );
    assert!(!ctx.out.join("report.md").exists());
}

#[test]
fn a_missing_upstream_file_names_the_node() {
    let mut fx = Fixture::new();
    fx.node("runs", &[("dim", int(192))], &[]);
    let err = run(
        &spec(r#"(title: "t", sources: ["runs"])"#),
        &fx.context("report"),
    )
    .unwrap_err();
    assert!(
        matches!(err, TaskError::UpstreamFileMissing { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("`runs[dim=192]`") && message.contains("metrics.json"),
        "{message}"
    );
}

#[test]
fn a_malformed_upstream_file_names_the_node_and_the_file() {
    let mut fx = Fixture::new();
    fx.node(
        "analysis",
        &[("dim", int(192))],
        &[("metrics.json", "{\"devices\": [".to_owned())],
    );
    let err = run(
        &spec(r#"(title: "t", sources: ["analysis"])"#),
        &fx.context("report"),
    )
    .unwrap_err();
    let TaskError::UpstreamJson { node, path, .. } = &err else {
        panic!("expected a JSON error, got {err:?}");
    };
    assert_eq!(node, "analysis[dim=192]");
    assert!(path.ends_with("metrics.json"), "{path:?}");

    let mut fx = Fixture::new();
    fx.node(
        "analysis",
        &[("dim", int(192))],
        &[("metrics.json", r#"{"devices": [{"device": 0}]}"#.to_owned())],
    );
    let err = run(
        &spec(r#"(title: "t", sources: ["analysis"], device: 1)"#),
        &fx.context("report"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`devices` has 1 entries"), "{err}");

    // No devices at all is a trace without a GPU (a CPU run), not an error:
    // the GPU columns stay empty and report.md says why.
    let mut fx = Fixture::new();
    fx.node(
        "analysis",
        &[("dim", int(192))],
        &[("metrics.json", r#"{"devices": []}"#.to_owned())],
    );
    let ctx = fx.context("report");
    run(
        &spec(
            r#"(title: "t", sources: ["analysis"], columns: ["gpu_utilization"],
                plots: [Plot(x: "dim", y: "gpu_utilization")])"#,
        ),
        &ctx,
    )
    .expect("a CPU run's metrics are reported");
    let md = std::fs::read_to_string(ctx.out.join("report.md")).expect("report.md");
    assert!(md.contains("recorded no GPU"), "{md}");
    // Its GPU plot is one line of text, not an empty frame.
    let svg = read(&ctx.out, "plots/gpu_utilization_vs_dim.svg");
    assert!(
        svg.contains("no data, the traces recorded no GPU (runs on the CPU)"),
        "{svg}"
    );
    assert!(svg.contains(r#"height="48""#), "{svg}");
    assert!(!svg.contains("<line"), "no axes: {svg}");
}

#[test]
fn a_source_outside_needs_and_an_unknown_column_are_explained() {
    let mut fx = Fixture::new();
    fx.node(
        "runs",
        &[("dim", int(192))],
        &[("results.json", results(&[1.0], "H100"))],
    );
    let ctx = fx.context("report");
    let err = run(&spec(r#"(title: "t", sources: ["runz"])"#), &ctx).unwrap_err();
    assert!(
        matches!(err, TaskError::SourceNotNeeded { ref stage } if stage == "runz"),
        "{err:?}"
    );
    let err = run(
        &spec(r#"(title: "t", sources: ["runs"], columns: ["latency_ms.medain"])"#),
        &ctx,
    )
    .unwrap_err();
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("did you mean `latency_ms.median`?"), "{help}");
    assert!(!ctx.out.join("table.csv").exists());
}

#[test]
fn rows_of_different_environments_are_flagged_and_not_compared() {
    let mut fx = Fixture::new();
    fx.node(
        "runs",
        &[("dim", int(192)), ("compile", text("none"))],
        &[("results.json", results(&[2.0, 2.2], "H100"))],
    );
    fx.node(
        "runs",
        &[("dim", int(192)), ("compile", text("max"))],
        &[("results.json", results(&[1.0, 1.1], "H200"))],
    );
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["runs"], columns: ["throughput_images_per_s"],
            compare: Some(Compare(param: "compile", baseline: "none", metric: "throughput_images_per_s")))"#,
    );
    run(&spec, &ctx).unwrap();
    let csv = read(&ctx.out, "table.csv");
    assert!(csv.contains(",env1,") && csv.contains(",env2,"), "{csv}");
    let md = read(&ctx.out, "report.md");
    assert!(
        md.contains("**Warning:** the rows were measured in 2 different environments"),
        "{md}"
    );
    let compare = read(&ctx.out, "compare.csv");
    assert!(
        compare.contains("environments differ (baseline in env2, this row in env1): not compared"),
        "{compare}"
    );
    let line = compare.lines().nth(1).unwrap();
    assert!(line.starts_with("192,max,none,"), "{line}");
    assert!(line.contains(",,,,2,2,"), "no ratio, no interval: {line}");
    assert!(
        !md.contains("Measured on"),
        "two places, named per group: {md}"
    );
}

/// Rows of one environment: the report and each plot say where they were
/// measured (a plot that travels alone still says it).
#[test]
fn a_report_and_its_plots_say_where_their_rows_were_measured() {
    let mut fx = Fixture::new();
    for dim in [192, 384] {
        fx.node(
            "runs",
            &[("dim", int(dim))],
            &[(
                "results.json",
                results(&[2.0, 2.2], "NVIDIA H100 80GB HBM3"),
            )],
        );
    }
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["runs"], columns: ["throughput_images_per_s"],
            plots: [Plot(x: "dim", y: "throughput_images_per_s", caption: "One run per dim.")])"#,
    );
    run(&spec, &ctx).unwrap();
    let md = read(&ctx.out, "report.md");
    assert!(
        md.contains("Measured on gpu-01: GPU NVIDIA H100 80GB HBM3.\n"),
        "{md}"
    );
    let svg = read(&ctx.out, "plots/throughput_images_per_s_vs_dim.svg");
    assert!(
        svg.contains("One run per dim.; measured on gpu-01: GPU NVIDIA H100 80GB HBM3"),
        "{svg}"
    );
}

/// Samples of a run: `center` ms with a deterministic ±10% wobble.
fn wobble(center: f64, n: usize, phase: usize) -> Vec<f64> {
    (0..n)
        .map(|i| center * (0.9 + 0.2 * (((i * 7 + phase) % 13) as f64 / 12.0)))
        .collect()
}

fn compare_fixture() -> Fixture {
    let mut fx = Fixture::new();
    for dim in [192, 384] {
        let scale = dim as f64 / 192.0;
        for (compile, ms, phase) in [("none", 10.0, 0), ("max", 6.0, 5)] {
            let p = [("dim", int(dim)), ("compile", text(compile))];
            fx.node(
                "runs",
                &p,
                &[(
                    "results.json",
                    results(&wobble(ms * scale, 60, phase), "H100"),
                )],
            );
        }
    }
    fx
}

fn compare_spec(seed: u64) -> ReportSpec {
    spec(&format!(
        r#"(title: "t", sources: ["runs"], columns: ["throughput_images_per_s"],
            compare: Some(Compare(param: "compile", baseline: "none",
                                  metric: "throughput_images_per_s", seed: {seed}, resamples: 500)))"#
    ))
}

#[test]
fn a_param_that_follows_the_compared_one_does_not_split_its_groups() {
    // HET1's shape: each pattern brings its own `max_over_mean`, so no two
    // rows share it; the comparison still pairs each pattern with
    // `uniform`, within each `dim`, and shows `max_over_mean`.
    let mut fx = Fixture::new();
    for dim in [64, 128] {
        for (pattern, over, ms) in [("uniform", 1.0, 10.0), ("severe", 3.0, 20.0)] {
            let p = [
                ("dim", int(dim)),
                ("pattern", text(pattern)),
                ("max_over_mean", Value::Float(over)),
            ];
            fx.node(
                "runs",
                &p,
                &[("results.json", results(&wobble(ms, 60, 0), "H100"))],
            );
        }
    }
    let spec = spec(
        r#"(title: "t", sources: ["runs"], columns: ["latency_ms.median"],
            compare: Some(Compare(param: "pattern", baseline: "uniform", metric: "latency_ms.median")))"#,
    );
    let ctx = fx.context("out");
    run(&spec, &ctx).unwrap();
    let (header, rows) = csv(&read(&ctx.out, "compare.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row[col("pattern")], "severe");
        assert_eq!(row[col("max_over_mean")], "3.0");
        let ratio: f64 = row[col("ratio")]
            .parse()
            .unwrap_or_else(|_| panic!("{row:?}"));
        assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    }
    let dims: Vec<&str> = rows.iter().map(|r| r[col("dim")].as_str()).collect();
    assert_eq!(dims, ["64", "128"]);
}

#[test]
fn within_run_intervals_are_reproducible_and_contain_the_ratio() {
    let fx = compare_fixture();
    let (a, b) = (fx.context("a"), fx.context("b"));
    // The seed and resamples of older pipelines still load; nothing is
    // drawn, so they change nothing.
    run(&compare_spec(7), &a).unwrap();
    run(&compare_spec(8), &b).unwrap();
    let first = read(&a.out, "compare.csv");
    assert_eq!(first, read(&b.out, "compare.csv"));

    let mut lines = first.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{first}");
    for row in rows {
        let num = |name: &str| row[col(name)].parse::<f64>().unwrap();
        let (ratio, low, high) = (num("ratio"), num("ci95_low"), num("ci95_high"));
        // 10 ms against 6 ms per batch: the compiled run is 5/3 as fast.
        assert!((ratio - 10.0 / 6.0).abs() < 0.05, "{ratio}");
        assert!(low < ratio && ratio < high, "{low} {ratio} {high}");
        assert!(
            high - low < 0.3,
            "the interval is implausibly wide: {low}..{high}"
        );
        assert_eq!(row[col("n_baseline")], "60");
        assert_eq!(row[col("interval")], "within-run");
        assert_eq!(row[col("verdict")], "faster");
    }
    assert!(read(&a.out, "report.md").contains("standard errors of its batches"));
}

#[test]
fn plots_are_written_as_svg_and_png_with_series_names() {
    let mut fx = Fixture::new();
    for patch in [16, 32] {
        for dim in [192, 384, 768] {
            let util = dim as f64 / 1000.0 + patch as f64 / 100.0;
            fx.node(
                "analysis",
                &[("patch", int(patch)), ("dim", int(dim))],
                &[("metrics.json", metrics(util))],
            );
        }
    }
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["analysis"], columns: ["gpu_utilization"],
            plots: [Plot(x: "dim", y: "gpu_utilization", series: "patch", log_x: true)])"#,
    );
    run(&spec, &ctx).unwrap();
    for file in spec.outputs() {
        let len = std::fs::metadata(ctx.out.join(&file))
            .map(|m| m.len())
            .unwrap_or(0);
        let least = if file.starts_with("plots/") {
            2000
        } else {
            100
        };
        assert!(len > least, "`{file}` is missing or tiny ({len} bytes)");
    }
    let svg = read(&ctx.out, "plots/gpu_utilization_vs_dim_by_patch.svg");
    assert!(
        svg.contains("patch=16") && svg.contains("patch=32"),
        "series names missing"
    );
    assert!(
        svg.contains("hidden dim, log scale"),
        "axis titles read as words"
    );
    // The sweep's three dims on a log axis tick at 192, 384 and 768 (its
    // own values), nothing like 251.2.
    let labels: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next())
        .map(str::trim)
        .collect();
    assert!(
        ["192", "384", "768"].iter().all(|v| labels.contains(v)),
        "{labels:?}"
    );
    assert!(!labels.iter().any(|l| l.starts_with("251")), "{labels:?}");
    let png = std::fs::read(ctx.out.join("plots/gpu_utilization_vs_dim_by_patch.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!(
        (size(16), size(20)),
        (1800, 1120),
        "PNG at twice the SVG's 900 × 560"
    );
    assert!(read(&ctx.out, "report.md").contains("(plots/gpu_utilization_vs_dim_by_patch.svg)"));
}

#[test]
fn a_plot_takes_a_title_and_a_caption() {
    let mut fx = Fixture::new();
    for dim in [192, 384, 768] {
        fx.node(
            "analysis",
            &[("dim", int(dim))],
            &[("metrics.json", metrics(dim as f64 / 1000.0))],
        );
    }
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["analysis"], columns: ["gpu_utilization"],
            plots: [Plot(x: "dim", y: "gpu_utilization", title: "Wider models keep the GPU busier",
                         caption: "One run per dim; utilization from the CUPTI trace.")])"#,
    );
    run(&spec, &ctx).unwrap();
    let svg = read(&ctx.out, "plots/gpu_utilization_vs_dim.svg");
    assert!(
        svg.contains("Wider models keep the GPU busier"),
        "the title"
    );
    assert!(
        !svg.contains("gpu_utilization vs dim"),
        "instead of the generated heading"
    );
    assert!(
        svg.contains("One run per dim; utilization from the CUPTI trace."),
        "the caption"
    );
    let md = read(&ctx.out, "report.md");
    assert!(
        md.contains("![Wider models keep the GPU busier](plots/gpu_utilization_vs_dim.svg)\n\n*One run per dim; utilization from the CUPTI trace.*"),
        "{md}"
    );
    // Without them a plot's spec (and so the report's key) is as before.
    let plain = spec_plain();
    assert!(!serde_json::to_string(&plain).unwrap().contains("caption"));
}

fn spec_plain() -> ReportSpec {
    spec(r#"(title: "t", sources: ["a"], columns: ["x"], plots: [Plot(x: "a", y: "b")])"#)
}

#[test]
fn rows_tables_become_one_row_per_entry() {
    let mut fx = Fixture::new();
    let rows = json!({"rows": [
        {"op": "gelu", "n": 1024, "time_ms": 0.5, "gbps": 16.0},
        {"op": "layernorm", "n": 1024, "time_ms": 0.25, "gbps": 32.5},
    ]});
    fx.node(
        "ops",
        &[("dtype", text("f16"))],
        &[("results.json", rows.to_string())],
    );
    let ctx = fx.context("report");
    run(&spec(r#"(title: "ops", sources: ["ops"])"#), &ctx).unwrap();
    assert_eq!(
        read(&ctx.out, "table.csv"),
        "dtype,gbps,n,op,time_ms,reps,interval,samples,env_group,nodes\n\
         f16,16.0,1024,gelu,0.5,1,,,,ops[dtype=f16]\n\
         f16,32.5,1024,layernorm,0.25,1,,,,ops[dtype=f16]\n"
    );
}

#[test]
fn a_filter_keeps_the_rows_of_one_value_and_every_column_of_the_stage() {
    let mut fx = Fixture::new();
    // rq1's metrics have a gap figure, rq2's do not: the column stays for rq2.
    fx.node(
        "analysis",
        &[("rq", text("rq1")), ("gpu", int(0))],
        &[("metrics.json", metrics(0.5))],
    );
    let mut bare: Json = serde_json::from_str(&metrics(0.25)).unwrap();
    bare["devices"][0].as_object_mut().unwrap().remove("gaps");
    fx.node(
        "analysis",
        &[("rq", text("rq2")), ("gpu", int(1))],
        &[("metrics.json", bare.to_string())],
    );
    let ctx = fx.context("report");
    let with = |filter: &str| {
        spec(&format!(
            r#"(title: "t", sources: ["analysis"], columns: ["gpu_utilization", "gaps.count_ge_1us"], filter: {filter})"#
        ))
    };
    run(&with(r#"{"rq": "rq2"}"#), &ctx).unwrap();
    assert_eq!(
        read(&ctx.out, "table.csv"),
        "rq,gpu,gpu_utilization,gaps.count_ge_1us,reps,interval,samples,env_group,nodes\n\
         rq2,1,0.25,,1,,,,\"analysis[rq=rq2,gpu=1]\"\n"
    );
    // Numbers match by value.
    run(&with(r#"{"gpu": 0.0}"#), &ctx).unwrap();
    assert!(read(&ctx.out, "table.csv").contains("\nrq1,0,0.5,4,"));
    // A name no node has, and values that leave nothing, are errors that say so.
    let err = run(&with(r#"{"qr": "rq1"}"#), &ctx).unwrap_err();
    assert!(
        err.to_string()
            .contains("`qr`, which is a param of no source node"),
        "{err}"
    );
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("`gpu`, `rq`"), "{help}");
    let err = run(&with(r#"{"rq": "rq9"}"#), &ctx).unwrap_err();
    assert!(
        err.to_string().contains("no source node has rq=rq9"),
        "{err}"
    );
}

/// The columns of a CSV file by name.
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    (header, rows)
}

/// Three configurations measured three times each, the second noisier
/// than the first; each repetition's median is `ms` plus a shift.
fn repeated_fixture() -> Fixture {
    let mut fx = Fixture::new();
    for (dim, shifts) in [
        (192, [0.0, 0.1, -0.1]),
        (384, [0.0, 1.0, -1.0]),
        (768, [0.3, 0.2, 0.4]),
    ] {
        for (k, shift) in shifts.iter().enumerate() {
            let ms = dim as f64 / 96.0 + shift;
            fx.repetition(
                "runs",
                &[("dim", int(dim))],
                k as u32 + 1,
                &[("results.json", results(&wobble(ms, 60, k), "H100"))],
            );
        }
    }
    fx
}

#[test]
fn repetitions_fold_into_one_row_with_a_t_interval() {
    let fx = repeated_fixture();
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["runs"], columns: ["latency_ms.median"], target: Some(0.05))"#,
    );
    run(&spec, &ctx).unwrap();
    let (header, rows) = csv(&read(&ctx.out, "table.csv"));
    assert_eq!(
        header,
        [
            "dim",
            "latency_ms.median",
            "latency_ms.median.ci95_low",
            "latency_ms.median.ci95_high",
            "reps",
            "interval",
            "wide",
            "samples",
            "env_group",
            "nodes"
        ]
    );
    assert_eq!(rows.len(), 3, "one row per configuration, no `rep` column");
    // The reference: the repetitions' medians, their mean and t-interval
    // worked out here from the files the report read.
    for row in &rows {
        let dim: i64 = row[0].parse().unwrap();
        let medians: Vec<f64> = (1..=3)
            .map(|k| {
                let dir = fx.dir.path().join(format!("out/runs/dim={dim}_rep={k}"));
                let doc: Json = serde_json::from_str(&read(&dir, "results.json")).unwrap();
                doc["latency_ms"]["median"].as_f64().unwrap()
            })
            .collect();
        let mean = medians.iter().sum::<f64>() / 3.0;
        let sd = (medians.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let half = 4.302_652_729_9 * sd / 3f64.sqrt();
        let num = |i: usize| row[i].parse::<f64>().unwrap();
        assert!((num(1) - mean).abs() < 1e-9, "{row:?}");
        // A latency is positive: the interval is on the log scale.
        let rel = half / mean;
        assert!(
            (num(2) - mean * (-rel).exp()).abs() < 1e-6 && (num(3) - mean * rel.exp()).abs() < 1e-6,
            "{row:?}"
        );
        assert_eq!((row[4].as_str(), row[5].as_str()), ("3", "repetitions"));
        assert_eq!(row[7], "180", "every batch of every repetition");
        let wide = rel.sinh() > 0.05;
        assert_eq!(!row[6].is_empty(), wide, "{row:?}");
    }
    assert!(
        read(&ctx.out, "table.csv")
            .contains("\"runs[dim=192,rep=1] runs[dim=192,rep=2] runs[dim=192,rep=3]\""),
        "the row lists its repetitions' nodes"
    );
    // dim 384 moved ±1 ms around 4 ms between runs: far wider than ±5 %.
    assert!(
        rows[1][6].starts_with("latency_ms.median ±"),
        "{:?}",
        rows[1]
    );
    let md = read(&ctx.out, "report.md");
    assert!(md.contains("t-interval over them"), "{md}");
    assert!(md.contains(" % ⚠ |"), "{md}");
    // Counted under the title, before the numbers.
    let wide = rows.iter().filter(|r| !r[6].is_empty()).count();
    let line = format!("**⚠ {wide} of 3 rows have a 95% interval wider than the target of ±5 %**");
    assert!(md.starts_with(&format!("# t\n\n{line}")), "{md}");
    assert!(
        !md.contains("ci95_low"),
        "bounds show as ± in the markdown: {md}"
    );
}

#[test]
fn one_run_gets_a_within_run_interval_labelled_as_such() {
    let mut fx = Fixture::new();
    fx.node(
        "runs",
        &[("dim", int(192))],
        &[("results.json", results(&wobble(2.0, 60, 0), "H100"))],
    );
    let ctx = fx.context("report");
    run(
        &spec(r#"(title: "t", sources: ["runs"], columns: ["latency_ms.median", "params"])"#),
        &ctx,
    )
    .unwrap();
    let (header, rows) = csv(&read(&ctx.out, "table.csv"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows[0][col("reps")], "1");
    assert_eq!(rows[0][col("interval")], "within-run");
    let (lo, hi): (f64, f64) = (
        rows[0][col("latency_ms.median.ci95_low")].parse().unwrap(),
        rows[0][col("latency_ms.median.ci95_high")].parse().unwrap(),
    );
    let median: f64 = rows[0][col("latency_ms.median")].parse().unwrap();
    assert!(lo < median && median < hi, "{lo} {median} {hi}");
    assert!(
        !header.iter().any(|h| h == "params.ci95_low"),
        "no samples for `params`"
    );
    assert!(read(&ctx.out, "report.md").contains("it says nothing of where the next run lands"));
}

#[test]
fn a_param_named_rep_that_is_no_repetition_is_not_folded() {
    let mut fx = Fixture::new();
    for rep in [1, 2] {
        fx.node(
            "runs",
            &[("rep", int(rep))],
            &[("results.json", results(&wobble(2.0, 10, 0), "H100"))],
        );
    }
    let ctx = fx.context("report");
    run(&spec(r#"(title: "t", sources: ["runs"])"#), &ctx).unwrap();
    let (header, rows) = csv(&read(&ctx.out, "table.csv"));
    assert_eq!(header[0], "rep");
    assert_eq!(rows.len(), 2);
}

#[test]
fn comparisons_of_repeated_rows_use_welch_and_say_when_inconclusive() {
    let mut fx = Fixture::new();
    // `max` is clearly faster at dim 192; at dim 384 the two overlap.
    for (dim, none, max) in [
        (192, [10.0, 10.2, 9.8], [6.0, 6.1, 5.9]),
        (384, [8.0, 9.0, 7.0], [8.2, 7.4, 8.6]),
    ] {
        for k in 0..3 {
            for (compile, ms) in [("none", none[k]), ("max", max[k])] {
                fx.repetition(
                    "runs",
                    &[("dim", int(dim)), ("compile", text(compile))],
                    k as u32 + 1,
                    &[("results.json", results(&wobble(ms, 40, k), "H100"))],
                );
            }
        }
    }
    let ctx = fx.context("report");
    run(
        &spec(
            r#"(title: "t", sources: ["runs"], columns: ["latency_ms.median"],
                compare: Some(Compare(param: "compile", baseline: "none", metric: "latency_ms.median")))"#,
        ),
        &ctx,
    )
    .unwrap();
    let text = read(&ctx.out, "compare.csv");
    let (header, rows) = csv(&text);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows.len(), 2, "{text}");
    for row in &rows {
        assert_eq!(row[col("interval")], "repetitions", "{row:?}");
        assert_eq!(
            (
                row[col("reps_baseline")].as_str(),
                row[col("reps_value")].as_str()
            ),
            ("3", "3")
        );
    }
    let note = |dim: &str| rows.iter().find(|r| r[0] == dim).unwrap()[col("note")].clone();
    let (lo, hi): (f64, f64) = {
        let r = rows.iter().find(|r| r[0] == "192").unwrap();
        (
            r[col("ci95_low")].parse().unwrap(),
            r[col("ci95_high")].parse().unwrap(),
        )
    };
    assert!(hi < 1.0 && lo > 0.5, "{lo} {hi}");
    assert_eq!(note("192"), "");
    assert!(note("384").starts_with("inconclusive"), "{text}");
    let verdict = |dim: &str| rows.iter().find(|r| r[0] == dim).unwrap()[col("verdict")].clone();
    assert_eq!(
        (verdict("192"), verdict("384")),
        ("faster".into(), "inconclusive".into())
    );
    assert!(read(&ctx.out, "report.md").contains("Welch's over the repetitions"));
}

#[test]
fn a_run_kept_invalid_is_flagged_in_a_column_of_its_own() {
    let mut fx = Fixture::new();
    for (dim, invalid) in [(192, false), (384, true)] {
        let mut doc: Json = serde_json::from_str(&results(&[2.0, 2.0], "H100")).unwrap();
        doc["validity"] = if invalid {
            json!({"verdict": "invalid", "excluded_batches": [], "excluded_latency_ms": [],
                   "flags": [{"kind": "intruded", "detail": "intruded: another compute process on the GPU (pid 702)", "invalidates": true},
                             {"kind": "undersampled", "detail": "undersampled: 2 batches", "invalidates": false}]})
        } else {
            json!({"verdict": "valid", "excluded_batches": [], "excluded_latency_ms": [], "flags": []})
        };
        fx.node(
            "runs",
            &[("dim", int(dim))],
            &[("results.json", doc.to_string())],
        );
    }
    let ctx = fx.context("report");
    run(
        &spec(r#"(title: "T", sources: ["runs"], columns: ["latency_ms.median"])"#),
        &ctx,
    )
    .unwrap();
    let (names, rows) = csv(&read(&ctx.out, "table.csv"));
    let at = names
        .iter()
        .position(|n| n == "invalid")
        .expect("an invalid column");
    assert_eq!(names[at + 1], "samples", "{names:?}");
    assert_eq!(rows[0][at], "");
    assert_eq!(
        rows[1][at],
        "intruded: another compute process on the GPU (pid 702)"
    );
    assert!(read(&ctx.out, "report.md").contains("pid 702"));
}

#[test]
fn uncertain_points_are_drawn_hollow_and_the_plot_says_so() {
    // Dim 192: one run. Dim 384: three runs within ±1 %. Dim 768: three
    // runs spread far beyond the target of ±5 %. Batch counts do not matter.
    let mut fx = Fixture::new();
    fx.node(
        "runs",
        &[("dim", int(192))],
        &[("results.json", results(&[2.0; 40], "H100"))],
    );
    for (dim, levels) in [(384, [2.0, 2.01, 1.99]), (768, [2.0, 3.0, 1.5])] {
        for (k, level) in levels.into_iter().enumerate() {
            fx.repetition(
                "runs",
                &[("dim", int(dim))],
                k as u32 + 1,
                &[("results.json", results(&[level; 3], "H100"))],
            );
        }
    }
    let ctx = fx.context("report");
    let spec = spec(
        r#"(title: "t", sources: ["runs"], columns: ["latency_ms.median"], target: Some(0.05),
            plots: [Plot(x: "dim", y: "latency_ms.median")])"#,
    );
    run(&spec, &ctx).unwrap();
    let svg = read(&ctx.out, &format!("plots/{}.svg", spec.plots[0].stem()));
    assert!(
        svg.contains(
            "hollow points: fewer than 3 repetitions, or an interval wider than the report"
        ),
        "the note"
    );
    let hollow = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.contains("#FFFFFF"))
        .count();
    assert_eq!(
        hollow, 2,
        "dim 192 has one run, dim 768 an interval over the target"
    );
}
