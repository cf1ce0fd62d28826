//! Bad runtime input: clear errors, and the store stays consistent.

use super::harness::{Run, Ws};

fn one(run: &str, outputs: &str) -> Ws {
    Ws::new(&[(
        "p.ron",
        &format!(
            r#"Pipeline(stages: {{ "n": Stage(task: Command(run: "{run}", outputs: [{outputs}])) }})"#
        ),
    )])
}

#[test]
fn failing_command_reports_status_and_log_tail() {
    let ws = one("echo preparing; echo boom >&2; exit 4", r#""x""#);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr()
            .contains("`n` failed: the task exited with status 4"),
        "{}",
        r.stderr()
    );
    assert!(
        r.stderr().contains("boom"),
        "log tail shown: {}",
        r.stderr()
    );
    assert!(r.stderr().contains("cache/logs/n/n.log"), "{}", r.stderr());
    assert_eq!(ws.run(&["verify"]).code(), 0);
}

#[test]
fn missing_declared_output_is_named() {
    let ws = one("echo hi > ${out}/a.txt", r#""a.txt", "b.txt""#);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("b.txt"), "{}", r.stderr());
    assert!(
        !ws.path().join("out/n").exists(),
        "nothing half-materialized"
    );
    assert_eq!(ws.reasons("n", &[])[0].0, "failed");
}

#[test]
fn command_not_found_says_so() {
    let ws = one("definitely-not-a-program-vitgraph", r#""x""#);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("command not found"), "{}", r.stderr());
}

#[test]
fn dependents_of_a_failure_are_skipped_and_keep_going_builds_the_rest() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
        "a": Stage(task: Command(run: "exit 1")),
        "b": Stage(for_each: "a", task: Command(run: "true")),
        "c": Stage(task: Command(run: "echo c > ${out}/c.txt", outputs: ["c.txt"])),
    })"#,
    )]);
    let r = ws.run(&["build", "-k"]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("skipped b: `a` failed"),
        "{}",
        r.stderr()
    );
    assert_eq!(ws.read("out/c/c.txt"), "c\n");
}

#[test]
fn unwritable_workspace_is_a_clear_error() {
    let ws = one("echo hi > ${out}/a.txt", r#""a.txt""#);
    // A file where the cache directory should be: the store cannot be created.
    std::fs::write(ws.path().join("cache"), "not a directory").unwrap();
    let r = ws.run(&["build"]);
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("cache"), "{}", r.stderr());
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
}

#[test]
fn full_disk_while_recording_keeps_the_store_consistent() {
    let mnt = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(mnt.path())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root)");
        return;
    }
    let root = mnt.path();
    std::fs::create_dir_all(root.join("pipelines")).unwrap();
    // 1.2 MB output: it fits once (in staging), not twice (the store's copy of it).
    std::fs::write(
        root.join("pipelines/p.ron"),
        r#"Pipeline(stages: { "big": Stage(task: Command(run: "head -c 1200000 /dev/zero > ${out}/big.bin", outputs: ["big.bin"])) })"#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(super::harness::BIN)
            .arg("-C")
            .arg(root)
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let r = run(&["build"]);
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("no space") || stderr.contains("disk"),
        "{stderr}"
    );
    let v = run(&["verify"]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "store consistent after ENOSPC: {}",
        String::from_utf8_lossy(&v.stdout)
    );
    let _ = std::process::Command::new("umount").arg(root).status();
}

#[test]
fn keep_going_skips_the_dependents_of_a_node_that_cannot_get_its_gpus() {
    // An exclusive GPU node on a machine with no GPUs fails before it starts;
    // with -k its dependents are skipped and the build ends (it used to wait
    // forever for a message from a node that never ran).
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
        "g": Stage(matrix: { "i": [1, 2] },
                   task: Command(run: "true", resources: (gpus: 1, exclusive: true))),
        "a": Stage(for_each: "g", task: Command(run: "true")),
        "c": Stage(task: Command(run: "echo c > ${out}/c.txt", outputs: ["c.txt"])),
    })"#,
    )]);
    let out = std::process::Command::new("timeout")
        .args([
            "60",
            env!("CARGO_BIN_EXE_vitgraph"),
            "build",
            "-k",
            "--json",
        ])
        .env("CUDA_VISIBLE_DEVICES", "")
        .current_dir(ws.path())
        .output()
        .expect("run vitgraph under timeout");
    let events = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(124), "the build hung:\n{events}");
    assert_eq!(out.status.code(), Some(1), "{events}");
    assert_eq!(
        events.matches(r#""event":"skipped""#).count(),
        2,
        "{events}"
    );
    assert_eq!(ws.read("out/c/c.txt"), "c\n");
}

/// The `vitgraph` users run: built without libtorch (`$VITGRAPH_LEAN_EXE`
/// when the tests' own binary links it).
fn lean(ws: &Ws, args: &[&str]) -> std::process::Command {
    match std::env::var_os("VITGRAPH_LEAN_EXE") {
        Some(exe) => {
            let mut c = std::process::Command::new(exe);
            c.arg("-C")
                .arg(ws.path())
                .args(args)
                .env("NO_COLOR", "1")
                .env("VITGRAPH_NO_PROGRESS", "1");
            c
        }
        None => ws.cmd(args),
    }
}

#[test]
fn a_failure_reaches_the_json_stream_and_status_as_a_typed_value() {
    let ws = one("echo boom >&2; exit 4", r#""x""#);
    let r = ws.run(&["build", "--json"]);
    assert_eq!(r.code(), 1);
    let failed = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "failed")
        .expect("a failed event");
    assert_eq!(failed["node"], "n");
    assert_eq!(failed["kind"], "exit");
    assert_eq!(failed["exit_code"], 4);
    assert!(failed["error"].as_str().unwrap().contains("boom"));
    assert!(failed["log"]
        .as_str()
        .unwrap()
        .ends_with("cache/logs/n/n.log"));
    let s = ws.status(&[]);
    let reason = &s["nodes"][0]["reasons"][0];
    assert_eq!(reason["kind"], "failed");
    assert_eq!(reason["failure"]["kind"], "exit");
    assert_eq!(reason["failure"]["exit_code"], 4);
}

#[test]
fn a_command_exiting_75_is_a_transient_failure_never_recorded_as_the_result() {
    let ws = one("exit 75", r#""x""#);
    let r = ws.run(&["build", "--json"]);
    assert_eq!(r.code(), 1);
    let failed = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["kind"], "transient");
    let reasons = ws.reasons("n", &[]);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert_eq!(reasons[0].0, "interrupted");
    assert!(reasons[0].1.contains("transient failure"), "{reasons:?}");
}

#[test]
fn gpus_named_by_uuid_are_handed_out_one_per_node() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "g": Stage(matrix: {"i": [1, 2]},
            task: Command(run: "echo $CUDA_VISIBLE_DEVICES > ${out}/gpu.txt; sleep 0.2 # node ${i}", outputs: ["gpu.txt"], resources: (gpus: 1))) })"#,
    )]);
    let r = Run(ws
        .cmd(&["build", "-j", "2"])
        .env("CUDA_VISIBLE_DEVICES", "GPU-aaaa1111,MIG-bbbb2222")
        .env("VITGRAPH_FAKE_ENV", r#"{"gpu":"H100"}"#)
        .output()
        .unwrap());
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let mut seen = vec![
        ws.read("out/g/i=1/gpu.txt").trim().to_string(),
        ws.read("out/g/i=2/gpu.txt").trim().to_string(),
    ];
    seen.sort();
    assert_eq!(seen, ["GPU-aaaa1111", "MIG-bbbb2222"]);
    let r = ws.run(&["build", "--force", "--gpus", "0,nope"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("`nope` is not a GPU id"),
        "{}",
        r.stderr()
    );
}

#[test]
fn a_libtorch_executable_that_cannot_say_its_version_fails_hardware_nodes() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
            "gpu": Stage(task: Command(run: "echo x > ${out}/x", outputs: ["x"], resources: (gpus: 1))),
            "cpu": Stage(task: Command(run: "echo y > ${out}/y", outputs: ["y"])),
        })"#,
    )]);
    ws.write(
        "broken-torch",
        "#!/bin/sh\necho 'error while loading shared libraries: libtorch_cpu.so' >&2\nexit 127\n",
    );
    let exe = ws.path().join("broken-torch");
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = lean(&ws, &["build", "-k", "--gpus", "0"])
        .env("VITGRAPH_TORCH_EXE", &exe)
        .env("XDG_CACHE_HOME", ws.path().join("xdg"))
        .env_remove("VITGRAPH_FAKE_ENV")
        .output()
        .unwrap();
    let r = Run(out);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let err = r.stderr();
    assert!(err.contains("cannot key `gpu`"), "{err}");
    assert!(err.contains("torch-info` failed"), "{err}");
    assert!(err.contains("libtorch_cpu.so"), "{err}");
    assert!(
        ws.path().join("out/cpu/y").is_file(),
        "other nodes still build"
    );
    assert!(!ws.path().join("out/gpu").exists());
}

#[test]
fn diagnostic_switches_are_part_of_an_experiments_key() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "v": Stage(task: Vit(model: "vit32x6x384", batch: 1, device: "cpu")) })"#,
    )]);
    let explain = |diag: Option<&str>| {
        let mut c = ws.cmd(&["explain", "--json", "v"]);
        c.env("VITGRAPH_FAKE_ENV", r#"{"gpu":"none"}"#);
        match diag {
            Some(v) => c.env("VITGRAPH_COPY_STREAMS", v),
            None => c.env_remove("VITGRAPH_COPY_STREAMS"),
        };
        let r = Run(c.output().unwrap());
        assert_eq!(r.code(), 0, "{}", r.stderr());
        serde_json::from_str::<serde_json::Value>(&r.stdout()).unwrap()
    };
    let plain = explain(None);
    let diag = explain(Some("0"));
    assert_ne!(plain["key"]["current"], diag["key"]["current"]);
    assert_eq!(
        diag["parts"]["current"]["env"]["diag.VITGRAPH_COPY_STREAMS"],
        "0"
    );
    assert!(plain["parts"]["current"]["env"]
        .get("diag.VITGRAPH_COPY_STREAMS")
        .is_none());
}

/// Before any build made a store, read-only commands hash inputs straight
/// from the files: a FIFO or a device among them is refused, never opened
/// (it would block, or never end). Run under `timeout`, so a regression
/// fails instead of hanging.
#[test]
fn a_fifo_input_is_refused_not_opened_before_the_first_build() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "f": Stage(task: Command(run: "cat in.fifo > ${out}/o", inputs: ["in.fifo"], outputs: ["o"])) })"#,
    )]);
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path().join("in.fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    for args in [&["status"][..], &["build", "-n"], &["report"]] {
        let out = std::process::Command::new("timeout")
            .arg("20")
            .arg(super::harness::BIN)
            .arg("-C")
            .arg(ws.path())
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(124), "{args:?} blocked on the FIFO");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not a regular file"), "{args:?}: {err}");
    }
}

/// A build whose state database is damaged in its middle says it failed
/// before any node ran, with no progress counter and no empty node name.
#[test]
fn a_damaged_state_database_fails_the_build_before_any_node() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "gen": Stage(matrix: {"i": [0, 1, 2, 3]}, task: Command(run: "head -c 300000 /dev/urandom > ${out}/v.bin", outputs: ["v.bin"])),
})"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let db = ws.path().join("cache/state.sqlite");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let mut bytes = std::fs::read(&db).unwrap();
    let mid = bytes.len() / 2;
    let end = (mid + 8192).min(bytes.len());
    bytes[mid..end].fill(0);
    std::fs::write(&db, bytes).unwrap();
    let r = ws.run(&["build", "--force"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let err = r.stderr();
    assert!(
        err.starts_with("FAILED before any node ran: state database"),
        "{err}"
    );
    assert!(!err.contains("[1/0]"), "{err}");
    let r = ws.run(&["build", "--force", "--json"]);
    let first = r.stdout().lines().next().unwrap_or("").to_owned();
    assert!(
        first.contains(r#""event":"failed","node":"","kind":"store""#),
        "{first}"
    );
}
