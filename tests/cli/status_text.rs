//! `status` and `build -n` on a 1,000-node study with mixed reasons: a
//! line per stage first, then stale nodes with grouped reasons, ten per
//! stage unless `-v`. Snapshot tests of the text.

use super::harness::Ws;
use super::support::snapshot;

/// 333 runs → 333 analyses → 333 plots → 1 summary, and a stage of 50
/// never built.
fn study() -> Ws {
    let values: Vec<String> = (0..333).map(|i| i.to_string()).collect();
    let pipeline = format!(
        r#"Pipeline(stages: {{
    "runs": Stage(matrix: {{"i": [{}]}},
        task: Command(run: "cat data/${{i}}.txt > ${{out}}/r.txt", inputs: ["data/${{i}}.txt"], outputs: ["r.txt"])),
    "analysis": Stage(for_each: "runs",
        task: Command(run: "cat ${{needs.runs}}/r.txt > ${{out}}/a.txt", outputs: ["a.txt"])),
    "plots": Stage(for_each: "analysis",
        task: Command(run: "cat ${{needs.analysis}}/a.txt > ${{out}}/p.txt", outputs: ["p.txt"])),
    "summary": Stage(needs: ["analysis"],
        task: Command(run: "ls out/analysis | wc -l > ${{out}}/n.txt", outputs: ["n.txt"])),
    "late": Stage(matrix: {{"k": [{}]}}, task: Command(run: "true")),
}})"#,
        values.join(", "),
        values[..50].join(", ")
    );
    let ws = Ws::new(&[("study.ron", &pipeline)]);
    for i in 0..333 {
        ws.write(&format!("data/{i}.txt"), &format!("{i}\n"));
    }
    let r = ws.run(&["build", "runs", "analysis", "plots", "summary"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // Mixed reasons: 12 inputs changed (their analyses, plots and the
    // summary follow), an output removed, an output edited.
    for i in 0..12 {
        ws.write(&format!("data/{i}.txt"), "changed\n");
    }
    std::fs::remove_file(ws.path().join("out/analysis/i=200/a.txt")).unwrap();
    ws.write("out/plots/i=300/p.txt", "edited by hand\n");
    ws
}

fn stdout(ws: &Ws, args: &[&str]) -> String {
    let r = ws.run(args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    r.stdout()
}

#[test]
fn status_of_a_thousand_nodes_reads_by_stage_with_grouped_reasons() {
    let ws = study();
    let text = stdout(&ws, &["status"]);
    snapshot("status_text", "thousand_nodes", &text);
    // At most ten stale nodes per stage, the rest counted.
    assert!(
        text.contains("… and 2 more stale nodes in `runs` (use -v or --json to list all)"),
        "{text}"
    );

    let verbose = stdout(&ws, &["status", "-v"]);
    let stale_lines = verbose.lines().filter(|l| l.starts_with("stale  ")).count();
    // 12 runs, 13 analyses (one output missing), 13 plots (one edited), the summary, 50 late.
    assert_eq!(stale_lines, 12 + 13 + 13 + 1 + 50, "{verbose}");

    // --json keeps every node and every reason, ungrouped.
    let json = ws.status(&[]);
    assert_eq!(json["summary"]["stale"], 89);
    assert_eq!(json["summary"]["fresh"], 1000 + 50 - 89);
    let summary = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "summary")
        .unwrap();
    // Restoring a removed output does not change a manifest: 12 reasons.
    assert_eq!(
        summary["reasons"].as_array().unwrap().len(),
        12,
        "{summary}"
    );
}

#[test]
fn a_dry_run_of_a_thousand_nodes_groups_the_same_way() {
    let ws = study();
    let text = stdout(&ws, &["build", "-n"]);
    snapshot("status_text", "dry_run", &text);
    let verbose = stdout(&ws, &["build", "-n", "-v"]);
    let acting = verbose
        .lines()
        .filter(|l| l.starts_with("run ") || l.starts_with("restore "))
        .count();
    // 12 runs, 12 analyses + 1 restore, 12 plots + 1 restore (edited), the summary, 50 late.
    assert_eq!(acting, 12 + 13 + 13 + 1 + 50, "{verbose}");
    assert!(
        verbose.ends_with("87 to run, 2 to restore, 961 fresh\n"),
        "{verbose}"
    );
    // Nothing ran.
    assert_eq!(ws.read("out/plots/i=300/p.txt"), "edited by hand\n");
}

#[test]
fn explain_groups_many_upstream_changes() {
    let ws = study();
    let text = stdout(&ws, &["explain", "summary"]);
    let line = text
        .lines()
        .find(|l| l.contains("upstream_changed"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("12 nodes of analysis (first: analysis[i=0] (stale))"),
        "{text}"
    );
}
