//! `vitgraph export` and `import` (a study's runs carried between machines
//! in one file, see `store::bundle`), `push` and `pull` (to and from a
//! remote named in `vitgraph.ron`, see `store::remote`), `remote verify`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{load, usage, Failure};
use crate::config::RemoteMode;
use crate::engine::key::RecordedParts;
use crate::exit;
use crate::pipeline::Override;
use crate::store::{Remote, Store};
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Stages, node ids, globs or pipeline file stems; their runs and those
    /// of everything they need are exported. None means every stage.
    pub targets: Vec<String>,
    /// The bundle to write (a tar archive; `.vgb` by convention).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Carry only the outputs the targets read: all of the selection's
    /// last nodes' (none of the others needs them) and, of the nodes they
    /// need, what each reads (a `Report`: `results.json` and
    /// `metrics.json`; other tasks: all). Every run's record goes; the rest
    /// (raw traces) stays here. On import such a run stands for its node,
    /// and a node that must read what is missing fails saying where it is.
    #[arg(long)]
    pub results_only: bool,
    /// Sign each run record with this secret key (`vitgraph key generate`);
    /// default: the file `VITGRAPH_SIGNING_KEY` names, if set.
    #[arg(long, value_name = "KEYFILE")]
    pub sign: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A bundle written by `vitgraph export`.
    pub bundle: PathBuf,
}

#[derive(Args, Debug)]
pub struct PushPullArgs {
    /// Stages, node ids, globs or pipeline file stems; their runs and those
    /// of everything they need. None means every stage.
    pub targets: Vec<String>,
    /// The remote, by its name in `vitgraph.ron` (needed when it names several).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// `push`: sign each run record with this secret key (`vitgraph key
    /// generate`); default: the file `VITGRAPH_SIGNING_KEY` names, if set.
    #[arg(long, value_name = "KEYFILE")]
    pub sign: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum RemoteCommand {
    /// List the remotes `vitgraph.ron` names.
    List,
    /// Remove what this workspace's study no longer needs from a remote:
    /// records of its nodes beyond each node's newest `--keep-last` that no
    /// baseline saved here names, and objects no record names, all older
    /// than the grace period. A dry run unless `--apply`.
    Gc {
        /// Stages, node ids, globs or pipeline file stems whose superseded
        /// records may go; none means every stage. Other studies' records stay.
        targets: Vec<String>,
        /// The remote, by its name in `vitgraph.ron`.
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        /// Keep whatever was written or touched within this many days.
        #[arg(long, value_name = "DAYS", default_value_t = 7.0)]
        keep_days: f64,
        /// Keep each node's this many newest records (its last N
        /// measurements); runs saved in a baseline here are kept whatever
        /// their age.
        #[arg(long, value_name = "N", default_value_t = 1)]
        keep_last: usize,
        /// Remove; without it, print what would be removed.
        #[arg(long)]
        apply: bool,
    },
    /// Check every run record and object on a remote.
    Verify {
        /// The remote, by its name in `vitgraph.ron`.
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
    },
}

/// The remote a command names (or the only one), its folder and mode.
pub(super) fn remote_of(
    ws: &Workspace,
    name: Option<&str>,
) -> Result<(Remote, RemoteMode), Failure> {
    let file = crate::pipeline::load_settings(&ws.root)?;
    let names: Vec<&str> = file.remotes.keys().map(String::as_str).collect();
    let chosen = match (name, names.as_slice()) {
        (_, []) => {
            return Err(usage(
                "no remote: `vitgraph.ron` names none",
                "add one, e.g. `Workspace(remotes: {\"lab\": Remote(path: \"/shared/vitgraph-runs\")})`, or carry runs in a file with `vitgraph export`/`import`",
            ))
        }
        (None, [only]) => *only,
        (None, _) => {
            return Err(usage(
                format!("which remote? `vitgraph.ron` names {}", names.join(", ")),
                "name one with `--remote NAME`",
            ))
        }
        (Some(n), _) if file.remotes.contains_key(n) => n,
        (Some(n), _) => {
            return Err(usage(
                format!("no remote `{n}` in `vitgraph.ron`"),
                format!("its remotes: {}", names.join(", ")),
            ))
        }
    };
    let spec = &file.remotes[chosen];
    if let Err((what, fix)) = spec.check() {
        return Err(usage(
            format!("`vitgraph.ron`: remote `{chosen}` {what}"),
            fix,
        ));
    }
    let remote = Remote::of_spec(chosen, spec, &ws.root)?;
    Ok((remote, spec.mode))
}

/// The node ids of the targets and everything they need.
fn selected_ids(
    ws: &Workspace,
    overrides: &[Override],
    targets: &[String],
) -> Result<Vec<String>, Failure> {
    let graph = load(ws, overrides)?;
    let selection = crate::graph::select(&graph, targets)?;
    Ok(selection
        .iter()
        .map(|&i| graph.nodes[i].id.clone())
        .collect())
}

fn key_of(parts: &str) -> Option<crate::hash::ContentHash> {
    serde_json::from_str::<RecordedParts>(parts)
        .ok()
        .map(|r| r.parts.key())
}

pub(super) fn push(
    ws: &Workspace,
    overrides: &[Override],
    args: PushPullArgs,
) -> Result<i32, Failure> {
    let (remote, mode) = remote_of(ws, args.remote.as_deref())?;
    let name = remote.name.clone();
    if mode == RemoteMode::Read {
        return Err(usage(
            format!(
                "remote `{name}` is read-only for this workspace (`mode: Read` in `vitgraph.ron`)"
            ),
            "pull from it, or push to another remote",
        ));
    }
    let ids = selected_ids(ws, overrides, &args.targets)?;
    let Some(store) = Store::open_existing(&ws.root)? else {
        return Err(usage(
            "nothing to push: this workspace has no store yet",
            "build the targets first (`vitgraph build TARGETS`)",
        ));
    };
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let key = super::keys::signing_key(args.sign.as_deref())?;
    let got = store.reader().push(&remote, &ids, key.as_ref())?;
    println!(
        "pushed to `{name}`: {} runs, {} new there; {} objects ({}) copied",
        got.runs,
        got.runs_added,
        got.objects_added,
        bytes_text(got.bytes_added)
    );
    if got.without_outputs > 0 {
        println!(
            "{} runs not pushed: they are here without all their outputs (a `--results-only` bundle); push them from the machine that has them",
            got.without_outputs
        );
    }
    Ok(exit::SUCCESS)
}

pub(super) fn pull(
    ws: &Workspace,
    overrides: &[Override],
    args: PushPullArgs,
) -> Result<i32, Failure> {
    let (remote, _) = remote_of(ws, args.remote.as_deref())?;
    let name = remote.name.clone();
    if args.sign.is_some() {
        return Err(usage(
            "`--sign` signs what is pushed or exported; a pull checks signatures",
            "leave it out",
        ));
    }
    let trust = super::keys::trust(ws)?;
    let ids = selected_ids(ws, overrides, &args.targets)?;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let store = Store::open(&ws.root)?;
    let got = store.objects().pull(&remote, &ids, &key_of, &trust)?;
    println!(
        "pulled from `{name}`: {} runs new here, {} now their node's current run{}; {} objects ({}) added",
        got.runs_added,
        got.current,
        match got.signed {
            0 => String::new(),
            n => format!(", {n} signed (signatures checked)"),
        },
        got.objects_added,
        bytes_text(got.bytes_added),
    );
    damaged_runs("pulled", &got.refused)
}

/// Exit 1 naming the runs left out because an object arrived damaged (the
/// others arrived); success when there are none.
fn damaged_runs(verb: &str, refused: &[String]) -> Result<i32, Failure> {
    if refused.is_empty() {
        return Ok(exit::SUCCESS);
    }
    Err(Failure::Report(
        miette::miette!(
            help = format!("the other runs were {verb}; `vitgraph remote verify` (or exporting the bundle again) finds where the damage is, and a copy from an intact source brings these runs"),
            "{} runs were not {verb}:\n{}",
            refused.len(),
            refused.join("\n")
        ),
        exit::NODE_FAILED,
    ))
}

pub(super) fn remote(
    ws: &Workspace,
    overrides: &[Override],
    cmd: RemoteCommand,
) -> Result<i32, Failure> {
    match cmd {
        RemoteCommand::Gc {
            targets,
            remote,
            keep_days,
            keep_last,
            apply,
        } => {
            let (r, mode) = remote_of(ws, remote.as_deref())?;
            let name = r.name.clone();
            if apply && mode == RemoteMode::Read {
                return Err(usage(
                    format!("remote `{name}` is read-only for this workspace (`mode: Read` in `vitgraph.ron`)"),
                    "collect it from a workspace that may write it",
                ));
            }
            if !(keep_days >= 0.0 && keep_days.is_finite()) {
                return Err(usage(
                    format!("`--keep-days {keep_days}` is not a number of days"),
                    "give 0 or more, e.g. `--keep-days 7`",
                ));
            }
            let ids = selected_ids(ws, overrides, &targets)?;
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            if keep_last == 0 {
                return Err(usage(
                    "`--keep-last 0` would remove every record of the selected nodes",
                    "keep at least each node's newest: `--keep-last 1` (the default)",
                ));
            }
            let grace = std::time::Duration::from_secs_f64(keep_days * 86400.0);
            let baselines = match Store::open_existing(&ws.root)? {
                Some(store) => store.reader().baseline_keys()?,
                None => Default::default(),
            };
            let roots = crate::store::GcRoots {
                last: keep_last,
                keys: baselines,
            };
            let gc = crate::store::remote_gc(&r, &ids, &roots, grace, apply)?;
            let verb = if apply { "removed" } else { "would remove" };
            println!(
                "remote `{name}`: {verb} {} superseded run records, {} objects no record names ({}) and {} leftover files; {} records kept{}",
                gc.records.len(),
                gc.objects.len(),
                bytes_text(gc.bytes),
                gc.tmp.len(),
                gc.records_kept,
                match gc.kept_for_baselines {
                    0 => String::new(),
                    n => format!(" ({n} of them only because a baseline here names them)"),
                }
            );
            if !apply && (gc.records.len() + gc.objects.len() + gc.tmp.len()) > 0 {
                println!("(a dry run: `vitgraph remote gc --apply` removes them)");
            }
            Ok(exit::SUCCESS)
        }
        RemoteCommand::List => {
            let file = crate::pipeline::load_settings(&ws.root)?;
            if file.remotes.is_empty() {
                println!("no remotes: `vitgraph.ron` names none");
            }
            for (name, spec) in &file.remotes {
                let mode = match spec.mode {
                    RemoteMode::ReadWrite => "read-write",
                    RemoteMode::Read => "read",
                };
                let place = match spec.kind() {
                    crate::config::RemoteKind::Dir(path) => {
                        ws.root.join(path).display().to_string()
                    }
                    crate::config::RemoteKind::S3 { url, .. } => url.to_owned(),
                };
                println!("{name}  {place}  ({mode})");
            }
            Ok(exit::SUCCESS)
        }
        RemoteCommand::Verify { remote } => {
            let (r, _) = remote_of(ws, remote.as_deref())?;
            let name = r.name.clone();
            let (runs, objects, damage) = crate::store::verify_remote(&r, &key_of)?;
            for d in &damage {
                println!("damaged: {}: {}", d.path, d.problem);
            }
            println!(
                "remote `{name}`: {runs} run records, {objects} objects, {} problems",
                damage.len()
            );
            Ok(if damage.is_empty() {
                exit::SUCCESS
            } else {
                exit::NODE_FAILED
            })
        }
    }
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
    let key = super::keys::signing_key(args.sign.as_deref())?;
    let read = args
        .results_only
        .then(|| what_the_last_read(&graph, &selection));
    let out =
        store
            .reader()
            .export_bundle(&ids, read.as_ref(), &args.output, host, key.as_ref())?;
    let missing = ids.len() - out.runs;
    println!(
        "exported {} runs and {} objects ({}) to {}",
        out.runs,
        out.objects,
        bytes_text(out.bytes),
        args.output.display()
    );
    if out.left_behind > 0 {
        println!(
            "{} of the runs go without all their outputs (`--results-only`): their records, and only what the targets read of their outputs; the rest stays here",
            out.left_behind
        );
    }
    if missing > 0 {
        println!(
            "{missing} of the {} selected nodes have no run yet and are not in the bundle",
            ids.len()
        );
    }
    Ok(exit::SUCCESS)
}

/// What a `--results-only` bundle carries: all the outputs of the
/// selection's last nodes (no other selected node needs them), and of the
/// nodes they need what they read (a `Report`: `results.json` and
/// `metrics.json`; any other task: all).
fn what_the_last_read<'g>(
    graph: &'g crate::graph::Graph,
    selection: &[usize],
) -> crate::store::Carry<'g> {
    let selected: std::collections::HashSet<usize> = selection.iter().copied().collect();
    let mut needed = vec![false; graph.nodes.len()];
    for &i in selection {
        for d in graph.nodes[i].deps() {
            needed[d] = true;
        }
    }
    let mut carry = crate::store::Carry::new();
    for &i in selection.iter().filter(|&&i| !needed[i]) {
        carry.insert(graph.nodes[i].id.as_str(), None);
        let reads = graph.nodes[i].task.reads_of_upstream();
        for d in graph.nodes[i]
            .deps()
            .into_iter()
            .filter(|d| selected.contains(d))
        {
            let entry = carry.entry(graph.nodes[d].id.as_str()).or_insert(reads);
            // Read whole by one target, it goes whole.
            if reads.is_none() {
                *entry = None;
            }
        }
    }
    carry
}

pub(super) fn import(ws: &Workspace, args: ImportArgs) -> Result<i32, Failure> {
    if !args.bundle.is_file() {
        return Err(usage(
            format!("no bundle at `{}`", args.bundle.display()),
            "give the path of a file written by `vitgraph export`",
        ));
    }
    let trust = super::keys::trust(ws)?;
    let store = Store::open(&ws.root)?;
    let got = store
        .objects()
        .import_bundle(&args.bundle, &key_of, &trust)?;
    let from = got
        .from_host
        .as_deref()
        .map(|h| format!(" (written on `{h}`)"))
        .unwrap_or_default();
    let signed = match got.signed {
        0 => String::new(),
        n => format!(", {n} signed (signatures checked)"),
    };
    println!(
        "imported {}{from}: {} runs, {} new here, {} now their node's current run{signed}; {} objects ({}) added",
        args.bundle.display(),
        got.runs,
        got.added,
        got.current,
        got.objects_added,
        bytes_text(got.bytes_added)
    );
    if got.without_outputs > 0 {
        println!(
            "{} runs came without all their outputs (exported with `--results-only`): they stand for their nodes; a node that must read what is missing fails until a bundle with it is imported",
            got.without_outputs
        );
    }
    println!("`vitgraph status` shows where each run was measured; a hardware node measured on another machine stands as measured elsewhere and is not measured again here");
    damaged_runs("imported", &got.refused)
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
