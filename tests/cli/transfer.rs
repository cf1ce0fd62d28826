//! `vitgraph export` and `import`: a study measured on a GPU host carried
//! to a laptop in one file, checked on arrival, and never measured again
//! on the laptop's hardware unless asked (`build --measure-here`).

use std::process::Command;

use super::support::{Output, Workspace};

pub(super) const GPU_HOST: &str =
    r#"{"cpu":"Xeon 8480+","gpu":"H100","driver":"580","host":"gpu-box"}"#;
pub(super) const LAPTOP: &str =
    r#"{"cpu":"Apple M2","gpu":"none","driver":"none","host":"laptop"}"#;

/// Runs `vitgraph ARGS…` in `ws` with the faked environment `env`.
pub(super) fn vg(ws: &Workspace, env: &str, args: &[&str]) -> Output {
    ws.run_as(Some(env), args)
}

/// A study of two measured configurations and a sum over them; each
/// measurement appends a line to `measured.txt` in `log_dir`.
fn study(log_dir: &std::path::Path) -> String {
    let log = log_dir.join("measured.txt");
    format!(
        r#"Pipeline(stages: {{
    "bench": Stage(task: Command(run: "echo '{{\"v\": ${{n}}}}' > ${{out}}/results.json; echo ${{n}} >> {log}", outputs: ["results.json"], measure: true), matrix: {{"n": [1, 2]}}),
    "sum": Stage(task: Command(run: "for d in ${{needs.bench}}; do cat $d/results.json; done > ${{out}}/s.txt", outputs: ["s.txt"]), needs: ["bench"]),
}})"#,
        log = log.display()
    )
}

pub(super) fn measured(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("measured.txt"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn status_json(ws: &Workspace, env: &str) -> serde_json::Value {
    let out = vg(ws, env, &["status", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("status --json prints JSON")
}

/// A GPU host's study, built, and its bundle; the bundle's path.
fn exported(logs: &tempfile::TempDir) -> (Workspace, std::path::PathBuf) {
    let gpu = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
    let built = vg(&gpu, GPU_HOST, &["build"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    assert_eq!(measured(logs.path()), 2);
    let bundle = logs.path().join("study.vgb");
    let out = vg(&gpu, GPU_HOST, &["export", "-o", bundle.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("exported 3 runs"), "{}", out.stdout);
    (gpu, bundle)
}

#[test]
fn a_laptop_builds_on_imported_runs_without_measuring() {
    let logs = tempfile::tempdir().unwrap();
    let (gpu, bundle) = exported(&logs);
    let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
    let out = vg(&laptop, LAPTOP, &["import", bundle.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("3 runs, 3 new here"), "{}", out.stdout);
    assert!(
        out.stdout.contains("written on `gpu-box`"),
        "{}",
        out.stdout
    );

    // Before a build, the runs stand but `out/` lacks their files.
    let s = status_json(&laptop, LAPTOP);
    assert_eq!(s["summary"]["measured_elsewhere"], 2, "{s}");
    let bench = &s["nodes"][0];
    assert_eq!(bench["measured_elsewhere"]["host"], "gpu-box", "{s}");
    assert_eq!(bench["measured_elsewhere"]["gpu"], "H100", "{s}");
    assert_eq!(bench["reasons"][0]["kind"], "output_missing", "{s}");

    // The build restores; nothing is measured on the laptop.
    let built = vg(&laptop, LAPTOP, &["build"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    assert_eq!(
        measured(logs.path()),
        2,
        "the laptop measured: {}",
        built.stdout
    );
    assert_eq!(
        std::fs::read_to_string(laptop.path().join("out/sum/s.txt")).unwrap(),
        std::fs::read_to_string(gpu.path().join("out/sum/s.txt")).unwrap()
    );
    let s = status_json(&laptop, LAPTOP);
    assert_eq!(s["summary"]["stale"], 0, "{s}");
    assert_eq!(s["summary"]["fresh"], 3, "{s}");
    assert_eq!(s["summary"]["measured_elsewhere"], 2, "{s}");
    let text = vg(&laptop, LAPTOP, &["status"]).stdout;
    assert!(
        text.contains("measured elsewhere: 2 runs measured on another machine")
            && text.contains("bench  2 on `gpu-box` (H100)"),
        "{text}"
    );
    let explain = vg(&laptop, LAPTOP, &["explain", "bench[n=1]"]).stdout;
    assert!(
        explain.contains("measured elsewhere: on `gpu-box` (H100)"),
        "{explain}"
    );
    // A second build is a no-op, and still measures nothing.
    let again = vg(&laptop, LAPTOP, &["build"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(measured(logs.path()), 2);

    // Importing again adds nothing.
    let out = vg(&laptop, LAPTOP, &["import", bundle.to_str().unwrap()]);
    assert!(
        out.stdout.contains("3 runs, 0 new here, 0 now"),
        "{}",
        out.stdout
    );

    // Asked to, the laptop measures here; then nothing stands for it.
    let here = vg(&laptop, LAPTOP, &["build", "--measure-here"]);
    assert_eq!(here.code, 0, "{}", here.stderr);
    assert_eq!(measured(logs.path()), 4);
    let s = status_json(&laptop, LAPTOP);
    assert!(s["summary"].get("measured_elsewhere").is_none(), "{s}");
    assert_eq!(s["summary"]["stale"], 0, "{s}");
}

/// On the host that measured, a changed facet still means measuring
/// again: only another host's runs stand as measured elsewhere.
#[test]
fn the_same_host_with_other_facets_measures_again() {
    let logs = tempfile::tempdir().unwrap();
    let (gpu, _) = exported(&logs);
    let upgraded = GPU_HOST.replace("Xeon 8480+", "Xeon 8490H");
    let s = status_json(&gpu, &upgraded);
    assert_eq!(s["nodes"][0]["reasons"][0]["kind"], "env_changed", "{s}");
    assert!(s["summary"].get("measured_elsewhere").is_none(), "{s}");
}

/// Replaces the first occurrence of `from` in the bundle by `to` (same
/// length: the archive stays readable, its content does not).
fn tamper(bundle: &std::path::Path, name: &str, from: &[u8], to: &[u8]) -> std::path::PathBuf {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(bundle).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the bundle holds the bytes to alter");
    bytes[at..at + from.len()].copy_from_slice(to);
    let out = bundle.with_file_name(name);
    std::fs::write(&out, bytes).unwrap();
    out
}

/// An object that arrives damaged is set aside and only the runs that
/// name it are left out; the others arrive.
#[test]
fn a_damaged_object_leaves_out_only_the_runs_that_name_it() {
    let logs = tempfile::tempdir().unwrap();
    let (_gpu, bundle) = exported(&logs);
    let damaged = tamper(&bundle, "object.vgb", b"{\"v\": 2}", b"{\"v\": 9}");
    let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
    let out = vg(&laptop, LAPTOP, &["import", damaged.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("1 runs were not imported")
            && out.stderr.contains("`bench[n=2]`")
            && out.stderr.contains("arrived damaged"),
        "{}",
        out.stderr
    );
    let aside: Vec<_> = std::fs::read_dir(laptop.path().join("cache/damaged"))
        .expect("the damaged bytes are set aside")
        .collect();
    assert_eq!(aside.len(), 1);
    let s = status_json(&laptop, LAPTOP);
    let reason = |id: &str| {
        let node = s["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap();
        node["reasons"][0]["kind"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(reason("bench[n=1]"), "output_missing", "{s}");
    assert_eq!(reason("bench[n=2]"), "never_built", "{s}");
    assert_eq!(s["summary"]["measured_elsewhere"], 1, "{s}");
}

#[test]
fn a_damaged_or_altered_bundle_is_refused_and_nothing_is_imported() {
    let logs = tempfile::tempdir().unwrap();
    let (_gpu, bundle) = exported(&logs);
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        // A record: its spec no longer gives its key.
        (
            tamper(&bundle, "record.vgb", b"; done > ", b"; done >>"),
            "its key does not match",
        ),
    ];
    let truncated = logs.path().join("truncated.vgb");
    let bytes = std::fs::read(&bundle).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let not_a_bundle = logs.path().join("notes.vgb");
    std::fs::write(&not_a_bundle, "a note, not a bundle\n").unwrap();
    let mut cases = cases;
    cases.push((truncated, "bundle `"));
    cases.push((not_a_bundle, "bundle `"));
    for (file, says) in cases {
        let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
        let out = vg(&laptop, LAPTOP, &["import", file.to_str().unwrap()]);
        assert_eq!(
            out.code,
            1,
            "{}: {}{}",
            file.display(),
            out.stdout,
            out.stderr
        );
        assert!(
            out.stderr.contains(says) && out.stderr.contains("nothing was imported"),
            "{}: {}",
            file.display(),
            out.stderr
        );
        let s = status_json(&laptop, LAPTOP);
        assert_eq!(s["summary"]["fresh"], 0, "{}: {s}", file.display());
        assert!(
            std::fs::read_dir(laptop.path().join("cache/objects"))
                .map(|d| d.count() == 0)
                .unwrap_or(true),
            "{}: objects were left in the store",
            file.display()
        );
    }
}

/// A signing key made with `vitgraph key generate` in `dir`; its file and
/// its public key.
fn signing_key(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
        .args(["key", "generate", name])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let public = text
        .split('"')
        .find(|w| w.starts_with("ed25519:"))
        .expect("the public key is printed")
        .to_owned();
    let file = dir.join(format!("{name}.vitgraph-key"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600,
        "a secret key is readable by its owner alone"
    );
    (file, public)
}

/// A laptop workspace of the study whose `vitgraph.ron` says `settings`
/// (none when empty).
fn laptop_with(logs: &tempfile::TempDir, settings: &str) -> Workspace {
    let pipeline = study(logs.path());
    let mut files = vec![("pipelines/s.ron", pipeline.as_str())];
    if !settings.is_empty() {
        files.push(("vitgraph.ron", settings));
    }
    Workspace::with_files(&files)
}

#[test]
fn signed_runs_say_who_measured_them_and_altered_ones_are_refused() {
    let logs = tempfile::tempdir().unwrap();
    let (gpu, unsigned) = exported(&logs);
    let (key, public) = signing_key(logs.path(), "gpu-lab");
    let signed = logs.path().join("signed.vgb");
    let out = vg(
        &gpu,
        GPU_HOST,
        &[
            "export",
            "-o",
            signed.to_str().unwrap(),
            "--sign",
            key.to_str().unwrap(),
        ],
    );
    ok(&out);

    // Trusted: the signer's name, in `status`.
    let trusting = format!(r#"Workspace(trusted_keys: {{"gpu-lab": "{public}"}})"#);
    let laptop = laptop_with(&logs, &trusting);
    let out = vg(&laptop, LAPTOP, &["import", signed.to_str().unwrap()]);
    ok(&out);
    let s = status_json(&laptop, LAPTOP);
    assert_eq!(
        s["nodes"][0]["measured_elsewhere"]["signed_by"], "gpu-lab",
        "{s}"
    );
    let text = vg(&laptop, LAPTOP, &["status"]).stdout;
    assert!(
        text.contains("on `gpu-box` (H100), signed by gpu-lab"),
        "{text}"
    );

    // Not trusted here: said so, with the name it gives itself.
    let laptop = laptop_with(&logs, "");
    ok(&vg(&laptop, LAPTOP, &["import", signed.to_str().unwrap()]));
    let s = status_json(&laptop, LAPTOP);
    let by = s["nodes"][0]["measured_elsewhere"]["signed_by"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        by.starts_with("untrusted key ed25519:") && by.contains("gpu-lab"),
        "{by}"
    );

    // What the key does not cover — the host a run was measured on — is
    // covered by the signature: altered, a signed run is refused; an
    // unsigned one cannot tell.
    // (In a run's environment record, a JSON string inside the manifest.)
    let (from, to) = (br#"\"host\":\"gpu-box\""#, br#"\"host\":\"gpu-bax\""#);
    let forged = tamper(&signed, "forged.vgb", from, to);
    let laptop = laptop_with(&logs, &trusting);
    let out = vg(&laptop, LAPTOP, &["import", forged.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("does not match it"), "{}", out.stderr);
    let forged_unsigned = tamper(&unsigned, "forged-unsigned.vgb", from, to);
    let laptop = laptop_with(&logs, &trusting);
    ok(&vg(
        &laptop,
        LAPTOP,
        &["import", forged_unsigned.to_str().unwrap()],
    ));
}

#[test]
fn a_workspace_that_requires_signatures_refuses_unsigned_and_untrusted_runs() {
    let logs = tempfile::tempdir().unwrap();
    let (gpu, unsigned) = exported(&logs);
    let (key, public) = signing_key(logs.path(), "ci");
    let (other_key, _) = signing_key(logs.path(), "intruder");
    let bundle = |name: &str, key: &std::path::Path| {
        let path = logs.path().join(name);
        // Signed through the environment variable this time.
        let out = gpu
            .command(Some(GPU_HOST), &["export", "-o", path.to_str().unwrap()])
            .env("VITGRAPH_SIGNING_KEY", key)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    };
    let by_ci = bundle("ci.vgb", &key);
    let by_intruder = bundle("intruder.vgb", &other_key);
    let strict = format!(r#"Workspace(trusted_keys: {{"ci": "{public}"}}, require_signed: true)"#);
    for (file, says) in [
        (&unsigned, "it is unsigned"),
        (&by_intruder, "untrusted key"),
    ] {
        let laptop = laptop_with(&logs, &strict);
        let out = vg(&laptop, LAPTOP, &["import", file.to_str().unwrap()]);
        assert_eq!(out.code, 1, "{}: {}", file.display(), out.stderr);
        assert!(
            out.stderr.contains(says),
            "{}: {}",
            file.display(),
            out.stderr
        );
        assert_eq!(status_json(&laptop, LAPTOP)["summary"]["fresh"], 0);
    }
    let laptop = laptop_with(&logs, &strict);
    let out = vg(&laptop, LAPTOP, &["import", by_ci.to_str().unwrap()]);
    ok(&out);
    assert!(out.stdout.contains("3 signed"), "{}", out.stdout);

    // A key that is not a key is named.
    let laptop = laptop_with(&logs, r#"Workspace(trusted_keys: {"ci": "ed25519:abc"})"#);
    let out = vg(&laptop, LAPTOP, &["import", by_ci.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`ci` is `ed25519:abc`, not a public key"),
        "{}",
        out.stderr
    );
}

pub(super) fn ok(out: &Output) {
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// After measuring here too, `compare` pairs the imported runs with this
/// machine's by environment: the facets that differ are named.
#[test]
fn compare_takes_an_imported_environment_as_a_side() {
    let pipeline = r#"Pipeline(stages: {
    "bench": Stage(task: Command(run: "echo '{\"latency_ms\": {\"median\": ${n}}}' > ${out}/results.json", outputs: ["results.json"], measure: true), matrix: {"n": [1, 2]}),
})"#;
    let dir = tempfile::tempdir().unwrap();
    let gpu = Workspace::with_pipelines(&[("b.ron", pipeline)]);
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    let bundle = dir.path().join("b.vgb");
    ok(&vg(
        &gpu,
        GPU_HOST,
        &["export", "-o", bundle.to_str().unwrap()],
    ));
    let laptop = Workspace::with_pipelines(&[("b.ron", pipeline)]);
    ok(&vg(&laptop, LAPTOP, &["import", bundle.to_str().unwrap()]));
    ok(&vg(&laptop, LAPTOP, &["build", "--measure-here"]));
    let out = vg(
        &laptop,
        LAPTOP,
        &["compare", "env:cpu=Xeon 8480+", "env:cpu=Apple M2", "bench"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("env:cpu=Xeon 8480+: latest runs in that environment, 2 runs")
            && out
                .stdout
                .contains("env:cpu=Apple M2: latest runs in that environment, 2 runs")
            && out.stdout.contains("2 configurations paired")
            && out.stdout.contains("differs: cpu Xeon 8480+ → Apple M2"),
        "{}",
        out.stdout
    );
}

/// A build that would measure on this machine a node whose stage's other
/// runs were measured elsewhere is refused: one study, two machines.
#[test]
fn a_build_never_mixes_machines_in_one_stage_unless_asked() {
    let logs = tempfile::tempdir().unwrap();
    let (gpu, _) = exported(&logs);
    let one = logs.path().join("one.vgb");
    ok(&vg(
        &gpu,
        GPU_HOST,
        &["export", "bench[n=1]", "-o", one.to_str().unwrap()],
    ));
    let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
    ok(&vg(&laptop, LAPTOP, &["import", one.to_str().unwrap()]));
    let out = vg(&laptop, LAPTOP, &["build"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("1 node would be measured on this machine")
            && out.stderr.contains("`bench[n=2]`")
            && out.stderr.contains("--measure-here"),
        "{}",
        out.stderr
    );
    assert_eq!(measured(logs.path()), 2, "nothing was measured");
    // What it needs only from the imported run builds.
    ok(&vg(&laptop, LAPTOP, &["build", "bench[n=1]"]));
    ok(&vg(&laptop, LAPTOP, &["build", "--measure-here"]));
    assert_eq!(measured(logs.path()), 4, "both measured here, as asked");
}

/// Cloud machines often share a host name (`vm`, `localhost`): a run that
/// arrived in a bundle is measured elsewhere whatever the names say.
#[test]
fn an_imported_run_is_measured_elsewhere_though_the_host_names_agree() {
    let logs = tempfile::tempdir().unwrap();
    let (_gpu, bundle) = exported(&logs);
    let same_name = LAPTOP.replace("laptop", "gpu-box");
    let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path()))]);
    ok(&vg(
        &laptop,
        &same_name,
        &["import", bundle.to_str().unwrap()],
    ));
    ok(&vg(&laptop, &same_name, &["build"]));
    assert_eq!(measured(logs.path()), 2, "the laptop measured");
    let s = status_json(&laptop, &same_name);
    assert_eq!(s["summary"]["measured_elsewhere"], 2, "{s}");
    assert_eq!(s["summary"]["stale"], 0, "{s}");
}
