//! A `Vit` stage measured together on real libtorch, on the CPU: each
//! repetition is one process that builds, warms up and times every member
//! in shuffled rounds; the report pairs them, the A/A twin checks them.
#![cfg(feature = "torch")]

mod common;
use common::Study;

const PIPELINE: &str = r#"Pipeline(
    params: { "model": ["vit32x2x96", "vit16x2x96"], "batch": [1, 2] },
    stages: {
        "runs": Stage(
            matrix: { "model": "${model}", "batch": "${batch}" },
            together: ["model"], check: true, repeat: 3,
            task: Vit((model: "${model}", batch: "${batch}", samples: 24, warmup: 2,
                       device: "cpu", image_size: 64, num_classes: 10)),
        ),
        "report": Stage(
            needs: ["runs"],
            task: Report(title: "models together", sources: ["runs"],
                columns: ["latency_ms.median", "throughput_images_per_s"],
                compare: Some(Compare(param: "model", baseline: "vit32x2x96", metric: "latency_ms.median"))),
        ),
    },
)"#;

fn study() -> Study {
    study_of(PIPELINE)
}

fn study_of(pipeline: &str) -> Study {
    let study = Study::new();
    let dir = study.dir.path().join("pipelines");
    std::fs::remove_dir_all(&dir).expect("remove the study's pipelines");
    std::fs::create_dir_all(&dir).expect("create pipelines/");
    std::fs::write(dir.join("t.ron"), pipeline).expect("write the pipeline");
    study
}

#[test]
fn a_vit_block_times_every_member_in_one_process_and_the_report_pairs_them() {
    let study = study();
    study.ok(&["build", "report", "-j", "2"]);
    // One node, one process, per (batch, rep): 6, not 18.
    let ls = study.ok(&["ls"]);
    assert!(ls.contains("runs") && ls.contains("6 nodes"), "{ls}");
    let root = study.dir.path();
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("out/runs/batch=2,rep=1/results.json")).expect("results.json"),
    )
    .expect("JSON");
    let members = doc["members"].as_object().expect("members");
    let keys: Vec<&str> = members.keys().map(String::as_str).collect();
    assert_eq!(keys, ["vit16x2x96", "vit32x2x96", "vit32x2x96#2"]);
    for (key, m) in members {
        assert_eq!(m["config"]["batch"], 2, "{key}");
        // 24 images at batch 2: 12 timed batches each, all of them kept.
        assert_eq!(
            m["latency_samples_ms"].as_array().map(Vec::len),
            Some(12),
            "{key}"
        );
        assert!(
            m["throughput_images_per_s"].as_f64().unwrap() > 0.0,
            "{key}"
        );
    }
    assert_eq!(members["vit16x2x96"]["config"]["patch"], 16);
    assert_eq!(members["vit32x2x96#2"]["config"]["model"], "vit32x2x96");
    assert_eq!(doc["method"]["design"], "together");
    // Every member is a row of the report; the twin is not.
    let csv = std::fs::read_to_string(root.join("out/report/compare.csv")).expect("compare.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for row in rows {
        assert!(
            row.starts_with("1,vit16x2x96,") || row.starts_with("2,vit16x2x96,"),
            "{row}"
        );
        assert!(row.contains(",paired,"), "{row}");
    }
    let show = study.ok(&["show", "runs[batch=1,rep=1]"]);
    assert!(
        show.contains("A/A check: `vit32x2x96#2` / `vit32x2x96`"),
        "{show}"
    );
    // A model added to the block measures each block again, and says why.
    let (_, status, _) = study.run(&[
        "status",
        "report",
        "-p",
        r#"model=["vit32x2x96","vit16x2x96","vit16x2x128"]"#,
    ]);
    assert!(
        status.contains("6 stale") || status.contains("7 stale"),
        "{status}"
    );
    let (_, explain, _) = study.run(&[
        "explain",
        "runs[batch=1,rep=1]",
        "-p",
        r#"model=["vit32x2x96","vit16x2x96","vit16x2x128"]"#,
    ]);
    assert!(
        explain.contains("members measured together: vit16x2x128 added"),
        "{explain}"
    );
}

const OPS_PIPELINE: &str = r#"Pipeline(
    params: { "dim": [64, 256], "backend": ["Auto", "Math", "MemEfficient"] },
    stages: {
        "norm": Stage(
            matrix: { "dim": "${dim}" },
            together: ["dim"], check: true, repeat: 2,
            task: OpBench((op: LayerNorm(batch: 4, seq: 32, dim: "${dim}"),
                           device: "cpu", warmup: 2, repeats: 10)),
        ),
        "attention": Stage(
            matrix: { "backend": "${backend}" },
            together: ["backend"],
            task: OpBench((op: Sdpa(batch: 1, heads: 2, seq: 16, head_dim: 8, backend: "${backend}"),
                           device: "cpu", warmup: 1, repeats: 6)),
        ),
        "report": Stage(
            needs: ["norm"],
            task: Report(title: "dims together", sources: ["norm"],
                columns: ["time_ms.median"],
                compare: Some(Compare(param: "dim", baseline: 64, metric: "time_ms.median"))),
        ),
    },
)"#;

#[test]
fn an_opbench_block_times_every_member_in_one_process_and_the_report_pairs_them() {
    let study = study_of(OPS_PIPELINE);
    study.ok(&["build", "report", "attention", "-j", "2"]);
    let ls = study.ok(&["ls"]);
    // One node per repetition for `norm` (2), one for `attention`.
    assert!(ls.contains("norm") && ls.contains("2 nodes"), "{ls}");
    let root = study.dir.path();
    let read = |path: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(root.join(path)).expect(path)).expect("JSON")
    };
    let doc = read("out/norm/rep=1/results.json");
    let members = doc["members"].as_object().expect("members");
    let keys: Vec<&str> = members.keys().map(String::as_str).collect();
    assert_eq!(keys, ["256", "64", "64#2"]);
    for (key, m) in members {
        assert_eq!(m["status"], "ok", "{key}");
        assert_eq!(m["time_ms"]["repeats"], 10, "{key}");
        assert!(m["time_ms"]["median"].as_f64().unwrap() > 0.0, "{key}");
        assert!(m["peak_memory_bytes"].is_null(), "{key}");
    }
    assert_eq!(members["256"]["config"]["op"]["LayerNorm"]["dim"], 256);
    assert_eq!(members["64#2"]["config"]["op"]["LayerNorm"]["dim"], 64);
    assert_eq!(doc["method"]["design"], "together");
    // The report pairs dim 256 with dim 64 over the two processes.
    let csv = std::fs::read_to_string(root.join("out/report/compare.csv")).expect("compare.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{csv}");
    assert!(
        rows[0].starts_with("256,") && rows[0].contains(",paired,"),
        "{csv}"
    );
    // A forced backend the CPU cannot run is a member's result, not the
    // block's failure; the others are timed.
    let doc = read("out/attention/results.json");
    let members = &doc["members"];
    assert_eq!(members["Math"]["status"], "ok", "{doc}");
    assert_eq!(members["Auto"]["status"], "ok", "{doc}");
    assert_eq!(members["MemEfficient"]["status"], "unsupported", "{doc}");
    assert_eq!(members["Math"]["time_ms"]["repeats"], 6, "{doc}");
}
