//! Shared by the study tests: a temporary workspace holding a copy of the
//! repository's `pipelines/`, and the real `vitgraph` binary run in it.

use std::path::Path;
use std::process::Command;

/// The torch-free `vitgraph` that `scripts/test.sh` builds beside this test
/// build (`$VITGRAPH_LEAN_EXE`): with it, the study tests run as users do,
/// libtorch nodes in `vitgraph-torch`.
pub fn lean_exe() -> Option<std::path::PathBuf> {
    std::env::var_os("VITGRAPH_LEAN_EXE")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
}

/// The `vitgraph` the study tests run: the lean one when there is one.
pub fn exe() -> std::path::PathBuf {
    lean_exe().unwrap_or_else(|| env!("CARGO_BIN_EXE_vitgraph").into())
}

pub struct Study {
    pub dir: tempfile::TempDir,
}

impl Study {
    pub fn new() -> Study {
        let dir = tempfile::Builder::new()
            .prefix("vitgraph-study-")
            .tempdir()
            .expect("create a temporary directory");
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
        let to = dir.path().join("pipelines");
        std::fs::create_dir_all(&to).expect("create pipelines/");
        for entry in std::fs::read_dir(&from).expect("read pipelines/") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "ron") {
                std::fs::copy(&path, to.join(path.file_name().expect("a file name")))
                    .expect("copy a pipeline");
            }
        }
        // The study's notebooks (`Notebook` nodes read them from the workspace).
        let notebooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("notebooks");
        if let Ok(entries) = std::fs::read_dir(&notebooks) {
            std::fs::create_dir_all(dir.path().join("notebooks")).expect("create notebooks/");
            for path in entries.flatten().map(|e| e.path()) {
                if path.extension().is_some_and(|e| e == "ipynb") {
                    std::fs::copy(
                        &path,
                        dir.path()
                            .join("notebooks")
                            .join(path.file_name().expect("a file name")),
                    )
                    .expect("copy a notebook");
                }
            }
        }
        Study { dir }
    }

    /// `vitgraph` to run in the study, under `wrap` (e.g. `taskset -c 0`)
    /// when it is not empty; the arguments are the caller's to add.
    pub fn command(&self, wrap: &[&str]) -> Command {
        let mut cmd = match wrap.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(exe());
                c
            }
            None => Command::new(exe()),
        };
        if let (Some(_), Some(torch)) = (lean_exe(), option_env!("CARGO_BIN_EXE_vitgraph-torch")) {
            cmd.env("VITGRAPH_TORCH_EXE", torch);
        }
        // The host load is recorded, not judged: these tests run beside
        // each other on a machine that may be loaded, and what they check is
        // not the machine's quiet (tests about the load say `judge`).
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env("VITGRAPH_HOST_LOAD", "record");
        // The Jupyter kernel of `Notebook` nodes, where scripts/test.sh installed it.
        if let Some(pydeps) = std::env::var_os("VITGRAPH_PYDEPS") {
            cmd.env("PYTHONPATH", pydeps);
        }
        cmd
    }

    /// Runs `vitgraph ARGS…`: whether it succeeded, and stdout.
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.command(&[]).args(args).output().expect("run vitgraph");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `vitgraph ARGS…`; panics with its output unless it exits 0.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args);
        assert!(ok, "vitgraph {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    }
}
