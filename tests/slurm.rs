//! `vitgraph build --executor slurm` against a real SLURM (slurmctld,
//! slurmd and munge on this machine, fake GPUs through gres), as
//! `scripts/slurm-setup.sh` starts it. Without a SLURM the tests are
//! skipped, saying why — unless `VITGRAPH_REQUIRE_SLURM=1` (CI), where a
//! missing SLURM fails them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `vitgraph` users run, which the jobs run too: built without libtorch
/// (`$VITGRAPH_LEAN_EXE` when the tests' own binary links it, whose start
/// alone outgrows a test cluster's default 100 MB per job).
fn bin() -> std::ffi::OsString {
    std::env::var_os("VITGRAPH_LEAN_EXE").unwrap_or_else(|| env!("CARGO_BIN_EXE_vitgraph").into())
}

/// Whether a SLURM answers here; panics when one is required and absent.
fn slurm() -> bool {
    let up = Command::new("scontrol")
        .arg("ping")
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("UP"))
        .unwrap_or(false);
    if !up {
        if std::env::var_os("VITGRAPH_REQUIRE_SLURM").is_some_and(|v| v == "1") {
            panic!("VITGRAPH_REQUIRE_SLURM=1 but no SLURM answers `scontrol ping` (start one with scripts/slurm-setup.sh)");
        }
        eprintln!("skipped: no SLURM here (`scontrol ping` does not answer); start one with `SLURM_CPUS=16 scripts/slurm-setup.sh`");
    }
    up
}

struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new(pipeline: &str) -> Ws {
        // Under the target directory, not /tmp: a real cluster's compute
        // nodes see the workspace through a shared file system.
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let dir = tempfile::Builder::new()
            .prefix("slurm-")
            .tempdir_in(base)
            .unwrap();
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        std::fs::write(dir.path().join("pipelines/p.ron"), pipeline).unwrap();
        Ws { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.arg("-C")
            .arg(self.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("VITGRAPH_NO_PROGRESS", "1")
            .env_remove("VITGRAPH_FAKE_ENV");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_default()
    }

    /// Lines of `side.log`: one per command run, written by the commands.
    fn ran(&self) -> Vec<String> {
        let mut v: Vec<String> = self.read("side.log").lines().map(String::from).collect();
        v.sort();
        v
    }

    /// This workspace's jobs still pending or running.
    fn queued(&self) -> Vec<String> {
        let name = job_name(self.path());
        let out = Command::new("squeue")
            .args([
                "-h",
                "-r",
                "-t",
                "pending,running,configuring,completing",
                "--name",
                &name,
                "-o",
                "%i",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }
}

fn job_name(root: &Path) -> String {
    vitgraph::slurm::job_name(&root.canonicalize().unwrap())
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn events(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every file under `out/`, by path, with its bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root.join("out"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// CPU nodes, GPU nodes (one GPU each), and a summary of them all.
fn mixed(n: usize) -> String {
    let values = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        r#"Pipeline(stages: {{
    "cpu": Stage(matrix: {{"i": [{values}]}},
        task: Command(run: "echo cpu-${{i}} >> side.log; echo $(( ${{i}} * 3 )) > ${{out}}/v.txt", outputs: ["v.txt"])),
    "gpu": Stage(for_each: "cpu",
        task: Command(run: "echo gpu-${{i}} >> side.log; test -n \"$CUDA_VISIBLE_DEVICES\" && echo $(( $(cat ${{needs.cpu}}/v.txt) + 1 )) > ${{out}}/w.txt", outputs: ["w.txt"], resources: (gpus: 1))),
    "sum": Stage(needs: ["gpu"],
        task: Command(run: "echo sum >> side.log; cat $(for d in ${{needs.gpu}}; do echo $d/w.txt; done) | paste -sd+ | bc > ${{out}}/sum.txt", outputs: ["sum.txt"])),
}})"#
    )
}

#[test]
fn a_study_builds_on_slurm_as_it_does_locally() {
    if !slurm() {
        return;
    }
    let n = 30;
    let ws = Ws::new(&mixed(n));
    let o = ws.run(&["build", "--executor", "slurm", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Every node ran once.
    let ran = ws.ran();
    assert_eq!(ran.len(), 2 * n + 1, "{ran:?}");
    let unique: std::collections::HashSet<&String> = ran.iter().collect();
    assert_eq!(unique.len(), 2 * n + 1);
    let expected: usize = (0..n).map(|i| 3 * i + 1).sum();
    assert_eq!(ws.read("out/sum/sum.txt").trim(), expected.to_string());
    // Byte for byte what a local build makes.
    let local = Ws::new(&mixed(n));
    let o = local.run(&["build", "--gpus", "0,1,2,3"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(tree(ws.path()), tree(local.path()));
    // Fresh on SLURM and locally alike; nothing left in the queue.
    let o = ws.run(&["build", "--executor", "slurm", "--json"]);
    let done = events(&o)
        .into_iter()
        .find(|e| e["event"] == "done")
        .unwrap();
    assert_eq!(done["built"], 0, "{}", text(&o));
    assert!(ws.queued().is_empty());
    assert_eq!(ws.run(&["verify"]).status.code(), Some(0));
    assert!(
        !ws.path().join("cache/jobs").read_dir().unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .parse::<u64>()
                .is_ok()
        }),
        "job directories are removed once their runs are recorded"
    );
    // The page's timeline draws each node in the lane of the SLURM job it ran as.
    let page = ws.path().join("cache/page.html");
    let o = ws.run(&["report", "-o", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let lanes: Vec<&str> = html
        .split("<text class=\"lane\"")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .and_then(|(_, r)| r.split_once('<'))
                .map(|(l, _)| l)
        })
        .collect();
    assert_eq!(lanes.len(), 2 * n + 1, "a lane per job: {lanes:?}");
    assert!(lanes.iter().all(|l| l.starts_with("job:")), "{lanes:?}");
    assert_eq!(html.matches("<rect class=\"bar ").count(), 2 * n + 1);
}

#[test]
fn a_job_that_exits_3_fails_its_node_with_the_job_named() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: {
            "bad": Stage(task: Command(run: "echo going wrong; exit 3", outputs: ["x"])),
            "after": Stage(needs: ["bad"], task: Command(run: "touch ${out}/y", outputs: ["y"])),
        })"#,
    );
    let o = ws.run(&["build", "--executor", "slurm", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let failed = events(&o)
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["kind"], "exit");
    assert_eq!(failed["exit_code"], 3);
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("SLURM job "), "{error}");
    assert!(error.contains("going wrong"), "the log tail: {error}");
    assert!(
        failed["log"].as_str().unwrap().contains("cache/jobs/"),
        "{failed}"
    );
    // A failed attempt records no measurement.
    let s = ws.run(&["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(s["summary"]["fresh"], 0);
}

#[test]
fn sigint_cancels_every_job_and_exits_130() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: {
            "slow": Stage(matrix: {"i": [1, 2, 3, 4]}, task: Command(run: "echo ${i} >> started.log; sleep 120", outputs: ["x"])),
        })"#,
    );
    let mut child = ws
        .cmd(&["build", "--executor", "slurm"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while ws.read("started.log").lines().count() < 4 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the jobs never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let t = Instant::now();
    while !ws.queued().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "jobs left: {:?}",
            ws.queued()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let s = ws.run(&["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    let kinds: Vec<&str> = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["reasons"][0]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["interrupted"; 4], "{s}");
}

/// Polls until `f` holds, or panics after `limit`.
fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_job_cancelled_from_outside_fails_its_node_as_cancelled() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: { "n": Stage(task: Command(run: "touch started; sleep 120", outputs: ["x"])) })"#,
    );
    let child = ws
        .cmd(&["build", "--executor", "slurm", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(60), "the job to start", || {
        ws.path().join("started").exists()
    });
    let ids = ws.queued();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let s = Command::new("scancel").arg(&ids[0]).status().unwrap();
    assert!(s.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let failed = events(&o)
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["kind"], "cancelled", "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains(&ids[0]),
        "{failed}"
    );
}

/// A chain of sleeping jobs: `a[i]` → `b[i]` → `all`.
fn sleepy(n: usize, sleep: &str) -> String {
    let values = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        r#"Pipeline(stages: {{
    "a": Stage(matrix: {{"i": [{values}]}},
        task: Command(run: "echo a-${{i}} >> side.log; sleep {sleep}; echo ${{i}} > ${{out}}/v.txt", outputs: ["v.txt"])),
    "b": Stage(for_each: "a",
        task: Command(run: "echo b-${{i}} >> side.log; sleep {sleep}; cat ${{needs.a}}/v.txt > ${{out}}/v.txt", outputs: ["v.txt"])),
    "all": Stage(needs: ["b"],
        task: Command(run: "echo all >> side.log; cat $(for d in ${{needs.b}}; do echo $d/v.txt; done) > ${{out}}/v.txt", outputs: ["v.txt"])),
}})"#
    )
}

#[test]
fn a_driver_killed_at_any_moment_is_followed_by_one_that_reruns_nothing() {
    if !slurm() {
        return;
    }
    let n = 6;
    for (trial, delay_ms) in [300u64, 900, 1700, 2600, 3800].into_iter().enumerate() {
        let ws = Ws::new(&sleepy(n, "1"));
        let mut child = ws
            .cmd(&["build", "--executor", "slurm"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL: no chance to clean up
        child.wait().unwrap();
        let o = ws.run(&["build", "--executor", "slurm"]);
        assert_eq!(o.status.code(), Some(0), "trial {trial}: {}", text(&o));
        // Every command ran exactly once, across both drivers.
        let ran = ws.ran();
        let mut unique = ran.clone();
        unique.dedup();
        assert_eq!(
            ran, unique,
            "trial {trial} (kill after {delay_ms} ms): a node ran twice"
        );
        assert_eq!(ran.len(), 2 * n + 1, "trial {trial}: {ran:?}");
        assert_eq!(ws.read("out/all/v.txt").lines().count(), n);
        // Nothing left behind. A job whose task has ended may still be
        // `completing` for a moment while slurmd cleans up after it.
        let drained = (0..50).any(|_| {
            let empty = ws.queued().is_empty();
            if !empty {
                std::thread::sleep(Duration::from_millis(200));
            }
            empty
        });
        assert!(
            drained,
            "trial {trial}: still queued after 10 s: {:?}",
            ws.queued()
        );
        assert_eq!(
            ws.ran().len(),
            2 * n + 1,
            "trial {trial}: a job ran after the build"
        );
        assert_eq!(ws.run(&["verify"]).status.code(), Some(0), "trial {trial}");
    }
}

#[test]
fn detach_submits_and_exits_status_shows_the_jobs_and_build_collects_them() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(&sleepy(3, "2"));
    let o = ws.run(&["build", "--executor", "slurm", "--detach", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let detached: Vec<String> = events(&o)
        .into_iter()
        .filter(|e| e["event"] == "detached")
        .map(|e| e["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(detached, ["a[i=0]", "a[i=1]", "a[i=2]"]);
    assert_eq!(ws.queued().len(), 3, "the jobs run on");
    // `status` lists them with their job ids.
    let s = ws.run(&["status"]);
    let out = String::from_utf8_lossy(&s.stdout).to_string();
    assert!(out.contains("on the cluster (3 jobs"), "{out}");
    assert!(out.contains("a[i=1]  SLURM job "), "{out}");
    let s = ws.run(&["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(s["jobs"].as_array().unwrap().len(), 3, "{s}");
    assert!(s["jobs"][0]["job_id"].as_str().unwrap().contains('_'));
    // Once they are done, `status` records them without running anything.
    wait_for(Duration::from_secs(60), "the detached jobs", || {
        ws.queued().is_empty()
    });
    let s = ws.run(&["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert!(s.get("jobs").is_none(), "{s}");
    assert_eq!(s["summary"]["fresh"], 3, "{s}");
    // The next build goes on from there.
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(ws.ran().len(), 7);
}

#[test]
fn a_build_survives_slurmctld_restarting() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(&sleepy(4, "3"));
    let child = ws
        .cmd(&["build", "--executor", "slurm"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(60), "the first jobs", || {
        ws.read("side.log").lines().count() >= 4
    });
    let pid = std::fs::read_to_string("/run/slurm/slurmctld.pid").unwrap();
    let pid: i32 = pid.trim().parse().unwrap();
    // SAFETY: kill(2) on slurmctld, which this test's SLURM runs as a daemon.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    wait_for(Duration::from_secs(30), "slurmctld to stop", || {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) != 0 }
    });
    std::thread::sleep(Duration::from_secs(2));
    let s = Command::new("/usr/sbin/slurmctld").status().unwrap();
    assert!(s.success(), "slurmctld restarts");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(ws.ran().len(), 9);
}

#[test]
fn without_sacct_on_path_everything_still_works() {
    if !slurm() {
        return;
    }
    // A PATH with every program of /usr/bin but sacct.
    let bin = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir("/usr/bin").unwrap().flatten() {
        if e.file_name() != "sacct" {
            let _ = std::os::unix::fs::symlink(e.path(), bin.path().join(e.file_name()));
        }
    }
    let ws = Ws::new(
        r#"Pipeline(stages: {
            "ok": Stage(task: Command(run: "echo fine > ${out}/v.txt", outputs: ["v.txt"])),
            "gone": Stage(task: Command(run: "touch started; sleep 120", outputs: ["x"])),
        })"#,
    );
    let child = ws
        .cmd(&["build", "--executor", "slurm", "-k", "--json"])
        .env("PATH", bin.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(60), "the job to start", || {
        ws.path().join("started").exists()
    });
    for id in ws.queued() {
        Command::new("scancel").arg(id).status().unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(ws.read("out/ok/v.txt"), "fine\n");
    let failed = events(&o)
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["node"], "gone");
    assert_eq!(failed["kind"], "cancelled", "{failed}");
}

#[test]
fn a_job_over_its_time_limit_fails_as_time() {
    if !slurm() {
        return;
    }
    // SLURM rounds limits up to whole minutes and checks them about every
    // 30 s: this takes a minute and a half.
    let ws = Ws::new(
        r#"Pipeline(stages: {
            "slow": Stage(slurm: (time: "1"), task: Command(run: "sleep 300", outputs: ["x"])),
        })"#,
    );
    let o = ws.run(&["build", "--executor", "slurm", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let failed = events(&o)
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["kind"], "time", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("reached its time limit"), "{error}");
    assert!(
        error.contains("TIME LIMIT"),
        "SLURM's line from the job's log: {error}"
    );
}

#[test]
fn bad_cluster_settings_are_load_errors_with_the_place_and_the_fix() {
    let ws = Ws::new(
        r#"Pipeline(stages: { "n": Stage(slurm: (mem: "16GB"), task: Command(run: "true", outputs: [])) })"#,
    );
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`16GB` is not a SLURM memory size"), "{err}");
    assert!(err.contains("pipelines/p.ron:1:"), "{err}");
    assert!(err.contains("`16G`"), "{err}");
    let ws =
        Ws::new(r#"Pipeline(stages: { "n": Stage(task: Command(run: "true", outputs: [])) })"#);
    std::fs::write(
        ws.path().join("vitgraph.ron"),
        "Workspace(slurm: Slurm(partiton: \"gpu\"))",
    )
    .unwrap();
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("vitgraph.ron:1:"), "{err}");
    assert!(err.contains("partition"), "did you mean: {err}");
    std::fs::remove_file(ws.path().join("vitgraph.ron")).unwrap();
    let o = ws.run(&["build", "--executor", "slurm", "--time", "1h"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`--time`"));
}

#[test]
fn hardware_nodes_are_keyed_with_the_compute_nodes_environment() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: {
            "bench": Stage(matrix: {"i": [1, 2]}, task: Command(run: "echo ${i} > ${out}/r.txt", outputs: ["r.txt"], resources: (gpus: 1))),
        })"#,
    );
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = ws.run(&["explain", "--json", "--executor", "slurm", "bench[i=1]"]);
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let source = e["env_source"].as_str().unwrap();
    assert!(source.starts_with("compute node `"), "{source}");
    assert!(source.contains("--gres=gpu:1"), "{source}");
    assert_eq!(e["state"], "fresh");
    // A probe that no longer matches the compute nodes: the job refuses to
    // record under the wrong key, and the probe is taken again next time.
    let db = rusqlite::Connection::open(ws.path().join("cache/state.sqlite")).unwrap();
    let facets: String = db
        .query_row("SELECT facets FROM env_probes", [], |r| r.get(0))
        .unwrap();
    let mut f: BTreeMap<String, String> = serde_json::from_str(&facets).unwrap();
    f.insert("gpu".into(), "Imaginary X1".into());
    db.execute(
        "UPDATE env_probes SET facets = ?1",
        [serde_json::to_string(&f).unwrap()],
    )
    .unwrap();
    drop(db);
    let o = ws.run(&["status", "--json", "--executor", "slurm"]);
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["nodes"][0]["reasons"][0]["kind"], "env_changed", "{s}");
    let o = ws.run(&["build", "--executor", "slurm", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let failed = events(&o)
        .into_iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["kind"], "key", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("gpu Imaginary X1 →"),
        "{failed}"
    );
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(0), "probed again: {}", text(&o));
}

/// A CPU stage, and a GPU stage asking for a partition that does not exist.
const BAD_GPU_PARTITION: &str = r#"Pipeline(stages: {
    "a": Stage(matrix: {"i": [0, 1]}, task: Command(run: "echo ${i} > ${out}/v.txt", outputs: ["v.txt"])),
    "g": Stage(slurm: (partition: "nosuch"), task: Command(run: "true > ${out}/w.txt", outputs: ["w.txt"], resources: (gpus: 1))),
})"#;

#[test]
fn a_failed_probe_fails_only_the_nodes_that_need_it() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(BAD_GPU_PARTITION);
    // `a` does not need `g`: its probe is not even asked for.
    let o = ws.run(&["build", "--executor", "slurm", "a"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(ws.read("out/a/i=1/v.txt"), "1\n");
    // Everything, going on past failures: `a` is fresh, `g` fails with the cause and the fix.
    let ws = Ws::new(BAD_GPU_PARTITION);
    let o = ws.run(&["build", "--executor", "slurm", "-k", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let ev = events(&o);
    let finished: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "finished")
        .map(|e| e["node"].as_str().unwrap())
        .collect();
    assert_eq!(finished.len(), 2, "{}", text(&o));
    let failed = ev.iter().find(|e| e["event"] == "failed").unwrap();
    assert_eq!(failed["node"], "g");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("invalid partition"), "{error}");
    assert!(error.contains("check the partition"), "{error}");
}

#[test]
fn a_job_slurm_refuses_names_no_log_it_never_wrote() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: { "a": Stage(task: Command(run: "echo a > ${out}/v.txt", outputs: ["v.txt"])) })"#,
    );
    std::fs::write(
        ws.path().join("vitgraph.ron"),
        r#"Workspace(slurm: Slurm(partition: "gpuq"))"#,
    )
    .unwrap();
    let o = ws.run(&["build", "--executor", "slurm"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("SLURM refused the job"), "{err}");
    assert!(!err.contains("full log"), "{err}");
}

/// Stops munged (as `scripts/slurm-setup.sh` runs it) and returns a guard
/// that starts it again.
struct MungeDown;

impl MungeDown {
    fn now() -> MungeDown {
        let pid = std::fs::read_to_string("/run/munge/munged.pid").unwrap();
        let pid: i32 = pid.trim().parse().unwrap();
        // SAFETY: kill(2) on munged, which this test's SLURM runs as a daemon.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        wait_for(Duration::from_secs(30), "munged to stop", || {
            // SAFETY: signal 0 only checks that the process exists.
            unsafe { libc::kill(pid, 0) != 0 }
        });
        MungeDown
    }
}

impl Drop for MungeDown {
    fn drop(&mut self) {
        let s = Command::new("runuser")
            .args([
                "-u",
                "munge",
                "--",
                "/usr/sbin/munged",
                "--pid-file=/run/munge/munged.pid",
            ])
            .status()
            .unwrap();
        assert!(s.success(), "munged restarts");
    }
}

#[test]
fn submissions_wait_out_munge_being_down() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: {
    "a": Stage(matrix: {"i": [0, 1, 2]}, task: Command(run: "echo a-${i} >> side.log; sleep 6; echo ${i} > ${out}/v.txt", outputs: ["v.txt"])),
    "b": Stage(for_each: "a", task: Command(run: "echo b-${i} >> side.log; cat ${needs.a}/v.txt > ${out}/w.txt", outputs: ["w.txt"])),
    "g": Stage(needs: ["b"], task: Command(run: "true > ${out}/p.txt", outputs: ["p.txt"], resources: (gpus: 1))),
})"#,
    );
    let child = ws
        .cmd(&["build", "--executor", "slurm"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(60), "the first jobs", || {
        ws.read("side.log").lines().count() >= 3
    });
    // While `a` runs, munge goes down: `b` is submitted into the outage.
    let down = MungeDown::now();
    std::thread::sleep(Duration::from_secs(15));
    drop(down);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(ws.ran().len(), 6);
    assert_eq!(ws.read("out/b/i=2/w.txt"), "2\n");
}

#[test]
fn a_probe_waits_out_munge_being_down() {
    if !slurm() {
        return;
    }
    let ws = Ws::new(
        r#"Pipeline(stages: { "g": Stage(task: Command(run: "true > ${out}/p.txt", outputs: ["p.txt"], resources: (gpus: 1))) })"#,
    );
    let down = MungeDown::now();
    let child = ws
        .cmd(&["build", "--executor", "slurm"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(5));
    drop(down);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
