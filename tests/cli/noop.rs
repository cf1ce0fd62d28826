//! The no-op snapshot (`cache/noop.snapshot`): an unchanged workspace is
//! answered from it, and every change a verdict depends on makes `build` and
//! `status` judge again — in full, or, when only some files changed, the
//! nodes those files reach — with the same answers as without a snapshot.
//!
//! The snapshot only vouches for files written more than a racy window (1 s)
//! before they were looked at, so the tests date the workspace's files back.

use std::time::SystemTime;

use super::harness::{Run, Ws, CHAIN};

const SNAPSHOT: &str = "cache/noop.snapshot";

/// Dates every input and output file an hour back, as if written long ago.
fn settle(ws: &Ws) {
    let past = SystemTime::now() - super::harness::SETTLE_BACK;
    for dir in ["out", "data.txt", "inputs"] {
        for e in walkdir::WalkDir::new(ws.path().join(dir))
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
        {
            std::fs::File::open(e.path())
                .and_then(|f| f.set_modified(past))
                .unwrap();
        }
    }
}

/// Runs with phase timings on; true when the snapshot answered (the
/// pipelines were never loaded).
fn timed(ws: &Ws, args: &[&str]) -> (Run, bool) {
    let r = Run(ws
        .cmd(args)
        .env("VITGRAPH_TIMINGS", "1")
        .output()
        .expect("run vitgraph"));
    let err = r.stderr();
    let from_snapshot = err.contains("check snapshot") && !err.contains("load pipelines");
    (r, from_snapshot)
}

fn status_json(ws: &Ws, extra: &[&str]) -> (serde_json::Value, bool) {
    let mut args = vec!["status", "--json"];
    args.extend_from_slice(extra);
    let (r, fast) = timed(ws, &args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    (serde_json::from_str(&r.stdout()).unwrap(), fast)
}

/// A no-op `build`: its full plan finds everything fresh and writes the
/// snapshot (`status` only reads it).
fn rebuild(ws: &Ws) {
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
}

/// A built, settled chain whose snapshot has been written (by a no-op `build`).
fn snapshotted() -> Ws {
    let ws = Ws::new(&[("chain.ron", CHAIN)]);
    ws.write("data.txt", "a\n");
    assert_eq!(ws.run(&["build"]).code(), 0);
    settle(&ws);
    let (s, fast) = status_json(&ws, &[]);
    assert!(!fast, "no snapshot yet");
    assert_eq!(s["summary"]["fresh"], 4);
    assert!(
        !ws.path().join(SNAPSHOT).exists(),
        "status never writes to cache/"
    );
    rebuild(&ws);
    assert!(
        ws.path().join(SNAPSHOT).is_file(),
        "a full plan of a fresh workspace writes it"
    );
    ws
}

/// Overwrites an output the store wrote read-only.
fn tamper(ws: &Ws, rel: &str, text: &str) {
    let out = ws.path().join(rel);
    let mut perms = std::fs::metadata(&out).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&out, perms).unwrap();
    std::fs::write(&out, text).unwrap();
}

/// A `build` of `targets` that judges `judged` (as `VITGRAPH_TIMINGS`
/// prints it): the nodes it ran, sorted.
fn build_incrementally(ws: &Ws, targets: &[&str], judged: &str) -> Vec<String> {
    let args: Vec<&str> = ["build", "--json"].iter().chain(targets).copied().collect();
    let (r, _) = timed(ws, &args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains(judged), "{}", r.stderr());
    let mut built = r.nodes_with("finished");
    built.sort();
    built
}

fn kinds(s: &serde_json::Value, id: &str) -> Vec<String> {
    let node = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id} in {s}"));
    node["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_unchanged_workspace_is_answered_from_the_snapshot_with_the_same_output() {
    let ws = snapshotted();
    let full = full_plan(&ws, &["status", "--json"]);
    let full: serde_json::Value = serde_json::from_str(&full.stdout()).unwrap();
    let (fast, from_snapshot) = status_json(&ws, &[]);
    assert!(from_snapshot);
    assert_eq!(fast, full, "the snapshot answers exactly as a full plan");

    let (r, from_snapshot) = timed(&ws, &["status"]);
    assert!(from_snapshot);
    let full = full_plan(&ws, &["status"]);
    assert_eq!(r.stdout(), full.stdout(), "the same text as a full plan");
    assert!(r.stdout().ends_with("4 fresh, 0 stale\n"), "{}", r.stdout());

    let before = ws.log_lines();
    let (r, from_snapshot) = timed(&ws, &["build", "--json"]);
    assert!(from_snapshot);
    assert_eq!(r.code(), 0);
    assert_eq!(
        r.nodes_with("cached"),
        ["double[i=1]", "double[i=2]", "gen[i=1]", "gen[i=2]"]
    );
    let done = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "done")
        .unwrap();
    assert_eq!(
        (done["built"].as_u64(), done["cached"].as_u64()),
        (Some(0), Some(4))
    );
    let (r, from_snapshot) = timed(&ws, &["build"]);
    assert!(from_snapshot);
    assert!(r.stderr().contains("0 built, 4 fresh"), "{}", r.stderr());
    assert_eq!(ws.log_lines(), before, "nothing ran");

    // With targets, the pipelines are loaded to select them, and the
    // snapshot answers.
    let s = status_as_full_plan(&ws, &["double[i=2]"], None);
    assert_eq!(s["summary"], serde_json::json!({"fresh": 2, "stale": 0}));
    let (r, _) = timed(&ws, &["build", "gen"]);
    assert_eq!(r.code(), 0);
    assert!(r.stderr().contains("check snapshot"), "{}", r.stderr());
    assert!(r.stderr().contains("load pipelines"), "{}", r.stderr());
    assert!(r.stderr().contains("0 built, 2 fresh"), "{}", r.stderr());
    // Forced or dry-run builds plan in full.
    for args in [
        &["build", "-n", "gen"][..],
        &["build", "--force", "gen[i=1]"],
    ] {
        let (r, _) = timed(&ws, args);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        assert!(
            !r.stderr().contains("check snapshot"),
            "{args:?}: {}",
            r.stderr()
        );
    }
}

#[test]
fn editing_a_pipeline_file_plans_in_full() {
    let ws = snapshotted();
    ws.write(
        "pipelines/chain.ron",
        &CHAIN.replace("\"scale\": 2", "\"scale\": 3"),
    );
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "double[i=1]"), ["spec_changed"]);
    assert!(kinds(&s, "gen[i=1]").is_empty());
    // A new pipeline file beside it counts too.
    ws.write("pipelines/chain.ron", CHAIN);
    status_json(&ws, &[]);
    ws.write(
        "pipelines/more.ron",
        r#"Pipeline(stages: { "extra": Stage(task: Command(run: "echo x > ${out}/x.txt", outputs: ["x.txt"])) })"#,
    );
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "extra"), ["never_built"]);
}

#[test]
fn overrides_are_part_of_the_snapshot() {
    let ws = snapshotted();
    let (s, from_snapshot) = status_json(&ws, &["-p", "scale=5"]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "double[i=1]"), ["spec_changed"]);
    // An override equal to the default plans in full, until a build with
    // it writes its own snapshot.
    let (_, from_snapshot) = status_json(&ws, &["-p", "scale=2"]);
    assert!(!from_snapshot);
    assert_eq!(ws.run(&["build", "-p", "scale=2"]).code(), 0);
    let (s, from_snapshot) = status_json(&ws, &["-p", "scale=2"]);
    assert!(from_snapshot);
    assert_eq!(s["summary"]["stale"], 0);
    let (_, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot, "the snapshot now belongs to -p scale=2");
}

#[test]
fn a_changed_or_touched_input_plans_in_full() {
    let ws = snapshotted();
    // Same content, new stat: planned in full, still fresh.
    ws.write("data.txt", "a\n");
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(s["summary"]["stale"], 0);
    // Same size, different bytes.
    settle(&ws);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1);
    ws.write("data.txt", "b\n");
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "gen[i=1]"), ["input_changed"]);
    let (r, from_snapshot) = timed(&ws, &["build"]);
    assert!(!from_snapshot);
    assert_eq!(r.code(), 0);
    assert!(ws.read("out/double/i=1/v.txt").contains('b'));
    // A removed input is seen too.
    settle(&ws);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1);
    std::fs::remove_file(ws.path().join("data.txt")).unwrap();
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "gen[i=1]"), ["input_changed"]);
}

/// Right after an input was edited and rebuilt: the file is too recent to
/// vouch for, so the next build judges its chain again (`incremental`, as
/// `VITGRAPH_TIMINGS` prints it) and runs nothing; once it is old enough,
/// the snapshot answers alone again.
fn judged_again_until_settled(ws: &Ws, incremental: &str) {
    let (r, from_snapshot) = timed(ws, &["build", "--json"]);
    assert!(!from_snapshot);
    assert!(r.stderr().contains(incremental), "{}", r.stderr());
    assert!(r.nodes_with("finished").is_empty(), "{}", r.stdout());
    settle(ws);
    let (r, _) = timed(ws, &["build"]);
    assert!(r.stderr().contains("incremental"), "{}", r.stderr());
    let (r, from_snapshot) = timed(ws, &["build"]);
    assert!(from_snapshot, "{}", r.stderr());
}

/// Two chains, each reading its own input file (`inputs/1.txt`, `inputs/2.txt`).
macro_rules! two_chains {
    () => {
        r#"
    "gen": Stage(matrix: { "i": [1, 2] },
        task: Command(run: "echo gen-${i} >> side.log; cat inputs/${i}.txt > ${out}/v.txt", inputs: ["inputs/${i}.txt"], outputs: ["v.txt"])),
    "double": Stage(for_each: "gen",
        task: Command(run: "echo double-${i} >> side.log; cat ${needs.gen}/v.txt ${needs.gen}/v.txt > ${out}/v.txt", outputs: ["v.txt"])),"#
    };
}

/// Two chains and a sum of them.
const TWO_INPUTS: &str = concat!(
    "Pipeline(stages: {",
    two_chains!(),
    r#"
    "sum": Stage(needs: ["double"],
        task: Command(run: "echo sum >> side.log; cat ${needs.double} > ${out}/v.txt 2>/dev/null; ls ${needs.double} > ${out}/v.txt", outputs: ["v.txt"])),
})"#
);

/// Two chains, and nothing below them.
const TWO_CHAINS: &str = concat!("Pipeline(stages: {", two_chains!(), "\n})");

/// A workspace of `pipeline` with its two inputs, built cold and settled
/// (a cold build leaves no snapshot).
fn built_with_two_inputs(pipeline: &str) -> Ws {
    let ws = Ws::new(&[("two.ron", pipeline)]);
    ws.write("inputs/1.txt", "one\n");
    ws.write("inputs/2.txt", "two\n");
    assert_eq!(ws.run(&["build"]).code(), 0);
    settle(&ws);
    ws
}

#[test]
fn a_changed_input_rebuilds_incrementally_from_the_snapshot() {
    let ws = built_with_two_inputs(TWO_INPUTS);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1, "snapshotted");

    // One input changes: only its chain and the sum are judged, and run.
    ws.write("inputs/1.txt", "uno\n");
    let before = ws.log_lines().len();
    let built = build_incrementally(&ws, &[], "incremental (3 of 5 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]", "sum"]);
    assert_eq!(ws.log_lines().len(), before + 3);
    assert_eq!(ws.read("out/double/i=1/v.txt"), "uno\nuno\n");
    // The same answers as a full plan.
    let (s, _) = status_json(&ws, &["gen", "double", "sum"]);
    assert_eq!(s["summary"]["stale"], 0);

    judged_again_until_settled(&ws, "incremental (3 of 5 nodes)");

    // A tampered output is judged incrementally too, and restored.
    tamper(&ws, "out/gen/i=2/v.txt", "tampered\n");
    let before = ws.log_lines().len();
    let (r, _) = timed(&ws, &["build", "--json"]);
    assert_eq!(r.code(), 0);
    assert!(
        r.stderr().contains("incremental (3 of 5 nodes)"),
        "{}",
        r.stderr()
    );
    assert_eq!(ws.read("out/gen/i=2/v.txt"), "two\n");
    assert_eq!(
        ws.log_lines().len(),
        before,
        "restored from the store, nothing ran"
    );
}

/// A command planned in full: run with the snapshot set aside, then put back.
fn without_snapshot(ws: &Ws, args: &[&str]) -> Run {
    let (snapshot, aside) = (ws.path().join(SNAPSHOT), ws.path().join("snapshot.aside"));
    std::fs::rename(&snapshot, &aside).unwrap();
    let (r, _) = timed(ws, args);
    std::fs::rename(&aside, &snapshot).unwrap();
    assert!(!r.stderr().contains("check snapshot"), "{}", r.stderr());
    r
}

/// A `status` planned in full: every recorded state loaded.
fn full_plan(ws: &Ws, args: &[&str]) -> Run {
    let r = without_snapshot(ws, args);
    assert!(r.stderr().contains("load states"), "{}", r.stderr());
    r
}

/// A `build` planned in full.
fn full_plan_build(ws: &Ws, args: &[&str]) -> Run {
    let r = without_snapshot(ws, args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("timing: build"), "{}", r.stderr());
    r
}

/// `status TARGETS` in JSON, text and `-v`: judged from the snapshot, none
/// of the recorded states loaded beyond those of the nodes a change reaches
/// (`judged`, as `VITGRAPH_TIMINGS` prints it, when a file changed), and the
/// same output as a full plan.
fn status_as_full_plan(ws: &Ws, targets: &[&str], judged: Option<&str>) -> serde_json::Value {
    let mut json = None;
    for extra in [&["--json"][..], &[], &["-v"]] {
        let args: Vec<&str> = ["status"]
            .iter()
            .chain(extra)
            .chain(targets)
            .copied()
            .collect();
        let (r, _) = timed(ws, &args);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        let err = r.stderr();
        assert!(err.contains("check snapshot"), "{err}");
        assert!(!err.contains("load states"), "{err}");
        assert_eq!(err.contains("judge the changed"), judged.is_some(), "{err}");
        if let Some(judged) = judged {
            assert!(err.contains(judged), "{err}");
        }
        assert_eq!(r.stdout(), full_plan(ws, &args).stdout(), "{args:?}");
        if json.is_none() {
            json = Some(serde_json::from_str(&r.stdout()).unwrap());
        }
    }
    json.unwrap()
}

#[test]
fn status_after_a_change_judges_only_what_the_change_reaches() {
    let ws = built_with_two_inputs(TWO_INPUTS);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1, "snapshotted");
    let snapshot = std::fs::read(ws.path().join(SNAPSHOT)).unwrap();

    // The same bytes, a new stat: its chain is judged, and fresh.
    ws.write("inputs/1.txt", "one\n");
    let s = status_as_full_plan(&ws, &[], Some("judge the changed (3 of 5 nodes)"));
    assert_eq!(s["summary"], serde_json::json!({"fresh": 5, "stale": 0}));

    ws.write("inputs/1.txt", "uno\n");
    let s = status_as_full_plan(&ws, &[], Some("judge the changed (3 of 5 nodes)"));
    assert_eq!(s["summary"], serde_json::json!({"fresh": 2, "stale": 3}));
    assert_eq!(kinds(&s, "gen[i=1]"), ["input_changed"]);
    assert_eq!(kinds(&s, "double[i=1]"), ["upstream_changed"]);
    assert_eq!(kinds(&s, "sum"), ["upstream_changed"]);
    assert!(kinds(&s, "gen[i=2]").is_empty());
    // Targets: the changed nodes among the selected ones are judged.
    let s = status_as_full_plan(&ws, &["double"], Some("judge the changed (2 of 5 nodes)"));
    assert_eq!(s["summary"], serde_json::json!({"fresh": 2, "stale": 2}));
    let s = status_as_full_plan(&ws, &["gen[i=2]"], Some("judge the changed (0 of 5 nodes)"));
    assert_eq!(s["summary"], serde_json::json!({"fresh": 1, "stale": 0}));

    // A tampered output of the other chain reaches it too.
    tamper(&ws, "out/gen/i=2/v.txt", "tampered\n");
    let s = status_as_full_plan(&ws, &[], Some("judge the changed (5 of 5 nodes)"));
    assert_eq!(s["summary"], serde_json::json!({"fresh": 1, "stale": 4}));
    assert_eq!(kinds(&s, "gen[i=2]"), ["output_modified"]);

    // `status` wrote nothing: the build that follows is incremental and
    // runs the first chain and the sum; the tampered output is restored.
    assert_eq!(std::fs::read(ws.path().join(SNAPSHOT)).unwrap(), snapshot);
    let before = ws.log_lines().len();
    let built = build_incrementally(&ws, &[], "incremental (5 of 5 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]", "sum"]);
    assert_eq!(ws.log_lines().len(), before + 3);
    assert_eq!(ws.read("out/gen/i=2/v.txt"), "two\n");
}

#[test]
fn a_build_of_targets_is_judged_from_the_snapshot() {
    let ws = built_with_two_inputs(TWO_INPUTS);
    rebuild(&ws);
    let snapshot = std::fs::read(ws.path().join(SNAPSHOT)).unwrap();

    // Unchanged: every selected node cached, as a full plan says, no record read.
    let (r, _) = timed(&ws, &["build", "--json", "double[i=2]"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("check snapshot"), "{}", r.stderr());
    assert!(!r.stderr().contains("timing: build"), "{}", r.stderr());
    let full = full_plan_build(&ws, &["build", "--json", "double[i=2]"]);
    let mut cached = r.nodes_with("cached");
    cached.sort();
    assert_eq!(cached, ["double[i=2]", "gen[i=2]"]);
    let mut full_cached = full.nodes_with("cached");
    full_cached.sort();
    assert_eq!(cached, full_cached);

    // Both inputs change: only the selected chain is judged and run.
    ws.write("inputs/1.txt", "uno\n");
    ws.write("inputs/2.txt", "dos\n");
    let before = ws.log_lines().len();
    let built = build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 5 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]"]);
    assert_eq!(ws.log_lines().len(), before + 2);
    assert_eq!(ws.read("out/double/i=1/v.txt"), "uno\nuno\n");
    assert_eq!(ws.read("out/double/i=2/v.txt"), "two\ntwo\n");
    assert_eq!(
        std::fs::read(ws.path().join(SNAPSHOT)).unwrap(),
        snapshot,
        "a build of targets leaves the snapshot as it was"
    );
    // The store moved: the whole build plans in full and runs the rest.
    let (r, _) = timed(&ws, &["build", "--json"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(!r.stderr().contains("incremental"), "{}", r.stderr());
    let mut built = r.nodes_with("finished");
    built.sort();
    assert_eq!(built, ["double[i=2]", "gen[i=2]", "sum"]);
}

#[test]
fn a_build_of_targets_that_holds_all_a_change_reaches_leaves_a_snapshot() {
    let ws = built_with_two_inputs(TWO_CHAINS);
    rebuild(&ws);
    let snapshot = std::fs::read(ws.path().join(SNAPSHOT)).unwrap();

    ws.write("inputs/1.txt", "uno\n");
    let built = build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 4 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]"]);
    assert_ne!(
        std::fs::read(ws.path().join(SNAPSHOT)).unwrap(),
        snapshot,
        "the snapshot was written again"
    );
    // Its files are too recent to vouch for until they settle; then the
    // snapshot answers alone.
    judged_again_until_settled(&ws, "incremental (2 of 4 nodes)");
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(from_snapshot);
    assert_eq!(s["summary"], serde_json::json!({"fresh": 4, "stale": 0}));
    assert_eq!(ws.read("out/double/i=1/v.txt"), "uno\nuno\n");
}

#[test]
fn a_build_of_targets_leaves_a_snapshot_of_what_it_selected() {
    let ws = built_with_two_inputs(TWO_CHAINS);
    assert!(
        !ws.path().join(SNAPSHOT).exists(),
        "a cold build leaves none"
    );
    // A full plan of the selection finds it fresh: the snapshot vouches for
    // the selected nodes only.
    let (r, _) = timed(&ws, &["build", "double[i=1]"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("0 built, 2 fresh"), "{}", r.stderr());
    assert!(ws.path().join(SNAPSHOT).is_file());
    let s = status_as_full_plan(&ws, &["double[i=1]"], None);
    assert_eq!(s["summary"], serde_json::json!({"fresh": 2, "stale": 0}));
    // Nodes it does not vouch for are planned in full.
    for args in [&["status"][..], &["status", "gen[i=2]"]] {
        let (r, from_snapshot) = timed(&ws, args);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        assert!(!from_snapshot);
        assert!(
            r.stderr().contains("load states"),
            "{args:?}: {}",
            r.stderr()
        );
    }
    let (r, _) = timed(&ws, &["build", "gen[i=2]"]);
    assert!(r.stderr().contains("0 built, 1 fresh"), "{}", r.stderr());

    // A change inside it: judged from it, and it is written again.
    let (r, _) = timed(&ws, &["build", "double[i=1]"]);
    assert!(r.stderr().contains("0 built, 2 fresh"), "{}", r.stderr());
    ws.write("inputs/1.txt", "uno\n");
    let s = status_as_full_plan(
        &ws,
        &["double[i=1]"],
        Some("judge the changed (2 of 4 nodes)"),
    );
    assert_eq!(s["summary"], serde_json::json!({"fresh": 0, "stale": 2}));
    let snapshot = std::fs::read(ws.path().join(SNAPSHOT)).unwrap();
    let built = build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 4 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]"]);
    assert_ne!(std::fs::read(ws.path().join(SNAPSHOT)).unwrap(), snapshot);
    settle(&ws);
    let built = build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 4 nodes)");
    assert!(built.is_empty(), "judged again once settled, nothing ran");
    let (r, _) = timed(&ws, &["build", "--json", "double[i=1]"]);
    assert!(
        !r.stderr().contains("timing: build"),
        "answered alone: {}",
        r.stderr()
    );
    assert_eq!(r.nodes_with("cached").len(), 2);

    // The whole workspace plans in full and leaves a snapshot of it all.
    let (r, from_snapshot) = timed(&ws, &["build"]);
    assert!(!from_snapshot);
    assert!(r.stderr().contains("0 built, 4 fresh"), "{}", r.stderr());
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(from_snapshot);
    assert_eq!(s["summary"], serde_json::json!({"fresh": 4, "stale": 0}));
}

#[test]
fn a_snapshot_of_targets_ignores_changes_to_what_it_does_not_vouch_for() {
    let ws = built_with_two_inputs(TWO_INPUTS);
    let (r, _) = timed(&ws, &["build", "double[i=1]"]);
    assert!(r.stderr().contains("0 built, 2 fresh"), "{}", r.stderr());
    // The change reaches `sum` too, which the snapshot does not vouch for:
    // the build of the chain still leaves a snapshot of it.
    ws.write("inputs/1.txt", "uno\n");
    let built = build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 5 nodes)");
    assert_eq!(built, ["double[i=1]", "gen[i=1]"]);
    settle(&ws);
    build_incrementally(&ws, &["double[i=1]"], "incremental (2 of 5 nodes)");
    let (r, _) = timed(&ws, &["build", "--json", "double[i=1]"]);
    assert!(
        !r.stderr().contains("timing: build"),
        "answered alone: {}",
        r.stderr()
    );
    // `sum` is stale, as a full plan says.
    let (r, _) = timed(&ws, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(kinds(&s, "sum"), ["upstream_changed"]);
    assert_eq!(r.stdout(), full_plan(&ws, &["status", "--json"]).stdout());
}

/// Eight chains, each reading its own input file, and a sum of them all.
const EIGHT_INPUTS: &str = r#"Pipeline(stages: {
    "gen": Stage(matrix: { "i": [1, 2, 3, 4, 5, 6, 7, 8] },
        task: Command(run: "echo gen-${i} >> side.log; cat inputs/${i}.txt > ${out}/v.txt", inputs: ["inputs/${i}.txt"], outputs: ["v.txt"])),
    "double": Stage(for_each: "gen",
        task: Command(run: "echo double-${i} >> side.log; cat ${needs.gen}/v.txt ${needs.gen}/v.txt > ${out}/v.txt", outputs: ["v.txt"])),
    "sum": Stage(needs: ["double"],
        task: Command(run: "echo sum >> side.log; ls ${needs.double} > ${out}/v.txt", outputs: ["v.txt"])),
})"#;

#[test]
fn a_full_build_that_ran_a_few_nodes_leaves_a_snapshot() {
    let ws = Ws::new(&[("eight.ron", EIGHT_INPUTS)]);
    for i in 1..=8 {
        ws.write(&format!("inputs/{i}.txt"), &format!("{i}\n"));
    }
    assert_eq!(ws.run(&["build"]).code(), 0);
    settle(&ws);
    // No snapshot to start from: the next build plans in full.
    let _ = std::fs::remove_file(ws.path().join(SNAPSHOT));
    ws.write("inputs/3.txt", "three\n");
    let (r, _) = timed(&ws, &["build", "--json"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(!r.stderr().contains("incremental"), "{}", r.stderr());
    assert_eq!(r.nodes_with("finished").len(), 3);
    assert!(
        ws.path().join(SNAPSHOT).is_file(),
        "judged again after the build, the three rebuilt nodes refresh the snapshot"
    );
    judged_again_until_settled(&ws, "incremental (3 of 17 nodes)");
}

#[test]
fn a_modified_or_removed_output_plans_in_full_and_is_restored() {
    let ws = snapshotted();
    tamper(&ws, "out/gen/i=2/v.txt", "x\n2\n");
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "gen[i=2]"), ["output_modified"]);
    let (r, from_snapshot) = timed(&ws, &["build", "--json"]);
    assert!(!from_snapshot);
    assert_eq!(r.nodes_with("cached").len(), 4, "{}", r.stdout());
    assert_eq!(ws.read("out/gen/i=2/v.txt"), "a\n2\n");

    settle(&ws);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1);
    std::fs::remove_file(ws.path().join("out/double/i=1/v.txt")).unwrap();
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(kinds(&s, "double[i=1]"), ["output_missing"]);
}

#[test]
fn a_change_to_the_records_plans_in_full() {
    let ws = snapshotted();
    assert!(status_json(&ws, &[]).1);
    // Another process's doing: the node no longer points at its run.
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    db.execute("DELETE FROM node_runs WHERE node_id = 'gen[i=1]'", [])
        .unwrap();
    drop(db);
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(s["summary"]["stale"], 1);
    assert_eq!(kinds(&s, "gen[i=1]"), ["never_built"]);
    // A replaced database (same counter, other file) misses too.
    assert_eq!(ws.run(&["build"]).code(), 0);
    settle(&ws);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1);
    let db_path = ws.path().join("cache/state.sqlite");
    let copy = ws.path().join("cache/state.copy");
    let db = rusqlite::Connection::open(&db_path).unwrap();
    db.execute_batch(&format!("VACUUM INTO '{}'", copy.display()))
        .unwrap();
    drop(db);
    std::fs::rename(&copy, &db_path).unwrap();
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot);
    assert_eq!(s["summary"]["stale"], 0);
}

#[test]
fn recent_files_and_directory_inputs_are_never_vouched_for() {
    // Written just now: a later write in the same tick could keep the stat.
    // The mtime is set ahead of the clock so that the file stays "recent"
    // however long the build takes on a loaded machine.
    let ws = Ws::new(&[("chain.ron", CHAIN)]);
    ws.write("data.txt", "a\n");
    let touched = std::process::Command::new("touch")
        .args(["-d", "+1 hour", "data.txt"])
        .current_dir(ws.path())
        .status()
        .expect("run touch");
    assert!(touched.success());
    assert_eq!(ws.run(&["build"]).code(), 0);
    ws.run(&["status"]);
    // A snapshot may list the file, but only as untrusted: every command
    // judges its nodes again rather than answer from the snapshot.
    for _ in 0..2 {
        let (r, from_snapshot) = timed(&ws, &["build"]);
        assert_eq!(r.code(), 0);
        assert!(!from_snapshot, "{}", r.stderr());
    }

    // A directory input: a stat cannot vouch for the tree.
    let ws = Ws::new(&[(
        "d.ron",
        r#"Pipeline(stages: { "d": Stage(task: Command(run: "ls inputs > ${out}/l.txt", inputs: ["inputs"], outputs: ["l.txt"])) })"#,
    )]);
    ws.write("inputs/a.txt", "a");
    assert_eq!(ws.run(&["build"]).code(), 0);
    settle(&ws);
    let (s, _) = status_json(&ws, &[]);
    assert_eq!(s["summary"]["fresh"], 1);
    assert!(!ws.path().join(SNAPSHOT).exists());
}

#[test]
fn a_version_one_store_is_migrated_and_then_snapshotted() {
    let ws = snapshotted();
    let db_path = ws.path().join("cache/state.sqlite");
    // Make it a version-1 database: no change counter, no triggers.
    let db = rusqlite::Connection::open(&db_path).unwrap();
    let triggers: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(triggers.len(), 12, "{triggers:?}");
    for t in &triggers {
        db.execute_batch(&format!("DROP TRIGGER {t}")).unwrap();
    }
    db.execute_batch("DROP TABLE generation; PRAGMA user_version = 1;")
        .unwrap();
    drop(db);
    let (s, from_snapshot) = status_json(&ws, &[]);
    assert!(!from_snapshot, "a store without a counter cannot vouch");
    assert_eq!(s["summary"]["fresh"], 4);
    let db = rusqlite::Connection::open(&db_path).unwrap();
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 7);
    drop(db);
    rebuild(&ws);
    assert!(status_json(&ws, &[]).1, "migrated, then snapshotted");
}
