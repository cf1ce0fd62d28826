//! A `Vit` stage measured together: one node per block, each member's spec
//! read with its own values, the A/A twin a second instance of the first.

use crate::pipeline::{load, Override, PipelineError};
use crate::tasks::TaskSpec;

fn load_with(text: &str, overrides: &[&str]) -> Result<crate::graph::Graph, PipelineError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
    std::fs::write(dir.path().join("pipelines/p.ron"), text).unwrap();
    let o: Vec<Override> = overrides
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    load(dir.path(), &o)
}

fn stage(extra: &str, task: &str) -> String {
    format!(
        r#"Pipeline(params: {{"model": ["vit32x2x96", "vit16x2x96"], "batch": [1, 8]}}, stages: {{
  "runs": Stage(matrix: {{"model": "${{model}}", "batch": "${{batch}}"}}, together: ["model"], repeat: 2, {extra}
                task: Vit(({task}))) }})"#
    )
}

const TASK: &str = r#"model: "${model}", batch: "${batch}", samples: 16, device: "cpu""#;

#[test]
fn a_vit_block_reads_each_members_spec_with_its_own_values() {
    let g = load_with(&stage("check: true,", TASK), &[]).unwrap();
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "runs[batch=1,rep=1]",
            "runs[batch=1,rep=2]",
            "runs[batch=8,rep=1]",
            "runs[batch=8,rep=2]"
        ]
    );
    let node = &g.nodes[g.find("runs[batch=8,rep=2]").unwrap()];
    let TaskSpec::Vit(v) = &node.task else {
        panic!("a Vit task")
    };
    let block = v.together.as_ref().expect("a block");
    let models: Vec<Option<&str>> = block.members.iter().map(|m| m.model.as_deref()).collect();
    assert_eq!(
        models,
        [Some("vit32x2x96"), Some("vit16x2x96"), Some("vit32x2x96")]
    );
    assert!(block
        .members
        .iter()
        .all(|m| m.batch == 8 && m.together.is_none()));
    assert_eq!(
        node.task.member_keys().unwrap(),
        ["vit32x2x96", "vit16x2x96", "vit32x2x96#2"]
    );
    assert_eq!(
        node.task.aa_members(),
        Some(("vit32x2x96".to_owned(), "vit32x2x96#2".to_owned()))
    );
    // The spec itself is the first member's.
    assert_eq!(v.model.as_deref(), Some("vit32x2x96"));
}

#[test]
fn two_together_axes_make_every_combination_a_member() {
    let text = stage("", TASK).replace(r#"together: ["model"]"#, r#"together: ["batch", "model"]"#);
    let g = load_with(&text, &[]).unwrap();
    assert_eq!(g.nodes.len(), 2);
    let keys = g.nodes[0].task.member_keys().unwrap();
    assert_eq!(
        keys,
        [
            "vit32x2x96,1",
            "vit32x2x96,8",
            "vit16x2x96,1",
            "vit16x2x96,8"
        ]
    );
    let TaskSpec::Vit(v) = &g.nodes[0].task else {
        panic!("a Vit task")
    };
    let batches: Vec<u32> = v
        .together
        .as_ref()
        .unwrap()
        .members
        .iter()
        .map(|m| m.batch)
        .collect();
    assert_eq!(batches, [1, 8, 1, 8]);

    // With `check: true` the first model's twin is measured at every batch
    // size, and every twin is left out of the report's rows.
    let g = load_with(&text.replace("repeat: 2,", "repeat: 2, check: true,"), &[]).unwrap();
    let task = &g.nodes[0].task;
    let keys = task.member_keys().unwrap();
    assert_eq!(keys.len(), 6);
    assert_eq!(&keys[4..], ["vit32x2x96#2,1", "vit32x2x96#2,8"]);
    let block = task.together().unwrap();
    let twins: Vec<bool> = block.members.iter().map(|m| block.is_twin(m)).collect();
    assert_eq!(twins, [false, false, false, false, true, true]);
}

#[test]
fn a_member_that_cannot_share_the_process_is_named() {
    let cases = [
        (
            format!("{TASK}, trace: Cupti"),
            vec![],
            "member `vit32x2x96` has `trace: Cupti`, and a block measured together records timings only",
        ),
        (
            r#"model: "${model}", batch: "${batch}", device: "${dev}""#.to_owned(),
            vec![],
            "one process measures a block, on one device",
        ),
        (
            TASK.to_owned(),
            vec![r#"model=["vit32x2x96","vit3"]"#],
            "`model` \"vit3\" is not of the form",
        ),
    ];
    for (task, overrides, message) in cases {
        let mut text = stage("", &task);
        if task.contains("${dev}") {
            text = text
                .replace(
                    r#""batch": [1, 8]}"#,
                    r#""batch": [1, 8], "dev": ["cpu", "cuda"]}"#,
                )
                .replace(
                    r#""batch": "${batch}"}"#,
                    r#""batch": "${batch}", "dev": "${dev}"}"#,
                )
                .replace(r#"together: ["model"]"#, r#"together: ["model", "dev"]"#);
        }
        let e = load_with(&text, &overrides).expect_err(message);
        assert!(e.message.contains(message), "{message}: {}", e.message);
    }
}

/// Each member's op of an `OpBench` block, as `Debug` prints it.
fn member_ops(task: &TaskSpec) -> Vec<String> {
    let TaskSpec::OpBench(o) = task else {
        panic!("an OpBench task")
    };
    let block = o.together.as_ref().expect("a block");
    block
        .members
        .iter()
        .map(|m| format!("{:?}", m.op))
        .collect()
}

#[test]
fn an_opbench_block_reads_each_members_op_and_refuses_a_calibration() {
    let text = r#"Pipeline(params: {"backend": ["Auto", "Math"]}, stages: {
  "sdpa": Stage(matrix: {"backend": "${backend}", "head_dim": [64, 128]}, together: ["backend"],
                task: OpBench((op: Sdpa(batch: 1, heads: 2, seq: 16, head_dim: "${head_dim}", backend: "${backend}")))) })"#;
    let g = load_with(text, &[]).unwrap();
    assert_eq!(g.nodes.len(), 2);
    let ops = member_ops(&g.nodes[1].task);
    assert!(
        ops[0].contains("backend: Auto") && ops[1].contains("backend: Math"),
        "{ops:?}"
    );
    assert!(ops.iter().all(|o| o.contains("head_dim: 128")), "{ops:?}");
    assert_eq!(g.nodes[1].task.member_keys().unwrap(), ["Auto", "Math"]);

    let text = r#"Pipeline(stages: {
  "cal": Stage(matrix: {"device": ["cpu"]}, together: ["device"], task: OpBench((op: Calibrate, device: "${device}")))})"#;
    let err = load_with(text, &[]).unwrap_err().to_string();
    assert!(
        err.contains("`op: Calibrate`") && err.contains("a stage of its own"),
        "{err}"
    );
}

#[test]
fn an_include_entrys_own_params_travel_with_their_member() {
    // HET1's shape: each pattern brings its `seqs` and `max_over_mean`.
    let text = r#"Pipeline(stages: {
  "het": Stage(matrix: {"pattern": ["even", "skew"]}, together: ["pattern"], repeat: 2,
               include: [
                 {"pattern": "even", "ratio": 1.0, "seqs": [8, 8]},
                 {"pattern": "skew", "ratio": 1.5, "seqs": [4, 12]},
               ],
               task: OpBench((op: Hetero(heads: 1, head_dim: 16, seqs: "${seqs}"), device: "cpu"))) })"#;
    let g = load_with(text, &[]).unwrap();
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["het[rep=1]", "het[rep=2]"]);
    let ops = member_ops(&g.nodes[0].task);
    let TaskSpec::OpBench(o) = &g.nodes[0].task else {
        panic!("an OpBench task")
    };
    let block = o.together.as_ref().expect("a block");
    assert!(
        ops[0].contains("seqs: [8, 8]") && ops[1].contains("seqs: [4, 12]"),
        "{ops:?}"
    );
    let configs: Vec<Vec<(String, String)>> = block
        .block
        .configs()
        .map(|(_, params)| params.into_iter().map(|(k, v)| (k, v.display())).collect())
        .collect();
    let text_of = |c: &[(String, String)]| {
        c.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(text_of(&configs[0]), "pattern=even ratio=1.0 seqs=[8,8]");
    assert_eq!(text_of(&configs[1]), "pattern=skew ratio=1.5 seqs=[4,12]");

    // A param that varies apart from the together axis still sets blocks
    // apart, as a matrix axis does: `ratio` is 9 wherever `h` is 2.
    let apart = text
        .replace(
            r#"{"pattern": ["even", "skew"]}"#,
            r#"{"pattern": ["even", "skew"], "h": [1, 2]}"#,
        )
        .replace(
            r#"{"pattern": "skew", "ratio": 1.5, "seqs": [4, 12]},"#,
            r#"{"pattern": "skew", "ratio": 1.5, "seqs": [4, 12]}, {"h": 2, "ratio": 9.0},"#,
        );
    let g = load_with(&apart, &[]).unwrap();
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(ids.contains(&"het[h=2,ratio=9.0,rep=1]"), "{ids:?}");
}
