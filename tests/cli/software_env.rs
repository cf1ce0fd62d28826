//! A `Command` that declares its software (`env: Python(…)`): the
//! interpreter's versions are in the node's key, so an upgrade makes it
//! stale with `env_changed` naming what changed, and an interpreter that
//! cannot be run is an error that names it and the node.

use super::harness::Ws;

const PIPELINE: &str = r#"Pipeline(params: {"python": "py/bin/python"}, stages: {
  "bench": Stage(task: Command(run: "echo ran > ${out}/r.txt", outputs: ["r.txt"],
                               env: Python(interpreter: "${python}"))),
  "plain": Stage(task: Command(run: "echo ran > ${out}/r.txt", outputs: ["r.txt"])),
})"#;

/// A stand-in interpreter: answers the version probe with `answer.json`.
const INTERPRETER: &str = "#!/bin/sh\ncat \"$(dirname \"$0\")/answer.json\"\n";

fn answer(torch: &str) -> String {
    format!(
        r#"{{"python": "3.12.3", "torch": "{torch}", "triton": "3.6.0", "cudnn": "9.10", "packages": "0123456789abcdef"}}"#
    )
}

fn workspace() -> Ws {
    let ws = Ws::new(&[("p.ron", PIPELINE)]);
    ws.write("py/bin/python", INTERPRETER);
    ws.write("py/bin/answer.json", &answer("2.10.0"));
    let path = ws.path().join("py/bin/python");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    ws
}

#[test]
fn an_upgraded_interpreter_makes_exactly_its_commands_stale() {
    let ws = workspace();
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let explain = ws.run(&["explain", "--json", "bench"]);
    let doc: serde_json::Value = serde_json::from_str(&explain.stdout()).unwrap();
    let env = &doc["parts"]["current"]["env"];
    assert_eq!(env["py.torch"], "2.10.0", "{doc}");
    assert_eq!(env["py.python"], "3.12.3", "{doc}");

    ws.write("py/bin/answer.json", &answer("2.11.0"));
    let status = ws.run(&["status"]);
    assert_eq!(status.code(), 0, "{}", status.stderr());
    let text = status.stdout();
    assert!(
        text.contains("stale  bench  env_changed: py.torch 2.10.0 → 2.11.0"),
        "{text}"
    );
    assert!(text.contains("1 fresh, 1 stale"), "{text}");
    let r = ws.run(&["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("1 built, 1 fresh"), "{}", r.stderr());
    // Nothing else changed: a second build runs nothing.
    let again = ws.run(&["build"]);
    assert!(
        again.stderr().contains("0 built, 2 fresh"),
        "{}",
        again.stderr()
    );
}

#[test]
fn an_interpreter_that_cannot_run_is_named_with_its_node() {
    let ws = workspace();
    let r = ws.run(&["build", "-p", "python=venv/bin/python"]);
    assert_ne!(r.code(), 0);
    let err = r.stderr();
    assert!(err.contains("cannot key `bench`"), "{err}");
    assert!(
        err.contains("cannot run the Python interpreter `venv/bin/python`"),
        "{err}"
    );
    assert!(err.contains("relative to the workspace root"), "{err}");
}
