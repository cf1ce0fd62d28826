//! The environment fingerprint ([`fingerprint`], [`probe`]): the facts about
//! the machine that a hardware measurement depends on.
//!
//! Key-affecting facets (GPU model, driver major version, CUDA version, the
//! libtorch this binary was built against, CPU model, NUMA binding) go into the
//! keys of hardware-measuring nodes, so a driver upgrade makes them stale with
//! `env_changed`. Record-only facts (GPU UUID, host name, clocks, temperature,
//! free memory) are stored with a run but change no key. Every probe works
//! without a GPU and without libtorch: a missing `nvidia-smi` gives `"none"`.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A fingerprint: the facets that are part of a key, and what is only recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Env {
    pub key_facets: BTreeMap<String, String>,
    pub record: Value,
}

/// The fingerprint of this machine, probed once per process and cached (the
/// engine asks for it for every hardware-measuring node).
pub fn fingerprint() -> Env {
    static CACHE: OnceLock<Env> = OnceLock::new();
    CACHE.get_or_init(probe).clone()
}

/// A fresh probe; tasks call it before and after measuring, since clocks,
/// temperature and free memory move.
pub fn probe() -> Env {
    let gpus = visible(query_gpus(), crate::gpu::visible_from_env());
    let smi_cuda = nvidia_smi_cuda_version();
    let mut key_facets = BTreeMap::new();
    key_facets.insert(
        "gpu".to_owned(),
        join_distinct(gpus.iter().map(|g| g.name.as_str())),
    );
    key_facets.insert(
        "driver".to_owned(),
        join_distinct(
            gpus.iter()
                .map(|g| g.driver.split('.').next().unwrap_or("none")),
        ),
    );
    key_facets.insert(
        "cuda".to_owned(),
        smi_cuda.unwrap_or_else(|| "none".to_owned()),
    );
    key_facets.insert("libtorch".to_owned(), libtorch_version().to_owned());
    key_facets.insert(
        "cpu".to_owned(),
        cpu_model().unwrap_or_else(|| "unknown".to_owned()),
    );
    key_facets.insert("numa".to_owned(), numa_binding());
    // Only a GPU in an unexpected state adds a facet: a normal machine's
    // keys do not change.
    let states: Vec<String> = gpus.iter().filter_map(Gpu::unexpected_state).collect();
    if !states.is_empty() {
        key_facets.insert(
            "gpu_state".to_owned(),
            join_distinct(states.iter().map(String::as_str)),
        );
    }
    let record = json!({
        "host": hostname_opt(),
        "kernel": read_trimmed("/proc/sys/kernel/osrelease"),
        "cpu_count": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "libtorch_cuda": libtorch_cuda_version(),
        "cuda_visible_devices": std::env::var("CUDA_VISIBLE_DEVICES").ok(),
        "gpus": gpus.iter().map(Gpu::record).collect::<Vec<_>>(),
        "unix_time_s": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    });
    Env { key_facets, record }
}

/// The libtorch version that runs this workspace's libtorch tasks ("none"
/// where there is none): this binary's, or `vitgraph-torch`'s (see
/// [`super::torch_exe`]).
pub fn libtorch_version() -> &'static str {
    match super::torch_exe::effective_build() {
        Ok(b) => &b.libtorch,
        Err(_) => "unavailable",
    }
}

fn libtorch_cuda_version() -> &'static str {
    match super::torch_exe::effective_build() {
        Ok(b) => &b.libtorch_cuda,
        Err(_) => "unavailable",
    }
}

/// Why the fingerprint cannot be trusted, if it cannot: the libtorch
/// executable could not say which libtorch it runs.
pub fn problem() -> Option<&'static str> {
    super::torch_exe::effective_build()
        .as_ref()
        .err()
        .map(String::as_str)
}

/// One GPU as `nvidia-smi` reports it.
#[derive(Debug, Clone, PartialEq)]
struct Gpu {
    index: String,
    name: String,
    uuid: String,
    driver: String,
    fields: Vec<(&'static str, String)>,
}

/// The columns asked of `nvidia-smi`, in order; the first four are the
/// identity, the rest are recorded as they are.
const QUERY: [&str; 12] = [
    "index",
    "name",
    "uuid",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "memory.free",
    "memory.total",
    "pstate",
];

impl Gpu {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// What about this GPU changes what it measures: MIG enabled, or
    /// application clocks set below their default (`MIG enabled`,
    /// `application clocks 1410 of 1980 MHz`); None for a normal GPU.
    fn unexpected_state(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.field("mig.mode.current") == Some("Enabled") {
            parts.push("MIG enabled".to_owned());
        }
        let mhz = |name| self.field(name)?.parse::<u32>().ok();
        if let (Some(app), Some(default)) = (
            mhz("clocks.applications.graphics"),
            mhz("clocks.default_applications.graphics"),
        ) {
            if app < default {
                parts.push(format!("application clocks {app} of {default} MHz"));
            }
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn record(&self) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("index".into(), json!(self.index));
        map.insert("name".into(), json!(self.name));
        map.insert("uuid".into(), json!(self.uuid));
        map.insert("driver".into(), json!(self.driver));
        for (key, value) in &self.fields {
            map.insert((*key).to_owned(), json!(value));
        }
        Value::Object(map)
    }
}

/// Columns that say whether the GPU is in an unexpected state (MIG,
/// application clocks set below their default, uncorrected ECC errors, the
/// clock-event reasons), asked after [`QUERY`]'s: an `nvidia-smi` that does
/// not know one of them is asked [`QUERY`] alone.
const STATE: [&str; 5] = [
    "mig.mode.current",
    "clocks.applications.graphics",
    "clocks.default_applications.graphics",
    "ecc.errors.uncorrected.volatile.total",
    "clocks_event_reasons.active",
];

fn query_gpus() -> Vec<Gpu> {
    let ask = |columns: &[&'static str]| -> Option<Vec<Gpu>> {
        let out = Command::new("nvidia-smi")
            .arg(format!("--query-gpu={}", columns.join(",")))
            .arg("--format=csv,noheader,nounits")
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| parse_gpus(&String::from_utf8_lossy(&out.stdout), columns))
    };
    let full: Vec<&str> = QUERY.iter().chain(&STATE).copied().collect();
    ask(&full)
        .filter(|g| !g.is_empty())
        .or_else(|| ask(&QUERY))
        .unwrap_or_default()
}

fn parse_gpus(csv: &str, columns: &[&'static str]) -> Vec<Gpu> {
    csv.lines()
        .filter_map(|line| {
            let cells: Vec<String> = line.split(',').map(|c| c.trim().to_owned()).collect();
            if cells.len() != columns.len() {
                return None;
            }
            let fields = columns[4..]
                .iter()
                .copied()
                .zip(cells[4..].iter().cloned())
                .collect();
            Some(Gpu {
                index: cells[0].clone(),
                name: cells[1].clone(),
                uuid: cells[2].clone(),
                driver: cells[3].clone(),
                fields,
            })
        })
        .collect()
}

/// The GPUs `CUDA_VISIBLE_DEVICES` leaves visible (by index or UUID).
/// The GPUs of `gpus` that `mask` (the parsed `CUDA_VISIBLE_DEVICES`; None
/// when unset) makes visible, in its order: by index, by UUID or a unique
/// prefix of one, or by MIG id (the GPU holding the instance).
fn visible(gpus: Vec<Gpu>, mask: Option<Vec<crate::gpu::GpuId>>) -> Vec<Gpu> {
    let Some(mask) = mask else {
        return gpus;
    };
    mask.iter()
        .filter_map(|id| {
            let id = id.as_str();
            // The older MIG form names its GPU: `MIG-GPU-<uuid>/<gi>/<ci>`.
            let uuid = id.strip_prefix("MIG-").unwrap_or(id);
            let uuid = uuid.split('/').next().unwrap_or(uuid);
            let matching: Vec<&Gpu> = gpus
                .iter()
                .filter(|g| g.index == id || g.uuid.starts_with(uuid))
                .collect();
            match matching.as_slice() {
                [one] => Some((*one).clone()),
                _ => None,
            }
        })
        .collect()
}

fn join_distinct<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    if seen.is_empty() {
        "none".to_owned()
    } else {
        seen.join(", ")
    }
}

/// The CUDA version the driver supports, from `nvidia-smi --version`.
fn nvidia_smi_cuda_version() -> Option<String> {
    let out = Command::new("nvidia-smi").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|line| line.to_ascii_lowercase().starts_with("cuda version"))
        .and_then(|line| line.split(':').nth(1))
        .map(|v| v.trim().to_owned())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// "unbound" when this process may use every NUMA node's memory, else the
/// node list it is bound to (as `numactl --membind` leaves it).
fn numa_binding() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Mems_allowed_list:"))
        .map(|v| v.trim().to_owned());
    let online = read_trimmed("/sys/devices/system/node/online");
    match (allowed, online) {
        (Some(a), Some(o)) if a != o => a,
        _ => "unbound".to_owned(),
    }
}

/// This machine's host name, if it can be read.
pub fn hostname_opt() -> Option<String> {
    read_trimmed("/proc/sys/kernel/hostname")
}

/// This machine's host name (`unknown` if it cannot be read).
pub fn hostname() -> String {
    hostname_opt().unwrap_or_else(|| "unknown".to_owned())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMI: &str = "0, NVIDIA H100 80GB HBM3, GPU-1234abcd, 580.159.04, 1980, 2619, 1980, 34, 71.2, 80000, 81559, P0\n\
                       1, NVIDIA H100 80GB HBM3, GPU-5678ef01, 580.159.04, 345, 2619, 1980, 31, 60.0, 81000, 81559, P0\n";

    #[test]
    fn nvidia_smi_rows_parse_into_identity_and_recorded_fields() {
        let gpus = parse_gpus(SMI, &QUERY);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(gpus[1].uuid, "GPU-5678ef01");
        let record = gpus[0].record();
        assert_eq!(record["temperature.gpu"], "34");
        assert_eq!(record["clocks.sm"], "1980");
    }

    #[test]
    fn only_a_gpu_in_an_unexpected_state_says_so() {
        let columns: Vec<&'static str> = QUERY.iter().chain(&STATE).copied().collect();
        let rows = "0, NVIDIA H100 80GB HBM3, GPU-1, 580.159.04, 1980, 2619, 1980, 34, 71.2, 80000, 81559, P0, Disabled, 1980, 1980, 0, 0x0000000000000000\n\
                    1, NVIDIA H100 80GB HBM3, GPU-2, 580.159.04, 1410, 2619, 1980, 34, 71.2, 80000, 81559, P0, Enabled, 1410, 1980, 0, 0x0000000000000002\n\
                    2, NVIDIA A10, GPU-3, 580.159.04, 1695, 6251, 1695, 34, 71.2, 80000, 81559, P0, [N/A], [N/A], [N/A], [N/A], 0x0000000000000000\n";
        let gpus = parse_gpus(rows, &columns);
        assert_eq!(gpus.len(), 3);
        assert_eq!(gpus[0].unexpected_state(), None);
        assert_eq!(
            gpus[1].unexpected_state().as_deref(),
            Some("MIG enabled, application clocks 1410 of 1980 MHz")
        );
        assert_eq!(
            gpus[2].unexpected_state(),
            None,
            "unsupported fields say nothing"
        );
        assert_eq!(
            gpus[1].record()["ecc.errors.uncorrected.volatile.total"],
            "0"
        );
    }

    #[test]
    fn cuda_visible_devices_selects_by_index_or_uuid() {
        let gpus = parse_gpus(SMI, &QUERY);
        let mask = |v: &str| Some(crate::gpu::parse_visible_devices(v));
        assert_eq!(visible(gpus.clone(), mask("1"))[0].uuid, "GPU-5678ef01");
        assert_eq!(visible(gpus.clone(), mask("GPU-1234"))[0].index, "0");
        assert_eq!(
            visible(gpus.clone(), mask("MIG-GPU-5678ef01/1/0"))[0].index,
            "1"
        );
        assert_eq!(visible(gpus.clone(), None).len(), 2);
        assert!(visible(gpus.clone(), mask("")).is_empty());
        assert!(visible(gpus, mask("7")).is_empty());
    }

    #[test]
    fn a_machine_without_gpus_says_none_for_every_gpu_facet() {
        let env = probe();
        for facet in ["gpu", "driver", "cuda", "libtorch", "cpu", "numa"] {
            assert!(env.key_facets.contains_key(facet), "missing facet {facet}");
        }
        if query_gpus().is_empty() {
            assert_eq!(env.key_facets["gpu"], "none");
            assert_eq!(env.key_facets["driver"], "none");
        }
        assert_eq!(fingerprint().key_facets, fingerprint().key_facets);
    }
}
