//! `Notebook` nodes run by a real Jupyter kernel: params injected after the
//! `parameters` cell, the executed notebook and its HTML as outputs, a key
//! of the code cells (outputs cleared or markdown edited: fresh; a code
//! cell edited: stale naming the cell; the table upstream changed: stale),
//! and a failing cell named with its line and traceback.
//!
//! The kernel needs nbclient, ipykernel and nbconvert: from `python3`, with
//! `VITGRAPH_PYDEPS` (where `scripts/test.sh` installs them) on its
//! `PYTHONPATH`. Without them the tests are skipped, saying so — unless
//! `VITGRAPH_REQUIRE_JUPYTER=1` (the test suite), where that is a failure.

use serde_json::json;

use super::harness::{flat, Ws};

const PIPELINE: &str = r#"Pipeline(stages: {
  "table": Stage(task: Command(run: "echo \"value\" > ${out}/t.csv; cat data.txt >> ${out}/t.csv",
                               inputs: ["data.txt"], outputs: ["t.csv"])),
  "nb": Stage(needs: ["table"], task: Notebook(
      path: "notebooks/a.ipynb",
      params: {"table": "${needs.table}/t.csv", "scale": 3},
      outputs: ["scaled.txt"],
  )),
})"#;

fn jupyter() -> Option<String> {
    super::harness::python_with("nbclient, ipykernel, nbconvert", "VITGRAPH_REQUIRE_JUPYTER")
}

fn cell(kind: &str, source: &str, tags: &[&str]) -> serde_json::Value {
    let mut c = json!({"cell_type": kind, "metadata": {}, "source": source});
    if !tags.is_empty() {
        c["metadata"]["tags"] = json!(tags);
    }
    if kind == "code" {
        c["outputs"] = json!([]);
        c["execution_count"] = json!(null);
    }
    c
}

fn notebook(cells: Vec<serde_json::Value>) -> String {
    json!({
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    })
    .to_string()
}

/// Markdown, the `parameters` cell, a cell reading the table, one writing
/// the declared output (`body` of its second line).
fn analysis(title: &str, body: &str) -> String {
    notebook(vec![
        cell("markdown", title, &[]),
        cell("code", "table = \"\"\nscale = 1", &["parameters"]),
        cell(
            "code",
            "rows = open(table).read().split()\nvalue = int(rows[1])",
            &[],
        ),
        cell("code", &format!("total = value * scale\n{body}"), &[]),
    ])
}

const WRITE: &str = "open('scaled.txt', 'w').write(str(total))";

fn workspace() -> Ws {
    let ws = Ws::new(&[("p.ron", PIPELINE)]);
    ws.write("data.txt", "14\n");
    ws.write("notebooks/a.ipynb", &analysis("# Scaled", WRITE));
    ws
}

fn run(ws: &Ws, path: &str, args: &[&str]) -> super::harness::Run {
    super::harness::Run(
        ws.cmd(args)
            .env("PYTHONPATH", path)
            .output()
            .expect("run vitgraph"),
    )
}

fn nb_reasons(ws: &Ws) -> Vec<String> {
    ws.reasons("nb", &[])
        .into_iter()
        .map(|(k, d)| format!("{k}: {d}"))
        .collect()
}

#[test]
fn a_notebook_node_is_keyed_by_its_code_cells_and_its_inputs() {
    let Some(path) = jupyter() else { return };
    let ws = workspace();
    let r = run(&ws, &path, &["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // The params were injected: 14 × 3, not 14 × 1.
    assert_eq!(ws.read("out/nb/scaled.txt"), "42");
    let executed: serde_json::Value = serde_json::from_str(&ws.read("out/nb/a.ipynb")).unwrap();
    let injected = &executed["cells"][2];
    assert_eq!(
        injected["metadata"]["tags"],
        json!(["injected-parameters"]),
        "{executed}"
    );
    let source: String = injected["source"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(source.contains("scale = 3"), "{injected}");
    let html = ws.read("out/nb/a.html");
    assert!(
        html.contains("scaled.txt") && html.contains(">Scaled<"),
        "the HTML holds the code and the markdown"
    );

    // Outputs and execution counts saved with the notebook, a cell's
    // metadata and a markdown cell edited: the code is the same, so the
    // node stays fresh.
    let mut saved: serde_json::Value =
        serde_json::from_str(&analysis("# Scaled, reworded", WRITE)).unwrap();
    saved["cells"][2]["outputs"] =
        json!([{"output_type": "stream", "name": "stdout", "text": "14\n"}]);
    saved["cells"][2]["execution_count"] = json!(4);
    saved["cells"][3]["metadata"]["collapsed"] = json!(true);
    ws.write("notebooks/a.ipynb", &saved.to_string());
    assert!(nb_reasons(&ws).is_empty(), "{:?}", nb_reasons(&ws));

    // A code cell edited: stale, naming the cell (the file's fourth cell
    // is its third code cell).
    ws.write(
        "notebooks/a.ipynb",
        &analysis("# Scaled", "open('scaled.txt', 'w').write(str(total + 1))"),
    );
    assert_eq!(
        nb_reasons(&ws),
        ["input_changed: notebooks/a.ipynb: code cell 3 changed"]
    );
    let r = run(&ws, &path, &["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.read("out/nb/scaled.txt"), "43");

    // The table upstream changed: stale for that reason.
    ws.write("data.txt", "20\n");
    let reasons = nb_reasons(&ws);
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("upstream_changed: table")),
        "{reasons:?}"
    );
    let r = run(&ws, &path, &["build"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(ws.read("out/nb/scaled.txt"), "61");
    let again = run(&ws, &path, &["build"]);
    assert!(
        again.stderr().contains("0 built, 2 fresh"),
        "{}",
        again.stderr()
    );
}

#[test]
fn a_failing_cell_fails_the_node_with_its_line_and_keeps_the_partial_notebook() {
    let Some(path) = jupyter() else { return };
    let ws = workspace();
    ws.write(
        "notebooks/a.ipynb",
        &analysis("# Scaled", "ratio = total / (value - value)"),
    );
    let r = run(&ws, &path, &["build"]);
    assert_ne!(r.code(), 0);
    let err = flat(&r.stderr());
    assert!(
        err.contains("notebook `notebooks/a.ipynb`: cell 4 (code cell 3), line 2 `ratio = total / (value - value)` raised ZeroDivisionError: division by zero"),
        "{err}"
    );
    assert!(
        err.contains("Traceback"),
        "the traceback is in the message: {err}"
    );
    // The partial notebook, named in the help, holds the error under the cell.
    assert!(
        err.contains("nb.partial.ipynb`; fix the cell and build again"),
        "{err}"
    );
    let partial = ws.path().join("cache/logs/nb/nb.partial.ipynb");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(partial).unwrap()).unwrap();
    assert_eq!(
        doc["cells"][4]["outputs"][0]["ename"], "ZeroDivisionError",
        "{doc}"
    );
    assert!(
        !ws.path().join("out/nb").exists(),
        "nothing half-written is kept as an output"
    );
}

#[test]
fn a_python_without_jupyter_is_named_with_the_packages_to_install() {
    if jupyter().is_none() {
        return;
    }
    // An interpreter where `nbclient` cannot be imported.
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {"nb": Stage(task: Notebook(path: "notebooks/a.ipynb", env: Python(interpreter: "py/python")))})"#,
    )]);
    ws.write(
        "notebooks/a.ipynb",
        &notebook(vec![cell("code", "x = 1", &[])]),
    );
    ws.write(
        "py/shadow/nbclient/__init__.py",
        "raise ImportError('No module named nbclient')\n",
    );
    ws.write(
        "py/python",
        "#!/bin/sh\nPYTHONPATH=\"$(dirname \"$0\")/shadow\" exec python3 \"$@\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        ws.path().join("py/python"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let r = ws.run(&["build"]);
    assert_ne!(r.code(), 0);
    let err = flat(&r.stderr());
    assert!(
        err.contains("running a notebook needs nbformat, nbclient, ipykernel and nbconvert"),
        "{err}"
    );
    assert!(
        err.contains("-m pip install nbclient ipykernel nbconvert"),
        "{err}"
    );
}
