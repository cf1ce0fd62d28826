//! Temp workspaces and a runner for the real `vitgraph` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_vitgraph");

/// The racy window every command of these tests runs with
/// (`VITGRAPH_RACY_WINDOW_MS`, see `vitgraph::clock`): ten minutes, so a
/// file a test wrote "just now" is still too recent to vouch for however
/// loaded the machine is; tests that need files older than it date them
/// back with [`SETTLE_BACK`] instead of waiting.
pub const RACY_WINDOW_MS: &str = "600000";

/// How far the tests' `settle` helpers date files back: well beyond the window.
pub const SETTLE_BACK: std::time::Duration = std::time::Duration::from_secs(3600);

pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    /// A workspace with `pipelines/NAME.ron` files.
    pub fn new(pipelines: &[(&str, &str)]) -> Ws {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = Ws { dir };
        for (name, text) in pipelines {
            ws.write(&format!("pipelines/{name}"), text);
        }
        ws
    }

    /// A workspace rooted at an existing directory (e.g. a small tmpfs).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_default()
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("-C")
            .arg(self.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("VITGRAPH_NO_PROGRESS", "1")
            .env("VITGRAPH_RACY_WINDOW_MS", RACY_WINDOW_MS);
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run(self.cmd(args).output().expect("run vitgraph"))
    }

    /// `status --json`, parsed.
    pub fn status(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["status", "--json"];
        args.extend_from_slice(extra);
        let r = self.run(&args);
        assert_eq!(r.code(), 0, "status failed: {}", r.stderr());
        serde_json::from_str(&r.stdout()).expect("status --json is JSON")
    }

    /// (kind, detail) reasons of one node in `status --json`.
    pub fn reasons(&self, id: &str, extra: &[&str]) -> Vec<(String, String)> {
        let s = self.status(extra);
        let node = s["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id} in {s}"));
        node["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["kind"].as_str().unwrap().to_string(),
                    r["detail"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Lines of the side-effect log the test pipelines append to.
    pub fn log_lines(&self) -> Vec<String> {
        self.read("side.log").lines().map(str::to_string).collect()
    }

    /// Every object file in the store.
    pub fn objects(&self) -> Vec<PathBuf> {
        walkdir::WalkDir::new(self.path().join("cache/objects"))
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().to_path_buf())
            .collect()
    }
}

pub struct Run(pub Output);

impl Run {
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// `build --json` events as parsed objects.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.stdout()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Node ids of events of one kind.
    pub fn nodes_with(&self, event: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .events()
            .iter()
            .filter(|e| e["event"] == event)
            .map(|e| e["node"].as_str().unwrap_or("").to_string())
            .collect();
        v.sort();
        v
    }
}

/// A sweep-shaped pipeline: `n` gens → doubles (for_each) → triples (for_each) → one total (needs).
/// Every command appends its node's name to `side.log` before writing its output.
pub fn sweep(n: usize, sleep: &str) -> String {
    let values = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        r#"Pipeline(
    stages: {{
        "gen": Stage(
            matrix: {{ "i": [{values}] }},
            task: Command(run: "echo gen-${{i}} >> side.log; sleep {sleep}; echo ${{i}} > ${{out}}/v.txt", outputs: ["v.txt"]),
        ),
        "double": Stage(
            for_each: "gen",
            task: Command(run: "echo double-${{i}} >> side.log; sleep {sleep}; echo $(( $(cat ${{needs.gen}}/v.txt) * 2 )) > ${{out}}/v.txt", outputs: ["v.txt"]),
        ),
        "triple": Stage(
            for_each: "double",
            task: Command(run: "echo triple-${{i}} >> side.log; sleep {sleep}; echo $(( $(cat ${{needs.double}}/v.txt) * 3 )) > ${{out}}/v.txt", outputs: ["v.txt"]),
        ),
        "total": Stage(
            needs: ["triple"],
            task: Command(run: "echo total >> side.log; cat $(for d in ${{needs.triple}}; do echo $d/v.txt; done) | paste -sd+ | bc > ${{out}}/sum.txt", outputs: ["sum.txt"]),
        ),
    }},
)"#
    )
}

/// The node name each side-effect log line stands for, as a node id.
pub fn log_node(line: &str) -> String {
    match line.split_once('-') {
        Some((stage, i)) => format!("{stage}[i={i}]"),
        None => line.to_string(),
    }
}

/// Two stages, `gen[i]` (reads `data.txt`) and `double[i]` (for each `gen`),
/// each appending its name to `side.log`: what runs is visible afterwards.
pub const CHAIN: &str = r#"Pipeline(
    params: { "scale": 2 },
    stages: {
        "gen": Stage(
            matrix: { "i": [1, 2] },
            task: Command(run: "echo gen-${i} >> side.log; cat data.txt > ${out}/v.txt; echo ${i} >> ${out}/v.txt", inputs: ["data.txt"], outputs: ["v.txt"]),
        ),
        "double": Stage(
            for_each: "gen",
            task: Command(run: "echo double-${i} >> side.log; echo ${scale} > ${out}/v.txt; cat ${needs.gen}/v.txt >> ${out}/v.txt", outputs: ["v.txt"]),
        ),
    },
)"#;

/// Whitespace and the margin of wrapped message lines collapsed, so text that
/// the terminal width wrapped still matches.
pub fn flat(text: &str) -> String {
    text.replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `PYTHONPATH` under which `python3` imports `modules` (comma-separated):
/// `VITGRAPH_PYDEPS`, where scripts/test.sh installs them. None (the test
/// skipped, saying so) without them — unless `require` (an environment
/// variable) is `1`, as in the test suite, where that is a failure.
pub fn python_with(modules: &str, require: &str) -> Option<String> {
    let path = std::env::var("VITGRAPH_PYDEPS").unwrap_or_default();
    let ok = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .env("PYTHONPATH", &path)
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(path);
    }
    if std::env::var_os(require).is_some_and(|v| v == "1") {
        panic!("{require}=1 but python3 cannot import {modules} (PYTHONPATH={path:?}; scripts/test.sh installs them)");
    }
    eprintln!("skipped: python3 cannot import {modules} (set VITGRAPH_PYDEPS to where they are)");
    None
}
