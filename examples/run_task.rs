//! Runs one `Vit` or `OpBench` spec directly, outside any pipeline, writing
//! its outputs into a folder (used by `scripts/gpu/` to measure on a GPU host):
//!
//! ```text
//! run_task vit '(model: "vit16x12x768", batch: 64, dtype: "bf16")' OUT_DIR [NEEDS_DIR…]
//! run_task opbench '(op: Calibrate)' OUT_DIR
//! ```
//! NEEDS_DIR are upstream output folders (a `Calibrate` node's, for OpBench).

use std::path::PathBuf;
use std::process::ExitCode;

use vitgraph::tasks::{opbench, vit, TaskContext};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, spec, out, needs @ ..] = args.as_slice() else {
        eprintln!("usage: run_task vit|opbench SPEC OUT_DIR [NEEDS_DIR…]");
        return ExitCode::from(2);
    };
    let out = PathBuf::from(out);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("cannot create {}: {e}", out.display());
        return ExitCode::from(2);
    }
    let ctx = TaskContext {
        root: std::env::current_dir().unwrap_or_default(),
        out,
        needs: [(
            "upstream".to_owned(),
            needs.iter().map(PathBuf::from).collect(),
        )]
        .into(),
        gpus: vec![vitgraph::gpu::GpuId::index(0)],
        node: format!("{kind} {spec}"),
        log: None,
        upstream: Default::default(),
    };
    let result = match kind.as_str() {
        "vit" => ron::from_str(spec)
            .map_err(|e| e.to_string())
            .map(|s| vit::run(&s, &ctx)),
        "opbench" => ron::from_str(spec)
            .map_err(|e| e.to_string())
            .map(|s| opbench::run(&s, &ctx)),
        other => Err(format!("unknown kind `{other}`; use vit or opbench")),
    };
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("{:?}", miette::Report::new(e));
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("bad spec: {e}");
            ExitCode::from(2)
        }
    }
}
