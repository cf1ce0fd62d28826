//! `vitgraph status --remote`: which runs a remote holds too, which are
//! only here, and which of the selected nodes' runs are only there. A
//! remote that cannot be read is a warning: `status` still shows the
//! workspace.

use std::collections::HashMap;

use super::Failure;
use crate::engine::plan::Evaluation;
use crate::graph::Graph;
use crate::store::{remote_state, Store};
use crate::workspace::Workspace;

/// What `status --remote` shows.
pub(super) struct Shown {
    name: String,
    /// The state, or why the remote could not be read.
    state: Result<crate::store::RemoteState, String>,
}

/// The remote `name` (empty: the only one) against the selected nodes'
/// verdicts.
pub(super) fn of(
    ws: &Workspace,
    name: &str,
    graph: &Graph,
    selection: &[usize],
    evals: &HashMap<usize, Evaluation>,
) -> Result<Shown, Failure> {
    let (remote, _) = super::transfer::remote_of(ws, (!name.is_empty()).then_some(name))?;
    let name = remote.name.clone();
    let here: Vec<(&str, crate::hash::ContentHash)> = selection
        .iter()
        .filter_map(|&i| {
            let run = evals.get(&i)?.verdict.run()?;
            Some((graph.nodes[i].id.as_str(), run.key))
        })
        .collect();
    let selected: Vec<&str> = selection
        .iter()
        .map(|&i| graph.nodes[i].id.as_str())
        .collect();
    let store = Store::open_existing(&ws.root).ok().flatten();
    let state = remote_state(&remote, store.as_ref(), &here, &selected).map_err(|e| match e {
        crate::store::StoreError::Remote { path, detail, .. } => {
            format!("`{}`: {detail}", path.display())
        }
        other => other.to_string(),
    });
    Ok(Shown { name, state })
}

pub(super) fn print(shown: &Shown) {
    println!();
    match &shown.state {
        Err(why) => println!(
            "warning: remote `{}` was not read ({why}); the lines above are this workspace alone",
            shown.name
        ),
        Ok(s) => {
            println!(
                "remote `{}`: {} runs there too, {} only here{}",
                shown.name,
                s.both,
                s.local_only.len(),
                if s.local_only.is_empty() {
                    String::new()
                } else {
                    " (`vitgraph push` sends them)".into()
                }
            );
            if !s.remote_only.is_empty() {
                let runs: usize = s.remote_only.values().sum();
                println!(
                    "  {} nodes have {runs} runs there that this store lacks (`vitgraph pull` brings them), first: {}",
                    s.remote_only.len(),
                    s.remote_only.keys().next().map(String::as_str).unwrap_or("")
                );
            }
        }
    }
}

pub(super) fn json(shown: &Shown) -> serde_json::Value {
    match &shown.state {
        Err(why) => serde_json::json!({ "name": shown.name, "error": why }),
        Ok(s) => serde_json::json!({
            "name": shown.name,
            "both": s.both,
            "local_only": s.local_only,
            "remote_only": s.remote_only,
        }),
    }
}
