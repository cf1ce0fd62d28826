//! Which cores sit near which GPU: the machine's NUMA nodes and their cores
//! (`/sys/devices/system/node`), and each GPU's NUMA node (its PCI device's
//! `numa_node`, found through `nvidia-smi`'s bus id). A measurement with
//! `isolation: Gpu` is pinned to cores of its GPU's node ([`partition`]).

use std::collections::BTreeMap;
use std::path::Path;

use crate::gpu::GpuId;

/// The machine as the scheduler places nodes on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// NUMA node → its online cores, ascending.
    pub nodes: BTreeMap<usize, Vec<usize>>,
    /// Each GPU's NUMA node, where known.
    pub gpu_node: BTreeMap<GpuId, usize>,
}

/// The cores a build hands out: each isolated GPU's own, and the rest,
/// which every other node shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    pub reserved: BTreeMap<GpuId, Vec<usize>>,
    pub shared: Vec<usize>,
}

impl Topology {
    /// This machine's: NUMA nodes from sysfs (one node of every online core
    /// where there is none), GPUs placed by `nvidia-smi`.
    pub fn detect(gpus: &[GpuId]) -> Topology {
        let mut nodes = numa_nodes(Path::new("/sys/devices/system/node"));
        if nodes.is_empty() {
            let cores = crate::telemetry::host::affinity().unwrap_or_default();
            nodes.insert(0, cores);
        }
        let gpu_node = gpus
            .iter()
            .filter_map(|g| Some((g.clone(), gpu_numa_node(g)?)))
            .collect();
        Topology { nodes, gpu_node }
    }

    /// A made-up machine (tests, dry runs): `nodes` NUMA nodes of
    /// `cores_per_node` cores, `gpus_per_node` GPUs on each, numbered in
    /// order.
    pub fn simulated(nodes: usize, cores_per_node: usize, gpus_per_node: usize) -> Topology {
        let mut t = Topology {
            nodes: BTreeMap::new(),
            gpu_node: BTreeMap::new(),
        };
        for n in 0..nodes {
            t.nodes
                .insert(n, (n * cores_per_node..(n + 1) * cores_per_node).collect());
            for g in 0..gpus_per_node {
                t.gpu_node
                    .insert(GpuId::index((n * gpus_per_node + g) as u32), n);
            }
        }
        t
    }

    /// The node a GPU hangs off: its own where known, else the first.
    fn node_of(&self, gpu: &GpuId) -> usize {
        self.gpu_node
            .get(gpu)
            .copied()
            .or_else(|| self.nodes.keys().next().copied())
            .unwrap_or(0)
    }
}

/// Splits the cores for a build on `gpus`: on each NUMA node, each of its
/// GPUs gets `cores / (gpus + 1)` of its cores (at least 1, from the end of
/// the node's list), and what is left — at least one GPU's share — is
/// shared by every other node. GPUs beyond a node's cores get none.
pub fn partition(topology: &Topology, gpus: &[GpuId]) -> Partition {
    let mut p = Partition::default();
    let mut taken: Vec<usize> = Vec::new();
    for (node, cores) in &topology.nodes {
        let here: Vec<&GpuId> = gpus
            .iter()
            .filter(|g| topology.node_of(g) == *node)
            .collect();
        if here.is_empty() {
            continue;
        }
        let each = (cores.len() / (here.len() + 1)).max(1);
        let mut free: Vec<usize> = cores.clone();
        for g in here {
            if free.len() <= each {
                break;
            }
            let mine = free.split_off(free.len() - each);
            taken.extend(&mine);
            p.reserved.insert(g.clone(), mine);
        }
    }
    p.shared = topology
        .nodes
        .values()
        .flatten()
        .copied()
        .filter(|c| !taken.contains(c))
        .collect();
    p.shared.sort_unstable();
    p
}

fn numa_nodes(sys: &Path) -> BTreeMap<usize, Vec<usize>> {
    let Ok(entries) = std::fs::read_dir(sys) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n: usize = name.strip_prefix("node")?.parse().ok()?;
            let list = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
            Some((n, parse_cpulist(&list)))
        })
        .filter(|(_, cores)| !cores.is_empty())
        .collect()
}

/// `0-3,8,10-11` → [0, 1, 2, 3, 8, 10, 11].
pub fn parse_cpulist(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.trim().parse::<usize>().ok()),
        }
    }
    out
}

/// The NUMA node of a GPU, from its PCI device in sysfs.
fn gpu_numa_node(gpu: &GpuId) -> Option<usize> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=pci.bus_id",
            "--format=csv,noheader",
            "-i",
            gpu.as_str(),
        ])
        .output()
        .ok()?;
    let bus = String::from_utf8_lossy(&out.stdout)
        .trim()
        .to_ascii_lowercase();
    // nvidia-smi: 00000000:19:00.0; sysfs: 0000:19:00.0.
    let bus = bus.get(bus.len().checked_sub(12)?..)?;
    let text = std::fs::read_to_string(format!("/sys/bus/pci/devices/{bus}/numa_node")).ok()?;
    let n: i64 = text.trim().parse().ok()?;
    usize::try_from(n).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_read_ranges_and_single_cores() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<usize>::new());
    }

    #[test]
    fn each_gpu_gets_cores_of_its_own_node_and_a_share_is_left() {
        // 2 NUMA nodes × 8 cores, 4 GPUs on each.
        let t = Topology::simulated(2, 8, 4);
        let gpus: Vec<GpuId> = (0..8).map(GpuId::index).collect();
        let p = partition(&t, &gpus);
        assert_eq!(p.reserved.len(), 8);
        for (g, cores) in &p.reserved {
            let node = t.gpu_node[g];
            assert_eq!(cores.len(), 1, "8 cores / (4 GPUs + 1)");
            assert!(
                cores.iter().all(|c| t.nodes[&node].contains(c)),
                "{g}: {cores:?}"
            );
        }
        assert_eq!(p.reserved[&GpuId::index(0)], [7]);
        assert_eq!(p.reserved[&GpuId::index(4)], [15]);
        assert_eq!(p.shared, [0, 1, 2, 3, 8, 9, 10, 11]);
        let mut all: Vec<usize> = p
            .reserved
            .values()
            .flatten()
            .chain(&p.shared)
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..16).collect::<Vec<_>>(), "every core once");
    }

    #[test]
    fn a_build_on_fewer_gpus_reserves_fewer_cores() {
        let t = Topology::simulated(2, 8, 4);
        let p = partition(&t, &[GpuId::index(1)]);
        assert_eq!(p.reserved[&GpuId::index(1)], [4, 5, 6, 7]);
        assert_eq!(p.shared.len(), 12);
    }

    #[test]
    fn this_machine_has_cores() {
        let t = Topology::detect(&[]);
        assert!(t.nodes.values().any(|c| !c.is_empty()), "{t:?}");
    }
}
