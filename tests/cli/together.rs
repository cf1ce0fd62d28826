//! Configurations measured together, end to end on the CPU: a measuring
//! `Command` whose timings carry a seeded speed factor per process (±20 %)
//! and 1 % noise per sample. Measured together, the factor cancels in the
//! report's ratio; measured one configuration per process, it does not.

use super::harness::Ws;
use super::repetitions::column;

/// `bench.py MODE IMPLS REP OUT`: times each implementation of `IMPLS`
/// (`a,b`) in one process whose speed factor is drawn from its seed
/// (`MODE`, the repetition and, measured apart, the implementation): 200
/// samples of `level × factor × (1 ± 1 %)` each, in shuffled blocks. `g`
/// is untouched by the factor (as a CUDA graph is by a slow launching
/// core). Writes one run's `results.json`, or with `together` one object
/// per member.
const BENCH: &str = include_str!("../common/together_bench.py");

const PIPELINE: &str = r#"Pipeline(params: {"reps": 5}, stages: {
  "together": Stage(matrix: {"impl": ["a", "b"]}, together: ["impl"], repeat: "${reps}",
                    task: Command(run: "python3 bench.py together ${impl} ${rep} ${out}/results.json",
                                  inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "apart": Stage(matrix: {"impl": ["a", "b"]}, repeat: "${reps}",
                 task: Command(run: "python3 bench.py apart ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "together_report": Stage(needs: ["together"],
      task: Report(title: "together", sources: ["together"], columns: ["latency_ms.median"],
                   compare: Some(Compare(param: "impl", baseline: "a", metric: "latency_ms.median")))),
  "apart_report": Stage(needs: ["apart"],
      task: Report(title: "apart", sources: ["apart"], columns: ["latency_ms.median"],
                   compare: Some(Compare(param: "impl", baseline: "a", metric: "latency_ms.median")))),
})"#;

fn workspace() -> Ws {
    let ws = Ws::new(&[("p.ron", PIPELINE)]);
    ws.write("bench.py", BENCH);
    ws
}

/// The comparison of `impl`'s row: its ratio, its interval's half-width
/// relative to the ratio, the interval's kind and the note.
fn ratio(ws: &Ws, report: &str, impl_: &str) -> (f64, f64, String, String) {
    let csv = ws.read(&format!("out/{report}/compare.csv"));
    let row = column(&csv, "impl")
        .iter()
        .position(|v| v == impl_)
        .unwrap_or_else(|| panic!("no row for {impl_} in {csv}"));
    let num = |name: &str| -> f64 { column(&csv, name)[row].parse().unwrap() };
    let (r, lo, hi) = (num("ratio"), num("ci95_low"), num("ci95_high"));
    let text = |name: &str| column(&csv, name)[row].clone();
    (r, (hi - lo) / 2.0 / r, text("interval"), text("note"))
}

#[test]
fn measured_together_a_ratio_is_known_to_2_percent_where_apart_it_is_five_times_wider() {
    let ws = workspace();
    let r = ws.run(&["build", "--json", "-j", "1", "-p", "impl=[a,b,g]"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    // One node per repetition measures every implementation.
    let mut together: Vec<String> = r
        .nodes_with("finished")
        .into_iter()
        .filter(|n| n.starts_with("together["))
        .collect();
    together.sort();
    assert_eq!(
        together,
        (1..=5)
            .map(|k| format!("together[rep={k}]"))
            .collect::<Vec<_>>()
    );
    // Each member is a configuration of the report's table, repeated 5 times.
    let table = ws.read("out/together_report/table.csv");
    assert_eq!(column(&table, "impl"), ["a", "b", "g"]);
    assert_eq!(column(&table, "reps"), ["5", "5", "5"]);

    let truth = 3.7 / 2.0;
    let (paired, paired_half, kind, note) = ratio(&ws, "together_report", "b");
    assert_eq!(kind, "paired");
    assert_eq!(note, "");
    assert!(
        (paired / truth - 1.0).abs() <= 0.02,
        "together: {paired} against {truth}"
    );
    assert!(paired_half <= 0.02, "together: ±{paired_half}");
    let (apart, apart_half, kind, _) = ratio(&ws, "apart_report", "b");
    assert_eq!(kind, "repetitions");
    assert!(
        apart_half >= 5.0 * paired_half,
        "apart ±{apart_half} ({apart}) is not 5× together's ±{paired_half}"
    );
    eprintln!(
        "together: {paired:.4} ±{:.2} %; apart: {apart:.4} ±{:.2} % (truth {truth})",
        100.0 * paired_half,
        100.0 * apart_half
    );
    // `g` is untouched by the factor that moves `a`: pairing cannot cancel
    // it, the interval stays wide, and the note says why.
    let (_, g_half, kind, note) = ratio(&ws, "together_report", "g");
    assert_eq!(kind, "paired");
    assert!(g_half > 0.05, "±{g_half}");
    assert!(note.contains("moved these members unequally"), "{note}");
}

#[test]
fn a_value_added_to_a_together_axis_measures_the_block_again() {
    let ws = workspace();
    let r = ws.run(&["build", "--json", "-p", "reps=2", "together"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.nodes_with("started").len(), 2);
    let r = ws.run(&["build", "--json", "-p", "reps=2", "together"]);
    assert_eq!(r.nodes_with("started").len(), 0, "nothing is stale");
    // The block now holds c too: `status` says so in words, and both
    // repetitions measure the three again.
    let r = ws.run(&["status", "-p", "reps=2", "-p", "impl=[a,b,c]", "together"]);
    assert!(
        r.stdout().contains(
            "stale  together[rep=1]  spec_changed: members measured together: c added (block a b → a b c)"
        ),
        "{}",
        r.stdout()
    );
    let r = ws.run(&[
        "explain",
        "-p",
        "reps=2",
        "-p",
        "impl=[a,c]",
        "together[rep=2]",
    ]);
    assert!(
        r.stdout()
            .contains("members measured together: c added, b removed (block a b → a c)"),
        "{}",
        r.stdout()
    );
    let r = ws.run(&[
        "build",
        "--json",
        "-p",
        "reps=2",
        "-p",
        "impl=[a,b,c]",
        "together",
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.nodes_with("started").len(), 2);
    let doc: serde_json::Value =
        serde_json::from_str(&ws.read("out/together/rep=1/results.json")).unwrap();
    let mut members: Vec<&String> = doc["members"].as_object().unwrap().keys().collect();
    members.sort();
    assert_eq!(members, ["a", "b", "c"]);
}

#[test]
fn a_block_that_leaves_out_a_member_fails_naming_the_file_and_the_member() {
    let ws = workspace();
    ws.write(
        "bench.py",
        "import json, sys\njson.dump({\"members\": {\"a\": {\"latency_ms\": {\"median\": 1.0}}}}, open(sys.argv[4], \"w\"))\n",
    );
    let r = ws.run(&["build", "-p", "reps=1", "together"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let err = r.stderr();
    assert!(
        err.contains("out/together/results.json")
            && err.contains("has no member `b` (the block is `a`, `b`)"),
        "{err}"
    );
    assert!(
        !ws.path().join("out/together/results.json").exists(),
        "nothing recorded"
    );
}

#[test]
fn a_measuring_command_that_writes_nan_fails_at_build_time() {
    let ws = workspace();
    ws.write(
        "bench.py",
        "import json, sys\njson.dump({\"latency_ms\": {\"median\": float(\"nan\")}}, open(sys.argv[4], \"w\"))\n",
    );
    let r = ws.run(&["build", "-p", "reps=1", "apart"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let err = r.stderr();
    assert!(
        err.contains("results.json` is not JSON") && err.contains("allow_nan=False"),
        "{err}"
    );
}

#[test]
fn together_is_checked_against_the_matrix_and_the_task() {
    let cases = [
        (
            r#"together: ["model"]"#,
            "`together` names `model`, which is not an axis of the matrix",
        ),
        (
            r#"together: "impl""#,
            "`together` must be a list of matrix axes",
        ),
        (r#"together: ["rep"]"#, "`rep` cannot be measured together"),
        (r#"check: true"#, "stage `s` has `check` but no `together`"),
        (
            r#"together: ["impl"], check: "yes""#,
            "`check` must be `true` or `false`",
        ),
    ];
    for (key, message) in cases {
        let text = format!(
            r#"Pipeline(stages: {{ "s": Stage(matrix: {{"impl": ["a", "b"]}}, {key},
                task: Command(run: "m ${{impl}}", outputs: ["results.json"], measure: true)) }})"#
        );
        let ws = Ws::new(&[("p.ron", &text)]);
        let r = ws.run(&["status"]);
        assert_eq!(r.code(), 2, "{key}: {}", r.stderr());
        assert!(r.stderr().contains(message), "{key}: {}", r.stderr());
    }
    let text = r#"Pipeline(stages: { "s": Stage(matrix: {"impl": ["a", "b"]}, together: ["impl"],
        task: Command(run: "m ${impl}", outputs: ["results.json"])) })"#;
    let ws = Ws::new(&[("p.ron", text)]);
    let r = ws.run(&["status"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("this `Command` measures nothing"),
        "{}",
        r.stderr()
    );
}

/// A precision target on a together stage judges the members' paired
/// ratios to the baseline: `b / a` shares each process's factor and is
/// precise after the first 3 processes, although `a` and `b` alone spread
/// ±20 %; with `g`, untouched by the factor, the ratio `g / a` carries it
/// and the block runs to its budget.
#[test]
fn a_precision_target_on_a_together_stage_stops_when_the_ratios_are_precise() {
    let text = r#"Pipeline(params: {"maxr": 6}, stages: {
  "bench": Stage(matrix: {"impl": ["a", "b"]}, together: ["impl"],
                 precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: "${maxr}"),
                 task: Command(run: "python3 bench.py together ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
})"#;
    let ws = Ws::new(&[("p.ron", text)]);
    ws.write("bench.py", BENCH);
    let r = ws.run(&["build", "--json", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(
        r.nodes_with("started").len(),
        3,
        "3 processes, then precise"
    );
    let standing = |args: &[&str]| -> (String, u64, String) {
        let mut all = vec!["status", "--json"];
        all.extend_from_slice(args);
        let json: serde_json::Value = serde_json::from_str(&ws.run(&all).stdout()).unwrap();
        let s = &json["precision"][0];
        (
            s["state"].as_str().unwrap().to_owned(),
            s["runs"].as_u64().unwrap(),
            s["detail"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let (state, runs, why) = standing(&[]);
    assert_eq!((state.as_str(), runs), ("precise", 3), "{why}");
    assert!(why.starts_with("ratios to `a`: precise at ±"), "{why}");
    // `g`'s ratio to `a` carries the factor: the block runs to max_repeat.
    let r = ws.run(&["build", "--json", "-j", "1", "-p", "impl=[a,b,g]"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.nodes_with("started").len(), 6, "{}", r.stdout());
    let (state, runs, why) = standing(&["-p", "impl=[a,b,g]"]);
    assert_eq!((state.as_str(), runs), ("budget_spent", 6), "{why}");
    assert!(why.starts_with("ratios to `a`: budget spent at ±"), "{why}");
    // A baseline that is no member is refused where it is written.
    let bad = text.replace("ci_rel: 0.02,", "ci_rel: 0.02, baseline: \"z\",");
    let ws = Ws::new(&[("p.ron", &bad)]);
    let r = ws.run(&["status"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr()
            .contains("`precision.baseline` `z` is not a member of every block"),
        "{}",
        r.stderr()
    );
}

/// A member that measured nothing (an unsupported backend) has no ratio
/// and does not hold its block's precision back; a block of one member
/// (an `include` entry of its own) is judged on its own values.
#[test]
fn precision_leaves_out_unmeasured_members_and_judges_a_lone_member_alone() {
    let text = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"impl": ["a", "b", "u"], "size": [1]}, together: ["impl"],
                 include: [{"impl": "c", "size": 2}],
                 precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: 6),
                 task: Command(run: "python3 bench.py together ${impl} ${rep}${size} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
})"#;
    let ws = Ws::new(&[("p.ron", text)]);
    ws.write("bench.py", BENCH);
    let r = ws.run(&["build", "--json", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let json: serde_json::Value =
        serde_json::from_str(&ws.run(&["status", "--json"]).stdout()).unwrap();
    let targets = json["precision"].as_array().expect("precision");
    let of = |size: &str| {
        targets
            .iter()
            .find(|s| {
                s["configuration"]
                    .as_str()
                    .is_some_and(|c| c.contains(size))
            })
            .unwrap_or_else(|| panic!("no target for {size}: {json}"))
    };
    let (block, lone) = (of("size=1"), of("size=2"));
    assert_eq!(block["state"], "precise", "{block}");
    assert!(
        block["detail"]
            .as_str()
            .unwrap()
            .starts_with("ratios to `a`: precise"),
        "{block}"
    );
    // `c` alone: its own latency, steady within a process but ±10 %
    // between processes, is judged as a node's would be.
    assert_ne!(lone["state"], "unmeasured", "{lone}");
    assert!(
        lone["detail"].as_str().unwrap().starts_with("`c` alone: "),
        "{lone}"
    );
}

/// `check: true`: each block measures its first member twice (`a#2`
/// beside `a`). A process whose A/A ratio is beyond what its batches allow
/// — here repetition 2's, made to drift by 5 % while it measured the twin
/// — is recorded invalid with the ratio in its reason and measured again;
/// the others carry their ratio in their record. The twin is no
/// configuration of the report.
#[test]
fn an_aa_check_flags_a_process_whose_twin_drifted() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "checked": Stage(matrix: {"impl": ["a", "b"]}, together: ["impl"], check: true, repeat: 3,
                   task: Command(run: "python3 bench.py together ${impl} ${rep} ${out}/results.json",
                                 inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "checked_report": Stage(needs: ["checked"],
      task: Report(title: "checked", sources: ["checked"], columns: ["latency_ms.median"],
                   compare: Some(Compare(param: "impl", baseline: "a", metric: "latency_ms.median")))),
})"#,
    )]);
    ws.write("bench.py", BENCH);
    let out = ws
        .cmd(&["build", "-j", "1"])
        .env("AA_DRIFT_REP", "2")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reasons = ws.reasons("checked[rep=2]", &[]);
    assert!(
        reasons.iter().any(|(kind, detail)| kind == "invalid"
            && detail.starts_with("A/A check: `a#2` / `a` latency_ms.median = 1.04")
            && detail.contains("beyond the")),
        "{reasons:?}"
    );
    for rep in [1, 3] {
        assert!(ws.reasons(&format!("checked[rep={rep}]"), &[]).is_empty());
    }
    // The quiet processes carry their ratio in their record.
    let show = ws.run(&["show", "checked[rep=1]"]).stdout();
    let line = show
        .lines()
        .find(|l| l.starts_with("A/A check: `a#2` / `a` latency_ms.median = "))
        .unwrap_or_else(|| panic!("{show}"));
    assert!(line.contains("within the ±"), "{line}");
    let ratio: f64 = line.split(" = ").nth(1).unwrap()[..6].parse().unwrap();
    assert!((ratio - 1.0).abs() < 0.01, "{ratio}");
    // The report's rows are the configurations, not the twin.
    assert_eq!(
        column(&ws.read("out/checked_report/table.csv"), "impl"),
        ["a", "b"]
    );
    // Measured again without the drift, the process passes.
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(ws.reasons("checked[rep=2]", &[]).is_empty());
}

/// `vitgraph compare` reads a block as its report does: one configuration
/// per member, named by the node's params and the member's values.
#[test]
fn compare_pairs_the_members_of_blocks() {
    let ws = workspace();
    let r = ws.run(&["build", "-p", "reps=3", "together"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let r = ws.run(&["baseline", "save", "first"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ws.write("bench.py", &format!("{BENCH}\n# edited\n"));
    let r = ws.run(&["build", "-p", "reps=3", "together"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let r = ws.run(&["compare", "baseline:first", "HEAD", "together"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let out = r.stdout();
    assert!(out.contains("together[impl=a]  "), "{out}");
    assert!(out.contains("together[impl=b]  "), "{out}");
    assert!(out.contains("2 configurations paired"), "{out}");
    assert!(out.contains("n=3"), "{out}");
    assert!(out.contains("differs: input bench.py"), "{out}");
}

/// With `check: true`, a report tests each paired comparison against the
/// A/A check of the same processes: `g / a` (the process's factor acts on
/// `a` only) spreads far more than `a#2 / a` and is labelled with the F
/// test; `b / a` (the factor acts on both) is not.
#[test]
fn a_paired_comparison_that_spreads_more_than_its_aa_check_is_labelled() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "checked": Stage(matrix: {"impl": ["a", "b", "g"]}, together: ["impl"], check: true, repeat: 6,
                   task: Command(run: "python3 bench.py together ${impl} ${rep} ${out}/results.json",
                                 inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "checked_report": Stage(needs: ["checked"],
      task: Report(title: "checked", sources: ["checked"], columns: ["latency_ms.median"],
                   compare: Some(Compare(param: "impl", baseline: "a", metric: "latency_ms.median")))),
})"#,
    )]);
    ws.write("bench.py", BENCH);
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let (_, _, kind, note) = ratio(&ws, "checked_report", "g");
    assert_eq!(kind, "paired");
    assert!(
        note.starts_with("measured together but the per-process ratios spread ")
            && note.contains("times the A/A check's (F test p = "),
        "{note}"
    );
    let (_, half, _, note) = ratio(&ws, "checked_report", "b");
    assert_eq!(note, "", "b shares the factor with a: ±{half}");
    assert_eq!(
        column(&ws.read("out/checked_report/table.csv"), "impl"),
        ["a", "b", "g"]
    );
}
