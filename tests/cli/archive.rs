//! Stages over files (`files: "PATTERN"`): every matching file is a node,
//! a new file adds exactly its nodes, a changed one makes exactly its chain
//! stale, a removed one leaves the graph; the no-op snapshot sees files
//! come and go.

use std::time::SystemTime;

use super::harness::Ws;

const ARCHIVE: &str = r#"Pipeline(
    stages: {
        "conv": Stage(
            files: "archive/{rq}/**/gpu{gpu}_{model}.txt",
            task: Command(run: "echo conv-${rq}-${gpu}-${model} >> side.log; cp ${file} ${out}/t.txt", outputs: ["t.txt"]),
        ),
        "ana": Stage(
            for_each: "conv",
            task: Command(run: "echo ana-${rq}-${gpu}-${model} >> side.log; wc -c < ${needs.conv}/t.txt > ${out}/n.txt", outputs: ["n.txt"]),
        ),
        "summary": Stage(
            needs: ["ana"],
            task: Command(run: "echo summary >> side.log; for d in ${needs.ana}; do echo $d; done | sed 's|.*/||' > ${out}/rows.txt", outputs: ["rows.txt"]),
        ),
    },
)"#;

fn archive() -> Ws {
    let ws = Ws::new(&[("archive.ron", ARCHIVE)]);
    ws.write("archive/rq1/2025-07-14/gpu0_vit16x12x1024.txt", "a\n");
    ws.write("archive/rq1/2025-07-14/gpu1_vit32x6x384.txt", "bb\n");
    ws.write("archive/rq2/gpu0_vit8x6x384_512px.txt", "ccc\n");
    ws.write("archive/rq2/README.md", "not a trace\n");
    ws
}

/// The side-effect log since the last call, sorted, and emptied.
fn ran(ws: &Ws) -> Vec<String> {
    let mut lines = ws.log_lines();
    lines.sort();
    std::fs::remove_file(ws.path().join("side.log")).ok();
    lines
}

fn build(ws: &Ws) {
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
}

fn reasons(s: &serde_json::Value, id: &str) -> Vec<String> {
    s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id}"))["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn files_come_change_and_go_and_exactly_their_nodes_follow() {
    let ws = archive();
    build(&ws);
    assert_eq!(
        ran(&ws),
        [
            "ana-rq1-0-vit16x12x1024",
            "ana-rq1-1-vit32x6x384",
            "ana-rq2-0-vit8x6x384_512px",
            "conv-rq1-0-vit16x12x1024",
            "conv-rq1-1-vit32x6x384",
            "conv-rq2-0-vit8x6x384_512px",
            "summary"
        ]
    );
    let rows = |ws: &Ws| ws.read("out/summary/rows.txt");
    assert_eq!(rows(&ws).lines().count(), 3);

    // A new file: one new node, never built; only its chain runs.
    ws.write("archive/rq2/deep/er/gpu3_vit16x12x768.txt", "dddd\n");
    let s = ws.status(&[]);
    assert_eq!(
        reasons(&s, "conv[rq=rq2,gpu=3,model=vit16x12x768]"),
        ["never_built"]
    );
    assert_eq!(
        s["summary"]["stale"], 3,
        "the new conv, its ana, the summary"
    );
    build(&ws);
    assert_eq!(
        ran(&ws),
        [
            "ana-rq2-3-vit16x12x768",
            "conv-rq2-3-vit16x12x768",
            "summary"
        ]
    );
    assert_eq!(rows(&ws).lines().count(), 4);

    // A changed file: its node is stale with `input_changed`, naming it.
    ws.write("archive/rq1/2025-07-14/gpu1_vit32x6x384.txt", "bbbbbb\n");
    let s = ws.status(&[]);
    assert_eq!(
        reasons(&s, "conv[rq=rq1,gpu=1,model=vit32x6x384]"),
        ["input_changed"]
    );
    assert_eq!(s["summary"]["stale"], 3);
    build(&ws);
    assert_eq!(
        ran(&ws),
        ["ana-rq1-1-vit32x6x384", "conv-rq1-1-vit32x6x384", "summary"]
    );

    // A removed file: its nodes leave the graph and the summary rebuilds without it.
    std::fs::remove_file(ws.path().join("archive/rq2/gpu0_vit8x6x384_512px.txt")).unwrap();
    let s = ws.status(&[]);
    assert_eq!(
        s["summary"]["fresh"].as_u64().unwrap() + s["summary"]["stale"].as_u64().unwrap(),
        7
    );
    build(&ws);
    assert_eq!(ran(&ws), ["summary"]);
    let now = rows(&ws);
    assert_eq!(now.lines().count(), 3);
    assert!(!now.contains("512px"), "{now}");
    let r = ws.run(&["build"]);
    assert!(
        r.stderr().contains("0 ran") || ran(&ws).is_empty(),
        "{}",
        r.stderr()
    );
}

/// Dates every file and folder of the workspace an hour back, as if written long ago.
fn settle(ws: &Ws) {
    let past = SystemTime::now() - super::harness::SETTLE_BACK;
    for e in walkdir::WalkDir::new(ws.path())
        .contents_first(true)
        .into_iter()
        .flatten()
        .filter(|e| !e.path().starts_with(ws.path().join("cache")))
    {
        if let Ok(f) = std::fs::File::open(e.path()) {
            let _ = f.set_modified(past);
        }
    }
}

/// `status --json` with timings: the answer and whether the snapshot gave it.
fn status_fast(ws: &Ws) -> (serde_json::Value, bool) {
    let r = super::harness::Run(
        ws.cmd(&["status", "--json"])
            .env("VITGRAPH_TIMINGS", "1")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let err = r.stderr();
    let fast = err.contains("check snapshot") && !err.contains("load pipelines");
    (serde_json::from_str(&r.stdout()).unwrap(), fast)
}

#[test]
fn the_snapshot_sees_files_come_and_go() {
    let ws = archive();
    build(&ws);
    settle(&ws);
    build(&ws);
    let (s, fast) = status_fast(&ws);
    assert!(
        fast,
        "a settled, fresh archive is answered from the snapshot"
    );
    assert_eq!(s["summary"]["fresh"], 7);

    ws.write("archive/rq1/2025-07-14/gpu2_new.txt", "e\n");
    let (s, fast) = status_fast(&ws);
    assert!(!fast, "a new file in a listed folder misses the snapshot");
    assert_eq!(s["summary"]["stale"], 3);

    build(&ws);
    settle(&ws);
    build(&ws);
    assert!(status_fast(&ws).1);
    std::fs::remove_file(ws.path().join("archive/rq1/2025-07-14/gpu2_new.txt")).unwrap();
    let (s, fast) = status_fast(&ws);
    assert!(!fast, "a removed file misses the snapshot");
    assert_eq!(
        s["summary"]["stale"], 1,
        "the summary, without the removed file"
    );

    build(&ws);
    settle(&ws);
    build(&ws);
    assert!(status_fast(&ws).1);
    // A new folder the `**` reaches.
    ws.write("archive/rq2/new/sub/gpu5_x.txt", "f\n");
    let (s, fast) = status_fast(&ws);
    assert!(!fast);
    assert_eq!(s["summary"]["stale"], 3);
}

#[test]
fn a_pattern_that_matches_nothing_warns_and_builds_nothing() {
    let ws = Ws::new(&[("archive.ron", ARCHIVE)]);
    ws.write("archive/rq1/notes.txt", "x\n");
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let err = r.stderr();
    assert!(
        err.contains("warning: pipelines/archive.ron:4:20: stage `conv`: `files: \"archive/{rq}/**/gpu{gpu}_{model}.txt\"` matches no file (the deepest folder of it that exists is `archive`)"),
        "{err}"
    );
}

/// The example workspace's pipeline on an archive of real traces (nsys
/// SQLite exports of four nsys versions and PyTorch-profiler JSON) laid out
/// by its own script in seed 001's layout.
mod real_traces {
    use std::path::{Path, PathBuf};

    use super::super::harness::Ws;

    const PIPELINE: &str = include_str!("../../examples/archive/pipelines/archive.ron");

    fn external() -> Option<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/external-traces");
        if dir.is_dir() {
            Some(dir)
        } else {
            eprintln!("skipped: {} is absent", dir.display());
            None
        }
    }

    fn built(ws: &Ws) -> Vec<String> {
        let r = ws.run(&["build", "--json"]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        r.nodes_with("finished")
    }

    /// `table.csv` of one research question's report: (config, kernel_count) per row.
    fn rows(ws: &Ws, rq: &str) -> Vec<(String, String)> {
        let csv = ws.read(&format!("out/rq_report/rq={rq}/table.csv"));
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let (config, kernels) = (col("config"), col("kernel_count"));
        lines
            .map(|l| {
                let cells: Vec<&str> = l.split(',').collect();
                (cells[config].to_string(), cells[kernels].to_string())
            })
            .collect()
    }

    const RQ1: &str = "rq1_model_architecture_impact";
    const RQ1_DIR: &str =
        "experiments/rq1_model_architecture_impact/2025-07-14/16-30-54/nsys_reports";

    #[test]
    fn an_archive_of_mixed_real_traces_is_converted_analysed_and_reported_per_question() {
        let Some(traces) = external() else { return };
        let ws = Ws::new(&[("archive.ron", PIPELINE)]);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/archive/make-archive.sh");
        let made = std::process::Command::new("bash")
            .arg(&script)
            .arg(&traces)
            .arg(ws.path())
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );

        let first = built(&ws);
        assert_eq!(first.len(), 9 + 9 + 5, "{first:?}");
        let kineto = "traces[rq=rq3_compilation_optimization,gpu=0,numa=0,config=vit16x12x768_compiled,format=json.gz]";
        assert!(first.contains(&kineto.to_string()), "{first:?}");
        // Every trace's kernel count, as the analysis of that trace alone says.
        let kernels_of = |id_tail: &str| -> String {
            let m = ws.read(&format!("out/analysis/{id_tail}/metrics.json"));
            let m: serde_json::Value = serde_json::from_str(&m).unwrap();
            m["devices"][0]["kernel_count"].to_string()
        };
        let rq4: Vec<(String, String)> = rows(&ws, "rq4_numa_locality_effects");
        assert_eq!(rq4.len(), 2, "numa 0 and numa 2: {rq4:?}");
        let rq3 = rows(&ws, "rq3_compilation_optimization");
        assert_eq!(
            rq3,
            [
                (
                    "vit16x12x768_compiled".to_string(),
                    kernels_of("rq=rq3_compilation_optimization,gpu=0,numa=0,config=vit16x12x768_compiled,format=json.gz")
                ),
                (
                    "vit16x12x768_uncompiled".to_string(),
                    kernels_of("rq=rq3_compilation_optimization,gpu=0,numa=0,config=vit16x12x768_uncompiled,format=json.gz")
                ),
            ]
        );
        assert_eq!(rows(&ws, RQ1).len(), 2);

        // A new trace: its conversion and analysis run, and the reports.
        std::fs::copy(
            traces.join("aws_gpu/report2.sqlite"),
            ws.path().join(RQ1_DIR).join("gpu0_numa0_vit8x6x384.sqlite"),
        )
        .unwrap();
        let mut ran = built(&ws);
        ran.retain(|id| !id.starts_with("rq_report["));
        assert_eq!(
            ran,
            [
                "analysis[rq=rq1_model_architecture_impact,gpu=0,numa=0,config=vit8x6x384,format=sqlite]",
                "traces[rq=rq1_model_architecture_impact,gpu=0,numa=0,config=vit8x6x384,format=sqlite]",
            ]
        );
        assert_eq!(rows(&ws, RQ1).len(), 3);

        // A replaced trace: exactly its chain. (The copy above kept the
        // source's read-only mode: replace the file, as `cp -f` would.)
        std::fs::remove_file(ws.path().join(RQ1_DIR).join("gpu0_numa0_vit8x6x384.sqlite")).unwrap();
        std::fs::copy(
            traces.join("test-cuda/report1.sqlite"),
            ws.path().join(RQ1_DIR).join("gpu0_numa0_vit8x6x384.sqlite"),
        )
        .unwrap();
        let mut ran = built(&ws);
        ran.retain(|id| !id.starts_with("rq_report["));
        assert_eq!(ran.len(), 2, "{ran:?}");
        assert!(
            ran.iter().all(|id| id.contains("config=vit8x6x384")),
            "{ran:?}"
        );

        // A removed trace: nothing runs (the reports of the archive without it
        // were built first, and come back from the store), and RQ1's report
        // loses its row.
        std::fs::remove_file(ws.path().join(RQ1_DIR).join("gpu0_numa0_vit8x6x384.sqlite")).unwrap();
        let r = ws.run(&["build", "--json"]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        assert!(r.nodes_with("finished").is_empty(), "{}", r.stdout());
        assert!(
            r.nodes_with("cached")
                .contains(&format!("rq_report[rq={RQ1}]")),
            "{}",
            r.stdout()
        );
        assert_eq!(rows(&ws, RQ1).len(), 2);
        assert!(built(&ws).is_empty(), "then nothing is stale");
    }
}
