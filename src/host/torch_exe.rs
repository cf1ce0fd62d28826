//! Which executable runs a libtorch-backed task, and which libtorch it runs.
//!
//! Linking libtorch costs every start of the program about half a second
//! (libtorch registers its operators in static constructors), which alone
//! would break the budget of a no-op build. So the `vitgraph` users run is
//! built without the `torch` feature, and `Vit` and `OpBench` nodes run their
//! `exec-task` child in `vitgraph-torch`: the same program built with the
//! feature, found through `$VITGRAPH_TORCH_EXE` or beside `vitgraph`. A build
//! of `vitgraph` with the feature runs those tasks itself.
//!
//! The libtorch version is a key facet of hardware-measuring nodes, so a
//! torch-free `vitgraph` must know the version `vitgraph-torch` was built
//! against. It asks (`vitgraph-torch torch-info`) once per build of that
//! executable and caches the answer under `~/.cache/vitgraph/torch-exe/`,
//! keyed by the executable's path and identity (size, mtime, inode), so
//! rebuilding it against another libtorch is noticed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Names the libtorch executable explicitly (otherwise: beside `vitgraph`).
pub const ENV_VAR: &str = "VITGRAPH_TORCH_EXE";

/// The libtorch executable's file name.
pub const NAME: &str = "vitgraph-torch";

/// What a build of vitgraph was built against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchBuild {
    /// libtorch's `__version__` ("none" for a build without libtorch).
    pub libtorch: String,
    /// The CUDA version libtorch was built for ("none" for CPU-only libtorch).
    pub libtorch_cuda: String,
}

impl TorchBuild {
    fn none() -> TorchBuild {
        TorchBuild {
            libtorch: "none".into(),
            libtorch_cuda: "none".into(),
        }
    }
}

/// What this executable itself was built against.
pub fn this_build() -> TorchBuild {
    TorchBuild {
        libtorch: option_env!("VITGRAPH_LIBTORCH_VERSION")
            .unwrap_or("none")
            .into(),
        libtorch_cuda: option_env!("VITGRAPH_LIBTORCH_CUDA")
            .unwrap_or("none")
            .into(),
    }
}

/// The libtorch executable a torch-free build hands its libtorch tasks to.
pub fn torch_executable() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV_VAR).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let sibling = std::env::current_exe().ok()?.parent()?.join(NAME);
    sibling.is_file().then_some(sibling)
}

/// The libtorch that runs this workspace's libtorch tasks: this build's own,
/// or the one `vitgraph-torch` reports; "none" where there is none. Asked once
/// per process. An error when `vitgraph-torch` exists but cannot say: no
/// key may then be computed for a hardware-measuring node.
pub fn effective_build() -> &'static Result<TorchBuild, String> {
    static BUILD: OnceLock<Result<TorchBuild, String>> = OnceLock::new();
    BUILD.get_or_init(|| {
        if cfg!(feature = "torch") {
            return Ok(this_build());
        }
        match torch_executable() {
            Some(exe) => ask_cached(&exe),
            None => Ok(TorchBuild::none()),
        }
    })
}

/// The identity of an executable file: a rebuilt or replaced one differs.
fn identity(exe: &Path) -> Option<[u64; 5]> {
    let meta = std::fs::metadata(exe).ok()?;
    Some([
        meta.len(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        meta.ino(),
        meta.dev(),
    ])
}

#[derive(Serialize, Deserialize)]
struct Cached {
    exe: PathBuf,
    identity: [u64; 5],
    build: TorchBuild,
}

fn cache_file(exe: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let name = blake3::hash(exe.as_os_str().as_encoded_bytes()).to_hex();
    Some(
        base.join("vitgraph")
            .join("torch-exe")
            .join(format!("{}.json", &name[..16])),
    )
}

/// [`ask`], through the cache. A cache that cannot be written only costs
/// asking again next time; an answer that cannot be had is not cached.
fn ask_cached(exe: &Path) -> Result<TorchBuild, String> {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let Some(id) = identity(&exe) else {
        return Err(format!(
            "the libtorch executable `{}` cannot be read",
            exe.display()
        ));
    };
    let file = cache_file(&exe);
    if let Some(cached) = file
        .as_ref()
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| serde_json::from_slice::<Cached>(&b).ok())
        .filter(|c| c.exe == exe && c.identity == id)
    {
        return Ok(cached.build);
    }
    let build = ask(&exe)?;
    if let Some(file) = file {
        let entry = Cached {
            exe,
            identity: id,
            build: build.clone(),
        };
        let _ = crate::atomic::write(&file, &serde_json::to_vec(&entry).unwrap_or_default());
    }
    Ok(build)
}

/// Runs `EXE torch-info`: the libtorch it was built against, or why it
/// could not say (it cannot start, fails, or answers nonsense).
fn ask(exe: &Path) -> Result<TorchBuild, String> {
    let cmd = format!("`{} torch-info`", exe.display());
    let fix = format!("run {cmd} to see why; rebuild it (`scripts/quickstart.sh`), or point `{ENV_VAR}` at a working vitgraph-torch");
    let out = Command::new(exe)
        .arg("torch-info")
        .output()
        .map_err(|e| format!("{cmd} could not start: {e}; {fix}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "{cmd} failed ({}): {}; {fix}",
            out.status,
            tail.join(" / ")
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{cmd} answered something else than its JSON ({e}); {fix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_once_per_executable_identity() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("vitgraph-torch");
        let count = dir.path().join("count");
        let script = format!(
            "#!/bin/sh\necho x >> '{}'\necho '{{\"libtorch\": \"9.9.9+cu999\", \"libtorch_cuda\": \"99.9\"}}'\n",
            count.display()
        );
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let cache = dir.path().join("cache");
        // The only test in the binary that touches XDG_CACHE_HOME.
        std::env::set_var("XDG_CACHE_HOME", &cache);
        let asked = || {
            std::fs::read_to_string(&count)
                .unwrap_or_default()
                .lines()
                .count()
        };
        let first = ask_cached(&exe).unwrap();
        assert_eq!(first.libtorch, "9.9.9+cu999");
        assert_eq!(first.libtorch_cuda, "99.9");
        assert_eq!(ask_cached(&exe).unwrap(), first);
        assert_eq!(asked(), 1, "the second lookup must come from the cache");
        // A rebuilt executable (new size) is asked again.
        let mut script = std::fs::read_to_string(&exe).unwrap();
        script = script.replace("9.9.9", "9.9.10");
        std::fs::write(&exe, script).unwrap();
        assert_eq!(ask_cached(&exe).unwrap().libtorch, "9.9.10+cu999");
        assert_eq!(asked(), 2);
    }

    #[test]
    fn an_executable_that_fails_is_an_error_naming_it_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("vitgraph-torch");
        std::fs::write(
            &exe,
            "#!/bin/sh\necho 'libtorch.so: cannot open' >&2\nexit 3\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let e = ask(&exe).unwrap_err();
        assert!(e.contains("vitgraph-torch torch-info` failed"), "{e}");
        assert!(e.contains("libtorch.so: cannot open"), "{e}");
        assert!(e.contains("VITGRAPH_TORCH_EXE"), "{e}");
        std::fs::write(&exe, "#!/bin/sh\necho hello\n").unwrap();
        assert!(ask(&exe).unwrap_err().contains("JSON"));
    }
}
