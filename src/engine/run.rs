//! One node's task as a process to start: the [`Job`] and its command line.
//!
//! `Command` runs under `sh -c`; every built-in kind runs as
//! `vitgraph exec-task JOB.json` (`vitgraph-torch exec-task` for the
//! libtorch tasks, see `tasks::torch_exe`), so all kinds are killed, logged and
//! isolated the same way, whichever [`super::executor`] starts them.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use super::failure::{FailureKind, NodeFailure};
use crate::gpu::GpuId;
use crate::tasks::{TaskContext, TaskSpec, UpstreamNode};

/// Everything needed to run one node, with paths resolved. A cluster
/// executor writes it into the job's directory for the compute node.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Job {
    pub node: String,
    pub stage: String,
    /// The attempt this job runs (the store's id).
    pub attempt: i64,
    /// The record of a cluster job this attempt already runs as, left by a
    /// driver that ended: the executor adopts that job instead of starting one.
    #[serde(default)]
    pub adopt: Option<String>,
    pub task: TaskSpec,
    pub root: PathBuf,
    pub staging: PathBuf,
    /// Output directories of upstream nodes by stage (`${needs.S}`), id-sorted.
    pub needs: BTreeMap<String, Vec<PathBuf>>,
    pub upstream: BTreeMap<String, Vec<UpstreamNode>>,
    pub gpus: Vec<GpuId>,
    /// The cores the task is pinned to (`isolation: Gpu`, and the other
    /// nodes beside such a node); None: not pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    /// A measurement of `isolation: Gpu`: on a cluster it asks for its GPUs
    /// and cores bound to them instead of a whole node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
    pub log: PathBuf,
    /// For a job on another machine: what recording its run needs, so any
    /// later vitgraph process can record it once its result lands.
    #[serde(default)]
    pub record: Option<Record>,
}

/// What recording a finished job's run needs beyond its outputs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    pub key: crate::hash::ContentHash,
    /// The key's parts and params (JSON), as `explain` reads them.
    pub key_parts: String,
    /// The environment record (record-only facets too).
    pub env: serde_json::Value,
    /// Where its outputs are materialized: `out/<stage>/<node>`.
    pub dest: PathBuf,
    /// `--force`: replace an earlier run of the key.
    pub replace: bool,
    /// For a node that measures hardware: the environment facets its key
    /// was computed with (a probe of the compute nodes). A job that lands
    /// on a node whose facets differ fails instead of recording a
    /// measurement under the wrong key.
    #[serde(default)]
    pub facets: Option<std::collections::BTreeMap<String, String>>,
}

/// Quotes a path for `sh` when it holds characters the shell would split or expand.
fn sh_path(p: &Path) -> String {
    let s = p.to_string_lossy();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-=,+:@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Longer `Command` scripts are written to a file beside the log and run
/// with `sh FILE` instead of `sh -c SCRIPT`.
const MAX_INLINE_SCRIPT: usize = 64 * 1024;

/// Whether `text` may read stage `stage`'s output directories through
/// `${needs.STAGE}` (an escaped `$${needs.STAGE}` counts too: it only costs
/// listing them).
pub(crate) fn names_needs(text: &str, stage: &str) -> bool {
    text.match_indices("${needs.").any(|(i, m)| {
        text[i + m.len()..]
            .strip_prefix(stage)
            .is_some_and(|r| r.starts_with('}'))
    })
}

/// Replaces `${out}`, `${needs.S}` and `$$` in one string (params were substituted at load time).
pub(crate) fn substitute_runtime(
    text: &str,
    out: &Path,
    needs: &BTreeMap<String, Vec<PathBuf>>,
    quote: bool,
) -> String {
    let show = |p: &Path| {
        if quote {
            sh_path(p)
        } else {
            p.to_string_lossy().into_owned()
        }
    };
    let mut result = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        result.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            result.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix("{out}") {
            result.push_str(&show(out));
            rest = r;
        } else if let Some((name, r)) = after
            .strip_prefix("{needs.")
            .and_then(|r| r.split_once('}'))
        {
            let dirs = needs
                .get(name)
                .map(|d| d.iter().map(|p| show(p)).collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            result.push_str(&dirs);
            rest = r;
        } else {
            result.push('$');
            rest = after;
        }
    }
    result.push_str(rest);
    result
}

fn substitute_json(v: &mut serde_json::Value, out: &Path, needs: &BTreeMap<String, Vec<PathBuf>>) {
    match v {
        serde_json::Value::String(s) => *s = substitute_runtime(s, out, needs, false),
        serde_json::Value::Array(items) => items
            .iter_mut()
            .for_each(|x| substitute_json(x, out, needs)),
        serde_json::Value::Object(map) => map
            .values_mut()
            .for_each(|x| substitute_json(x, out, needs)),
        _ => {}
    }
}

/// How a job's task is started: program, arguments and the variables set
/// on top of vitgraph's environment. A built-in task's job file is written
/// beside its log on the way.
pub(crate) struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

/// The command line of `job`'s task: `sh -c SCRIPT` for a `Command`,
/// `[wrapper…] vitgraph exec-task JOB.json` for a built-in task.
pub(crate) fn launch(job: &Job) -> Result<Launch, NodeFailure> {
    let start = |m: String| NodeFailure::new(FailureKind::Start, m);
    let (program, args): (OsString, Vec<OsString>) = match &job.task {
        TaskSpec::Command(c) => {
            let script = substitute_runtime(&c.run, &job.staging, &job.needs, true);
            if script.len() < MAX_INLINE_SCRIPT {
                ("/bin/sh".into(), vec!["-c".into(), script.into()])
            } else {
                // `${needs.S}` over thousands of nodes outgrows the kernel's
                // limit on one argument (128 KiB on Linux): run it from a file.
                let file = job.log.with_extension("sh");
                std::fs::write(&file, script)
                    .map_err(|e| start(format!("cannot write `{}`: {e}", file.display())))?;
                ("/bin/sh".into(), vec![file.into()])
            }
        }
        builtin => {
            let mut spec = serde_json::to_value(builtin).unwrap_or_default();
            substitute_json(&mut spec, &job.staging, &job.needs);
            let ctx = TaskContext {
                root: job.root.clone(),
                out: job.staging.clone(),
                needs: job.needs.clone(),
                upstream: job.upstream.clone(),
                gpus: job.gpus.clone(),
                node: job.node.clone(),
                log: Some(job.log.clone()),
            };
            let job_file = job.log.with_extension("job.json");
            let body = serde_json::json!({ "spec": spec, "ctx": ctx });
            crate::atomic::write(
                &job_file,
                &serde_json::to_vec_pretty(&body).unwrap_or_default(),
            )
            .map_err(|e| start(format!("cannot write `{}`: {e}", job_file.display())))?;
            let exe = crate::tasks::executable_for(builtin)
                .map_err(|e| start(format!("cannot find the vitgraph executable: {e}")))?;
            let mut argv: Vec<OsString> = crate::tasks::wrapper(builtin, &job.staging)
                .map_err(|e| start(e.to_string()))?
                .into_iter()
                .map(OsString::from)
                .collect();
            argv.push(exe.into());
            argv.push("exec-task".into());
            argv.push(job_file.into());
            let program = argv.remove(0);
            (program, argv)
        }
    };
    let mut env: Vec<(OsString, OsString)> = vec![
        ("VITGRAPH_NODE".into(), job.node.clone().into()),
        ("VITGRAPH_OUT".into(), job.staging.clone().into()),
    ];
    if !job.gpus.is_empty() {
        let list = job
            .gpus
            .iter()
            .map(|g| g.as_str())
            .collect::<Vec<_>>()
            .join(",");
        env.push(("CUDA_VISIBLE_DEVICES".into(), list.into()));
    }
    Ok(Launch { program, args, env })
}

/// The failure a task's wait status stands for; None for success.
pub(crate) fn failure_of(
    status: std::process::ExitStatus,
    is_command: bool,
) -> Option<NodeFailure> {
    if status.success() {
        return None;
    }
    Some(match (status.code(), status.signal()) {
        (Some(code), _) => NodeFailure::exit(code, is_command),
        (None, Some(sig)) => NodeFailure::signal(sig),
        _ => NodeFailure::new(FailureKind::Exit, "the task failed"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_names_only_the_stages_it_reads() {
        let run = "cat ${needs.gen}/a ${needs.general}/b > ${out}/x";
        assert!(names_needs(run, "gen"));
        assert!(names_needs(run, "general"));
        assert!(!names_needs(run, "gene"));
        assert!(!names_needs("ls out/ana | wc -l", "ana"));
    }

    #[test]
    fn runtime_substitution() {
        let mut needs = BTreeMap::new();
        needs.insert(
            "gen".to_string(),
            vec![
                PathBuf::from("/w/out/gen/i=0"),
                PathBuf::from("/w s/out/gen/i=1"),
            ],
        );
        let s = substitute_runtime(
            "cat ${needs.gen} > ${out}/x $$HOME $(pwd) $x",
            Path::new("/w/st"),
            &needs,
            true,
        );
        assert_eq!(
            s,
            "cat /w/out/gen/i=0 '/w s/out/gen/i=1' > /w/st/x $HOME $(pwd) $x"
        );
    }
}
