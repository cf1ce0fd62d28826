//! `vitgraph compare` and `vitgraph baseline` end to end: a measuring
//! `Command` whose levels come from an input file, built, changed, built
//! again; the comparison, the gate's exit status, and baselines that
//! outlive the runs they copied.

use super::harness::{Run, Ws};

/// The median of 50 samples around the level `levels.json` gives `impl`,
/// each process shifted by ±1 % and each sample by ±2 %, seeded by
/// configuration, repetition and `BENCH_SALT`: the same build measures the
/// same numbers.
const BENCH: &str = include_str!("../common/levelled_bench.py");

const PIPELINE: &str = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"impl": ["fast", "slow"]}, repeat: 3,
                 task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py", "levels.json"], outputs: ["results.json"], measure: true)),
})"#;

fn built() -> Ws {
    let ws = Ws::new(&[("p.ron", PIPELINE)]);
    ws.write("bench.py", BENCH);
    ws.write("levels.json", r#"{"fast": 5.0, "slow": 8.0}"#);
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    ws
}

/// The whole study measured again in place, with other seeds: the records
/// of the build before are replaced.
fn measure_again(ws: &Ws) {
    let again = ws
        .cmd(&["build", "--force", "-j", "1"])
        .env("BENCH_SALT", "2")
        .output()
        .unwrap();
    assert!(again.status.success());
}

fn ok(r: &Run) {
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
}

fn rows(r: &Run) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(&r.stdout()).expect("compare --json is JSON");
    doc["rows"].as_array().cloned().unwrap_or_default()
}

fn verdict_of(rows: &[serde_json::Value], config: &str) -> String {
    let row = rows
        .iter()
        .find(|r| r["config"] == config)
        .unwrap_or_else(|| panic!("no row for {config}: {rows:?}"));
    row["verdict"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_slower_build_is_named_and_gated_and_the_same_runs_are_said_to_be_the_same() {
    let ws = built();
    ok(&ws.run(&["baseline", "save", "main", "bench"]));
    // The slow implementation gets 20 % slower.
    ws.write("levels.json", r#"{"fast": 5.0, "slow": 9.6}"#);
    ok(&ws.run(&["build", "-j", "1"]));

    let r = ws.run(&["compare", "baseline:main", "HEAD", "--threshold", "10%"]);
    ok(&r);
    let text = r.stdout();
    assert!(text.contains("differs: input levels.json"), "{text}");
    assert!(text.contains("1 slower, 1 same"), "{text}");

    let r = ws.run(&[
        "compare",
        "build:1",
        "build:2",
        "--json",
        "--threshold",
        "10%",
    ]);
    ok(&r);
    let rows = rows(&r);
    assert_eq!(verdict_of(&rows, "bench[impl=slow]"), "slower");
    assert_eq!(verdict_of(&rows, "bench[impl=fast]"), "same");
    let slow = rows
        .iter()
        .find(|r| r["config"] == "bench[impl=slow]")
        .unwrap();
    let ratio = slow["ratio"].as_f64().unwrap();
    assert!((ratio - 1.2).abs() < 0.03, "{slow}");
    assert_eq!(slow["a"]["runs"], 3);
    assert_eq!(slow["ratio_basis"], "repetitions");

    // The gate: exit status 3, naming the pair; a looser condition passes.
    let r = ws.run(&[
        "compare",
        "baseline:main",
        "HEAD",
        "--fail-if",
        "latency_ms.median > +5%",
    ]);
    assert_eq!(r.code(), 3, "{}{}", r.stdout(), r.stderr());
    assert!(
        r.stderr().contains("bench[impl=slow]: latency_ms.median +"),
        "{}",
        r.stderr()
    );
    let r = ws.run(&[
        "compare",
        "baseline:main",
        "HEAD",
        "--fail-if",
        "latency_ms.median > +50%",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("gate passed"), "{}", r.stderr());
    // A gated metric no pair can be judged on fails the gate: a benchmark
    // that broke or renamed it must not pass, unless the user says so.
    let missing = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            "baseline:main",
            "HEAD",
            "--fail-if",
            "latency_ms.p42 > +5%",
        ];
        args.extend_from_slice(extra);
        ws.run(&args)
    };
    let r = missing(&[]);
    assert_eq!(r.code(), 3, "{}", r.stderr());
    assert!(
        r.stderr().contains("missing: no pair has `latency_ms.p42`")
            && r.stderr()
                .contains("gate failed: 1 gated comparison(s) had no evidence"),
        "{}",
        r.stderr()
    );
    let r = missing(&["--allow-missing"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("warning: no pair has `latency_ms.p42`")
            && r.stderr().contains("gate passed"),
        "{}",
        r.stderr()
    );

    // The latest build against what stands now: the same runs.
    let r = ws.run(&["compare", "build:-1", "HEAD", "--csv"]);
    ok(&r);
    assert!(
        r.stdout().contains("the same measurements on both sides"),
        "{}",
        r.stdout()
    );
}

fn summaries(ws: &Ws) -> i64 {
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    db.query_row("SELECT COUNT(*) FROM summaries", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_measurement_keeps_its_summary_and_compare_reads_the_same_without_it() {
    let ws = built();
    ws.write("levels.json", r#"{"fast": 5.0, "slow": 9.6}"#);
    ok(&ws.run(&["build", "-j", "1"]));
    // Each measurement was summarized when it was recorded: 6 objects of
    // the first build, 3 new of the second (the fast ones measured the
    // same bytes again).
    assert_eq!(summaries(&ws), 9);
    let args = ["compare", "build:1", "build:2", "--json"];
    let with = ws.run(&args);
    ok(&with);
    // Without the summaries (a store recorded before they were kept),
    // compare reads every results.json, says the same, and keeps them.
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    db.execute("DELETE FROM summaries", []).unwrap();
    drop(db);
    let without = ws.run(&args);
    ok(&without);
    assert_eq!(with.stdout(), without.stdout());
    assert_eq!(summaries(&ws), 9);
    // A metric that is not a headline is read from the files.
    let r = ws.run(&[
        "compare",
        "build:1",
        "build:2",
        "--metric",
        "latency_ms.mean",
    ]);
    ok(&r);
    assert!(r.stdout().contains("latency_ms.mean"), "{}", r.stdout());
}

#[test]
fn a_baseline_outlives_the_runs_it_copied_through_gc() {
    let ws = built();
    ok(&ws.run(&["baseline", "save", "main"]));
    let listed = ws.run(&["baseline", "list"]);
    ok(&listed);
    assert!(
        listed.stdout().contains("main") && listed.stdout().contains("6 runs"),
        "{}",
        listed.stdout()
    );
    // Measured again in place: the records of build 1 are replaced.
    measure_again(&ws);
    ok(&ws.run(&["gc"]));
    let r = ws.run(&["compare", "baseline:main", "HEAD", "--json"]);
    ok(&r);
    let rows = rows(&r);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows
        .iter()
        .all(|r| r["a"]["runs"] == 3 && r["b"]["runs"] == 3));
    // Build 1's runs were measured again: nothing of it is left to compare.
    let r = ws.run(&["compare", "build:1", "HEAD", "--json"]);
    ok(&r);
    assert_eq!(rows_count(&r), 0);
    assert_eq!(
        r.stdout().matches("\"runs\": 0").count(),
        1,
        "{}",
        r.stdout()
    );

    ok(&ws.run(&["baseline", "rm", "main"]));
    let r = ws.run(&["compare", "baseline:main", "HEAD"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("no baseline `main`"), "{}", r.stderr());
}

/// `vitgraph report p --compare …`: the page's target names a pipeline
/// file, which the comparison reads as the file's stages (it used to match
/// no run, and the page said "0 runs" on both sides).
#[test]
fn a_page_of_one_pipeline_file_compares_its_runs() {
    let ws = built();
    ok(&ws.run(&["baseline", "save", "main"]));
    measure_again(&ws);
    ok(&ws.run(&["report", "p", "--compare", "baseline:main", "HEAD"]));
    let page = std::fs::read_to_string(ws.path().join("out/report.html")).unwrap();
    assert!(
        page.contains("A: baseline:main — baseline main, 6 runs")
            && page.contains("B: HEAD — current runs, 6 runs")
            && page.contains("2 configurations paired"),
        "{}",
        &page[page.find("\"compare\"").unwrap_or(0)..][..600.min(page.len())]
    );
}

fn rows_count(r: &Run) -> usize {
    rows(r).len()
}

#[test]
fn bad_sides_and_conditions_are_usage_errors_that_say_the_forms() {
    let ws = built();
    for (args, needle) in [
        (vec!["compare", "nightly", "HEAD"], "a side is one of"),
        (
            vec!["compare", "build:7", "HEAD"],
            "the store has recorded 1 build",
        ),
        (
            vec!["compare", "HEAD", "HEAD", "--fail-if", "latency_ms.median"],
            "METRIC < -5%",
        ),
        (
            vec!["compare", "HEAD", "HEAD", "--threshold", "200%"],
            "--threshold 200%",
        ),
        (vec!["baseline", "save", "a:b"], "cannot name a baseline"),
    ] {
        let r = ws.run(&args);
        assert_eq!(r.code(), 2, "{args:?}: {}", r.stderr());
        assert!(r.stderr().contains(needle), "{args:?}: {}", r.stderr());
    }
}

fn external(rel: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/external-traces")
        .join(rel);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} is absent", path.display());
        None
    }
}

#[test]
fn the_kernel_diff_names_what_a_changed_trace_added_and_removed() {
    let (Some(small), Some(h100)) = (
        external("test-cuda/report1.sqlite"),
        external("nsys-ai/h100_2gpu_1s.sqlite"),
    ) else {
        return;
    };
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {"ana": Stage(matrix: {"run": [1]}, task: Analyze(trace: "traces/t.sqlite"))})"#,
    )]);
    std::fs::create_dir_all(ws.path().join("traces")).unwrap();
    std::fs::copy(&small, ws.path().join("traces/t.sqlite")).unwrap();
    ok(&ws.run(&["build"]));
    // The copy kept the source's read-only mode: replace the file, as
    // `cp -f` would (root ignores the mode; an ordinary user does not).
    std::fs::remove_file(ws.path().join("traces/t.sqlite")).unwrap();
    std::fs::copy(&h100, ws.path().join("traces/t.sqlite")).unwrap();
    ok(&ws.run(&["build"]));
    let r = ws.run(&["compare", "build:1", "build:2", "--kernels"]);
    ok(&r);
    let text = r.stdout();
    assert!(
        text.contains("kernels: 1 analysed configuration paired"),
        "{text}"
    );
    assert!(text.contains("ana[run=1]"), "{text}");
    assert!(
        text.contains("removed") && text.contains("add_parallel"),
        "{text}"
    );
    assert!(
        text.contains("at::native::vectorized_elementwise_kernel"),
        "{text}"
    );
    let r = ws.run(&["compare", "build:1", "build:2", "--kernels", "--json"]);
    ok(&r);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let changes = doc["kernels"][0]["diff"]["changes"].as_array().unwrap();
    assert_eq!(changes[0]["status"], "added");
    assert!(changes
        .iter()
        .any(|c| c["name"] == "add_parallel" && c["status"] == "removed"));

    // The same diff straight from the two files.
    let r = ws.run(&[
        "trace",
        "diff",
        small.to_str().unwrap(),
        h100.to_str().unwrap(),
        "--top",
        "3",
    ]);
    ok(&r);
    assert!(r.stdout().contains("more kernels differ"), "{}", r.stdout());
}

/// A store that cannot be read is the store's problem, not the command
/// line's: exit 1 with a store-oriented hint, as `status` does; a side
/// that names nothing stays a usage error (2).
#[test]
fn a_damaged_database_is_a_store_failure_and_a_bad_side_a_usage_error() {
    let ws = built();
    let r = ws.run(&["compare", "baseline:nope", "HEAD"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("lists the forms of a side"),
        "{}",
        r.stderr()
    );
    for f in ["cache/state.sqlite-wal", "cache/state.sqlite-shm"] {
        let _ = std::fs::remove_file(ws.path().join(f));
    }
    // Replaced, not written over: the file's mode is the store's business.
    let db = ws.path().join("cache/state.sqlite");
    std::fs::remove_file(&db).unwrap();
    std::fs::write(&db, vec![0x5a; 65536]).unwrap();
    let r = ws.run(&["compare", "HEAD", "HEAD"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(
        r.stderr().contains("file is not a database")
            && r.stderr()
                .contains("the store (`cache/`) could not be read"),
        "{}",
        r.stderr()
    );
}

/// One pair, two ways to ask: a report's comparison of `impl` within one
/// workspace, and `vitgraph compare` between two workspaces that each
/// measured one implementation with the same seeds. Both call the one
/// ratio of `vitgraph::stats`, so they give the same ratio and interval —
/// over repetitions (Welch) and from one run's batches (within-run) alike.
#[test]
fn a_report_and_compare_give_one_pair_the_same_interval() {
    for repeat in [3, 1] {
        let rep = if repeat > 1 { "${rep}" } else { "1" };
        let stage = |matrix: &str, impl_: &str| {
            format!(
                r#""bench": Stage({matrix}repeat: {repeat},
                   task: Command(run: "python3 bench.py {impl_} {rep} ${{out}}/results.json",
                                 inputs: ["bench.py", "levels.json"], outputs: ["results.json"], measure: true))"#
            )
        };
        let report = format!(
            r#"Pipeline(stages: {{ {},
  "cmp": Stage(needs: ["bench"], task: Report(title: "t", sources: ["bench"], columns: ["latency_ms.median"],
               compare: Some(Compare(param: "impl", baseline: "fast", metric: "latency_ms.median")))) }})"#,
            stage(r#"matrix: {"impl": ["fast", "slow"]}, "#, "${impl}")
        );
        let one = |impl_: &str| {
            let ws = Ws::new(&[(
                "p.ron",
                &format!("Pipeline(stages: {{ {} }})", stage("", impl_)),
            )]);
            ws.write("bench.py", BENCH);
            ws.write("levels.json", r#"{"fast": 5.0, "slow": 8.0}"#);
            ok(&ws.run(&["build", "-j", "1"]));
            ws
        };
        let r = Ws::new(&[("p.ron", &report)]);
        r.write("bench.py", BENCH);
        r.write("levels.json", r#"{"fast": 5.0, "slow": 8.0}"#);
        ok(&r.run(&["build", "-j", "1"]));
        let csv = r.read("out/cmp/compare.csv");
        let num =
            |name: &str| -> f64 { super::repetitions::column(&csv, name)[0].parse().unwrap() };
        let text = |name: &str| super::repetitions::column(&csv, name)[0].clone();
        let reported = (num("ratio"), num("ci95_low"), num("ci95_high"));

        let (a, b) = (one("fast"), one("slow"));
        let sides = [
            format!("workspace:{}", a.path().display()),
            format!("workspace:{}", b.path().display()),
        ];
        let c = r.run(&[
            "compare",
            &sides[0],
            &sides[1],
            "--json",
            "--metric",
            "latency_ms.median",
        ]);
        ok(&c);
        let rows = rows(&c);
        let row = rows
            .iter()
            .find(|r| r["metric"] == "latency_ms.median")
            .unwrap_or_else(|| panic!("{rows:?}"));
        let compared = (
            row["ratio"].as_f64().unwrap(),
            row["ratio_low"].as_f64().unwrap(),
            row["ratio_high"].as_f64().unwrap(),
        );
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs();
        assert!(
            close(reported.0, compared.0)
                && close(reported.1, compared.1)
                && close(reported.2, compared.2),
            "repeat {repeat}: report {reported:?} ({}) against compare {compared:?} ({})",
            text("interval"),
            row["ratio_basis"]
        );
        let basis = if repeat > 1 {
            "repetitions"
        } else {
            "within-run"
        };
        assert_eq!(
            (text("interval").as_str(), row["ratio_basis"].as_str()),
            (basis, Some(basis))
        );
        assert_eq!(text("verdict"), row["verdict"].as_str().unwrap());
    }
}

/// F-T4-2: an object damaged at the same size, in a store without
/// summaries, is never read as a measurement: the pair is not comparable
/// and names the object; `verify --repair` rewrites it from `out/` and
/// forgets what was read from it, and the comparison is right again.
#[test]
fn a_damaged_result_object_is_not_comparable_and_repair_restores_the_verdict() {
    let ws = built();
    ok(&ws.run(&["baseline", "save", "main", "bench"]));
    ws.write("levels.json", r#"{"fast": 5.0, "slow": 9.6}"#);
    ok(&ws.run(&["build", "-j", "1"]));
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    db.execute("DELETE FROM summaries", []).unwrap();
    // HEAD's slow runs read 8.x ms instead of 9.x: the same size, a
    // regression turned into an improvement.
    let mut damaged = 0;
    for object in ws.objects() {
        let text = std::fs::read_to_string(&object).unwrap_or_default();
        if text.starts_with(r#"{"latency_ms": {"median": 9."#) {
            let mut perms = std::fs::metadata(&object).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&object, perms).unwrap();
            std::fs::write(&object, text.replacen(": 9.", ": 8.", 1)).unwrap();
            damaged += 1;
        }
    }
    assert_eq!(damaged, 3);
    let r = ws.run(&["compare", "baseline:main", "HEAD", "--json"]);
    let found = rows(&r);
    assert_eq!(
        verdict_of(&found, "bench[impl=slow]"),
        "not_comparable",
        "{found:?}"
    );
    let why = found
        .iter()
        .find(|r| r["config"] == "bench[impl=slow]")
        .unwrap()["why"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.starts_with("B: bench[impl=slow,rep=") && why.contains("is damaged"),
        "{why}"
    );
    assert_eq!(verdict_of(&found, "bench[impl=fast]"), "same");
    // Nothing read from the damaged objects was kept.
    assert!(summaries(&ws) <= 6, "{}", summaries(&ws));
    let r = ws.run(&["verify", "--repair"]);
    assert!(
        r.stdout().contains("3 repaired") || r.stderr().contains("3 repaired"),
        "{}{}",
        r.stdout(),
        r.stderr()
    );
    let r = ws.run(&["compare", "baseline:main", "HEAD", "--json"]);
    assert_eq!(verdict_of(&rows(&r), "bench[impl=slow]"), "slower");
}

/// A side whose metric is text or underflows is not comparable, says why
/// in words that are true, shows no interval, and fails a gate on it.
#[test]
fn a_metric_written_as_text_or_a_subnormal_fails_the_gate_with_its_reason() {
    let gen = r#"import sys
mode, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
v = {"ok": repr(10 + rep / 100), "str": '"12.3 ms"', "tiny": "5e-324"}[mode]
open(out, "w").write('{"latency_ms": {"median": %s}}' % v)
"#;
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(params: {"mode": "ok"}, stages: {
  "bench": Stage(repeat: 3, task: Command(run: "python3 gen.py ${mode} ${rep} ${out}/results.json",
                                         inputs: ["gen.py"], outputs: ["results.json"], measure: true)),
})"#,
    )]);
    ws.write("gen.py", gen);
    assert_eq!(ws.run(&["build"]).code(), 0);
    assert_eq!(ws.run(&["baseline", "save", "base"]).code(), 0);
    for (mode, why) in [
        ("str", "not comparable: B has no number at `latency_ms.median` (its runs lack the path, or hold text there)"),
        ("tiny", "not comparable: B's `latency_ms.median` is not a usable number (mean 5e-324"),
    ] {
        let r = ws.run(&["build", "-p", &format!("mode={mode}")]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        let r = ws.run(&["compare", "baseline:base", "HEAD", "--fail-if", "latency_ms.median > +5%"]);
        assert_eq!(r.code(), 3, "{mode}: {}{}", r.stdout(), r.stderr());
        assert!(r.stdout().contains(why), "{mode}: {}", r.stdout());
        assert!(!r.stdout().contains("NaN"), "{mode}: {}", r.stdout());
        assert!(r.stderr().contains("had no evidence"), "{mode}: {}", r.stderr());
    }
}
