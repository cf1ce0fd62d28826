//! `vitgraph export` and `vitgraph import`: a study's runs carried between
//! machines in one file (see `store::bundle`).

use std::path::PathBuf;

use clap::Args;

use super::{load, usage, Failure};
use crate::engine::key::RecordedParts;
use crate::exit;
use crate::pipeline::Override;
use crate::store::Store;
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Stages, node ids, globs or pipeline file stems; their runs and those
    /// of everything they need are exported. None means every stage.
    pub targets: Vec<String>,
    /// The bundle to write (a tar archive; `.vgb` by convention).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A bundle written by `vitgraph export`.
    pub bundle: PathBuf,
}

pub(super) fn export(
    ws: &Workspace,
    overrides: &[Override],
    args: ExportArgs,
) -> Result<i32, Failure> {
    let graph = load(ws, overrides)?;
    let selection = crate::graph::select(&graph, &args.targets)?;
    let Some(store) = Store::open_existing(&ws.root)? else {
        return Err(usage(
            "nothing to export: this workspace has no store yet",
            "build the targets first (`vitgraph build TARGETS`)",
        ));
    };
    let ids: Vec<&str> = selection
        .iter()
        .map(|&i| graph.nodes[i].id.as_str())
        .collect();
    let host = crate::engine::env::host_name();
    let out = store.reader().export_bundle(&ids, &args.output, host)?;
    let missing = ids.len() - out.runs;
    println!(
        "exported {} runs and {} objects ({}) to {}",
        out.runs,
        out.objects,
        bytes_text(out.bytes),
        args.output.display()
    );
    if missing > 0 {
        println!(
            "{missing} of the {} selected nodes have no run yet and are not in the bundle",
            ids.len()
        );
    }
    Ok(exit::SUCCESS)
}

pub(super) fn import(ws: &Workspace, args: ImportArgs) -> Result<i32, Failure> {
    if !args.bundle.is_file() {
        return Err(usage(
            format!("no bundle at `{}`", args.bundle.display()),
            "give the path of a file written by `vitgraph export`",
        ));
    }
    let store = Store::open(&ws.root)?;
    let key_of = |parts: &str| {
        serde_json::from_str::<RecordedParts>(parts)
            .ok()
            .map(|r| r.parts.key())
    };
    let got = store.objects().import_bundle(&args.bundle, &key_of)?;
    let from = got
        .from_host
        .as_deref()
        .map(|h| format!(" (written on `{h}`)"))
        .unwrap_or_default();
    println!(
        "imported {}{from}: {} runs, {} new here, {} now their node's current run; {} objects ({}) added",
        args.bundle.display(),
        got.runs,
        got.added,
        got.current,
        got.objects_added,
        bytes_text(got.bytes_added)
    );
    println!("`vitgraph status` shows where each run was measured; a hardware node measured on another host stands as measured elsewhere and is not measured again here");
    Ok(exit::SUCCESS)
}

/// A size as people read it: `812 B`, `4.2 kB`, `1.31 GB` (SI, 3 digits).
fn bytes_text(n: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ if value >= 100.0 => format!("{value:.0} {}", units[unit]),
        _ if value >= 10.0 => format!("{value:.1} {}", units[unit]),
        _ => format!("{value:.2} {}", units[unit]),
    }
}
