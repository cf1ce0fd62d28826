//! The study pipelines shipped in `pipelines/` (quickstart and RQ1–RQ5;
//! `study_ops.rs` covers ops and night_sweep): each loads, each stage has
//! exactly the configurations the book's "Study" chapters list, and targets
//! plan exactly their nodes. Runs the real binary on a copy of the
//! repository's `pipelines/` folder.

use std::collections::BTreeSet;

mod common;
use common::Study;

/// Queries on the study's pipelines.
trait Queries {
    fn nodes(&self, target: &str, params: &[&str]) -> Vec<String>;
    fn repetitions(&self, target: &str, params: &[&str]) -> Vec<String>;
    fn planned(&self, target: &str) -> BTreeSet<String>;
}

impl Queries for Study {
    /// The configurations of `target`: the node ids `vitgraph ls TARGET`
    /// lists, each repetition's id (`…,rep=2]`) folded into its
    /// configuration's (the id without `rep`), in order.
    fn nodes(&self, target: &str, params: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for id in self.repetitions(target, params) {
            let config = without_rep(&id);
            if out.last() != Some(&config) {
                out.push(config);
            }
        }
        out
    }

    /// The node ids of `target`, as `vitgraph ls TARGET` lists them.
    fn repetitions(&self, target: &str, params: &[&str]) -> Vec<String> {
        let mut args = vec!["ls", target];
        for p in params {
            args.extend(["-p", p]);
        }
        self.ok(&args).lines().map(str::to_owned).collect()
    }

    /// The nodes `vitgraph build -n -v TARGET` would run.
    fn planned(&self, target: &str) -> BTreeSet<String> {
        self.ok(&["build", "-n", "-v", target])
            .lines()
            .filter_map(|l| l.strip_prefix("run"))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    }
}

/// A repetition's configuration: its id without the param `rep`.
fn without_rep(id: &str) -> String {
    match id.rfind(",rep=").or_else(|| id.rfind("[rep=")) {
        Some(at) if id[at..].ends_with(']') => {
            let head = &id[..at];
            if id.as_bytes()[at] == b'[' {
                head.to_owned()
            } else {
                format!("{head}]")
            }
        }
        _ => id.to_owned(),
    }
}

/// The value of `key` in a node id such as `rq1_runs[patch=8,depth=6,…]`.
fn param<'a>(id: &'a str, key: &str) -> Option<&'a str> {
    let inner = id.split_once('[')?.1.strip_suffix(']')?;
    inner
        .split(',')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn every_pipeline_loads_with_the_documented_stage_sizes() {
    let study = Study::new();
    let expected = [
        // Measured together: one node a repetition times all six
        // configurations; one traced run each feeds the analysis.
        ("quickstart_runs", 1),
        ("quickstart_traces", 6),
        ("quickstart_analysis", 6),
        ("quickstart_report", 1),
        // The dims of each (patch, depth) measured together; every
        // architecture traced once.
        ("rq1_runs", 12),
        ("rq1_traces", 39),
        ("rq1_analysis", 39),
        ("rq1_report", 1),
        ("rq1_notebook", 1),
        ("rq2_runs", 17),
        ("rq2_analysis", 17),
        ("rq2_report", 1),
        ("rq3_eager", 13),
        ("rq3_compiled", 22),
        ("rq3_compiled_export", 22),
        ("rq3_eager_analysis", 13),
        ("rq3_compiled_analysis", 22),
        ("rq3_graph", 3),
        ("rq3_graph_analysis", 3),
        ("rq3_analysis", 1),
        ("rq3_report", 1),
        ("rq3_overhead", 1),
        ("rq4_runs", 52),
        ("rq4_analysis", 52),
        ("rq4_report", 1),
        ("rq5_runs", 23),
        ("rq5_analysis", 23),
        ("rq5_report", 1),
    ];
    for (stage, count) in expected {
        let nodes = study.nodes(stage, &[]);
        assert_eq!(nodes.len(), count, "{stage}: {nodes:#?}");
        let unique: BTreeSet<&String> = nodes.iter().collect();
        assert_eq!(unique.len(), count, "{stage} has duplicate ids");
    }
}

#[test]
fn rq1_is_the_architecture_grid_less_the_large_patch8_models() {
    let nodes = Study::new().nodes("rq1_traces", &[]);
    let models: BTreeSet<String> = nodes
        .iter()
        .map(|id| {
            let p = |k| param(id, k).unwrap_or_else(|| panic!("{id} lacks {k}"));
            format!("vit{}x{}x{}", p("patch"), p("depth"), p("dim"))
        })
        .collect();
    assert_eq!(models.len(), 39);
    for named in [
        "vit32x6x384",
        "vit16x6x384",
        "vit8x6x384",
        "vit32x12x768",
        "vit16x12x768",
        "vit8x12x768",
        "vit32x18x1024",
        "vit16x18x1024",
        "vit32x24x1280",
    ] {
        assert!(models.contains(named), "the seeds name {named}");
    }
    let patch8: BTreeSet<&str> = models
        .iter()
        .filter(|m| m.starts_with("vit8x"))
        .map(String::as_str)
        .collect();
    let want: BTreeSet<&str> = [
        "vit8x6x384",
        "vit8x12x384",
        "vit8x18x384",
        "vit8x24x384",
        "vit8x6x768",
        "vit8x12x768",
        "vit8x6x1024",
    ]
    .into();
    assert_eq!(patch8, want);
}

#[test]
fn rq2_has_the_seeds_resolutions_per_model() {
    let nodes = Study::new().nodes("rq2_runs", &[]);
    let mut per_model: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    for id in &nodes {
        let res = param(id, "res").expect("res").parse().expect("a number");
        per_model
            .entry(param(id, "model").expect("model").to_owned())
            .or_default()
            .push(res);
    }
    for v in per_model.values_mut() {
        v.sort();
    }
    let want = [
        ("vit16x12x768", vec![256]),
        ("vit16x6x384", vec![256, 512, 1024, 2048]),
        ("vit32x12x768", vec![256, 512, 1024]),
        ("vit32x18x1024", vec![256, 512]),
        ("vit32x6x384", vec![256, 512, 1024, 2048]),
        ("vit8x6x384", vec![256, 512, 1024]),
    ];
    let want: std::collections::BTreeMap<String, Vec<u32>> =
        want.into_iter().map(|(m, r)| (m.to_owned(), r)).collect();
    assert_eq!(per_model, want);
}

#[test]
fn rq4_pairs_every_configuration_local_and_remote() {
    let study = Study::new();
    let nodes = study.nodes("rq4_runs", &[]);
    let mut configs: std::collections::BTreeMap<(String, String), BTreeSet<String>> =
        Default::default();
    for id in &nodes {
        let key = (
            param(id, "model").expect("model").to_owned(),
            param(id, "batch").expect("batch").to_owned(),
        );
        configs
            .entry(key)
            .or_default()
            .insert(param(id, "numa").expect("numa").to_owned());
    }
    assert_eq!(configs.len(), 26);
    assert!(configs
        .values()
        .all(|n| n == &BTreeSet::from(["0".to_owned(), "2".to_owned()])));
    let batch1 = configs.keys().filter(|(_, b)| b == "1").count();
    assert_eq!(batch1, 14, "every model runs at batch 1");
    // On a host with one NUMA node the study is built with `-p numa=[0]`.
    assert_eq!(study.nodes("rq4_runs", &["numa=[0]"]).len(), 26);
}

#[test]
fn rq5_has_the_seeds_pipeline_designs() {
    let nodes = Study::new().nodes("rq5_runs", &[]);
    let designs: BTreeSet<(String, String, String, String)> = nodes
        .iter()
        .map(|id| {
            let p = |k| {
                param(id, k)
                    .unwrap_or_else(|| panic!("{id} lacks {k}"))
                    .to_owned()
            };
            (p("model"), p("pipeline"), p("preprocess"), p("batch"))
        })
        .collect();
    assert_eq!(designs.len(), 23);
    let has = |m: &str, p: &str, pre: &str, b: &str| {
        designs.contains(&(m.into(), p.into(), pre.into(), b.into()))
    };
    // The comparisons seed 000 names.
    assert!(has("vit32x6x384", "sync", "Cpu", "4"));
    assert!(has("vit32x6x384", "async:2", "Cpu", "4"));
    assert!(has("vit16x12x768", "async:2", "Cpu", "4"));
    assert!(has("vit16x12x768", "async:8", "Cpu", "4"));
    assert!(has("vit32x18x1024", "async:2", "Cpu", "1"));
    assert!(has("vit32x18x1024", "async:2", "Cpu", "32"));
    for queue in ["async:2", "async:4", "async:8", "async:16"] {
        assert!(has("vit16x12x768", queue, "Cpu", "4"), "{queue}");
    }
    assert!(has("vit32x18x1024", "sync", "Gpu", "4"));
}

#[test]
fn an_analysis_target_plans_its_experiments_and_nothing_else() {
    let study = Study::new();
    let planned = study.planned("rq2_analysis");
    // The first three repetitions of each of the 17 configurations, and
    // their analyses; the later ones are decided as the build goes.
    let first = |stage: &str| -> BTreeSet<String> {
        study
            .repetitions(stage, &[])
            .into_iter()
            .filter(|id| {
                ["rep=1]", "rep=2]", "rep=3]"]
                    .iter()
                    .any(|r| id.ends_with(r))
            })
            .collect()
    };
    let want: BTreeSet<String> = first("rq2_runs")
        .union(&first("rq2_analysis"))
        .cloned()
        .collect();
    assert_eq!(planned.len(), 102);
    assert_eq!(planned, want);
    // The report adds exactly itself.
    let report = study.planned("rq2_report");
    assert_eq!(report.len(), 103);
    assert!(report.contains("rq2_report"));
}

#[test]
fn every_measurement_is_repeated_with_a_precision_target() {
    let study = Study::new();
    for (stage, configurations, most) in [
        ("quickstart_runs", 1, 5),
        ("rq1_runs", 12, 10),
        ("rq2_runs", 17, 10),
        ("rq3_eager", 13, 10),
        ("rq3_compiled", 22, 10),
        ("rq4_runs", 52, 10),
        ("rq5_runs", 23, 10),
    ] {
        let ids = study.repetitions(stage, &[]);
        assert_eq!(ids.len(), configurations * most, "{stage}");
        assert!(ids[most - 1].ends_with(&format!("rep={most}]")), "{ids:?}");
    }
    // Three repetitions judged before any build: the rest wait for them.
    let status = study.ok(&["status", "quickstart_runs"]);
    assert!(
        status.contains(
            "0 fresh, 3 stale, 2 repetitions decided once the ones before them are built"
        ),
        "{status}"
    );
    // A smaller budget for a quick look: two runs each, no more.
    assert_eq!(
        study
            .repetitions("rq1_runs", &["repeat=2", "max_repeat=2"])
            .len(),
        24
    );
}
