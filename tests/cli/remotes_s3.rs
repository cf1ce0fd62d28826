//! `vitgraph push` and `pull` against an S3-compatible remote: moto's
//! server (`scripts/s3-server.sh`, started by `scripts/test.sh`) speaking
//! the S3 protocol over HTTP, a bucket of its own per test. A GPU host
//! pushes, a laptop pulls and builds without measuring; damage in the
//! bucket is refused on arrival and found by `remote verify`; concurrent
//! pushes and pushes killed with -9 leave it consistent; `remote gc`
//! collects it; an unreachable endpoint is a warning in `status`.
//!
//! Without `VITGRAPH_S3_ENDPOINT` the tests say so and pass, unless
//! `VITGRAPH_REQUIRE_S3=1` (as `scripts/test.sh` sets), where they fail.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::remotes::{command, ok, study_at, verify, vg, Place, GPU_HOST, LAPTOP};
use super::support::Workspace;

/// The server's address, or None (the test is skipped, saying why).
fn endpoint() -> Option<String> {
    match std::env::var("VITGRAPH_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            assert!(
                std::env::var("VITGRAPH_REQUIRE_S3").as_deref() != Ok("1"),
                "VITGRAPH_REQUIRE_S3=1 but VITGRAPH_S3_ENDPOINT is not set: start the server with `eval \"$(scripts/s3-server.sh start)\"`"
            );
            eprintln!("skipped: no S3 server (run `eval \"$(scripts/s3-server.sh start)\"` first)");
            None
        }
    }
}

/// Runs Python with boto3 (from moto's folder) against the server.
fn boto(endpoint: &str, code: &str) -> String {
    let script = format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='k', aws_secret_access_key='s', region_name='us-east-1')\n{code}"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .env(
            "PYTHONPATH",
            std::env::var("VITGRAPH_S3_PYTHONPATH").unwrap_or_default(),
        )
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new, empty bucket; its name.
fn bucket(endpoint: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "vg-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    boto(endpoint, &format!("s3.create_bucket(Bucket='{name}')"));
    name
}

/// A workspace measuring `n` configurations with the remote `lab` at
/// `url` on `endpoint`.
fn study(log_dir: &std::path::Path, n: usize, url: &str, endpoint: &str) -> Workspace {
    study_at(log_dir, n, &bucket_at(url, endpoint))
}

fn bucket_at(url: &str, endpoint: &str) -> Place {
    Place::Bucket {
        url: url.to_owned(),
        endpoint: endpoint.to_owned(),
    }
}

#[test]
fn a_laptop_pulls_from_a_bucket_what_a_gpu_host_pushed_and_measures_nothing() {
    let Some(ep) = endpoint() else { return };
    let name = bucket(&ep);
    let dir = tempfile::tempdir().unwrap();
    super::remotes::round_trip(dir.path(), &bucket_at(&format!("s3://{name}/study"), &ep));
    // The layout under the prefix is a folder remote's.
    let keys = boto(
        &ep,
        &format!(
            "print('\\n'.join(o['Key'] for o in s3.list_objects_v2(Bucket='{name}')['Contents']))"
        ),
    );
    assert_eq!(
        keys.lines()
            .filter(|k| k.starts_with("study/runs/"))
            .count(),
        3,
        "{keys}"
    );
    assert_eq!(
        keys.lines()
            .filter(|k| k.starts_with("study/objects/"))
            .count(),
        4,
        "{keys}"
    );
}

#[test]
fn damage_in_a_bucket_is_refused_on_arrival_and_found_by_verify() {
    let Some(ep) = endpoint() else { return };
    let name = bucket(&ep);
    let url = format!("s3://{name}");
    let dir = tempfile::tempdir().unwrap();
    let gpu = study(dir.path(), 2, &url, &ep);
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    ok(&vg(&gpu, GPU_HOST, &["push"]));
    // Rewrite the object holding the second result (same length).
    let key = boto(
        &ep,
        &format!(
            "for o in s3.list_objects_v2(Bucket='{name}')['Contents']:\n    if s3.get_object(Bucket='{name}', Key=o['Key'])['Body'].read() == b'{{\"v\": 2}}\\n':\n        s3.put_object(Bucket='{name}', Key=o['Key'], Body=b'{{\"v\": 7}}\\n')\n        print(o['Key'])"
        ),
    );
    assert!(key.trim().starts_with("objects/"), "{key}");

    let v = verify(&gpu);
    assert_eq!(v.code, 1, "{}", v.stdout);
    assert!(
        v.stdout.contains(&format!(
            "damaged: {url}/{}: its bytes do not match its name",
            key.trim()
        )),
        "{}",
        v.stdout
    );
    let laptop = study(dir.path(), 2, &url, &ep);
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
}

#[test]
fn concurrent_pushes_to_a_bucket_leave_it_consistent() {
    let Some(ep) = endpoint() else { return };
    let url = format!("s3://{}/shared", bucket(&ep));
    let dir = tempfile::tempdir().unwrap();
    super::remotes::concurrent_pushes(dir.path(), &bucket_at(&url, &ep));
}

#[test]
fn a_push_to_a_bucket_killed_at_any_moment_leaves_it_consistent() {
    let Some(ep) = endpoint() else { return };
    let url = format!("s3://{}", bucket(&ep));
    let dir = tempfile::tempdir().unwrap();
    let ws = study(dir.path(), 40, &url, &ep);
    ok(&vg(&ws, GPU_HOST, &["build"]));
    for delay_ms in [0u64, 5, 20, 50, 100, 200] {
        let mut p = command(&ws, GPU_HOST, &["push"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = p.kill();
        let _ = p.wait();
        let v = verify(&ws);
        assert!(
            v.stdout.contains(" 0 problems"),
            "after {delay_ms} ms: {}{}",
            v.stdout,
            v.stderr
        );
    }
    ok(&vg(&ws, GPU_HOST, &["push"]));
    let v = verify(&ws);
    ok(&v);
    assert!(v.stdout.contains("41 run records"), "{}", v.stdout);
}

#[test]
fn remote_gc_collects_a_bucket() {
    let Some(ep) = endpoint() else { return };
    let url = format!("s3://{}/gc", bucket(&ep));
    let dir = tempfile::tempdir().unwrap();
    let ws = study(dir.path(), 2, &url, &ep);
    ok(&vg(&ws, GPU_HOST, &["build"]));
    ok(&vg(&ws, GPU_HOST, &["push"]));
    // Measured again: new keys for every node.
    let ron = std::fs::read_to_string(ws.path().join("pipelines/s.ron")).unwrap();
    std::fs::write(
        ws.path().join("pipelines/s.ron"),
        ron.replace("{\\\"v\\\": ${n}}", "{\\\"v\\\": ${n}, \\\"again\\\": 1}"),
    )
    .unwrap();
    ok(&vg(&ws, GPU_HOST, &["build"]));
    ok(&vg(&ws, GPU_HOST, &["push"]));
    let dry = vg(&ws, GPU_HOST, &["remote", "gc", "--keep-days", "0"]);
    ok(&dry);
    assert!(
        dry.stdout.contains("would remove 3 superseded run records"),
        "{}",
        dry.stdout
    );
    let gc = vg(
        &ws,
        GPU_HOST,
        &["remote", "gc", "--keep-days", "0", "--apply"],
    );
    ok(&gc);
    assert!(
        gc.stdout.contains("removed 3 superseded run records")
            && gc.stdout.contains("3 records kept"),
        "{}",
        gc.stdout
    );
    let v = verify(&ws);
    ok(&v);
    assert!(
        v.stdout.contains("3 run records") && v.stdout.contains(" 0 problems"),
        "{}",
        v.stdout
    );
}

#[test]
fn an_unreachable_bucket_is_a_warning_in_status_and_an_error_for_push() {
    let Some(_) = endpoint() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1.
    let ws = study(dir.path(), 1, "s3://nowhere", "http://127.0.0.1:1");
    ok(&vg(&ws, GPU_HOST, &["build"]));
    let status = vg(&ws, GPU_HOST, &["status", "--remote"]);
    ok(&status);
    assert!(
        status.stdout.contains("warning: remote `lab` was not read")
            && status.stdout.contains("s3://nowhere"),
        "{}",
        status.stdout
    );
    let push = vg(&ws, GPU_HOST, &["push"]);
    assert_ne!(push.code, 0);
    assert!(
        push.stderr.contains("remote `lab` (`s3://nowhere`)"),
        "{}",
        push.stderr
    );
}
