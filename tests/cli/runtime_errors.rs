//! Bad runtime input: clear errors, and the store stays consistent.

use super::harness::Ws;

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
    assert_eq!(ws.read("out/c/c/c.txt"), "c\n");
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
    // 1.2 MB output: it fits once (in staging, moved into the store), not twice (materialized copy).
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
    assert_eq!(ws.read("out/c/c/c.txt"), "c\n");
}
