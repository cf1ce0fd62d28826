//! Build script: with the `torch` feature, lets the binary find libtorch at run
//! time and records the libtorch and CUDA versions it was built against.
//!
//! rustc links with `--as-needed` and torch-sys adds no RUNPATH, so without one
//! the binary needs `LD_LIBRARY_PATH`. torch-sys exports its library folder as
//! `DEP_TCH_LIBTORCH_LIB`; we add it, and the `nvidia/cu13/lib` folder that a
//! pip layout keeps beside `torch/`, as RUNPATH entries.

use std::env;
use std::fs;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if env::var_os("CARGO_FEATURE_TORCH").is_none() {
        return;
    }
    let Ok(lib) = env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!(
            "cargo:warning=torch-sys exported no libtorch folder; set LD_LIBRARY_PATH at run time"
        );
        return;
    };
    let lib = Path::new(&lib);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if let Some(torch) = lib.parent() {
        let cuda_libs = torch.join("../nvidia/cu13/lib");
        if cuda_libs.is_dir() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", cuda_libs.display());
        }
        compile_shim(torch);
        let (version, cuda) = versions(&torch.join("version.py"));
        println!("cargo:rustc-env=VITGRAPH_LIBTORCH_VERSION={version}");
        println!("cargo:rustc-env=VITGRAPH_LIBTORCH_CUDA={cuda}");
    }
}

/// The small C++ shim for what tch does not bind (the SDPA backend flags).
fn compile_shim(torch: &Path) {
    println!("cargo:rerun-if-changed=csrc/sdp_backend.cpp");
    cc::Build::new()
        .cpp(true)
        .file("csrc/sdp_backend.cpp")
        .include(torch.join("include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false)
        .compile("vitgraph_shim");
}

/// `__version__` and `cuda` from torch's `version.py`, "unknown" when absent.
fn versions(path: &Path) -> (String, String) {
    let text = fs::read_to_string(path).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .filter_map(|line| line.split_once('='))
            .filter(|(left, _)| left.split(':').next().map(str::trim) == Some(name))
            .map(|(_, value)| {
                value
                    .trim()
                    .trim_matches(|c| c == '\'' || c == '"')
                    .to_owned()
            })
            .find(|value| !value.is_empty() && value != "None")
            .unwrap_or_else(|| "unknown".to_owned())
    };
    (field("__version__"), field("cuda"))
}
