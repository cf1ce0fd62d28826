//! Every stale reason of DESIGN §3, produced by a scenario and asserted
//! through `status --json`; early cutoff; tampering.

use super::harness::{Ws, CHAIN};

fn kinds(r: &[(String, String)]) -> Vec<&str> {
    r.iter().map(|(k, _)| k.as_str()).collect()
}

fn chain() -> Ws {
    let ws = Ws::new(&[("chain.ron", CHAIN)]);
    ws.write("data.txt", "a\n");
    ws
}

#[test]
fn never_built_then_fresh() {
    let ws = chain();
    assert_eq!(kinds(&ws.reasons("gen[i=1]", &[])), ["never_built"]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let s = ws.status(&[]);
    assert_eq!(s["summary"]["fresh"], 4);
    assert_eq!(s["summary"]["stale"], 0);
    assert_eq!(s["nodes"][0]["state"], "fresh");
    assert_eq!(s["nodes"][0]["reasons"], serde_json::json!([]));
}

#[test]
fn spec_changed_shows_the_param_diff() {
    let ws = chain();
    ws.run(&["build"]);
    let r = ws.reasons("double[i=1]", &["-p", "scale=5"]);
    assert_eq!(
        r,
        [("spec_changed".to_string(), "scale: 2 → 5".to_string())]
    );
    assert!(
        ws.reasons("gen[i=1]", &["-p", "scale=5"]).is_empty(),
        "gen does not use scale"
    );
}

#[test]
fn input_changed_names_the_path_and_upstream_changed_the_node() {
    let ws = chain();
    ws.run(&["build"]);
    ws.write("data.txt", "b\n");
    assert_eq!(
        ws.reasons("gen[i=1]", &[]),
        [("input_changed".to_string(), "data.txt".to_string())]
    );
    assert_eq!(
        ws.reasons("double[i=1]", &[]),
        [(
            "upstream_changed".to_string(),
            "gen[i=1] (stale)".to_string()
        )]
    );
    // Rebuild only the upstream: the dependent now sees a changed manifest.
    assert_eq!(ws.run(&["build", "gen"]).code(), 0);
    assert_eq!(
        ws.reasons("double[i=1]", &[]),
        [("upstream_changed".to_string(), "gen[i=1]".to_string())]
    );
    std::fs::remove_file(ws.path().join("data.txt")).unwrap();
    assert_eq!(
        ws.reasons("gen[i=2]", &[]),
        [(
            "input_changed".to_string(),
            "data.txt (missing)".to_string()
        )]
    );
}

#[test]
fn failed_and_output_missing_and_output_modified() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
        "bad": Stage(task: Command(run: "echo oops >&2; exit 3", outputs: ["x"])),
        "good": Stage(task: Command(run: "echo good >> side.log; echo hi > ${out}/x.txt", outputs: ["x.txt"])),
    })"#,
    )]);
    let r = ws.run(&["build", "-k"]);
    assert_eq!(r.code(), 1);
    let reasons = ws.reasons("bad", &[]);
    assert_eq!(kinds(&reasons), ["failed"]);
    assert!(
        reasons[0].1.contains("exited with status 3") && reasons[0].1.contains("oops"),
        "{reasons:?}"
    );

    std::fs::remove_file(ws.path().join("out/good/x.txt")).unwrap();
    assert_eq!(
        ws.reasons("good", &[]),
        [("output_missing".to_string(), "out/good/x.txt".to_string())]
    );
    let r = ws.run(&["build", "good", "--json"]);
    assert_eq!(
        r.nodes_with("cached"),
        ["good"],
        "restored from the store, not re-run"
    );
    assert_eq!(ws.log_lines().len(), 1);
    assert_eq!(ws.read("out/good/x.txt"), "hi\n");

    ws.write("out/good/x.txt", "HI\n");
    assert_eq!(
        ws.reasons("good", &[]),
        [("output_modified".to_string(), "out/good/x.txt".to_string())]
    );
    // Same size, same content after a rewrite: intact again.
    ws.write("out/good/x.txt", "hi\n");
    assert!(ws.reasons("good", &[]).is_empty());
}

#[test]
fn env_changed_names_the_facet() {
    let ws = Ws::new(&[(
        "g.ron",
        r#"Pipeline(stages: {
        "bench": Stage(task: Command(run: "echo $CUDA_VISIBLE_DEVICES > ${out}/gpu.txt", outputs: ["gpu.txt"], resources: (gpus: 1))),
    })"#,
    )]);
    let build = ws
        .cmd(&["build", "--gpus", "3"])
        .env(
            "VITGRAPH_FAKE_ENV",
            r#"{"gpu":"H100","driver_major":"570"}"#,
        )
        .output()
        .unwrap();
    assert_eq!(
        build.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    assert_eq!(
        ws.read("out/bench/gpu.txt"),
        "3\n",
        "the leased GPU reaches the task"
    );
    let out = ws
        .cmd(&["status", "--json"])
        .env(
            "VITGRAPH_FAKE_ENV",
            r#"{"gpu":"H100","driver_major":"580"}"#,
        )
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        s["nodes"][0]["reasons"],
        serde_json::json!([{"kind": "env_changed", "detail": "driver_major 570 → 580"}])
    );
}

/// A measuring `Command` is keyed on the CPU it measured on: measured on
/// one machine it is not fresh on another CPU; the GPU facets, which a
/// command that asks for no GPU does not use, leave it fresh.
#[test]
fn a_measuring_command_is_keyed_on_the_cpu() {
    let ws = Ws::new(&[(
        "m.ron",
        r#"Pipeline(stages: {
        "bench": Stage(task: Command(run: "echo {} > ${out}/results.json", outputs: ["results.json"], measure: true)),
    })"#,
    )]);
    let host = r#"{"cpu":"Intel Xeon Platinum 8480+","gpu":"H100","driver_major":"580"}"#;
    let build = ws
        .cmd(&["build"])
        .env("VITGRAPH_FAKE_ENV", host)
        .output()
        .unwrap();
    assert_eq!(
        build.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let reasons = |env: &str| {
        let out = ws
            .cmd(&["status", "--json"])
            .env("VITGRAPH_FAKE_ENV", env)
            .output()
            .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        s["nodes"][0]["reasons"].clone()
    };
    assert_eq!(
        reasons(r#"{"cpu":"Apple M2","gpu":"none","driver_major":"none"}"#),
        serde_json::json!([{"kind": "env_changed", "detail": "cpu Intel Xeon Platinum 8480+ → Apple M2"}])
    );
    assert_eq!(
        reasons(r#"{"cpu":"Intel Xeon Platinum 8480+","gpu":"none","driver_major":"none"}"#),
        serde_json::json!([]),
        "the GPU's facets are not in a CPU benchmark's key"
    );
}

#[test]
fn task_version_changed_after_an_older_recording() {
    let ws = chain();
    ws.run(&["build"]);
    // Rewrite the recorded parts as an older vitgraph would have written them.
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    let (table, column) = recorded_parts_column(&db);
    let rows: Vec<(i64, String)> = db
        .prepare(&format!("SELECT rowid, {column} FROM {table}"))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (rowid, text) in rows {
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["parts"]["version"] = serde_json::json!(0);
        let old_key = blake3::hash(v.to_string().as_bytes());
        db.execute(
            &format!("UPDATE {table} SET {column} = ?1, key = ?2 WHERE rowid = ?3"),
            rusqlite::params![v.to_string(), old_key.as_bytes().to_vec(), rowid],
        )
        .unwrap();
    }
    drop(db);
    assert_eq!(
        ws.reasons("gen[i=1]", &[]),
        [(
            "task_version_changed".to_string(),
            "Command 0 → Command 1".to_string()
        )]
    );
}

/// The table and column where the store keeps each run's key parts.
fn recorded_parts_column(db: &rusqlite::Connection) -> (String, String) {
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type='table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in tables {
        let cols: Vec<String> = db
            .prepare(&format!("PRAGMA table_info({t})"))
            .unwrap()
            .query_map([], |r| r.get(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        if let Some(c) = cols.iter().find(|c| c.contains("key_parts")) {
            return (t, c.clone());
        }
    }
    panic!("no key_parts column in the state database");
}

#[test]
fn early_cutoff_keeps_dependents_fresh() {
    let ws = Ws::new(&[(
        "c.ron",
        r#"Pipeline(params: {"note": "a"}, stages: {
        "gen": Stage(task: Command(run: "echo gen >> side.log; echo ${note} > /dev/null; echo same > ${out}/v.txt", outputs: ["v.txt"])),
        "use": Stage(for_each: "gen", task: Command(run: "echo use >> side.log; cat ${needs.gen}/v.txt > ${out}/v.txt", outputs: ["v.txt"])),
    })"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let r = ws.run(&["build", "--json", "-p", "note=b"]);
    assert_eq!(r.code(), 0);
    assert_eq!(r.nodes_with("finished"), ["gen"]);
    assert_eq!(r.nodes_with("cached"), ["use"]);
    assert_eq!(ws.log_lines(), ["gen", "use", "gen"]);
}

#[test]
fn toggling_a_param_back_restores_without_running() {
    let ws = chain();
    ws.run(&["build"]);
    ws.run(&["build", "-p", "scale=3"]);
    let n = ws.log_lines().len();
    let r = ws.run(&["build", "--json"]);
    assert_eq!(r.nodes_with("finished"), Vec::<String>::new());
    assert_eq!(ws.log_lines().len(), n);
    assert!(ws.read("out/double/i=1/v.txt").starts_with("2\n"));
}

#[test]
fn tampered_store_object_is_named_by_verify() {
    let ws = chain();
    ws.run(&["build"]);
    assert_eq!(ws.run(&["verify"]).code(), 0);
    let objects = ws.objects();
    assert!(!objects.is_empty());
    let victim = &objects[0];
    let mut perm = std::fs::metadata(victim).unwrap().permissions();
    assert!(perm.readonly(), "objects are read-only");
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(victim, perm).unwrap();
    std::fs::write(victim, "tampered").unwrap();
    let r = ws.run(&["verify"]);
    assert_eq!(r.code(), 1);
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        r.stdout().contains(&name),
        "verify names {name}: {}",
        r.stdout()
    );
}

#[test]
fn force_reruns_the_named_targets_only_and_replaces_their_record() {
    let ws = chain();
    ws.run(&["build"]);
    let before = ws.log_lines().len();
    let r = ws.run(&["build", "--force", "gen[i=1]", "--json"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.nodes_with("finished"), ["gen[i=1]"]);
    assert_eq!(ws.log_lines()[before..], ["gen-1"]);
    assert_eq!(ws.status(&[])["summary"]["stale"], 0);
}

#[test]
fn nodes_sharing_a_key_reuse_one_result_and_say_so() {
    let ws = Ws::new(&[(
        "r.ron",
        r#"Pipeline(stages: {
        "repeat": Stage(matrix: {"rep": [1, 2, 3]}, task: Command(run: "echo once >> side.log; echo x > ${out}/x", outputs: ["x"])),
    })"#,
    )]);
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0);
    assert_eq!(ws.log_lines(), ["once"], "one key, one run");
    assert!(
        r.stderr()
            .contains("same key as `repeat[rep=1]`: its result was reused"),
        "{}",
        r.stderr()
    );
}
