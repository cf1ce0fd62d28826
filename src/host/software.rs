//! The software a `Command` declares it runs with (`env: Python(…)`),
//! probed once per process per interpreter: the facets its key carries.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Run by the interpreter: versions from the installed packages' metadata
/// (nothing is imported, so the probe costs the interpreter's start and a
/// scan of its `site-packages`, not torch's import), and a hash of every
/// installed package's name and version.
const PYTHON_PROBE: &str = r#"
import hashlib, json, sys
from importlib import metadata
def version(*names):
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return "none"
dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata['Name']})
print(json.dumps({
    "python": sys.version.split()[0],
    "torch": version("torch"),
    "triton": version("triton", "pytorch-triton"),
    "cudnn": version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
    "packages": hashlib.sha256("\n".join(dists).encode()).hexdigest()[:16],
}))
"#;

/// How long a probe may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(60);

type Facets = BTreeMap<String, String>;

fn cache() -> &'static Mutex<HashMap<String, Result<Facets, String>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Result<Facets, String>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The key facets of Python `interpreter` (`py.python`, `py.torch`,
/// `py.triton`, `py.cudnn`, `py.packages`), asked once per process; an
/// error says what went wrong and how to fix it.
pub fn python_facets(interpreter: &str, root: &Path) -> Result<Facets, String> {
    let key = format!("{}\0{interpreter}", root.display());
    if let Some(known) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return known;
    }
    let answer = probe_python(interpreter, root);
    if let Ok(mut c) = cache().lock() {
        c.insert(key, answer.clone());
    }
    answer
}

fn probe_python(interpreter: &str, root: &Path) -> Result<Facets, String> {
    // A relative path is the workspace's (`.venv/bin/python`); a bare name
    // is looked up on PATH.
    let program = if interpreter.contains('/') {
        root.join(interpreter)
    } else {
        interpreter.into()
    };
    let args = ["-c".to_owned(), PYTHON_PROBE.to_owned()];
    let out = super::process::run(program.as_os_str(), interpreter, &args, Some(root), TIMEOUT)
        .map_err(|e| {
            format!(
                "cannot run the Python interpreter `{interpreter}` its `env` names: {e} \
                 (name an interpreter on PATH, or a path relative to the workspace root)"
            )
        })?;
    if !out.ok {
        let last = out.stderr.lines().last().unwrap_or("").trim();
        return Err(format!(
            "the Python interpreter `{interpreter}` failed its version probe (exit {}): {last}",
            out.code.map_or("by a signal".to_owned(), |c| c.to_string())
        ));
    }
    let doc: BTreeMap<String, String> = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
        .ok_or_else(|| {
            format!("the Python interpreter `{interpreter}` answered its version probe with no JSON line")
        })?;
    Ok(doc
        .into_iter()
        .map(|(k, v)| (format!("py.{k}"), v))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python3_answers_with_its_version_and_package_hash() {
        let dir = tempfile::tempdir().unwrap();
        let f = python_facets("python3", dir.path()).expect("python3 is on PATH");
        assert!(f["py.python"].starts_with('3'), "{f:?}");
        assert_eq!(f["py.packages"].len(), 16, "{f:?}");
        for k in ["py.torch", "py.triton", "py.cudnn"] {
            assert!(f.contains_key(k), "{k}: {f:?}");
        }
    }

    #[test]
    fn a_missing_interpreter_says_how_to_name_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = python_facets(".venv/bin/python", dir.path()).unwrap_err();
        assert!(
            err.contains("cannot run the Python interpreter `.venv/bin/python`"),
            "{err}"
        );
        assert!(err.contains("relative to the workspace root"), "{err}");
    }
}
