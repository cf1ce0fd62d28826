//! The operator studies `pipelines/ops.ron` (seed 003) and
//! `pipelines/night_sweep.ron` (seed 004), loaded and planned by the real
//! `vitgraph` binary in a copy of the repository's `pipelines/` folder: every
//! pipeline loads beside the others, each stage has the nodes the chapter
//! "Study: operator benchmarks" lists, with the params it lists, at full size
//! and at the reduced size `scripts/gpu/study_ops.params` gives, and targets
//! plan exactly the nodes they need. The OpBench nodes need libtorch and a GPU,
//! so nothing here runs them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A temporary workspace holding a copy of the repository's pipelines.
struct Study {
    dir: tempfile::TempDir,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn copy_pipelines(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create pipelines/");
    for entry in std::fs::read_dir(from).expect("read pipelines/") {
        let path = entry.expect("list pipelines/").path();
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_pipelines(&path, &target);
        } else if path.extension().is_some_and(|e| e == "ron") {
            std::fs::copy(&path, &target).expect("copy a pipeline file");
        }
    }
}

impl Study {
    fn new() -> Study {
        let dir = tempfile::Builder::new()
            .prefix("vitgraph-study-ops-")
            .tempdir()
            .expect("create a temporary directory");
        copy_pipelines(
            &Path::new(REPO).join("pipelines"),
            &dir.path().join("pipelines"),
        );
        Study { dir }
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
            .args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("VITGRAPH_NO_PROGRESS", "1")
            .env_remove("CLICOLOR_FORCE")
            .output()
            .expect("run the vitgraph binary");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn ok(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert_eq!(
            run.code, 0,
            "vitgraph {args:?} failed:\n{}\n{}",
            run.stdout, run.stderr
        );
        run
    }

    /// The nodes `graph --format json ARGS…` selects (with what they need).
    fn graph(&self, args: &[&str]) -> Vec<Json> {
        let mut all = vec!["graph", "--format", "json"];
        all.extend_from_slice(args);
        let run = self.ok(&all);
        let doc: Json = serde_json::from_str(&run.stdout).expect("graph prints JSON");
        // One node per configuration: the first of its repetitions.
        doc["nodes"]
            .as_array()
            .expect("a `nodes` list")
            .iter()
            .filter(|n| n["params"]["rep"].is_null() || n["params"]["rep"] == 1)
            .cloned()
            .collect()
    }

    /// `build -n ARGS…`: how many nodes it would run.
    fn planned(&self, args: &[&str]) -> usize {
        let mut all = vec!["build", "-n"];
        all.extend_from_slice(args);
        let run = self.ok(&all);
        let text = format!("{}{}", run.stdout, run.stderr);
        let summary = text
            .lines()
            .find(|l| l.contains(" to run, "))
            .unwrap_or_else(|| panic!("no summary line in:\n{text}"));
        summary
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {summary:?}"))
    }
}

/// Nodes per stage.
fn counts(nodes: &[Json]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for node in nodes {
        *out.entry(node["stage"].as_str().expect("a stage").to_owned())
            .or_insert(0) += 1;
    }
    out
}

/// The distinct values of param `name` among the nodes of `stage`, and
/// among the members of blocks measured together when `name` is one of
/// their axes.
fn values(nodes: &[Json], stage: &str, name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for n in nodes.iter().filter(|n| n["stage"] == stage) {
        let axes = n["together"]["axes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match axes.iter().position(|a| a == name) {
            Some(at) => out.extend(
                n["together"]["members"]
                    .as_array()
                    .expect("members")
                    .iter()
                    .map(|m| m[at].to_string()),
            ),
            None => {
                out.insert(n["params"][name].to_string());
            }
        }
    }
    out
}

/// The members of each block of `stage`, summed: its configurations.
fn configurations(nodes: &[Json], stage: &str) -> usize {
    nodes
        .iter()
        .filter(|n| n["stage"] == stage)
        .map(|n| n["together"]["members"].as_array().map_or(1, Vec::len))
        .sum()
}

fn set<T: ToString>(items: impl IntoIterator<Item = T>) -> BTreeSet<String> {
    items.into_iter().map(|v| v.to_string()).collect()
}

fn strings(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| format!("{s:?}")).collect()
}

fn expected(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
}

/// head_dim 64–128 in steps of 1, then 130–160 in steps of 2: S1's range,
/// which G3 and G4 sweep K and N over.
fn dense() -> Vec<u32> {
    (64..=128).chain((130..=160).step_by(2)).collect()
}

/// The `-p` overrides of `scripts/gpu/study_ops.params`.
fn reduced() -> Vec<String> {
    let path = PathBuf::from(REPO).join("scripts/gpu/study_ops.params");
    let text = std::fs::read_to_string(&path).expect("read scripts/gpu/study_ops.params");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .flat_map(|l| ["-p".to_owned(), l.to_owned()])
        .collect()
}

const OPS: [&str; 5] = [
    "ops_layernorm",
    "ops_gelu",
    "ops_swish",
    "ops_mse",
    "ops_cross_entropy",
];
const OPS_REPORTS: [&str; 4] = [
    "ops_report",
    "ops_by_batch_size",
    "ops_by_sequence_length",
    "ops_by_tensor_dimension",
];

#[test]
fn every_pipeline_loads_beside_the_others() {
    let study = Study::new();
    // `ls` without targets lists each stage with its node count and file.
    let ls = study.ok(&["ls"]);
    for (stage, file) in [
        ("ops_calibrate", "pipelines/ops.ron"),
        ("ops_report", "pipelines/ops.ron"),
        ("night_calibrate", "pipelines/night_sweep.ron"),
        ("night_het1_report", "pipelines/night_sweep.ron"),
    ] {
        assert!(
            ls.stdout
                .lines()
                .any(|l| { l.split_whitespace().next() == Some(stage) && l.ends_with(file) }),
            "`ls` lists no stage {stage} of {file}:\n{}",
            ls.stdout
        );
    }
    // Planning needs every task spec to deserialize, typed params included.
    // The first three repetitions of each measured configuration.
    assert_eq!(study.planned(&["ops"]), 3 * 640 + 5);
    // The night sweep's 847 configurations are 496 nodes: blocks measured
    // together (see `night_sweep_has_the_seeds_configurations`).
    assert_eq!(study.planned(&["night_sweep"]), 3 * 496 + 7);
}

#[test]
fn ops_has_every_operation_over_every_shape() {
    let study = Study::new();
    let nodes = study.graph(&["ops"]);
    let mut want = vec![("ops_calibrate", 1)];
    want.extend(OPS.map(|s| (s, 4 * 4 * 8)));
    want.extend(OPS_REPORTS.map(|s| (s, 1)));
    assert_eq!(counts(&nodes), expected(&want));
    for stage in OPS {
        assert_eq!(values(&nodes, stage, "batch_size"), set([16, 32, 64, 128]));
        assert_eq!(
            values(&nodes, stage, "sequence_length"),
            set([256, 512, 1024, 2048])
        );
        assert_eq!(
            values(&nodes, stage, "tensor_dimension"),
            set([8, 16, 32, 64, 128, 256, 512, 768])
        );
    }
    let operations: BTreeSet<String> = OPS
        .iter()
        .flat_map(|s| values(&nodes, s, "operation"))
        .collect();
    assert_eq!(
        operations,
        strings(&["LayerNorm", "GELU", "Swish", "MSE", "CrossEntropy"])
    );
    // Every measurement needs the calibration; every report joins all 640
    // configurations, each with its 5 repetitions at most.
    for node in nodes
        .iter()
        .filter(|n| OPS.contains(&n["stage"].as_str().unwrap()))
    {
        assert_eq!(node["deps"], serde_json::json!(["ops_calibrate"]), "{node}");
    }
    for node in nodes
        .iter()
        .filter(|n| OPS_REPORTS.contains(&n["stage"].as_str().unwrap()))
    {
        assert_eq!(
            node["deps"].as_array().unwrap().len(),
            640 * 5,
            "{}",
            node["id"]
        );
    }
}

#[test]
fn night_sweep_has_the_seeds_configurations() {
    let study = Study::new();
    let nodes = study.graph(&["night_sweep"]);
    assert_eq!(
        counts(&nodes),
        expected(&[
            ("night_calibrate", 1),
            ("night_s1_sdpa_dense", 2 * 81),
            ("night_s1_report", 1),
            // Blocks measured together: the 4 backends of each head_dim,
            // the 2 dtypes of each K and (M, N), the 3 pads of each op.
            ("night_s2_sdpa_backend", 6),
            ("night_s2_report", 1),
            ("night_g3_gemm_k", 81),
            ("night_g3_report", 1),
            ("night_g4_gemm_n", 3 * 81),
            ("night_g4_report", 1),
            ("night_p1_sdpa", 1),
            ("night_p1_gemm_reduction", 1),
            ("night_p1_gemm_projection", 1),
            ("night_p1_report", 1),
            ("night_het1_hetero", 1),
            ("night_het1_report", 1),
        ])
    );
    assert_eq!(dense().len(), 81);
    // The seed's configurations, every one a node or a block's member.
    for (stage, n) in [
        ("night_s2_sdpa_backend", 6 * 4),
        ("night_g3_gemm_k", 2 * 81),
        ("night_g4_gemm_n", 3 * 2 * 81),
        ("night_p1_sdpa", 3),
        ("night_het1_hetero", 4),
    ] {
        assert_eq!(configurations(&nodes, stage), n, "{stage}");
    }
    assert_eq!(
        values(&nodes, "night_s1_sdpa_dense", "head_dim"),
        set(dense())
    );
    // The two shapes: (B=4, S=2048, H=32) and (B=1, S=4096, H=32).
    let shapes: BTreeSet<(String, String, String)> = nodes
        .iter()
        .filter(|n| n["stage"] == "night_s1_sdpa_dense")
        .map(|n| {
            let p = &n["params"];
            (
                p["shape"].to_string(),
                p["batch"].to_string(),
                p["seq"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        BTreeSet::from([
            ("\"B4_S2048_H32\"".into(), "4".into(), "2048".into()),
            ("\"B1_S4096_H32\"".into(), "1".into(), "4096".into()),
        ])
    );
    assert_eq!(
        values(&nodes, "night_s2_sdpa_backend", "head_dim"),
        set([96, 104, 107, 112, 120, 128])
    );
    assert_eq!(
        values(&nodes, "night_s2_sdpa_backend", "backend"),
        strings(&["Auto", "Flash", "MemEfficient", "Math"])
    );
    assert_eq!(values(&nodes, "night_g3_gemm_k", "k"), set(dense()));
    assert_eq!(
        values(&nodes, "night_g3_gemm_k", "dtype"),
        strings(&["f16", "bf16"])
    );
    assert_eq!(values(&nodes, "night_g4_gemm_n", "n"), set(dense()));
    assert_eq!(
        values(&nodes, "night_g4_gemm_n", "m"),
        set([1024, 4096, 16384])
    );
    assert_eq!(
        values(&nodes, "night_g4_gemm_n", "dtype"),
        strings(&["f16", "bf16"])
    );
    for stage in [
        "night_p1_sdpa",
        "night_p1_gemm_reduction",
        "night_p1_gemm_projection",
    ] {
        assert_eq!(
            values(&nodes, stage, "pad"),
            set([107, 112, 128]),
            "{stage}"
        );
    }
    assert_eq!(
        values(&nodes, "night_het1_hetero", "pattern"),
        strings(&["uniform", "mild", "medium", "severe"])
    );
    // Each pattern is four sequences of 4096 tokens in all, carried with
    // its member of the one block.
    let het1: Vec<&Json> = nodes
        .iter()
        .filter(|n| n["stage"] == "night_het1_hetero")
        .collect();
    assert_eq!(het1.len(), 1);
    let carried = het1[0]["together"]["carried"]
        .as_array()
        .expect("each member's carried params");
    assert_eq!(carried.len(), 4);
    for (member, params) in carried.iter().enumerate() {
        let param = |name: &str| -> Json {
            params
                .as_array()
                .expect("a list of (name, value)")
                .iter()
                .find(|p| p[0] == name)
                .map(|p| p[1].clone())
                .unwrap_or_else(|| panic!("member {member} carries no `{name}`: {params}"))
        };
        let seqs: Vec<u64> = param("seqs")
            .as_array()
            .expect("seqs is a list")
            .iter()
            .map(|v| v.as_u64().expect("a length"))
            .collect();
        assert_eq!(
            (seqs.len(), seqs.iter().sum::<u64>()),
            (4, 4096),
            "member {member}"
        );
        let longest = *seqs.iter().max().unwrap() as f64;
        assert_eq!(param("max_over_mean").as_f64(), Some(longest / 1024.0));
    }
}

#[test]
fn reports_need_exactly_their_experiment() {
    let study = Study::new();
    // A report plans its experiment's first three repetitions (the others
    // are decided as the build goes), the calibration and itself.
    for (report, nodes) in [
        ("night_s1_report", 162),
        ("night_s2_report", 6),
        ("night_g3_report", 81),
        ("night_g4_report", 243),
        ("night_p1_report", 3),
        ("night_het1_report", 1),
        ("ops_by_tensor_dimension", 640),
    ] {
        assert_eq!(study.planned(&[report]), 3 * nodes + 2, "{report}");
    }
    assert_eq!(
        study.planned(&["ops_report", "ops_by_batch_size"]),
        3 * 640 + 3
    );
    assert_eq!(
        study.planned(&["night_s2_sdpa_backend[head_dim=107,rep=1]"]),
        2
    );
    // The two pipelines share no node: together they plan the sum (640
    // configurations and 496 nodes for 847 configurations, three times;
    // calibrations and reports once).
    assert_eq!(
        study.planned(&["ops", "night_sweep"]),
        (3 * 640 + 5) + (3 * 496 + 7)
    );
}

#[test]
fn the_gpu_scripts_reduced_size_plans_the_books_counts() {
    let study = Study::new();
    let params = reduced();
    let mut args: Vec<&str> = vec!["ops", "night_sweep"];
    args.extend(params.iter().map(String::as_str));
    let nodes = study.graph(&args);
    let mut want = vec![
        ("ops_calibrate", 1),
        ("night_calibrate", 1),
        ("night_s1_sdpa_dense", 2 * 4),
        ("night_s2_sdpa_backend", 2),
        ("night_g3_gemm_k", 3),
        ("night_g4_gemm_n", 2),
        ("night_p1_sdpa", 1),
        ("night_p1_gemm_reduction", 1),
        ("night_p1_gemm_projection", 1),
        ("night_het1_hetero", 1),
    ];
    want.extend(OPS.map(|s| (s, 2 * 2)));
    want.extend(OPS_REPORTS.map(|s| (s, 1)));
    want.extend(
        [
            "night_s1_report",
            "night_s2_report",
            "night_g3_report",
            "night_g4_report",
            "night_p1_report",
            "night_het1_report",
        ]
        .map(|s| (s, 1)),
    );
    assert_eq!(counts(&nodes), expected(&want));
    assert_eq!(nodes.len(), 51);
    // The reports' reference values and baselines stay in the reduced lists.
    assert!(values(&nodes, "ops_gelu", "batch_size").contains("32"));
    assert!(values(&nodes, "ops_gelu", "sequence_length").contains("512"));
    assert!(values(&nodes, "ops_gelu", "tensor_dimension").contains("768"));
    assert!(values(&nodes, "night_s2_sdpa_backend", "backend").contains("\"Auto\""));
    let mut plan: Vec<&str> = vec!["ops", "night_sweep"];
    plan.extend(params.iter().map(String::as_str));
    // Two runs of each of the 39 measuring nodes (59 configurations).
    assert_eq!(study.planned(&plan), 2 * 39 + 12);
}

/// The two `Plot` fields the night sweep and the ops report use, through the
/// real binary: `series` naming two columns (G4's M and dtype) and `filter`
/// holding the params a plot does not show (the ops plots), driven by a param.
#[test]
fn report_plots_take_several_series_columns_and_a_filter() {
    let study = Study::new();
    std::fs::write(
        study.dir.path().join("pipelines/zz_plot_fields.ron"),
        r#"Pipeline(
    params: { "zz_at": 2 },
    stages: {
        "zz_runs": Stage(
            matrix: { "m": [1, 2], "dtype": ["f16", "bf16"], "n": [64, 128] },
            task: Command(
                run: "echo '{\"t\": ${n}, \"dtype\": \"${dtype}\", \"m\": ${m}}' > ${out}/results.json",
                outputs: ["results.json"],
            ),
        ),
        "zz_report": Stage(
            needs: ["zz_runs"],
            task: Report(
                title: "plot fields",
                sources: ["zz_runs"],
                columns: ["t"],
                plots: [
                    Plot(name: "by_m_dtype", x: "n", y: "t", series: ["m", "dtype"]),
                    Plot(name: "at_m", x: "n", y: "t", series: "dtype", filter: { "m": "${zz_at}" }),
                ],
            ),
        ),
    },
)"#,
    )
    .expect("write a pipeline");
    study.ok(&["build", "zz_report"]);
    let plots = study.dir.path().join("out/zz_report/plots");
    let svg = |name: &str| std::fs::read_to_string(plots.join(name)).expect("read a plot");
    let multi = svg("by_m_dtype.svg");
    for label in [
        "m=1, dtype=f16",
        "m=1, dtype=bf16",
        "m=2, dtype=f16",
        "m=2, dtype=bf16",
    ] {
        assert!(multi.contains(label), "no line {label} in by_m_dtype.svg");
    }
    let filtered = svg("at_m.svg");
    assert!(filtered.contains("(m=2)"), "the caption names the filter");
    assert!(filtered.contains("dtype=f16") && !filtered.contains("m=1"));
    assert!(plots.join("at_m.png").is_file());
    // A filter value no row has fails the report, naming it.
    let run = study.run(&["build", "zz_report", "-p", "zz_at=5"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("no row with m=5"), "{}", run.stderr);
}
