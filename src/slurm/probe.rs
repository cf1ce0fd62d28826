//! The environment of the compute nodes, for the keys of the nodes that
//! measure hardware there (DESIGN §7).
//!
//! A key must name the hardware its measurement ran on, not the login
//! node's. Which compute nodes a job lands on depends on what it asks for —
//! partition, account, qos, constraint, GPUs — its *signature*. Before such
//! nodes are judged, the driver runs one small job per signature (`vitgraph
//! env-probe`), which writes that machine's environment fingerprint; the
//! store keeps it, so `status` and `explain` judge with it too. A cluster
//! with two GPU models behind two constraints gets two signatures, and its
//! measurements are never keyed as one another's. Each job checks, before
//! it runs, that its node's facets are those its key was computed with.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use super::cmd::{self, Calls};
use crate::config::{GpuRequest, Slurm};
use crate::engine::plan::EnvProbe;
use crate::graph::{Graph, Node};
use crate::store::{EnvProbeRecord, RawJson, Store, StoreError};
use crate::tasks::Resources;

/// A probe older than this is run again by the next build that needs it.
pub const MAX_AGE_MS: i64 = 12 * 3600 * 1000;

/// How long a probe job may take, queueing included.
const PROBE_LIMIT: Duration = Duration::from_secs(600);

/// The `sbatch` arguments that choose the compute nodes a job lands on.
pub fn selectors(s: &Slurm, res: &Resources) -> Vec<String> {
    let mut a = Vec::new();
    for (flag, v) in [
        ("partition", &s.partition),
        ("account", &s.account),
        ("qos", &s.qos),
        ("constraint", &s.constraint),
    ] {
        if let Some(v) = v {
            a.push(format!("--{flag}={v}"));
        }
    }
    if res.gpus > 0 {
        a.push(match s.gpu_request.unwrap_or(GpuRequest::Gres) {
            GpuRequest::Gres => format!("--gres=gpu:{}", res.gpus),
            GpuRequest::Gpus => format!("--gpus={}", res.gpus),
        });
    }
    a
}

/// The signature of [`selectors`]: how the store names a probe.
pub fn signature(selectors: &[String]) -> String {
    if selectors.is_empty() {
        "(default partition)".into()
    } else {
        selectors.join(" ")
    }
}

/// Each hardware-measuring node of `selection` (all of `graph` when None)
/// placed on the cluster, by id, with its selectors.
pub fn hardware_nodes(
    graph: &Graph,
    placed: &[bool],
    settings: &HashMap<String, Slurm>,
    selection: Option<&[crate::graph::NodeIdx]>,
) -> HashMap<String, Vec<String>> {
    let all: Vec<usize>;
    let selection = match selection {
        Some(s) => s,
        None => {
            all = (0..graph.nodes.len()).collect();
            &all
        }
    };
    selection
        .iter()
        .filter(|&&i| placed[i] && graph.nodes[i].task.measures_hardware())
        .map(|&i| &graph.nodes[i])
        .map(|n| {
            let s = settings.get(&n.stage).cloned().unwrap_or_default();
            (n.id.clone(), selectors(&s, &n.task.resources()))
        })
        .collect()
}

/// What `vitgraph env-probe FILE` writes.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Probed {
    pub key_facets: BTreeMap<String, String>,
    pub record: serde_json::Value,
}

/// `vitgraph env-probe FILE`: this machine's fingerprint, into `FILE`.
pub fn write_probe(file: &Path) -> Result<(), String> {
    let env = crate::engine::env::HostEnv::new();
    env.check()?;
    let probed = Probed {
        key_facets: env.facets().clone(),
        record: env.record(),
    };
    let json = serde_json::to_vec_pretty(&probed).unwrap_or_default();
    crate::atomic::write_durable(file, &json)
        .map_err(|e| format!("cannot write `{}`: {e}", file.display()))
}

/// Runs a probe job for every signature of `wanted` with no recent probe in
/// the store, all at once, and records what they find. Returns the
/// signatures whose probe failed, each with why and what to do: only the
/// nodes of those signatures cannot be keyed (see [`ClusterEnv::failed`]).
pub fn ensure(
    store: &Store,
    exe: &Path,
    name: &str,
    wanted: &HashMap<String, Vec<String>>,
) -> Result<HashMap<String, String>, String> {
    let mut todo: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for sel in wanted.values() {
        let sig = signature(sel);
        if todo.contains_key(&sig) {
            continue;
        }
        let fresh = store
            .reader()
            .env_probe(&sig)
            .map_err(|e| e.to_string())?
            .is_some_and(|p| now_ms() - p.probed_at_ms < MAX_AGE_MS);
        if !fresh {
            todo.insert(sig, sel.clone());
        }
    }
    let dir = store.journal().jobs_dir().join("probes");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    let results: Vec<Result<EnvProbeRecord, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = todo
            .iter()
            .enumerate()
            .map(|(i, (sig, sel))| {
                let dir = &dir;
                scope.spawn(move || probe_one(exe, name, sig, sel, dir, i))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the probe thread failed".into()))
            })
            .collect()
    });
    let mut failed = HashMap::new();
    for ((sig, _), r) in todo.iter().zip(results) {
        match r {
            Ok(probe) => store
                .journal()
                .record_env_probe(&probe)
                .map_err(|e| e.to_string())?,
            Err(why) => {
                failed.insert(sig.clone(), why);
            }
        }
    }
    Ok(failed)
}

/// How many times a probe's `sbatch` is tried when SLURM or munge does not
/// answer, and the longest wait between two tries.
const PROBE_TRIES: u32 = 9;
const PROBE_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One probe job, waited for (`sbatch --wait`).
fn probe_one(
    exe: &Path,
    name: &str,
    sig: &str,
    selectors: &[String],
    dir: &Path,
    i: usize,
) -> Result<EnvProbeRecord, String> {
    let out = dir.join(format!("env-{}-{i}.json", std::process::id()));
    let log = dir.join(format!("probe-{}-{i}-%j.log", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut args = vec![
        "--parsable".to_string(),
        "--wait".to_string(),
        format!("--job-name={name}-probe"),
        format!("--output={}", log.display()),
        "--time=10".to_string(),
    ];
    args.extend(selectors.iter().cloned());
    args.push("--wrap".into());
    args.push(format!(
        "exec '{}' env-probe '{}'",
        exe.display(),
        out.display()
    ));
    let calls = Calls::default();
    let fail = |why: String| {
        format!(
            "cannot probe the compute nodes of `{sig}`: {why}; the nodes measuring hardware there cannot be keyed without it\n  help: {}",
            probe_help(&why)
        )
    };
    let mut backoff = Duration::from_secs(1);
    let mut tries = 0;
    let o = loop {
        tries += 1;
        let o = cmd::run(&calls, "sbatch", &args, PROBE_LIMIT).map_err(fail)?;
        if o.ok || !cmd::sbatch_error_is_transient(&o.stderr) || tries >= PROBE_TRIES {
            break o;
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(PROBE_MAX_BACKOFF);
    };
    if !o.ok {
        return Err(fail(format!("sbatch said: {}", o.stderr.trim())));
    }
    let bytes = std::fs::read(&out).map_err(|e| {
        fail(format!(
            "the probe job wrote no result ({e}); its log is in `{}`",
            dir.display()
        ))
    })?;
    let probed: Probed = serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string()))?;
    let _ = std::fs::remove_file(&out);
    Ok(EnvProbeRecord {
        signature: sig.to_string(),
        facets: RawJson(serde_json::to_string(&probed.key_facets).unwrap_or_default()),
        record: RawJson(serde_json::to_string(&probed.record).unwrap_or_default()),
        probed_at_ms: now_ms(),
    })
}

/// What to do about a probe that failed for `why`.
fn probe_help(why: &str) -> &'static str {
    if cmd::is_unreachable(why) {
        "SLURM's controller or its authentication service (munge) did not answer: check `scontrol ping` and `munge -n | unmunge`, then build again"
    } else {
        "check the partition, account, constraint and GPU settings (`sinfo` lists what exists), or run these nodes locally with `placement: Local`"
    }
}

/// The environment as a cluster build sees it: the facets of a probe for the
/// hardware-measuring nodes placed on the cluster, this machine's for the rest.
pub struct ClusterEnv<'a> {
    host: &'a dyn EnvProbe,
    /// The signature of each hardware-measuring node on the cluster.
    signature_of: HashMap<String, String>,
    /// The probes, by signature, with their facets parsed.
    probes: HashMap<String, (BTreeMap<String, String>, EnvProbeRecord)>,
    /// Signatures whose probe failed in this build, with why.
    failed: HashMap<String, String>,
}

impl<'a> ClusterEnv<'a> {
    /// The probes the store holds for the nodes of `wanted`.
    pub fn new(
        host: &'a dyn EnvProbe,
        store: Option<&Store>,
        wanted: &HashMap<String, Vec<String>>,
    ) -> Result<ClusterEnv<'a>, StoreError> {
        let signature_of: HashMap<String, String> = wanted
            .iter()
            .map(|(id, sel)| (id.clone(), signature(sel)))
            .collect();
        let mut probes = HashMap::new();
        if let Some(store) = store {
            for sig in signature_of.values() {
                if probes.contains_key(sig) {
                    continue;
                }
                if let Some(p) = store.reader().env_probe(sig)? {
                    let facets = p.facets.parse().unwrap_or_default();
                    probes.insert(sig.clone(), (facets, p));
                }
            }
        }
        Ok(ClusterEnv {
            host,
            signature_of,
            probes,
            failed: HashMap::new(),
        })
    }

    /// The signatures whose probe failed: their nodes fail (and what depends
    /// on them is skipped), the rest of the build goes on.
    pub fn failed(mut self, failed: HashMap<String, String>) -> ClusterEnv<'a> {
        self.failed = failed;
        self
    }
}

impl EnvProbe for ClusterEnv<'_> {
    fn facets(&self) -> &BTreeMap<String, String> {
        self.host.facets()
    }

    fn record(&self) -> serde_json::Value {
        self.host.record()
    }

    fn check(&self) -> Result<(), String> {
        self.host.check()
    }

    fn facets_of(&self, node: &Node) -> Result<&BTreeMap<String, String>, String> {
        let Some(sig) = self.signature_of.get(&node.id) else {
            return self.host.facets_of(node);
        };
        if let Some(why) = self.failed.get(sig) {
            return Err(why.clone());
        }
        match self.probes.get(sig) {
            Some((facets, _)) => Ok(facets),
            None => Err(format!(
                "it runs on the cluster's compute nodes (`{sig}`), whose environment has not been probed yet; `vitgraph build --executor slurm` probes it with a small job"
            )),
        }
    }

    /// A compute node's run is never one measured elsewhere: the cluster's
    /// nodes are where it is measured.
    fn here(&self, node: &Node) -> Option<String> {
        match self.signature_of.get(&node.id) {
            Some(_) => None,
            None => self.host.here(node),
        }
    }

    fn source_of(&self, node: &Node) -> String {
        let Some(sig) = self.signature_of.get(&node.id) else {
            return self.host.source_of(node);
        };
        match self.probes.get(sig) {
            Some((_, p)) => {
                let host = p
                    .record
                    .value()
                    .get("host")
                    .and_then(|h| h.as_str().map(String::from))
                    .unwrap_or_else(|| "a compute node".into());
                format!(
                    "compute node `{host}`, probed with `{sig}` {} ago",
                    ago((now_ms() - p.probed_at_ms).max(0) / 1000)
                )
            }
            None => format!("the compute nodes of `{sig}` (not probed yet)"),
        }
    }
}

fn ago(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{:.1} h", s as f64 / 3600.0),
    }
}

use crate::clock::now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_fits_the_cause() {
        let munge = "sbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or directory (Did you start munged?)";
        assert!(probe_help(munge).contains("munge -n | unmunge"));
        let refused = "sbatch: error: invalid partition specified: nosuch";
        assert!(probe_help(refused).contains("check the partition"));
    }
}
