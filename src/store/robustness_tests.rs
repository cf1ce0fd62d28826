//! Tests of the store under stress: concurrent writers, a full disk, and a
//! writer killed with SIGKILL at random instants.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::test_support::{commit, key, new_run, stage};
use super::{AttemptStatus, Store};

#[test]
fn two_handles_commit_concurrently_from_threads() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let root = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let store = Store::open(&root).unwrap();
                for i in 0..20 {
                    let own = format!("{t}-{i}");
                    commit(
                        &store,
                        &format!("own[t={t},i={i}]"),
                        &own,
                        &[("v.txt", &own), ("same.txt", "same")],
                    );
                    // Both threads build the same key: the key lock makes one
                    // build it and the other adopt the record.
                    let shared = format!("shared-{i}");
                    let _lock = store.journal().lock_key(&key(&shared)).unwrap();
                    if store.reader().run_for_key(&key(&shared)).unwrap().is_none() {
                        commit(
                            &store,
                            &format!("shared[i={i}]"),
                            &shared,
                            &[("v.txt", &format!("by {t}"))],
                        );
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer thread");
    }
    let store = Store::open(dir.path()).unwrap();
    let states = store.reader().load_states().unwrap();
    assert_eq!(states.len(), 60);
    assert!(states.values().all(|s| s.latest_success.is_some()));
    let runs: i64 = store
        .conn()
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 60, "each shared key recorded once");
    assert!(store.objects().verify().unwrap().is_empty());
}

/// Unmounts on drop, so a failing test leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_small_tmpfs(at: &Path) -> Result<Mount, String> {
    fs::create_dir_all(at).map_err(|e| e.to_string())?;
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "vitgraph-test"])
        .arg(at)
        .output()
        .map_err(|e| format!("cannot run `mount`: {e}"))?;
    if out.status.success() {
        Ok(Mount(at.to_path_buf()))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn fill(path: &Path) {
    let mut file = fs::File::create(path).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    while file.write_all(&chunk).is_ok() {}
    let _ = file.sync_all();
}

#[test]
fn a_full_disk_fails_the_commit_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let _mount = match mount_small_tmpfs(&root) {
        Ok(mount) => mount,
        Err(reason) => {
            eprintln!("skipped: cannot mount a small tmpfs ({reason})");
            return;
        }
    };
    let store = Store::open(&root).unwrap();
    commit(&store, "ok", "k0", &[("v.txt", "1")]);
    let staging = stage(&store, &[("data.txt", "payload")]);
    let attempt = store.journal().begin_attempt("big", &key("k1")).unwrap();
    fill(&root.join("filler"));

    // Large key parts make the WAL grow, which a full disk refuses.
    let parts = json!({ "blob": "y".repeat(300_000) });
    let (outputs, env) = (vec!["data.txt".to_string()], json!({}));
    let err = store
        .objects()
        .commit_success(
            attempt,
            new_run("big", key("k1"), &parts, &outputs, &env),
            &staging,
        )
        .expect_err("a full disk must fail the commit");
    assert!(err.is_disk_full(), "{err:?}");
    let help = miette::Diagnostic::help(&err)
        .map(|h| h.to_string())
        .unwrap_or_default();
    assert!(
        err.to_string().contains(&root.display().to_string()),
        "names the path: {err}"
    );
    assert!(help.contains("full"), "{help}");

    fs::remove_file(root.join("filler")).unwrap();
    drop(store);
    let store = Store::open(&root).unwrap();
    let ok: String = store
        .conn()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let states = store.reader().load_states().unwrap();
    assert!(states["ok"].latest_success.is_some());
    assert!(
        states["big"].latest_success.is_none(),
        "nothing half-recorded"
    );
    assert!(store.reader().run_for_key(&key("k1")).unwrap().is_none());
    assert!(store.objects().verify().unwrap().is_empty());
    assert_eq!(
        store.objects().gc().unwrap().objects_removed,
        0,
        "the copy into the store is what the full disk refused: no object was left"
    );
}

const CRASH_ROOT: &str = "VITGRAPH_STORE_CRASH_ROOT";

/// The writer of `commits_survive_sigkill_at_any_instant`: commits nodes until
/// killed. Does nothing unless started by that test.
#[test]
fn crash_writer() {
    let Some(root) = std::env::var_os(CRASH_ROOT) else {
        return;
    };
    let store = Store::open(Path::new(&root)).unwrap();
    let me = std::process::id();
    // Started (a test binary linked with libtorch takes half a second to):
    // from now on the parent's timer measures commits, not start-up.
    fs::write(Path::new(&root).join(format!("ready-{me}")), "").unwrap();
    for i in 0.. {
        let content = format!("{me}-{i}");
        let big = "z".repeat(i % 7 * 40_000);
        let (id, seed) = (format!("n[p={me},i={i}]"), format!("{me}/{i}"));
        commit(
            &store,
            &id,
            &seed,
            &[("a.txt", &content), ("b/big.txt", &big), ("c.txt", "same")],
        );
        let run = store.reader().run_for_key(&key(&seed)).unwrap().unwrap();
        store
            .objects()
            .materialize(&id, "n", &run, &Path::new(&root).join("out/n").join(&id))
            .unwrap();
    }
}

#[test]
fn commits_survive_sigkill_at_any_instant() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut recorded = 0;
    for round in 0..6u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "store::robustness_tests::crash_writer",
                "--test-threads",
                "1",
            ])
            .env(CRASH_ROOT, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let ready = dir.path().join(format!("ready-{}", child.id()));
        let started = std::time::Instant::now();
        while !ready.exists() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(150 + 37 * round));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let store = Store::open(dir.path()).unwrap();
        let ok: String = store
            .conn()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        assert!(
            store.objects().verify().unwrap().is_empty(),
            "round {round}: a recorded run lost an object"
        );
        let states = store.reader().load_states().unwrap();
        recorded = states
            .values()
            .filter(|s| s.latest_success.is_some())
            .count();
        for (id, state) in &states {
            if let Some(attempt) = &state.last_attempt {
                assert_ne!(
                    attempt.status,
                    AttemptStatus::Running,
                    "{id} still running after open"
                );
                let recorded = state.latest_success.is_some();
                assert_eq!(
                    recorded,
                    attempt.status == AttemptStatus::Succeeded,
                    "{id}: {attempt:?}"
                );
            }
        }
        let staging = dir.path().join("cache/staging");
        let leftovers = staging_dirs(&staging);
        assert_eq!(
            leftovers, 0,
            "round {round}: staging of the killed writer was not removed"
        );
    }
    assert!(
        recorded >= 6,
        "the writers recorded only {recorded} runs: the test did not exercise commits"
    );
}

/// Attempt directories under `cache/staging/<host>/`.
fn staging_dirs(staging: &Path) -> usize {
    let Ok(hosts) = fs::read_dir(staging) else {
        return 0;
    };
    hosts
        .flatten()
        .map(|host| fs::read_dir(host.path()).map(|d| d.count()).unwrap_or(0))
        .sum()
}
