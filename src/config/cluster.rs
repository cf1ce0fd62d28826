//! Cluster settings: `vitgraph.ron`'s `Workspace(slurm: Slurm(…))`, a
//! stage's `slurm: (…)` and `placement:`, and the command line's flags —
//! merged in that order, each over the one before (DESIGN §7).

use serde::{Deserialize, Serialize};

/// SLURM settings; every field may be left out. Merged field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slurm {
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub qos: Option<String>,
    /// A SLURM time limit: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
    #[serde(default)]
    pub time: Option<String>,
    /// Memory per node: a number with an optional unit `K`, `M`, `G`, `T`.
    #[serde(default)]
    pub mem: Option<String>,
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// Node features (`--constraint`), e.g. `"h100"`.
    #[serde(default)]
    pub constraint: Option<String>,
    /// How a GPU node asks for its GPUs: `--gres=gpu:N` or `--gpus=N`.
    #[serde(default)]
    pub gpu_request: Option<GpuRequest>,
    /// More `sbatch` arguments, as they are.
    #[serde(default)]
    pub extra: Option<Vec<String>>,
    /// The longest wait between two looks at the cluster, in seconds.
    #[serde(default)]
    pub poll_s: Option<f64>,
    /// The most `sbatch` calls per second.
    #[serde(default)]
    pub max_submit_per_s: Option<f64>,
    /// At most this many tasks of one array run at once (`--array=…%K`).
    #[serde(default)]
    pub array_limit: Option<u32>,
    /// At most this many of the build's jobs are queued or running at once.
    #[serde(default)]
    pub max_jobs: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuRequest {
    Gres,
    Gpus,
}

/// Where a stage's nodes run under `--executor slurm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Placement {
    /// On the machine `vitgraph build` runs on.
    Local,
    /// As SLURM jobs.
    Cluster,
}

/// What a measuring node holds while it runs on this machine
/// (`isolation:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Isolation {
    /// The whole machine: nothing else runs beside it.
    Host,
    /// Its GPU and a set of cores near it (the GPU's NUMA node), pinned:
    /// measurements on other GPUs and other nodes (on other cores) run
    /// beside it.
    Gpu,
}

/// `vitgraph.ron`: the workspace's settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Where `build` runs nodes, and how `status` and `explain` judge them,
    /// when the command line does not say (`--executor`).
    #[serde(default)]
    pub executor: Option<ExecutorKind>,
    #[serde(default)]
    pub slurm: Slurm,
    /// Where `vitgraph push` and `pull` carry runs, by name.
    #[serde(default)]
    pub remotes: std::collections::BTreeMap<String, super::RemoteSpec>,
    /// Public keys (`ed25519:<64 hex>`) whose signatures on arriving runs
    /// this workspace trusts, by the name it gives each signer.
    #[serde(default)]
    pub trusted_keys: std::collections::BTreeMap<String, String>,
    /// Refuse runs that arrive unsigned or signed by a key not trusted.
    #[serde(default)]
    pub require_signed: bool,
}

/// `executor:` in `vitgraph.ron`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ExecutorKind {
    Local,
    Slurm,
}

/// Defaults for what is left out everywhere.
pub(crate) const DEFAULT_POLL_S: f64 = 10.0;
pub(crate) const DEFAULT_MAX_SUBMIT_PER_S: f64 = 5.0;
pub(crate) const DEFAULT_MAX_JOBS: u32 = 1000;

impl Slurm {
    /// `self` with every field `over` sets taken from `over`.
    pub fn merged(&self, over: &Slurm) -> Slurm {
        fn pick<T: Clone>(base: &Option<T>, over: &Option<T>) -> Option<T> {
            over.clone().or_else(|| base.clone())
        }
        Slurm {
            partition: pick(&self.partition, &over.partition),
            account: pick(&self.account, &over.account),
            qos: pick(&self.qos, &over.qos),
            time: pick(&self.time, &over.time),
            mem: pick(&self.mem, &over.mem),
            cpus_per_task: pick(&self.cpus_per_task, &over.cpus_per_task),
            constraint: pick(&self.constraint, &over.constraint),
            gpu_request: pick(&self.gpu_request, &over.gpu_request),
            extra: pick(&self.extra, &over.extra),
            poll_s: pick(&self.poll_s, &over.poll_s),
            max_submit_per_s: pick(&self.max_submit_per_s, &over.max_submit_per_s),
            array_limit: pick(&self.array_limit, &over.array_limit),
            max_jobs: pick(&self.max_jobs, &over.max_jobs),
        }
    }

    /// The first field whose value SLURM would refuse: (field, message, fix).
    pub fn problem(&self) -> Option<(&'static str, String, String)> {
        if let Some(t) = &self.time {
            if !is_slurm_time(t) {
                return Some((
                    "time",
                    format!("`{t}` is not a SLURM time limit"),
                    "write minutes (`30`), `HH:MM:SS` (`1:30:00`) or `D-HH:MM:SS` (`2-00:00:00`)"
                        .into(),
                ));
            }
        }
        if let Some(m) = &self.mem {
            if !is_slurm_mem(m) {
                return Some((
                    "mem",
                    format!("`{m}` is not a SLURM memory size"),
                    "write a number with a unit: `500M`, `16G`".into(),
                ));
            }
        }
        for (field, value) in [
            ("poll_s", self.poll_s),
            ("max_submit_per_s", self.max_submit_per_s),
        ] {
            if value.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Some((
                    field,
                    format!("`{field}` must be a positive number of seconds"),
                    format!("write e.g. `{field}: 5.0`"),
                ));
            }
        }
        for (field, value) in [
            ("cpus_per_task", self.cpus_per_task),
            ("array_limit", self.array_limit),
            ("max_jobs", self.max_jobs),
        ] {
            if value == Some(0) {
                return Some((
                    field,
                    format!("`{field}` must be at least 1"),
                    format!("write `{field}: 1` or more, or leave it out"),
                ));
            }
        }
        for (field, value) in [
            ("partition", &self.partition),
            ("account", &self.account),
            ("qos", &self.qos),
            ("constraint", &self.constraint),
        ] {
            if value
                .as_ref()
                .is_some_and(|v| v.is_empty() || v.chars().any(char::is_whitespace))
            {
                return Some((
                    field,
                    format!("`{field}` must be a name without spaces"),
                    format!("write the {field} as SLURM lists it (`sinfo`, `sacctmgr show`)"),
                ));
            }
        }
        None
    }
}

/// Whether SLURM reads `t` as a time limit.
pub(crate) fn is_slurm_time(t: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.len() <= 6 && s.chars().all(|c| c.is_ascii_digit());
    let rest = match t.split_once('-') {
        Some((days, rest)) if digits(days) => rest,
        Some(_) => return false,
        None => t,
    };
    let parts: Vec<&str> = rest.split(':').collect();
    if !parts.iter().all(|p| digits(p)) {
        return false;
    }
    (1..=3).contains(&parts.len())
}

/// Whether SLURM reads `m` as a memory size.
pub(crate) fn is_slurm_mem(m: &str) -> bool {
    let number = m.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    let unit_len = m.len() - number.len();
    unit_len <= 1 && !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_as_slurm_reads_them() {
        for ok in ["30", "30:00", "1:30:00", "2-0", "2-12:00", "2-12:00:00"] {
            assert!(is_slurm_time(ok), "{ok}");
        }
        for bad in ["", "1h", "1:2:3:4", "a-1", "-1", "1:", "2-1:2:3:4"] {
            assert!(!is_slurm_time(bad), "{bad}");
        }
    }

    #[test]
    fn memory_sizes_as_slurm_reads_them() {
        for ok in ["500", "500M", "16G", "1T", "64g"] {
            assert!(is_slurm_mem(ok), "{ok}");
        }
        for bad in ["", "G", "16GB", "1.5G", "-1G"] {
            assert!(!is_slurm_mem(bad), "{bad}");
        }
    }

    #[test]
    fn a_later_layer_overrides_field_by_field() {
        let ws = Slurm {
            partition: Some("debug".into()),
            time: Some("10".into()),
            ..Slurm::default()
        };
        let stage = Slurm {
            time: Some("60".into()),
            gpu_request: Some(GpuRequest::Gpus),
            ..Slurm::default()
        };
        let m = ws.merged(&stage);
        assert_eq!(m.partition.as_deref(), Some("debug"));
        assert_eq!(m.time.as_deref(), Some("60"));
        assert_eq!(m.gpu_request, Some(GpuRequest::Gpus));
        assert!(m.problem().is_none());
        let bad = Slurm {
            mem: Some("16GB".into()),
            ..Slurm::default()
        };
        assert_eq!(bad.problem().unwrap().0, "mem");
    }
}
