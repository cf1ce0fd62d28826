//! The store's promises under attack: one regression test per way a probe
//! of vitgraph once broke them (the reproductions are in
//! `scripts/reliability/repro.sh`). The store owns its bytes, restores only
//! what hashes right, ends what a killed build left running, and refuses at
//! load what it could not build.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::harness::Ws;

/// Waits (bounded) for `f`; the bound only stops a broken test, it never
/// decides a passing one.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` runs (exists and is not a zombie).
fn runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s.rsplit(')').next()?.split_whitespace().next()?.to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

fn verify_is_clean(ws: &Ws) {
    let v = ws.run(&["verify"]);
    assert_eq!(v.code(), 0, "verify: {}{}", v.stdout(), v.stderr());
}

/// F1: a task's log is its own file, never a store object's inode: a node
/// that logged runs again (as any user), and the store stays intact.
#[test]
fn a_node_that_logged_runs_again_and_its_log_object_stays_intact() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(params: {"v": 1}, stages: {
  "n": Stage(task: Command(run: "echo hello ${v} >&2; cat data/in.txt > ${out}/o.txt",
                           inputs: ["data/in.txt"], outputs: ["o.txt"])),
})"#,
    )]);
    ws.write("data/in.txt", "one\n");
    assert_eq!(ws.run(&["build"]).code(), 0);
    let log = ws.path().join("cache/logs/n/n.log");
    let meta = std::fs::metadata(&log).unwrap();
    assert_eq!(meta.nlink(), 1, "the log is not linked into the store");
    assert_ne!(
        meta.permissions().mode() & 0o200,
        0,
        "the log stays writable"
    );
    let r = ws.run(&["build", "-p", "v=2"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    verify_is_clean(&ws);
    ws.write("data/in.txt", "two\n");
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.read("cache/logs/n/n.log"), "hello 1\n");
    verify_is_clean(&ws);
}

/// F2: a damaged object is never restored: the node runs again and its new
/// run replaces the damaged one.
#[test]
fn a_damaged_object_is_replaced_by_a_run_never_restored() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "gen": Stage(task: Command(run: "echo gen >> side.log; seq 1 100000 > ${out}/v.txt", outputs: ["v.txt"])),
})"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let good = ws.read("out/gen/v.txt");
    for damage in ["truncate", "flip"] {
        let object = ws
            .objects()
            .into_iter()
            .find(|o| std::fs::metadata(o).unwrap().len() == good.len() as u64)
            .expect("the output's object");
        std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut bytes = std::fs::read(&object).unwrap();
        match damage {
            "truncate" => bytes.truncate(1000),
            _ => bytes[500] ^= 1,
        }
        std::fs::write(&object, bytes).unwrap();
        std::fs::remove_file(ws.path().join("out/gen/v.txt")).unwrap();
        let r = ws.run(&["build"]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        assert!(r.stderr().contains("gen runs again"), "{}", r.stderr());
        assert!(r.stderr().contains("is damaged"), "{}", r.stderr());
        assert_eq!(ws.read("out/gen/v.txt"), good, "{damage}: the right bytes");
        verify_is_clean(&ws);
        assert_eq!(ws.status(&[])["summary"]["stale"], 0);
    }
    assert_eq!(ws.log_lines().len(), 3, "built once, then once per damage");
}

/// F2, verify: `--repair` rewrites a damaged object from an intact copy in `out/`.
#[test]
fn verify_repairs_a_damaged_object_from_out() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "gen": Stage(task: Command(run: "seq 1 1000 > ${out}/v.txt", outputs: ["v.txt"])) })"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let object = ws
        .objects()
        .into_iter()
        .find(|o| std::fs::metadata(o).unwrap().len() > 1000)
        .unwrap();
    std::fs::set_permissions(&object, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&object, "garbage").unwrap();
    let v = ws.run(&["verify"]);
    assert_eq!(v.code(), 1);
    assert!(v.stdout().contains("verify --repair"), "{}", v.stdout());
    let v = ws.run(&["verify", "--repair"]);
    assert_eq!(v.code(), 0, "{}{}", v.stdout(), v.stderr());
    assert!(v.stdout().contains("repaired:"), "{}", v.stdout());
    assert!(v.stdout().contains("out/gen/v.txt"), "{}", v.stdout());
    verify_is_clean(&ws);
    assert_eq!(
        std::fs::read_to_string(&object).unwrap(),
        ws.read("out/gen/v.txt")
    );
}

/// F3: a process the task left running, and an output that is a hard link
/// to an input, cannot reach the stored object; the input stays the user's.
#[test]
fn what_a_task_leaves_behind_cannot_touch_the_store() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "bg": Stage(task: Command(run: "exec 3>${out}/o.txt; echo early >&3; sh -c 'echo $$$$ > bg.pid; while true; do echo late >&3; sleep 0.05; done' & while [ ! -s bg.pid ]; do sleep 0.01; done",
                            outputs: ["o.txt"])),
  "ln": Stage(task: Command(run: "ln data/in.txt ${out}/o.txt", inputs: ["data/in.txt"], outputs: ["o.txt"])),
})"#,
    )]);
    ws.write("data/in.txt", "input-data\n");
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let input = std::fs::metadata(ws.path().join("data/in.txt")).unwrap();
    assert_eq!(input.nlink(), 1, "the input is not linked into the store");
    assert_ne!(
        input.permissions().mode() & 0o200,
        0,
        "the input stays writable"
    );
    // The writer the task left is ended with the task.
    let pid: i32 = ws.read("bg.pid").trim().parse().unwrap();
    wait_for("the background writer to end", || !runs(pid));
    ws.write("data/in.txt", "input-data\nedited\n");
    verify_is_clean(&ws);
    assert!(ws.read("out/bg/o.txt").starts_with("early\n"));
    assert_eq!(
        ws.status(&[])["summary"]["stale"],
        1,
        "only `ln`, whose input changed"
    );
}

/// F4: nodes that share a key are all fresh after one build.
#[test]
fn nodes_that_share_a_key_are_all_fresh() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "rep": Stage(matrix: {"k": [1, 2, 3]}, task: Command(run: "echo same > ${out}/o.txt", outputs: ["o.txt"])),
})"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let s = ws.status(&[]);
    assert_eq!(s["summary"]["stale"], 0, "{s}");
    let r = ws.run(&["build", "--json"]);
    assert!(r.nodes_with("cached").len() == 3, "{}", r.stdout());
    assert!(
        !r.stdout().contains("\"restored\":true"),
        "nothing restored again: {}",
        r.stdout()
    );
}

/// F5: values that differ only in how `/` and `%` are written get folders of their own.
#[test]
fn folder_names_never_collide() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "c": Stage(matrix: {"v": ["a/b", "a%2Fb"]}, task: Command(run: "echo ${v} > ${out}/o.txt", outputs: ["o.txt"])),
})"#,
    )]);
    for _ in 0..2 {
        let r = ws.run(&["build"]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
    }
    assert_eq!(ws.read("out/c/v=a%2Fb/o.txt"), "a/b\n");
    assert_eq!(ws.read("out/c/v=a%252Fb/o.txt"), "a%2Fb\n");
    assert_eq!(ws.status(&[])["summary"]["stale"], 0);
}

/// A pipeline whose tasks leave a grandchild running (its pid in `gc-<i>.pid`).
const GRANDCHILDREN: &str = r#"Pipeline(stages: {
  "slow": Stage(matrix: {"i": [1, 2]},
    task: Command(run: "sh -c 'echo $$$$ > gc-${i}.pid; sleep 300' & sleep 300; echo done > ${out}/v.txt", outputs: ["v.txt"])),
})"#;

fn grandchildren(ws: &Ws) -> Vec<i32> {
    (1..=2)
        .filter_map(|i| ws.read(&format!("gc-{i}.pid")).trim().parse().ok())
        .collect()
}

/// F6: after `kill -9` of a build, the next command ends what its tasks
/// left running — `status`, and `ls` and `graph`, which read no store.
#[test]
fn the_next_command_ends_what_a_killed_build_left_running() {
    for next in ["status", "ls", "graph"] {
        let ws = Ws::new(&[("p.ron", GRANDCHILDREN)]);
        let mut child = ws
            .cmd(&["build", "-j", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("both grandchildren", || grandchildren(&ws).len() == 2);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let left = grandchildren(&ws);
        assert!(
            left.iter().all(|&p| runs(p)),
            "they outlive the killed build"
        );
        let s = ws.run(&[next]);
        assert_eq!(s.code(), 0, "{next}: {}", s.stderr());
        for pid in left {
            wait_for(&format!("a grandchild to end after `{next}`"), || {
                !runs(pid)
            });
        }
    }
}

/// F6: SIGHUP (a closed terminal) ends a build as SIGINT does: exit 130, no task left.
#[test]
fn sighup_interrupts_a_build_and_ends_its_tasks() {
    let ws = Ws::new(&[("p.ron", GRANDCHILDREN)]);
    let child = ws
        .cmd(&["build", "-j", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("both grandchildren", || grandchildren(&ws).len() == 2);
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGHUP);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for pid in grandchildren(&ws) {
        wait_for("a grandchild to end", || !runs(pid));
    }
}

/// F9: a huge failing log costs a bounded excerpt everywhere it is shown.
#[test]
fn a_huge_log_gives_a_bounded_error() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "t": Stage(task: Command(run: "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo 'error: it broke' >&2; exit 3", outputs: ["o.txt"])) })"#,
    )]);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().len() < 10_000, "{} bytes", r.stderr().len());
    assert!(r.stderr().contains("error: it broke"), "{}", r.stderr());
    assert!(
        r.stderr().contains("cache/logs/t/t.log"),
        "names the full log"
    );
    let s = ws.run(&["status"]);
    assert!(s.stdout().len() < 10_000, "{} bytes", s.stdout().len());
    assert!(s.stdout().contains("failed"), "{}", s.stdout());
    let j = ws.run(&["build", "--json"]);
    assert!(j.stdout().len() < 20_000, "{} bytes", j.stdout().len());
}

/// F10, F11, F13: what cannot be built is refused at load, with the place.
#[test]
fn names_that_cannot_be_folders_are_load_errors() {
    for (name, stages, expect) in [
        (
            ".",
            r#"".": Stage(task: Command(run: "true", outputs: []))"#,
            "invalid stage name `.`",
        ),
        (
            "..",
            r#""..": Stage(matrix: {"k": [1]}, task: Command(run: "true", outputs: []))"#,
            "invalid stage name `..`",
        ),
        (
            "./o.txt",
            r#""t": Stage(task: Command(run: "true", outputs: ["./o.txt"]))"#,
            "write `o.txt`",
        ),
        (
            "s/",
            r#""t": Stage(task: Command(run: "true", outputs: ["s/"]))"#,
            "write `s`",
        ),
        (
            "a//b",
            r#""t": Stage(task: Command(run: "true", outputs: ["a//b"]))"#,
            "write `a/b`",
        ),
    ] {
        let ws = Ws::new(&[("p.ron", &format!("Pipeline(stages: {{ {stages} }})"))]);
        let r = ws.run(&["ls"]);
        assert_eq!(r.code(), 2, "{name}: {}", r.stderr());
        assert!(r.stderr().contains(expect), "{name}: {}", r.stderr());
        assert!(
            r.stderr().contains("[pipelines/p.ron:1:"),
            "{name}: {}",
            r.stderr()
        );
    }
}

/// F11: ids longer than a file name may be still build (the folder name is shortened).
#[test]
fn nodes_with_long_ids_build() {
    let h = "y".repeat(100);
    let ws = Ws::new(&[(
        "p.ron",
        &format!(
            r#"Pipeline(stages: {{
  "long3": Stage(matrix: {{"a": ["{h}"], "b": ["{h}"], "c": ["{h}", "{h}z"]}}, task: Command(run: "echo ${{c}} > ${{out}}/o.txt", outputs: ["o.txt"])),
}})"#
        ),
    )]);
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.status(&[])["summary"]["stale"], 0);
    let dirs: Vec<String> = std::fs::read_dir(ws.path().join("out/long3"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(dirs.iter().all(|d| d.len() <= 200), "{dirs:?}");
}

/// F12: an input edited and reverted (mtime and all) while its node runs is
/// not recorded as the node's result.
#[test]
fn an_input_changed_during_the_run_is_not_recorded_fresh() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {
  "read": Stage(task: Command(run: "touch started; while [ ! -e go ]; do sleep 0.01; done; cp data/in.txt ${out}/o.txt; touch copied; while [ ! -e done ]; do sleep 0.01; done",
                              inputs: ["data/in.txt"], outputs: ["o.txt"])),
})"#,
    )]);
    ws.write("data/in.txt", "AAAA-original\n");
    let input = ws.path().join("data/in.txt");
    let mtime = std::fs::metadata(&input).unwrap().modified().unwrap();
    let child = ws
        .cmd(&["build"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the task to start", || ws.path().join("started").exists());
    ws.write("data/in.txt", "BBBB-version2\n");
    ws.write("go", "");
    wait_for("the copy", || ws.path().join("copied").exists());
    ws.write("data/in.txt", "AAAA-original\n");
    std::fs::File::options()
        .write(true)
        .open(&input)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    ws.write("done", "");
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`data/in.txt` changed while the task ran"),
        "{err}"
    );
    let reasons = ws.reasons("read", &[]);
    assert_eq!(reasons[0].0, "interrupted", "{reasons:?}");
}

/// F13: a pipeline file linked into `pipelines/` is loaded.
#[test]
fn linked_pipeline_files_are_loaded() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "a": Stage(task: Command(run: "echo a > ${out}/a.txt", outputs: ["a.txt"])) })"#,
    )]);
    ws.write(
        "shared/ext.ron",
        r#"Pipeline(stages: { "ext": Stage(task: Command(run: "echo e > ${out}/e.txt", outputs: ["e.txt"])) })"#,
    );
    std::os::unix::fs::symlink("../shared/ext.ron", ws.path().join("pipelines/ext.ron")).unwrap();
    let r = ws.run(&["build", "ext"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.read("out/ext/e.txt"), "e\n");
    std::os::unix::fs::symlink("../shared/gone.ron", ws.path().join("pipelines/gone.ron")).unwrap();
    let r = ws.run(&["ls"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("pipelines/gone.ron"), "{}", r.stderr());
}

/// F13: a file where a node's folder belongs is replaced, as any change to `out/` is.
#[test]
fn a_file_in_place_of_a_node_folder_is_restored_over() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "gen": Stage(matrix: {"i": [1, 2, 3]}, task: Command(run: "echo ${i} > ${out}/v.bin", outputs: ["v.bin"])) })"#,
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    std::fs::remove_dir_all(ws.path().join("out/gen/i=3")).unwrap();
    ws.write("out/gen/i=3", "x");
    let s = ws.run(&["status", "--json"]);
    assert_eq!(s.code(), 0, "{}", s.stderr());
    assert_eq!(ws.reasons("gen[i=3]", &[])[0].0, "output_missing");
    assert_eq!(ws.run(&["build"]).code(), 0);
    assert_eq!(ws.read("out/gen/i=3/v.bin"), "3\n");
}

/// F13: `verify` checks the state database too.
#[test]
fn verify_sees_a_damaged_database() {
    let values = (0..400)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let ws = Ws::new(&[(
        "p.ron",
        &format!(
            r#"Pipeline(stages: {{ "gen": Stage(matrix: {{"i": [{values}]}}, task: Command(run: "echo ${{i}} > ${{out}}/v.bin", outputs: ["v.bin"])) }})"#
        ),
    )]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    verify_is_clean(&ws);
    let db = ws.path().join("cache/state.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = bytes.len() / 2 / 4096 * 4096;
    bytes[middle..middle + 8192].fill(0);
    std::fs::write(&db, bytes).unwrap();
    let v = ws.run(&["verify"]);
    assert_ne!(v.code(), 0, "{}{}", v.stdout(), v.stderr());
    let said = format!("{}{}", v.stdout(), v.stderr());
    assert!(said.contains("state.sqlite"), "{said}");
}

/// F13: a build stopped while it waits for another build's lock on a key
/// reports an interruption, not a failure.
#[test]
fn sigterm_while_waiting_for_a_lock_is_an_interruption() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "slow": Stage(task: Command(run: "touch started; while [ ! -e go ]; do sleep 0.01; done; echo ok > ${out}/v.txt", outputs: ["v.txt"])) })"#,
    )]);
    let first = ws
        .cmd(&["build"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the first build's task", || {
        ws.path().join("started").exists()
    });
    let mut second = ws
        .cmd(&["build", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second build judges the node and waits for the key's lock.
    let mut stdout = std::io::BufReader::new(second.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("\"started\"") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "no started event"
        );
    }
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(second.id() as i32, libc::SIGTERM);
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = second.wait().unwrap();
    ws.write("go", "");
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(!rest.contains("\"event\":\"failed\""), "{rest}");
    assert!(rest.contains("\"event\":\"interrupted\""), "{rest}");
}
