//! Hidden commands the engine and cluster executors use: `exec-task` runs a
//! built-in task in a child process; `run-node` executes and records one
//! node whose upstream is already built (one node per cluster job).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::{load, usage, Failure};
use crate::engine::env::HostEnv;
use crate::engine::executor::{Interrupt, Local};
use crate::engine::schedule::{BuildOptions, Builder, Lane};
use crate::exit;
use crate::pipeline::Override;
use crate::store::Store;
use crate::tasks::{TaskContext, TaskSpec};
use crate::workspace::Workspace;

#[derive(serde::Deserialize)]
struct JobFile {
    spec: TaskSpec,
    ctx: TaskContext,
}

pub(super) fn exec_task(job: &Path) -> Result<i32, Failure> {
    let text = std::fs::read_to_string(job).map_err(|e| {
        usage(
            format!("cannot read `{}`: {e}", job.display()),
            "exec-task is run by vitgraph itself",
        )
    })?;
    let file: JobFile = serde_json::from_str(&text).map_err(|e| {
        usage(
            format!("invalid job file `{}`: {e}", job.display()),
            "exec-task is run by vitgraph itself",
        )
    })?;
    match crate::tasks::run_builtin(&file.spec, &file.ctx) {
        Ok(()) => Ok(exit::SUCCESS),
        // The engine reads this status as a failure that may go away on a
        // retry, and does not record it as the node's result.
        Err(e) if e.is_transient() => Err(Failure::Report(
            miette::Report::new(e),
            crate::engine::failure::EXIT_TRANSIENT,
        )),
        Err(e) => Err(Failure::Report(miette::Report::new(e), exit::NODE_FAILED)),
    }
}

pub(super) fn run_node(ws: &Workspace, overrides: &[Override], node: &str) -> Result<i32, Failure> {
    let graph = load(ws, overrides)?;
    let Some(idx) = graph.find(node) else {
        return Err(usage(
            format!("unknown node `{node}`"),
            "`vitgraph ls TARGET` lists node ids",
        ));
    };
    let selection = crate::graph::select(&graph, &[node.to_string()])?;
    super::refuse(ws, &graph, &selection)?;
    let store = Arc::new(Store::open(&ws.root)?);
    let env = HostEnv::new();
    let options = BuildOptions {
        jobs: 1,
        keep_going: false,
        force: HashSet::new(),
        gpus: crate::gpu::visible_from_env().unwrap_or_default(),
        only: Some([idx].into_iter().collect()),
        retries: 0,
        interleave: None,
        accept_invalid: false,
        topology: None,
    };
    let executor = Arc::new(Local::noting_groups(&store));
    let builder = Builder {
        graph: &graph,
        root: ws.root.clone(),
        store,
        env: &env,
        options,
        lanes: vec![Lane::machine(executor)],
        lane_of: Vec::new(),
        interrupt: Interrupt::new(),
        noop: None,
        incremental: None,
    };
    let mut reporter = crate::report::json::JsonLines::new(std::io::stdout());
    let status = super::build::run_builder(&builder, &selection, &mut reporter)?;
    Ok(super::build::status_code(status))
}
