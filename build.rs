//! Build script: with the `torch` feature, lets the binary find libtorch at run
//! time and records the libtorch and CUDA versions it was built against.
//!
//! rustc links with `--as-needed` and torch-sys adds no RUNPATH, so without one
//! the binary needs `LD_LIBRARY_PATH`. torch-sys exports its library folder as
//! `DEP_TCH_LIBTORCH_LIB`; we add it, and the `nvidia/cu13/lib` folder that a
//! pip layout keeps beside `torch/`, as RUNPATH entries.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

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
        compile_graph_shim(torch);
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

/// The CUDA-graph shim (`csrc/cuda_graph.cpp`), a shared object embedded in
/// the binary and loaded on a GPU host (`src/tasks/vit/cuda_graph.rs`).
/// It is compiled against libtorch's CUDA headers and the CUDA runtime's
/// (`nvidia/cu13/include` beside `torch/`, which scripts/setup-libtorch.sh
/// unpacks) and links nothing: its libtorch_cuda symbols are resolved when
/// it is loaded. Without the headers an empty file is embedded and
/// `graph: Cuda` says how to get them; `VITGRAPH_CUDA_GRAPH_SHIM_MISSING`
/// carries why.
fn compile_graph_shim(torch: &Path) {
    println!("cargo:rerun-if-changed=csrc/cuda_graph.cpp");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("libvitgraph_cuda_graph.so");
    println!(
        "cargo:rustc-env=VITGRAPH_CUDA_GRAPH_SHIM={}",
        object.display()
    );
    let cuda_include = torch.join("../nvidia/cu13/include");
    // Headers added to the cache later (an older scripts/setup-libtorch.sh
    // cache) rebuild the shim.
    println!(
        "cargo:rerun-if-changed={}",
        cuda_include.join("crt/host_config.h").display()
    );
    let missing = if !cuda_include.join("crt/host_config.h").is_file() {
        Some(format!(
            "the CUDA runtime headers were not found at {} when this vitgraph was built (scripts/setup-libtorch.sh unpacks them)",
            cuda_include.display()
        ))
    } else {
        let compiler = cc::Build::new().cpp(true).get_compiler();
        let status = Command::new(compiler.path())
            .args(["-shared", "-fPIC", "-O2", "-std=c++17", "-w"])
            .arg("-D_GLIBCXX_USE_CXX11_ABI=1")
            .arg("-I")
            .arg(torch.join("include"))
            .arg("-I")
            .arg(torch.join("include/torch/csrc/api/include"))
            .arg("-I")
            .arg(&cuda_include)
            .arg("csrc/cuda_graph.cpp")
            .arg("-o")
            .arg(&object)
            .status();
        match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(format!("compiling csrc/cuda_graph.cpp failed ({s})")),
            Err(e) => Some(format!("the C++ compiler could not be run: {e}")),
        }
    };
    if let Some(why) = &missing {
        println!("cargo:warning=graph: Cuda will be unavailable: {why}");
        fs::write(&object, b"").expect("OUT_DIR is writable");
    }
    println!(
        "cargo:rustc-env=VITGRAPH_CUDA_GRAPH_SHIM_MISSING={}",
        missing.unwrap_or_default()
    );
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
