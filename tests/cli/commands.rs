//! The inspection and maintenance commands, and `run-node` (one node per
//! cluster job).

use super::harness::Ws;

const PIPE: &str = r#"Pipeline(stages: {
    "gen": Stage(matrix: {"i": [1, 2]}, task: Command(run: "echo gen-${i} >> side.log; echo ${i} > ${out}/v.txt", outputs: ["v.txt"])),
    "double": Stage(for_each: "gen", task: Command(run: "echo double-${i} >> side.log; cat ${needs.gen}/v.txt ${needs.gen}/v.txt > ${out}/v.txt", outputs: ["v.txt"])),
})"#;

#[test]
fn run_node_executes_and_records_exactly_one_node() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    let r = ws.run(&["run-node", "double[i=1]"]);
    assert_eq!(r.code(), 1, "upstream not built yet");
    assert!(
        r.stdout().contains("`gen[i=1]` is not built"),
        "{}",
        r.stdout()
    );
    assert!(ws.log_lines().is_empty(), "nothing ran");

    assert_eq!(ws.run(&["build", "gen"]).code(), 0);
    let r = ws.run(&["run-node", "double[i=1]"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    assert_eq!(r.nodes_with("finished"), ["double[i=1]"]);
    assert_eq!(ws.read("out/double/i=1/v.txt"), "1\n1\n");
    let s = ws.status(&[]);
    assert_eq!(s["summary"]["stale"], 1, "only double[i=2] left: {s}");
}

#[test]
fn dry_run_lists_what_would_run_and_runs_nothing() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    let r = ws.run(&["build", "-n", "double[i=2]"]);
    assert_eq!(r.code(), 0);
    assert_eq!(
        r.stdout(),
        "gen     0 fresh, 1 to run (never_built 1)\n\
         double  0 fresh, 1 to run (never_built 1)\n\
         \n\
         run      gen[i=2]  never_built: no successful run recorded\n\
         run      double[i=2]  never_built: no successful run recorded; upstream_changed: gen[i=2] (stale)\n\
         2 to run, 0 to restore, 0 fresh\n"
    );
    assert!(!ws.path().join("cache").exists(), "-n creates no store");
}

#[test]
fn graph_formats() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    let dot = ws.run(&["graph", "double[i=1]"]).stdout();
    assert!(dot.starts_with("digraph vitgraph {"), "{dot}");
    assert!(
        dot.contains("label=\"gen[i=1]\"") && dot.contains("label=\"double[i=1]\""),
        "{dot}"
    );
    assert_eq!(dot.matches("->").count(), 1);
    let mermaid = ws.run(&["graph", "--format", "mermaid"]).stdout();
    assert!(
        mermaid.starts_with("graph LR\n") && mermaid.matches("-->").count() == 2,
        "{mermaid}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ws.run(&["graph", "--format", "json"]).stdout()).unwrap();
    assert_eq!(json["nodes"][2]["id"], "double[i=1]");
    assert_eq!(json["nodes"][2]["deps"], serde_json::json!(["gen[i=1]"]));
    assert_eq!(json["nodes"][0]["params"], serde_json::json!({"i": 1}));
}

#[test]
fn ls_and_show() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    let ls = ws.run(&["ls"]).stdout();
    assert!(
        ls.contains("gen") && ls.contains("2 nodes") && ls.contains("pipelines/p.ron"),
        "{ls}"
    );
    assert_eq!(
        ws.run(&["ls", "double"]).stdout(),
        "double[i=1]\ndouble[i=2]\n"
    );
    assert_eq!(
        ws.run(&["ls", "p"]).stdout().lines().count(),
        4,
        "a pipeline stem names its stages"
    );
    assert_eq!(ws.run(&["ls", "gen*"]).stdout().lines().count(), 2);
    ws.run(&["build"]);
    let show = ws.run(&["show", "double[i=2]"]).stdout();
    assert!(
        show.contains("needs gen: gen[i=2]")
            && show.contains("out/double/i=2")
            && show.contains("last run: key"),
        "{show}"
    );
    let r = ws.run(&["show", "double[i=3]"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("did you mean `double[i=1]`?")
            || r.stderr().contains("did you mean `double[i=2]`?"),
        "{}",
        r.stderr()
    );
}

#[test]
fn explain_json_diffs_the_key_parts() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    ws.run(&["build"]);
    ws.write(
        "pipelines/p.ron",
        &PIPE.replace("echo ${i} >", "echo v${i} >"),
    );
    let r = ws.run(&["explain", "gen[i=1]", "--json"]);
    assert_eq!(r.code(), 0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["state"], "stale");
    assert_eq!(v["reasons"][0]["kind"], "spec_changed");
    assert_ne!(v["key"]["current"], v["key"]["recorded"]);
    let diff: Vec<&str> = v["diff"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert!(diff[0].starts_with("spec.Command.run: "), "{diff:?}");
}

#[test]
fn gc_removes_only_unreferenced_objects() {
    let ws = Ws::new(&[("p.ron", PIPE)]);
    ws.run(&["build"]);
    let before = ws.objects().len();
    let r = ws.run(&["gc"]);
    assert_eq!(r.code(), 0);
    assert!(
        r.stdout().starts_with("removed 0 objects"),
        "{}",
        r.stdout()
    );
    // An object nobody refers to (as a crash between staging and recording leaves).
    let stray = ws
        .path()
        .join("cache/objects/ff/ff00000000000000000000000000000000000000000000000000000000000000");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, "stray").unwrap();
    let r = ws.run(&["gc"]);
    assert!(
        r.stdout().starts_with("removed 1 objects"),
        "{}",
        r.stdout()
    );
    assert!(!stray.exists());
    assert_eq!(ws.objects().len(), before);
    assert_eq!(ws.run(&["verify"]).code(), 0);
}

#[test]
fn init_creates_a_workspace_that_builds() {
    let dir = tempfile::tempdir().unwrap();
    let r = std::process::Command::new(super::harness::BIN)
        .arg("init")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0));
    let r = std::process::Command::new(super::harness::BIN)
        .arg("-C")
        .arg(dir.path())
        .arg("build")
        .env("VITGRAPH_NO_PROGRESS", "1")
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/report/report.txt"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    let again = std::process::Command::new(super::harness::BIN)
        .arg("init")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(2),
        "init refuses an existing workspace"
    );
}

#[test]
fn a_command_longer_than_the_kernels_argument_limit_runs() {
    // `${needs.S}` over thousands of nodes gives scripts like this one: more
    // than the 128 KiB Linux allows a single argument of `sh -c`.
    let filler = "x".repeat(200 * 1024);
    let ws = Ws::new(&[(
        "long.ron",
        &format!(
            r#"Pipeline(stages: {{ "long": Stage(task: Command(run: ": {filler}; echo ok > ${{out}}/o.txt", outputs: ["o.txt"])) }})"#
        ),
    )]);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.read("out/long/o.txt"), "ok\n");
}

/// A workspace built when a node without params lived in
/// `out/<stage>/<stage>/`: `status` says where its files are, `build`
/// restores them at `out/<stage>/` without running anything and the old
/// folder goes.
#[test]
fn outputs_of_the_old_layout_are_explained_then_moved_without_running() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
            "gen": Stage(matrix: { "i": [1, 2] }, task: Command(run: "echo gen >> side.log; echo ${i} > ${out}/v.txt", outputs: ["v.txt"])),
            "sum": Stage(needs: ["gen"], task: Command(run: "echo sum >> side.log; cat ${needs.gen} > ${out}/s.txt 2>/dev/null; ls > ${out}/n.txt", outputs: ["n.txt"])),
        })"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    assert!(ws.path().join("out/sum/n.txt").is_file());
    assert!(ws.path().join("out/gen/i=1/v.txt").is_file());
    // The old layout: the node's folder one level down.
    std::fs::create_dir(ws.path().join("out/sum/sum")).unwrap();
    std::fs::rename(
        ws.path().join("out/sum/n.txt"),
        ws.path().join("out/sum/sum/n.txt"),
    )
    .unwrap();
    std::fs::remove_file(ws.path().join("side.log")).unwrap();
    let r = ws.reasons("sum", &[]);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, "output_missing");
    assert!(
        r[0].1.starts_with(
            "out/sum/n.txt (it is at out/sum/sum/n.txt, where earlier versions of vitgraph put it"
        ),
        "{r:?}"
    );
    let b = ws.run(&["build", "--json"]);
    assert_eq!(b.code(), 0, "{}", b.stderr());
    assert!(
        b.nodes_with("finished").is_empty(),
        "nothing runs: {}",
        b.stdout()
    );
    assert!(!ws.path().join("side.log").exists());
    assert!(ws.path().join("out/sum/n.txt").is_file());
    assert!(
        !ws.path().join("out/sum/sum").exists(),
        "the old folder is gone"
    );
    assert_eq!(ws.status(&[])["summary"]["stale"], 0);
}
