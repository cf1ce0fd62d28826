//! An old Hydra multirun brought in: a real Hydra app (tests/fixtures/hydra)
//! sweeps seven batch sizes as the seed study did, one job writing no
//! results and the last one failing; a `hydra:` stage makes a node of each
//! job with its overrides as params, `Import` takes its results, a `Report`
//! runs over them without re-running anything, and `vitgraph.runs` merges
//! them with new runs on their params.
//!
//! Needs hydra-core: from `python3`, with `VITGRAPH_PYDEPS` (where
//! `scripts/test.sh` installs it) on its `PYTHONPATH`. Skipped without it,
//! saying so — unless `VITGRAPH_REQUIRE_HYDRA=1` (the test suite).

use super::harness::{flat, Ws};

const MULTIRUN: &str = "multirun/2025-07-14/16-30-54";

fn pipeline(exclude: &str) -> String {
    format!(
        r#"Pipeline(stages: {{
  "old": Stage(
      hydra: (multirun: "{MULTIRUN}", rename: {{"batch_size": "batch"}}),
      exclude: [{exclude}],
      task: Import(from: "${{job}}", files: ["results.json"]),
  ),
  "new": Stage(
      matrix: {{"batch": [128, 256]}},
      task: Command(run: "echo '{{\"throughput_images_per_s\": ${{batch}}.5}}' > ${{out}}/results.json", outputs: ["results.json"]),
  ),
  "report": Stage(needs: ["old"], task: Report(title: "Throughput by batch", sources: ["old"], columns: ["throughput_images_per_s"])),
}})"#
    )
}

fn hydra() -> Option<String> {
    super::harness::python_with("hydra", "VITGRAPH_REQUIRE_HYDRA")
}

/// The seed's sweep, run by Hydra itself in the workspace.
fn multirun(ws: &Ws, pydeps: &str) {
    multirun_with(ws, pydeps, None)
}

/// The sweep, each measuring job leaving `trace` (an nsys SQLite export) beside its results.
fn multirun_with(ws: &Ws, pydeps: &str, trace: Option<&std::path::Path>) {
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hydra/app.py");
    let out = std::process::Command::new("python3")
        .arg(app)
        .args(["-m", "experiment.test.batch_size=1,2,4,8,16,32,64"])
        .arg(format!("hydra.sweep.dir={MULTIRUN}"))
        .current_dir(ws.path())
        .env("PYTHONPATH", pydeps)
        .envs(trace.map(|t| ("FIXTURE_TRACE", t)))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CUDA out of memory"),
        "the last job fails: {err}"
    );
    let dir = ws.path().join(MULTIRUN);
    assert!(dir.join("multirun.yaml").is_file());
    assert!(
        dir.join("6/.hydra/overrides.yaml").is_file(),
        "the failed job has its folder"
    );
    assert!(!dir.join("5/results.json").exists() && dir.join("4/results.json").is_file());
}

#[test]
fn an_old_hydra_multirun_is_reported_without_running_it_again() {
    let Some(pydeps) = hydra() else { return };
    let ws = Ws::new(&[("p.ron", &pipeline(r#"{ "batch": 64 }"#))]);
    multirun(&ws, &pydeps);
    let ls = ws.run(&["ls", "old"]);
    assert_eq!(ls.code(), 0, "{}", ls.stderr());
    let ids: Vec<String> = ls.stdout().lines().map(str::to_owned).collect();
    assert_eq!(
        ids,
        [
            "old[batch=1]",
            "old[batch=2]",
            "old[batch=4]",
            "old[batch=8]",
            "old[batch=16]",
            "old[batch=32]"
        ],
        "one node a job, its override as the param, the excluded job left out"
    );

    // The job that wrote no results fails its node, saying what its log says.
    let r = ws.run(&["build", "report"]);
    assert_ne!(r.code(), 0);
    let err = flat(&r.stderr());
    assert!(
        err.contains(&format!("cannot take `{MULTIRUN}/5/results.json`")),
        "{err}"
    );
    assert!(
        err.contains("no results: the run was cut short"),
        "the job's log is quoted: {err}"
    );
    assert!(err.contains("exclude"), "{err}");

    // Left out, the report builds over the other five, and nothing ran but copies.
    ws.write(
        "pipelines/p.ron",
        &pipeline(r#"{ "batch": 64 }, { "batch": 32 }"#),
    );
    let r = ws.run(&["build", "report"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let table = ws.read("out/report/table.csv");
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 5, "{table}");
    assert!(table.starts_with("batch,"), "{table}");
    // batch 8: 1000 × 8 / 12, as the app wrote it.
    assert!(rows.iter().any(|r| r.starts_with("8,666.667")), "{table}");

    // A changed result in the archive makes its node stale, and only it.
    ws.write(
        &format!("{MULTIRUN}/3/results.json"),
        r#"{"throughput_images_per_s": 700.0}"#,
    );
    let stale: Vec<String> = ws.status(&[])["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["state"] == "stale" && n["id"].as_str().unwrap().starts_with("old"))
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stale, ["old[batch=8]"]);

    // Old and new runs in one DataFrame, merged on their params.
    let r = ws.run(&["build", "old", "new"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let script = "import vitgraph\n\
        old = vitgraph.runs('old', backend='records')\n\
        new = vitgraph.runs('new', backend='records')\n\
        rows = sorted(old + new, key=lambda r: r['batch'])\n\
        print([(r['batch'], r['throughput_images_per_s']) for r in rows])\n";
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/python");
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .current_dir(ws.path())
        .env("PYTHONPATH", python)
        .env("VITGRAPH", super::harness::BIN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        printed.trim(),
        "[(1, 200.0), (2, 333.333), (4, 500.0), (8, 700.0), (16, 800.0), (128, 128.5), (256, 256.5)]"
    );
}

#[test]
fn a_hydra_stage_that_is_not_a_multirun_says_how_to_write_one() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {"old": Stage(hydra: (folder: "multirun/x"), task: Import(from: "${job}", files: ["r.json"]))})"#,
    )]);
    let r = ws.run(&["ls"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    let err = flat(&r.stderr());
    assert!(
        err.contains("`hydra` takes `multirun` and `rename`, not `folder`"),
        "{err}"
    );
    assert!(
        err.contains("hydra: \"multirun/2025-07-14/16-30-54\""),
        "{err}"
    );
}

/// An old Hydra + nsys study: each job's profile (a real nsys SQLite
/// export) comes in with its results, and `Export`, `Analyze` and a
/// `Report` joining both run over them; nothing is measured.
#[test]
fn an_old_hydra_and_nsys_study_is_analysed_without_running_it_again() {
    let Some(pydeps) = hydra() else { return };
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/external-traces/test-cuda/report1.sqlite");
    if !trace.is_file() {
        eprintln!("skipped: {} is absent", trace.display());
        return;
    }
    let pipeline = format!(
        r#"Pipeline(stages: {{
  "old": Stage(
      hydra: (multirun: "{MULTIRUN}", rename: {{"batch_size": "batch"}}),
      exclude: [{{ "batch": 64 }}, {{ "batch": 32 }}],
      task: Import(from: "${{job}}", files: ["results.json", "report.sqlite"]),
  ),
  "old_traces": Stage(for_each: "old", task: Export(input: "${{needs.old}}/report.sqlite")),
  "old_analysis": Stage(for_each: "old_traces", task: Analyze(trace: "${{needs.old_traces}}/trace.sqlite")),
  "report": Stage(needs: ["old", "old_analysis"],
                  task: Report(title: "Old study", sources: ["old", "old_analysis"],
                               columns: ["throughput_images_per_s", "kernel_count"])),
}})"#
    );
    let ws = Ws::new(&[("p.ron", &pipeline)]);
    multirun_with(&ws, &pydeps, Some(&trace));
    let r = ws.run(&["build", "report"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("16 built"),
        "5 imports, 5 exports, 5 analyses, 1 report: {}",
        r.stderr()
    );
    let table = ws.read("out/report/table.csv");
    let header: Vec<&str> = table.lines().next().unwrap().split(',').collect();
    let kernels = header
        .iter()
        .position(|h| *h == "kernel_count")
        .expect("kernel_count");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 5, "{table}");
    // Every job's row has its throughput and its trace's kernels, joined on the batch.
    assert!(
        rows.iter()
            .all(|r| r[kernels].parse::<u64>().is_ok_and(|k| k > 0)),
        "{table}"
    );
    let again = ws.run(&["build", "report"]);
    assert!(
        again.stderr().contains("0 built, 16 fresh"),
        "{}",
        again.stderr()
    );
}
