//! `vitgraph init`, `gc` and `verify`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{usage, Failure};
use crate::exit;
use crate::store::Store;
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct InitArgs {
    /// Where to create the workspace (default: the current directory).
    pub dir: Option<PathBuf>,
}

const EXAMPLE: &str = r#"// An example study: three "experiments", an analysis of each, one report.
// Build it with `vitgraph build`; edit a stage and build again to see what re-runs.
Pipeline(
    params: { "scale": 10 },
    stages: {
        "runs": Stage(
            matrix: { "size": [1, 2, 3] },
            task: Command(run: "echo $(( ${size} * ${scale} )) > ${out}/value.txt", outputs: ["value.txt"]),
        ),
        "analysis": Stage(
            for_each: "runs",
            task: Command(run: "echo \"size=${size} value=$(cat ${needs.runs}/value.txt)\" > ${out}/summary.txt",
                          outputs: ["summary.txt"]),
        ),
        "report": Stage(
            needs: ["analysis"],
            task: Command(run: "cat $(for d in ${needs.analysis}; do echo $d/summary.txt; done) > ${out}/report.txt",
                          outputs: ["report.txt"]),
        ),
    },
)
"#;

pub fn init(start: &Path, args: InitArgs) -> Result<i32, Failure> {
    let dir = args.dir.unwrap_or_else(|| start.to_path_buf());
    let pipelines = dir.join("pipelines");
    let example = pipelines.join("example.ron");
    if example.exists() {
        return Err(usage(
            format!("`{}` already exists", example.display()),
            "init creates a new workspace; this one is set up",
        ));
    }
    std::fs::create_dir_all(&pipelines).map_err(|e| {
        usage(
            format!("cannot create `{}`: {e}", pipelines.display()),
            "check the directory's permissions",
        )
    })?;
    std::fs::write(&example, EXAMPLE).map_err(|e| {
        usage(
            format!("cannot write `{}`: {e}", example.display()),
            "check permissions",
        )
    })?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        let _ = std::fs::write(&ignore, "/cache\n/out\n");
    }
    println!("created {}; run `vitgraph build` there", example.display());
    Ok(exit::SUCCESS)
}

pub fn gc(ws: &Workspace) -> Result<i32, Failure> {
    let Some(store) = Store::open_existing(&ws.root)? else {
        println!("nothing to collect: no store yet");
        return Ok(exit::SUCCESS);
    };
    let stats = store.gc()?;
    println!(
        "removed {} objects, freed {} bytes",
        stats.objects_removed, stats.bytes_freed
    );
    if stats.job_dirs_removed > 0 {
        println!(
            "removed {} directories of finished cluster jobs",
            stats.job_dirs_removed
        );
    }
    Ok(exit::SUCCESS)
}

pub fn verify(ws: &Workspace) -> Result<i32, Failure> {
    let Some(store) = Store::open_existing(&ws.root)? else {
        println!("nothing to verify: no store yet");
        return Ok(exit::SUCCESS);
    };
    let damage = store.verify()?;
    if damage.is_empty() {
        println!("store verified: no damage");
        return Ok(exit::SUCCESS);
    }
    for d in &damage {
        let runs = if d.runs.is_empty() {
            String::new()
        } else {
            format!(" (used by {})", d.runs.join(", "))
        };
        println!("damaged: {} {:?}{runs}", d.object, d.kind);
    }
    println!(
        "{} damaged objects; rebuild the nodes that use them with `vitgraph build --force NODE`",
        damage.len()
    );
    Ok(exit::NODE_FAILED)
}
