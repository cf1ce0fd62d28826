//! Crashes, interrupts and concurrent builds: the store stays consistent and
//! no completed node ever runs twice.

use std::collections::{BTreeMap, HashSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::harness::{log_node, sweep, Ws};

/// Nodes recorded in the store: fresh, or recorded but not (fully) materialized.
fn recorded_nodes(ws: &Ws) -> HashSet<String> {
    let s = ws.status(&[]);
    s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["state"] == "fresh"
                || n["reasons"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["kind"] == "output_missing" || r["kind"] == "output_modified")
        })
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kill_9_at_random_moments_never_loses_or_repeats_work() {
    // 40 gens → 40 doubles → 40 triples → 1 total = 121 nodes.
    let pipeline = sweep(40, "0.01");
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut partial_trials = 0;
    for trial in 0..20 {
        let ws = Ws::new(&[("sweep.ron", &pipeline)]);
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(30 + (seed >> 33) % 900);
        let mut child = ws
            .cmd(&["build", "-j", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(50));

        let recorded = recorded_nodes(&ws);
        if recorded.len() < 121 {
            partial_trials += 1;
        }
        let before = ws.log_lines().len();
        let r = ws.run(&["build", "-j", "2"]);
        assert_eq!(r.code(), 0, "trial {trial}: resume failed: {}", r.stderr());
        let rerun: Vec<String> = ws.log_lines()[before..]
            .iter()
            .map(|l| log_node(l))
            .collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for id in &rerun {
            *counts.entry(id.as_str()).or_default() += 1;
        }
        for (id, n) in &counts {
            assert!(
                !recorded.contains(*id),
                "trial {trial} (kill after {delay:?}): recorded node {id} ran again"
            );
            assert_eq!(*n, 1, "trial {trial}: {id} ran {n} times on resume");
        }
        // A node whose task had finished is recorded by the resume without
        // running (its staged run is adopted): only what was running when
        // the build was killed runs again, at most `-j` nodes.
        let started: HashSet<String> = ws.log_lines()[..before]
            .iter()
            .map(|l| log_node(l))
            .collect();
        let again: Vec<&&str> = counts.keys().filter(|id| started.contains(**id)).collect();
        assert!(
            again.len() <= 2,
            "trial {trial} (kill after {delay:?}): more than -j 2 nodes ran again: {again:?}"
        );
        assert!(recorded.len() + counts.len() <= 121, "trial {trial}");
        let status = ws.status(&[]);
        assert_eq!(status["summary"]["stale"], 0, "trial {trial}: {status}");
        assert_eq!(
            ws.read("out/total/sum.txt").trim(),
            (0..40).map(|i| i * 6).sum::<i64>().to_string()
        );
        for i in 0..40 {
            assert_eq!(
                ws.read(&format!("out/triple/i={i}/v.txt")).trim(),
                (i * 6).to_string(),
                "trial {trial}"
            );
        }
        let v = ws.run(&["verify"]);
        assert_eq!(
            v.code(),
            0,
            "trial {trial}: verify: {}{}",
            v.stdout(),
            v.stderr()
        );
        let leftovers: Vec<_> = walkdir::WalkDir::new(ws.path().join("cache/staging"))
            .min_depth(2)
            .into_iter()
            .flatten()
            .collect();
        assert!(
            leftovers.is_empty(),
            "trial {trial}: staging leftovers removed: {leftovers:?}"
        );
    }
    assert!(
        partial_trials >= 10,
        "most kills should land mid-build, got {partial_trials}/20"
    );
}

#[test]
fn sigint_exits_130_kills_children_and_resumes() {
    let pipeline = r#"Pipeline(stages: {
        "quick": Stage(matrix: {"i": [0, 1]}, task: Command(run: "echo quick-${i} >> side.log; echo ok > ${out}/v.txt", outputs: ["v.txt"])),
        "slow": Stage(matrix: {"i": [0, 1]}, task: Command(run: "echo slow-${i} >> side.log; echo $$$$ > pid-${i}; sleep 30; echo ok > ${out}/v.txt", outputs: ["v.txt"])),
    })"#;
    let ws = Ws::new(&[("p.ron", pipeline)]);
    let mut child = ws
        .cmd(&["build", "-j", "4"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid_of = |i: usize| ws.read(&format!("pid-{i}")).trim().parse::<i32>().ok();
    while !(pid_of(0).is_some() && pid_of(1).is_some()) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "slow nodes never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: signalling a child process we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "SIGINT took {:?}",
        t.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    for i in 0..2 {
        let pid = pid_of(i).unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "task process {pid} survived SIGINT"
        );
    }
    assert_eq!(
        ws.reasons("slow[i=0]", &[]),
        vec![(
            "interrupted".to_string(),
            "the last attempt was interrupted".to_string()
        )]
    );
    assert!(ws.reasons("quick[i=0]", &[]).is_empty());
}

/// Whether process `pid` has ended (gone, or a zombie waiting for its reaper).
fn ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn kill_9_of_vitgraph_ends_its_running_tasks() {
    // `exec`: the task process is the shell itself, vitgraph's direct child.
    let pipeline = r#"Pipeline(stages: {
        "slow": Stage(matrix: {"i": [0, 1]}, task: Command(run: "echo $$$$ > pid-${i}; exec sleep 30", outputs: ["v.txt"])),
    })"#;
    let ws = Ws::new(&[("p.ron", pipeline)]);
    let mut child = ws
        .cmd(&["build", "-j", "4"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid_of = |i: usize| ws.read(&format!("pid-{i}")).trim().parse::<i32>().ok();
    while !(pid_of(0).is_some() && pid_of(1).is_some()) {
        assert!(t.elapsed() < Duration::from_secs(20), "tasks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    for i in 0..2 {
        let pid = pid_of(i).unwrap();
        while !ended(pid) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "task process {pid} outlived vitgraph's SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn two_concurrent_builds_run_every_node_once() {
    let ws = Ws::new(&[("sweep.ron", &sweep(10, "0.05"))]);
    let a = ws
        .cmd(&["build", "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = ws
        .cmd(&["build", "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert_eq!(
        b.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let lines = ws.log_lines();
    let unique: HashSet<&String> = lines.iter().collect();
    assert_eq!(lines.len(), 31, "every node exactly once: {lines:?}");
    assert_eq!(unique.len(), 31);
    assert_eq!(ws.status(&[])["summary"]["stale"], 0);
    assert_eq!(ws.run(&["verify"]).code(), 0);
}
