//! `Notebook`: an analysis notebook as a node. Its params are injected into
//! the notebook (papermill's `parameters` cell convention), a real Jupyter
//! kernel runs it headless in the node's output directory, and the executed
//! notebook and its HTML rendering are the outputs (`python/vitgraph/notebook.py`
//! does the Jupyter side).
//!
//! Its key holds the code cells' sources, not the file's bytes
//! ([`code_cells`]): clearing outputs or editing a markdown cell leaves
//! the node fresh, editing a code cell makes it stale, and `explain` names
//! the cell.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::command::SoftwareEnv;
use super::error::TaskError;
use super::TaskContext;
use crate::hash::ContentHash;
use crate::value::Value;

/// Bump when the outputs' layout or the injection changes.
pub const VERSION: u32 = 1;

/// The Jupyter side, run by the node's Python interpreter.
const DRIVER: &str = include_str!("../../python/vitgraph/notebook.py");

/// The tag of the cell whose values the injected params override.
const INJECTED_TAG: &str = "injected-parameters";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotebookSpec {
    /// The notebook, relative to the workspace root.
    pub path: String,
    /// Values injected after the cell tagged `parameters`, one Python
    /// variable each (`${needs.S}` and `${out}` are resolved first).
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// The Python the notebook runs with (`env: Python(interpreter:
    /// ".venv/bin/python")`): its versions are part of the key. Without it
    /// the notebook runs with `python3` and its versions are not keyed.
    #[serde(
        default,
        deserialize_with = "super::command::bare_env",
        skip_serializing_if = "Option::is_none"
    )]
    pub env: Option<SoftwareEnv>,
    /// Files the notebook writes in its working directory (the node's
    /// output directory), besides the executed notebook and its HTML.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
}

impl NotebookSpec {
    /// The notebook's file name without `.ipynb`: its outputs' names.
    fn stem(&self) -> &str {
        let name = self.path.rsplit('/').next().unwrap_or(&self.path);
        name.strip_suffix(".ipynb").unwrap_or(name)
    }

    pub fn inputs(&self) -> Vec<String> {
        vec![self.path.clone()]
    }

    /// `NAME.ipynb` (executed), `NAME.html`, then the declared outputs.
    pub fn outputs(&self) -> Vec<String> {
        let mut outputs = vec![
            format!("{}.ipynb", self.stem()),
            format!("{}.html", self.stem()),
        ];
        outputs.extend(self.outputs.iter().cloned());
        outputs
    }

    pub fn validate(&self) -> Result<(), String> {
        let p = Path::new(&self.path);
        if !self.path.ends_with(".ipynb") || self.stem().is_empty() {
            return Err(format!(
                "`path` `{}` is not a notebook: name an `.ipynb` file",
                self.path
            ));
        }
        if p.is_absolute()
            || p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!(
                "`path` `{}` must name a notebook inside the workspace, relative to its root (e.g. `notebooks/rq1.ipynb`)",
                self.path
            ));
        }
        for name in self.params.keys() {
            if !is_identifier(name) {
                return Err(format!(
                    "param `{name}` is not a Python variable name: use letters, digits and `_`, not starting with a digit"
                ));
            }
        }
        let own = &self.outputs()[..2];
        if let Some(clash) = self.outputs.iter().find(|o| own.contains(o)) {
            return Err(format!(
                "`outputs` lists `{clash}`, which is the executed notebook's own output"
            ));
        }
        Ok(())
    }

    /// The interpreter the kernel runs with.
    fn interpreter(&self, root: &Path) -> PathBuf {
        match &self.env {
            Some(SoftwareEnv::Python { interpreter }) if interpreter.contains('/') => {
                root.join(interpreter)
            }
            Some(SoftwareEnv::Python { interpreter }) => interpreter.into(),
            None => "python3".into(),
        }
    }
}

fn is_identifier(name: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !KEYWORDS.contains(&name)
}

/// The parts of a notebook's key, by name: `PATH#N` for its N-th code
/// cell's source (cells tagged `injected-parameters`, which a run writes,
/// left out) and `PATH#kernel` for its kernel's name. Outputs, execution
/// counts, metadata and markdown cells are not in it. A file that is not
/// a notebook is keyed by its bytes (`PATH#unreadable`); running it fails
/// with nbformat's reason.
pub fn code_cells(rel: &str, bytes: &[u8]) -> BTreeMap<String, ContentHash> {
    let mut parts = BTreeMap::new();
    let doc: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(_) => {
            parts.insert(format!("{rel}#unreadable"), ContentHash::of_bytes(bytes));
            return parts;
        }
    };
    let Some(cells) = doc.get("cells").and_then(|c| c.as_array()) else {
        parts.insert(format!("{rel}#unreadable"), ContentHash::of_bytes(bytes));
        return parts;
    };
    let code = cells.iter().filter(|c| {
        c.get("cell_type").and_then(|t| t.as_str()) == Some("code")
            && !c
                .pointer("/metadata/tags")
                .and_then(|t| t.as_array())
                .is_some_and(|tags| tags.iter().any(|t| t.as_str() == Some(INJECTED_TAG)))
    });
    for (i, cell) in code.enumerate() {
        let source = match cell.get("source") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(lines)) => {
                lines.iter().filter_map(|l| l.as_str()).collect()
            }
            _ => String::new(),
        };
        parts.insert(
            format!("{rel}#{}", i + 1),
            ContentHash::of_bytes(source.as_bytes()),
        );
    }
    if let Some(kernel) = doc
        .pointer("/metadata/kernelspec/name")
        .and_then(|k| k.as_str())
    {
        parts.insert(
            format!("{rel}#kernel"),
            ContentHash::of_bytes(kernel.as_bytes()),
        );
    }
    parts
}

/// A key part of [`code_cells`] in words: `code cell 3`, `kernel`.
pub fn describe_part(part: &str) -> Option<(&str, String)> {
    let (path, what) = part.rsplit_once('#')?;
    let words = match what.parse::<usize>() {
        Ok(n) => format!("code cell {n}"),
        Err(_) if what == "kernel" => "kernel".to_owned(),
        Err(_) => "content (not a notebook)".to_owned(),
    };
    Some((path, words))
}

/// What the driver reports (`status`), as it writes it.
#[derive(Debug, Deserialize)]
struct Status {
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    help: String,
    #[serde(default)]
    injected: bool,
    #[serde(default)]
    cell: usize,
    #[serde(default)]
    code_cell: usize,
    line: Option<usize>,
    source: Option<String>,
    #[serde(default)]
    ename: String,
    #[serde(default)]
    evalue: String,
    #[serde(default)]
    traceback: Vec<String>,
}

pub fn run(spec: &NotebookSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let status = ctx.out.join(".vitgraph-notebook.json");
    let partial = match &ctx.log {
        Some(log) => log.with_extension("partial.ipynb"),
        None => ctx.out.with_extension("partial.ipynb"),
    };
    let params: serde_json::Map<String, serde_json::Value> = spec
        .params
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
        .collect();
    let outputs = spec.outputs();
    let job = serde_json::json!({
        "notebook": ctx.root.join(&spec.path),
        "params": params,
        "cwd": ctx.out,
        "executed": ctx.out.join(&outputs[0]),
        "html": ctx.out.join(&outputs[1]),
        "partial": partial,
        "status": status,
    });
    let python = spec.interpreter(&ctx.root);
    let mut child = Command::new(&python)
        .arg("-c")
        .arg(DRIVER)
        .arg(job.to_string())
        .current_dir(&ctx.out)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| {
            notebook_error(
                spec,
                format!("cannot start `{}`: {e}", python.display()),
                start_help(spec),
            )
        })?;
    let exit = child.wait().map_err(|e| {
        notebook_error(
            spec,
            format!("waiting for `{}` failed: {e}", python.display()),
            String::new(),
        )
    })?;
    let reported = std::fs::read(&status)
        .ok()
        .and_then(|b| serde_json::from_slice::<Status>(&b).ok());
    let _ = std::fs::remove_file(&status);
    match (exit.success(), reported) {
        (true, _) => Ok(()),
        (false, Some(s)) if s.kind == "cell" => Err(cell_failure(spec, &s, &partial)),
        (false, Some(s)) => Err(notebook_error(spec, s.message, s.help)),
        (false, None) => Err(notebook_error(
            spec,
            format!(
                "`{}` running the notebook ended with {exit} before saying why",
                python.display()
            ),
            "the node's log has its output".to_owned(),
        )),
    }
}

fn start_help(spec: &NotebookSpec) -> String {
    match &spec.env {
        Some(_) => "check the interpreter the `env` names".to_owned(),
        None => "install Python 3 (`python3` on PATH), or name an interpreter with `env: Python(interpreter: …)`".to_owned(),
    }
}

fn notebook_error(spec: &NotebookSpec, message: String, help: String) -> TaskError {
    TaskError::Notebook {
        path: spec.path.clone(),
        message,
        help,
    }
}

/// A failing cell in words: which cell, which line, the error, then the
/// traceback; the partial notebook named in the help.
fn cell_failure(spec: &NotebookSpec, s: &Status, partial: &Path) -> TaskError {
    let place = if s.injected {
        "the injected parameters cell".to_owned()
    } else {
        format!("cell {} (code cell {})", s.cell, s.code_cell)
    };
    let mut message = format!("{place} raised {}: {}", s.ename, s.evalue);
    if let (Some(line), Some(source)) = (s.line, &s.source) {
        message = format!(
            "{place}, line {line} `{}` raised {}: {}",
            source.trim(),
            s.ename,
            s.evalue
        );
    }
    if !s.traceback.is_empty() {
        message.push_str("\n\n");
        message.push_str(s.traceback.join("\n").trim_end());
    }
    let help = if s.injected {
        "a param's value is not a Python literal: check the `Notebook`'s `params`".to_owned()
    } else {
        format!(
            "the notebook as far as it ran, with the error under the cell, is `{}`; fix the cell and build again",
            partial.display()
        )
    };
    notebook_error(spec, message, help)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notebook(cells: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3"}},
            "cells": cells,
        }))
        .unwrap()
    }

    #[test]
    fn the_key_holds_code_not_outputs_or_markdown() {
        let base = code_cells(
            "nb.ipynb",
            &notebook(serde_json::json!([
                {"cell_type": "markdown", "metadata": {}, "source": ["# RQ1"]},
                {"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "y = 2"], "outputs": [], "execution_count": null},
            ])),
        );
        assert_eq!(base.len(), 2, "one code cell and the kernel: {base:?}");
        let run = code_cells(
            "nb.ipynb",
            &notebook(serde_json::json!([
                {"cell_type": "markdown", "metadata": {}, "source": "# RQ1, edited"},
                {"cell_type": "code", "metadata": {"collapsed": true}, "source": "x = 1\ny = 2",
                 "outputs": [{"output_type": "stream", "name": "stdout", "text": "3"}], "execution_count": 7},
                {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "x = 5", "outputs": []},
            ])),
        );
        assert_eq!(
            base, run,
            "outputs, counts, markdown and an injected cell leave the key"
        );
        let edited = code_cells(
            "nb.ipynb",
            &notebook(serde_json::json!([
                {"cell_type": "code", "metadata": {}, "source": "x = 1\ny = 3", "outputs": []},
            ])),
        );
        assert_ne!(base["nb.ipynb#1"], edited["nb.ipynb#1"]);
        assert_eq!(
            describe_part("nb.ipynb#1"),
            Some(("nb.ipynb", "code cell 1".to_owned()))
        );
        assert!(code_cells("nb.ipynb", b"not json").contains_key("nb.ipynb#unreadable"));
    }

    #[test]
    fn a_spec_names_a_notebook_in_the_workspace_and_python_params() {
        let spec = |path: &str, param: &str| NotebookSpec {
            path: path.into(),
            params: [(param.to_owned(), Value::Int(1))].into(),
            env: None,
            outputs: vec!["fig.png".into()],
        };
        assert_eq!(
            spec("notebooks/rq1.ipynb", "x").outputs(),
            ["rq1.ipynb", "rq1.html", "fig.png"]
        );
        assert!(spec("notebooks/rq1.ipynb", "table_csv").validate().is_ok());
        for (path, param, says) in [
            ("notebooks/rq1.py", "x", "not a notebook"),
            ("/abs/rq1.ipynb", "x", "inside the workspace"),
            ("../rq1.ipynb", "x", "inside the workspace"),
            ("rq1.ipynb", "1x", "not a Python variable"),
            ("rq1.ipynb", "class", "not a Python variable"),
        ] {
            let err = spec(path, param).validate().unwrap_err();
            assert!(err.contains(says), "{path} {param}: {err}");
        }
    }
}
