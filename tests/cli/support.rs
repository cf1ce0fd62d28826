//! Test support: a throwaway workspace and the real `vitgraph` binary.
//!
//! Every integration test runs the built executable the way a user would, in a
//! fresh temporary workspace, with `NO_COLOR=1` so output has no escape codes.

use std::path::Path;
use std::process::Command;

/// A temporary workspace, removed when dropped.
pub struct Workspace {
    dir: tempfile::TempDir,
}

/// What one `vitgraph` invocation did.
#[derive(Debug)]
pub struct Output {
    /// The exit status (`-1` if the process was killed by a signal).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Workspace {
    /// A workspace holding `files` (paths relative to its root) and a `pipelines/` folder.
    pub fn with_files(files: &[(&str, &str)]) -> Workspace {
        let dir = tempfile::Builder::new()
            .prefix("vitgraph-test-")
            .tempdir()
            .expect("create a temporary directory");
        std::fs::create_dir_all(dir.path().join("pipelines")).expect("create pipelines/");
        for (name, text) in files {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("create a fixture's folder");
            }
            std::fs::write(&path, text).expect("write a fixture file");
        }
        Workspace { dir }
    }

    /// A workspace whose `pipelines/` holds `files` (names relative to `pipelines/`).
    pub fn with_pipelines(files: &[(&str, &str)]) -> Workspace {
        let prefixed: Vec<(String, &str)> = files
            .iter()
            .map(|(n, t)| (format!("pipelines/{n}"), *t))
            .collect();
        let borrowed: Vec<(&str, &str)> = prefixed.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        Workspace::with_files(&borrowed)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `vitgraph ARGS…` in the workspace root, to run or spawn: no
    /// colours, and the machine's environment unless `fake_env` (a
    /// `VITGRAPH_FAKE_ENV` object) stands for it.
    pub fn command(&self, fake_env: Option<&str>, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vitgraph"));
        c.args(args)
            .current_dir(self.path())
            .env("NO_COLOR", "1")
            .env("VITGRAPH_RACY_WINDOW_MS", super::harness::RACY_WINDOW_MS)
            .env_remove("CLICOLOR_FORCE");
        match fake_env {
            Some(env) => c.env("VITGRAPH_FAKE_ENV", env),
            None => c.env_remove("VITGRAPH_FAKE_ENV"),
        };
        c
    }

    /// Runs `vitgraph ARGS…` in the workspace root.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_as(None, args)
    }

    /// Runs `vitgraph ARGS…` with the environment `fake_env` fakes, if any.
    pub fn run_as(&self, fake_env: Option<&str>, args: &[&str]) -> Output {
        let out = self
            .command(fake_env, args)
            .output()
            .expect("run the vitgraph binary");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `text` with this workspace's path replaced by `[WORKSPACE]`, for snapshots.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        // The canonical path first: it may be longer than the one we created (a /tmp symlink).
        if let Ok(canon) = self.path().canonicalize() {
            out = out.replace(&canon.to_string_lossy().into_owned(), "[WORKSPACE]");
        }
        out.replace(&self.path().to_string_lossy().into_owned(), "[WORKSPACE]")
    }
}

/// Snapshots `text` as `snapshots/AREA__NAME.snap`, with any temporary path
/// that slipped through redacted.
pub fn snapshot(area: &str, name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"/[^\s`']*/vitgraph-test-[A-Za-z0-9_]+", "[WORKSPACE]");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(format!("{area}__{name}"), text));
}
