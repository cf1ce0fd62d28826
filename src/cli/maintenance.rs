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

pub(super) fn init(start: &Path, args: InitArgs) -> Result<i32, Failure> {
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

pub(super) fn gc(ws: &Workspace) -> Result<i32, Failure> {
    let Some(store) = Store::open_existing(&ws.root)? else {
        println!("nothing to collect: no store yet");
        return Ok(exit::SUCCESS);
    };
    let stats = store.objects().gc()?;
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

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Mend what is found: set damaged objects aside and rewrite each damaged
    /// or missing object from an intact copy in `out/` (never from itself);
    /// nodes whose objects have no intact copy run again when a build must
    /// restore them.
    #[arg(long)]
    pub repair: bool,
}

pub(super) fn verify(ws: &Workspace, args: VerifyArgs) -> Result<i32, Failure> {
    let Some(store) = Store::open_existing(&ws.root)? else {
        println!("nothing to verify: no store yet");
        return Ok(exit::SUCCESS);
    };
    if let Some(problem) = store.objects().check_database()? {
        println!(
            "damaged: {} (SQLite's check: {problem})",
            store.database_path().display()
        );
        println!("move `cache/state.sqlite` and its `-wal` and `-shm` files aside and rebuild; objects in `cache/objects/` are kept and re-used");
        return Ok(exit::NODE_FAILED);
    }
    let damage = store.objects().verify()?;
    if damage.is_empty() {
        println!("store verified: no damage");
        return Ok(exit::SUCCESS);
    }
    for d in &damage {
        println!(
            "damaged: {} {}{}",
            d.object,
            describe(&d.kind),
            used_by(&d.runs)
        );
    }
    if !args.repair {
        println!(
            "{} damaged objects; `vitgraph verify --repair` sets them aside and rewrites what it can from `out/`",
            damage.len()
        );
        return Ok(exit::NODE_FAILED);
    }
    if store.is_read_only() {
        return Err(usage(
            "cannot repair: the workspace's store is read-only",
            "run `vitgraph verify --repair` as a user who can write `cache/`",
        ));
    }
    let repair = store.objects().repair(damage)?;
    for (object, from) in &repair.repaired {
        println!("repaired: {object} from {from}");
    }
    for d in &repair.unrepaired {
        println!(
            "no intact copy of {}{}: `vitgraph build` runs the node again when it must restore it",
            d.object,
            used_by(&d.runs)
        );
    }
    println!(
        "{} repaired, {} set aside without a copy",
        repair.repaired.len(),
        repair.unrepaired.len()
    );
    Ok(exit::SUCCESS)
}

fn describe(kind: &crate::store::DamageKind) -> String {
    match kind {
        crate::store::DamageKind::Corrupt { actual } => {
            format!("(its content hashes to {})", actual.short())
        }
        crate::store::DamageKind::Missing => "(missing)".into(),
        crate::store::DamageKind::Unreadable(e) => format!("(unreadable: {e})"),
    }
}

fn used_by(runs: &[String]) -> String {
    if runs.is_empty() {
        String::new()
    } else {
        format!(" (used by {})", runs.join(", "))
    }
}
