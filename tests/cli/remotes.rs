//! `vitgraph push` and `pull` against a directory remote: a GPU host pushes,
//! a laptop pulls and builds without measuring; a read-only remote refuses
//! pushes; damage on the remote is found on arrival and by `remote verify`;
//! concurrent pushes and pushes killed with -9 leave the remote consistent.

use std::path::Path;
use std::process::{Command, Stdio};

use super::support::{Output, Workspace};

pub(super) const GPU_HOST: &str =
    r#"{"cpu":"Xeon 8480+","gpu":"H100","driver":"580","host":"gpu-box"}"#;
pub(super) const LAPTOP: &str =
    r#"{"cpu":"Apple M2","gpu":"none","driver":"none","host":"laptop"}"#;

/// Credentials for a bucket remote (a folder ignores them).
const KEYS: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "vitgraph-test"),
    ("AWS_SECRET_ACCESS_KEY", "vitgraph-test-secret"),
    ("AWS_REGION", "us-east-1"),
];

pub(super) fn command(ws: &Workspace, env: &str, args: &[&str]) -> Command {
    let mut c = ws.command(Some(env), args);
    c.envs(KEYS);
    c
}

pub(super) fn vg(ws: &Workspace, env: &str, args: &[&str]) -> Output {
    let out = command(ws, env, args).output().expect("run vitgraph");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Where the remote `lab` is: a folder, or a bucket on an S3 endpoint.
pub(super) enum Place {
    Dir(std::path::PathBuf),
    Bucket { url: String, endpoint: String },
}

/// A workspace measuring `n` configurations (see [`study`]) with the
/// remote `lab` at `place`.
pub(super) fn study_at(log_dir: &Path, n: usize, place: &Place) -> Workspace {
    match place {
        Place::Dir(remote) => study(log_dir, n, remote, ""),
        Place::Bucket { url, endpoint } => {
            let ws = study(log_dir, n, log_dir, "");
            std::fs::write(
                ws.path().join("vitgraph.ron"),
                format!(
                    r#"Workspace(remotes: {{"lab": Remote(url: "{url}", endpoint: "{endpoint}")}})"#
                ),
            )
            .unwrap();
            ws
        }
    }
}

/// Overwrites a read-only file the remote holds.
fn overwrite(path: &Path, text: &str) {
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(path, perms).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A workspace measuring `n` configurations (each appends to
/// `log_dir/measured.txt`) and summing them, with the remote `lab` at
/// `remote` (and `mode`).
pub(super) fn study(log_dir: &Path, n: usize, remote: &Path, mode: &str) -> Workspace {
    let values: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    let pipeline = format!(
        r#"Pipeline(stages: {{
    "bench": Stage(task: Command(run: "echo '{{\"v\": ${{n}}}}' > ${{out}}/results.json; echo ${{n}} >> {log}", outputs: ["results.json"], measure: true), matrix: {{"n": [{values}]}}),
    "sum": Stage(task: Command(run: "for d in ${{needs.bench}}; do cat $d/results.json; done > ${{out}}/s.txt", outputs: ["s.txt"]), needs: ["bench"]),
}})"#,
        log = log_dir.join("measured.txt").display(),
        values = values.join(", ")
    );
    let settings = format!(
        r#"Workspace(remotes: {{"lab": Remote(path: "{}"{mode})}})"#,
        remote.display()
    );
    Workspace::with_files(&[("pipelines/s.ron", &pipeline), ("vitgraph.ron", &settings)])
}

pub(super) fn measured(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("measured.txt"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

pub(super) fn ok(out: &Output) {
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

pub(super) fn verify(ws: &Workspace) -> Output {
    vg(ws, LAPTOP, &["remote", "verify"])
}

#[test]
fn a_laptop_pulls_what_a_gpu_host_pushed_and_measures_nothing() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(dir.path(), &Place::Dir(dir.path().join("remote")));
}

/// A GPU host builds and pushes (twice: nothing new the second time), a
/// laptop pulls one configuration, then the rest, and builds without
/// measuring; the laptop's workspace.
pub(super) fn round_trip(dir: &Path, place: &Place) -> Workspace {
    let gpu = study_at(dir, 2, place);
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    let pushed = vg(&gpu, GPU_HOST, &["push"]);
    ok(&pushed);
    assert!(
        pushed.stdout.contains("3 runs, 3 new there; 4 objects"),
        "{}",
        pushed.stdout
    );
    let again = vg(&gpu, GPU_HOST, &["push"]);
    assert!(
        again.stdout.contains("3 runs, 0 new there; 0 objects"),
        "{}",
        again.stdout
    );
    let v = verify(&gpu);
    ok(&v);
    assert!(
        v.stdout.contains("3 run records, 4 objects, 0 problems"),
        "{}",
        v.stdout
    );

    // Only what the targets need: one configuration.
    let laptop = study_at(dir, 2, place);
    let one = vg(&laptop, LAPTOP, &["pull", "bench[n=1]"]);
    ok(&one);
    assert!(one.stdout.contains("1 runs new here"), "{}", one.stdout);
    let state = vg(&laptop, LAPTOP, &["status", "--remote"]);
    ok(&state);
    assert!(
        state.stdout.contains("1 runs there too, 0 only here")
            && state.stdout.contains("2 nodes have 2 runs there"),
        "{}",
        state.stdout
    );
    let all = vg(&laptop, LAPTOP, &["pull"]);
    assert!(all.stdout.contains("2 runs new here"), "{}", all.stdout);
    let none = vg(&laptop, LAPTOP, &["pull"]);
    assert!(none.stdout.contains("0 runs new here"), "{}", none.stdout);

    ok(&vg(&laptop, LAPTOP, &["build"]));
    assert_eq!(measured(dir), 2, "the laptop measured");
    let s: serde_json::Value =
        serde_json::from_str(&vg(&laptop, LAPTOP, &["status", "--json"]).stdout).unwrap();
    assert_eq!(s["summary"]["fresh"], 3, "{s}");
    assert_eq!(s["summary"]["measured_elsewhere"], 2, "{s}");
    laptop
}

#[test]
fn a_read_only_remote_refuses_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let ws = study(dir.path(), 1, &remote, ", mode: Read");
    ok(&vg(&ws, GPU_HOST, &["build"]));
    let out = vg(&ws, GPU_HOST, &["push"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("read-only"), "{}", out.stderr);
    assert!(!remote.exists(), "a refused push wrote the remote");
}

#[test]
fn damage_on_the_remote_is_refused_on_arrival_and_found_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let gpu = study(dir.path(), 2, &remote, "");
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    ok(&vg(&gpu, GPU_HOST, &["push"]));
    // Rewrite one object (same length: only its bytes differ).
    let object = walkdir::WalkDir::new(remote.join("objects"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| {
            e.file_type().is_file()
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t == "{\"v\": 2}\n")
        })
        .expect("the remote holds the second result");
    overwrite(object.path(), "{\"v\": 7}\n");

    let v = verify(&gpu);
    assert_eq!(v.code, 1, "{}", v.stdout);
    assert!(
        v.stdout.contains("its bytes do not match its name"),
        "{}",
        v.stdout
    );

    let laptop = study(dir.path(), 2, &remote, "");
    // The run naming the damaged object is left out; the others arrive.
    let out = vg(&laptop, LAPTOP, &["pull"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("1 runs were not pulled")
            && out.stderr.contains("the run of `bench[n=2]`")
            && out.stderr.contains("arrived damaged"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("2 runs new here"), "{}", out.stdout);
    assert_eq!(
        std::fs::read_dir(laptop.path().join("cache/damaged"))
            .unwrap()
            .count(),
        1,
        "the damaged bytes are set aside"
    );
    let s: serde_json::Value =
        serde_json::from_str(&vg(&laptop, LAPTOP, &["status", "--json"]).stdout).unwrap();
    assert_eq!(s["summary"]["measured_elsewhere"], 1, "{s}");
}

#[test]
fn concurrent_pushes_leave_the_remote_consistent() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_pushes(dir.path(), &Place::Dir(dir.path().join("remote")));
}

/// Two hosts with the same study push the same objects at once, three
/// times; the remote is consistent after.
pub(super) fn concurrent_pushes(dir: &Path, place: &Place) {
    let a = study_at(dir, 20, place);
    let b = study_at(dir, 20, place);
    let host_b = GPU_HOST.replace("gpu-box", "gpu-box-2");
    ok(&vg(&a, GPU_HOST, &["build"]));
    ok(&vg(&b, &host_b, &["build"]));
    for _ in 0..3 {
        let pa = command(&a, GPU_HOST, &["push"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pb = command(&b, &host_b, &["push"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        for mut p in [pa, pb] {
            assert!(p.wait().unwrap().success());
        }
    }
    let v = verify(&a);
    ok(&v);
    // 20 measurements on each host (one key each: the host is not in the
    // key, the facets are equal), one sum.
    assert!(v.stdout.contains("21 run records"), "{}", v.stdout);
    assert!(v.stdout.contains(" 0 problems"), "{}", v.stdout);
}

/// The state a push killed right after it made the remote's folder
/// leaves (its `tmp/`, no `objects/` or `runs/` yet): an empty remote to
/// every command, not an unreadable one.
#[test]
fn a_remote_whose_first_push_died_before_any_object_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    std::fs::create_dir_all(remote.join("tmp")).unwrap();
    let ws = study(dir.path(), 2, &remote, "");
    let v = verify(&ws);
    ok(&v);
    assert!(v.stdout.contains(" 0 problems"), "{}", v.stdout);
    ok(&vg(&ws, GPU_HOST, &["build"]));
    ok(&vg(&ws, GPU_HOST, &["push"]));
    let v = verify(&ws);
    ok(&v);
    assert!(v.stdout.contains("3 run records"), "{}", v.stdout);
}

#[test]
fn a_push_killed_at_any_moment_leaves_the_remote_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let ws = study(dir.path(), 60, &remote, "");
    ok(&vg(&ws, GPU_HOST, &["build"]));
    // Kill pushes after growing delays: whichever moment each dies at, the
    // remote holds no record without its objects.
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let mut p = command(&ws, GPU_HOST, &["push"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = p.kill();
        let _ = p.wait();
        if remote.exists() {
            let v = verify(&ws);
            assert!(
                v.stdout.contains(" 0 problems"),
                "after {delay_ms} ms: {}{}",
                v.stdout,
                v.stderr
            );
        }
    }
    ok(&vg(&ws, GPU_HOST, &["push"]));
    let v = verify(&ws);
    ok(&v);
    assert!(v.stdout.contains("61 run records"), "{}", v.stdout);
    let laptop = study(dir.path(), 60, &remote, "");
    let pulled = vg(&laptop, LAPTOP, &["pull"]);
    ok(&pulled);
    assert!(
        pulled.stdout.contains("61 runs new here"),
        "{}",
        pulled.stdout
    );
}

#[test]
fn a_pull_killed_at_any_moment_leaves_the_store_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let gpu = study(dir.path(), 60, &remote, "");
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    ok(&vg(&gpu, GPU_HOST, &["push"]));
    let laptop = study(dir.path(), 60, &remote, "");
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let mut p = command(&laptop, LAPTOP, &["pull"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = p.kill();
        let _ = p.wait();
        // Whatever was recorded has its objects, intact.
        let v = vg(&laptop, LAPTOP, &["verify"]);
        assert_eq!(v.code, 0, "after {delay_ms} ms: {}{}", v.stdout, v.stderr);
    }
    ok(&vg(&laptop, LAPTOP, &["pull"]));
    ok(&vg(&laptop, LAPTOP, &["build"]));
    let s: serde_json::Value =
        serde_json::from_str(&vg(&laptop, LAPTOP, &["status", "--json"]).stdout).unwrap();
    assert_eq!(s["summary"]["fresh"], 61, "{s}");
    assert_eq!(measured(dir.path()), 60, "the laptop measured");
}

/// `remote gc` removes a node's superseded records and the objects only
/// they named — after a dry run, past the grace period, and never another
/// study's records.
#[test]
fn remote_gc_removes_superseded_runs_and_spares_other_studies() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let ws = study(dir.path(), 2, &remote, "");
    ok(&vg(&ws, GPU_HOST, &["build"]));
    ok(&vg(&ws, GPU_HOST, &["push"]));
    // Another study on the same remote.
    let other_pipeline = r#"Pipeline(stages: {
    "other": Stage(task: Command(run: "echo other > ${out}/o.txt", outputs: ["o.txt"])),
})"#;
    let settings = format!(
        r#"Workspace(remotes: {{"lab": Remote(path: "{}")}})"#,
        remote.display()
    );
    let other = Workspace::with_files(&[
        ("pipelines/o.ron", other_pipeline),
        ("vitgraph.ron", &settings),
    ]);
    ok(&vg(&other, GPU_HOST, &["build"]));
    ok(&vg(&other, GPU_HOST, &["push"]));
    // Measured again: every bench node writes another result (new keys,
    // and a new sum).
    let ron = std::fs::read_to_string(ws.path().join("pipelines/s.ron")).unwrap();
    std::fs::write(
        ws.path().join("pipelines/s.ron"),
        ron.replace("{\\\"v\\\": ${n}}", "{\\\"v\\\": ${n}, \\\"again\\\": 1}"),
    )
    .unwrap();
    ok(&vg(&ws, GPU_HOST, &["build"]));
    ok(&vg(&ws, GPU_HOST, &["push"]));
    let records = || std::fs::read_dir(remote.join("runs")).unwrap().count();
    assert_eq!(
        records(),
        7,
        "3 runs, 3 measured again, 1 of the other study"
    );

    // Within the grace period nothing goes.
    let kept = vg(&ws, GPU_HOST, &["remote", "gc", "--apply"]);
    ok(&kept);
    assert!(
        kept.stdout.contains("removed 0 superseded run records"),
        "{}",
        kept.stdout
    );
    // A dry run says what would go and removes nothing.
    let dry = vg(&ws, GPU_HOST, &["remote", "gc", "--keep-days", "0"]);
    ok(&dry);
    assert!(
        dry.stdout.contains("would remove 3 superseded run records"),
        "{}",
        dry.stdout
    );
    assert_eq!(records(), 7);
    let gc = vg(
        &ws,
        GPU_HOST,
        &["remote", "gc", "--keep-days", "0", "--apply"],
    );
    ok(&gc);
    assert!(
        gc.stdout.contains("removed 3 superseded run records"),
        "{}",
        gc.stdout
    );
    assert!(
        !gc.stdout.contains(" 0 objects no record names"),
        "{}",
        gc.stdout
    );
    assert_eq!(records(), 4);
    let v = verify(&ws);
    ok(&v);
    assert!(
        v.stdout.contains("4 run records") && v.stdout.contains(" 0 problems"),
        "{}",
        v.stdout
    );
    // Both studies still pull whole.
    for (study_ws, n) in [(&ws, 3), (&other, 1)] {
        let fresh = Workspace::with_files(&[]);
        for entry in walkdir::WalkDir::new(study_ws.path().join("pipelines")).min_depth(1) {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(study_ws.path()).unwrap();
            std::fs::copy(entry.path(), fresh.path().join(rel)).unwrap();
        }
        std::fs::copy(
            study_ws.path().join("vitgraph.ron"),
            fresh.path().join("vitgraph.ron"),
        )
        .unwrap();
        let pulled = vg(&fresh, LAPTOP, &["pull"]);
        ok(&pulled);
        assert!(
            pulled.stdout.contains(&format!("{n} runs new here")),
            "{}",
            pulled.stdout
        );
    }
}

/// Pushed signed, pulled where signatures are required: each record's
/// signature is checked on arrival; one altered on the remote is refused.
#[test]
fn signed_pushes_are_checked_when_pulled() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let gpu = study(dir.path(), 2, &remote, "");
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    let keygen = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
        .args(["key", "generate", "gpu-lab"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let text = String::from_utf8_lossy(&keygen.stdout).into_owned();
    let public = text
        .split('"')
        .find(|w| w.starts_with("ed25519:"))
        .unwrap()
        .to_owned();
    let key = dir.path().join("gpu-lab.vitgraph-key");
    ok(&vg(
        &gpu,
        GPU_HOST,
        &["push", "--sign", key.to_str().unwrap()],
    ));

    let strict = |ws_dir: &Path| {
        let settings = format!(
            r#"Workspace(remotes: {{"lab": Remote(path: "{}")}}, trusted_keys: {{"gpu-lab": "{public}"}}, require_signed: true)"#,
            remote.display()
        );
        std::fs::write(ws_dir.join("vitgraph.ron"), settings).unwrap();
    };
    let laptop = study(dir.path(), 2, &remote, "");
    strict(laptop.path());
    let pulled = vg(&laptop, LAPTOP, &["pull"]);
    ok(&pulled);
    assert!(
        pulled.stdout.contains("3 signed (signatures checked)"),
        "{}",
        pulled.stdout
    );

    // Alter the host in one record on the remote.
    let record = std::fs::read_dir(remote.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains("gpu-box"))
        .unwrap();
    let text = std::fs::read_to_string(&record).unwrap();
    overwrite(&record, &text.replace("gpu-box", "gpu-bax"));
    let laptop = study(dir.path(), 2, &remote, "");
    strict(laptop.path());
    let out = vg(&laptop, LAPTOP, &["pull"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("does not match it"), "{}", out.stderr);
}

/// `status --remote` says which runs the remote holds too, which are only
/// here and which only there; a remote that cannot be read is a warning.
#[test]
fn status_says_where_runs_are() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let gpu = study(dir.path(), 2, &remote, "");
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    let remote_json = |ws: &Workspace, env: &str| {
        let out = vg(ws, env, &["status", "--remote", "--json"]);
        ok(&out);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        v["remote"].clone()
    };
    let before = remote_json(&gpu, GPU_HOST);
    assert!(
        before["error"].as_str().unwrap().contains("does not exist"),
        "{before}"
    );
    ok(&vg(&gpu, GPU_HOST, &["push", "bench[n=1]"]));
    let r = remote_json(&gpu, GPU_HOST);
    assert_eq!(r["both"], 1, "{r}");
    assert_eq!(r["local_only"].as_array().unwrap().len(), 2, "{r}");
    let text = vg(&gpu, GPU_HOST, &["status", "--remote"]).stdout;
    assert!(
        text.contains("remote `lab`: 1 runs there too, 2 only here (`vitgraph push` sends them)"),
        "{text}"
    );
    let laptop = study(dir.path(), 2, &remote, "");
    let r = remote_json(&laptop, LAPTOP);
    assert_eq!(r["remote_only"]["bench[n=1]"], 1, "{r}");
    assert_eq!(r["both"], 0, "{r}");
}

/// A remote that is neither a folder nor a bucket, or both, is a usage
/// error naming `vitgraph.ron`, the remote and the fix.
#[test]
fn a_remote_must_be_a_folder_or_a_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let ws = study(dir.path(), 1, &dir.path().join("remote"), "");
    for (settings, says) in [
        (
            r#"Workspace(remotes: {"lab": Remote()})"#,
            "names neither `path` nor `url`",
        ),
        (
            r#"Workspace(remotes: {"lab": Remote(path: "/x", url: "s3://b")})"#,
            "names both `path` and `url`",
        ),
        (
            r#"Workspace(remotes: {"lab": Remote(url: "http://b")})"#,
            "is not an S3 address",
        ),
    ] {
        std::fs::write(ws.path().join("vitgraph.ron"), settings).unwrap();
        let out = vg(&ws, GPU_HOST, &["pull"]);
        assert_eq!(out.code, 2, "{settings}: {}", out.stderr);
        assert!(
            out.stderr.contains("`vitgraph.ron`: remote `lab`") && out.stderr.contains(says),
            "{settings}: {}",
            out.stderr
        );
    }
}

/// `remote gc` keeps each node's newest `--keep-last` records, and the
/// runs a baseline saved here names whatever their age.
#[test]
fn remote_gc_keeps_the_last_records_and_what_a_baseline_names() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let ws = study(dir.path(), 2, &remote, "");
    let generation = |k: usize| {
        let ron = std::fs::read_to_string(ws.path().join("pipelines/s.ron")).unwrap();
        let (head, tail) = ron.split_once("${n}").unwrap();
        std::fs::write(
            ws.path().join("pipelines/s.ron"),
            format!(
                "{head}${{n}}{}{tail}",
                if k > 1 { format!("{k}") } else { String::new() }
            ),
        )
        .unwrap();
        ok(&vg(&ws, GPU_HOST, &["build"]));
        ok(&vg(&ws, GPU_HOST, &["push"]));
    };
    generation(1);
    ok(&vg(&ws, GPU_HOST, &["baseline", "save", "first"]));
    generation(2);
    generation(3);
    let records = || std::fs::read_dir(remote.join("runs")).unwrap().count();
    assert_eq!(records(), 9, "three generations of three runs");
    let gc = |args: &[&str]| {
        let mut all = vec!["remote", "gc", "--keep-days", "0", "--apply"];
        all.extend_from_slice(args);
        let out = vg(&ws, GPU_HOST, &all);
        ok(&out);
        out.stdout
    };
    // The baseline holds the two measurements (a baseline saves runs with
    // a `results.json`), not the sum: generation 1's sum goes.
    let two = gc(&["--keep-last", "2"]);
    assert!(
        two.contains("removed 1 superseded run records")
            && two.contains("(2 of them only because a baseline here names them)"),
        "{two}"
    );
    assert_eq!(records(), 8);
    let one = gc(&[]);
    assert!(one.contains("removed 3 superseded run records"), "{one}");
    assert_eq!(records(), 5, "the newest three and the baseline's two");
    ok(&vg(&ws, GPU_HOST, &["baseline", "rm", "first"]));
    let gone = gc(&[]);
    assert!(gone.contains("removed 2 superseded run records"), "{gone}");
    assert_eq!(records(), 3);
    let v = verify(&ws);
    ok(&v);
    assert!(v.stdout.contains(" 0 problems"), "{}", v.stdout);
    let zero = vg(&ws, GPU_HOST, &["remote", "gc", "--keep-last", "0"]);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
}
