//! The local machine's slots: how many CPU nodes run at once (`-j`), which
//! GPUs are free, and whether an exclusive node holds the machine.
//!
//! A GPU node takes its GPUs out of the free list and hands them to its task
//! through `CUDA_VISIBLE_DEVICES`, so two GPU nodes never share a card. An
//! exclusive node (every timing node of a stage with `isolation: Host`)
//! starts only when nothing runs, and nothing starts beside it.
//!
//! With a core [`Partition`] (a build with stages of `isolation: Gpu`), an
//! *isolated* node takes a free GPU and the cores reserved near it, and
//! runs beside other isolated nodes and ordinary ones; every ordinary node
//! is pinned to the shared cores, so no other node runs on an isolated
//! node's cores.

use crate::gpu::GpuId;
use crate::host::topology::Partition;
use crate::tasks::Resources;

#[derive(Debug)]
pub(crate) struct Slots {
    /// The free CPU slots, by number (0..jobs), lowest first.
    cpu_free: Vec<usize>,
    gpus: Vec<GpuId>,
    gpu_free: Vec<GpuId>,
    running: usize,
    exclusive: bool,
    /// The cores of isolated nodes and the shared rest, when the build has any.
    partition: Option<Partition>,
}

/// What a node holds while it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lease {
    pub gpus: Vec<GpuId>,
    /// The CPU slot's number (what the build page draws a lane for); None
    /// for a node on the cluster.
    pub cpu: Option<usize>,
    /// The cores the node is pinned to; None: not pinned.
    pub cores: Option<Vec<usize>>,
}

impl Lease {
    /// The lane the node ran in, as attempts record it: `gpu:0,1` for a
    /// node holding GPUs, else `cpu:3`.
    pub(crate) fn slot(&self) -> Option<String> {
        if !self.gpus.is_empty() {
            let ids: Vec<&str> = self.gpus.iter().map(|g| g.as_str()).collect();
            return Some(format!("gpu:{}", ids.join(",")));
        }
        self.cpu.map(|c| format!("cpu:{c}"))
    }
}

/// Whether a node may start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Start(Lease),
    /// Not now: wait for a running node to end.
    Wait,
    /// Never in this build: it needs more GPUs than there are.
    Never {
        wanted: u32,
        available: usize,
    },
}

impl Slots {
    pub(crate) fn new(jobs: usize, gpus: Vec<GpuId>) -> Slots {
        Slots {
            cpu_free: (0..jobs.max(1)).collect(),
            gpu_free: gpus.clone(),
            gpus,
            running: 0,
            exclusive: false,
            partition: None,
        }
    }

    /// Slots whose isolated nodes take the cores `partition` reserves
    /// for their GPU, and whose other nodes share the rest.
    pub(crate) fn with_partition(mut self, partition: Partition) -> Slots {
        self.partition = Some(partition);
        self
    }

    pub(crate) fn cpu_free(&self) -> usize {
        self.cpu_free.len()
    }

    /// Whether no node could start now, whatever it needs: every node takes
    /// a CPU slot, and none are free (or an exclusive node runs).
    pub(crate) fn full(&self) -> bool {
        self.exclusive || self.cpu_free.is_empty()
    }

    /// Takes the slots a node with `res` needs, if they are free;
    /// `isolated`: a node of `isolation: Gpu` (see the module's docs).
    pub(crate) fn admit(&mut self, res: &Resources, isolated: bool) -> Admit {
        let reserved = self.partition.as_ref().map(|p| &p.reserved);
        if isolated && reserved.is_some_and(|r| !r.is_empty()) {
            return self.admit_isolated(res);
        }
        let wanted = res.gpus as usize;
        if wanted > self.gpus.len() {
            return Admit::Never {
                wanted: res.gpus,
                available: self.gpus.len(),
            };
        }
        let fits = !self.exclusive
            && !self.cpu_free.is_empty()
            && self.gpu_free.len() >= wanted
            && (!res.exclusive || self.running == 0);
        if !fits {
            return Admit::Wait;
        }
        let cpu = self.cpu_free.remove(0);
        self.running += 1;
        self.exclusive = res.exclusive;
        let shared = self.partition.as_ref().map(|p| p.shared.clone());
        Admit::Start(Lease {
            gpus: self.gpu_free.drain(..wanted).collect(),
            cpu: Some(cpu),
            // The whole machine for an exclusive node; else the shared cores.
            cores: shared.filter(|s| !s.is_empty() && !res.exclusive),
        })
    }

    /// An isolated node: one free GPU that has cores reserved (its first
    /// `res.gpus` such GPUs), pinned to their cores.
    fn admit_isolated(&mut self, res: &Resources) -> Admit {
        let reserved = self
            .partition
            .as_ref()
            .map(|p| p.reserved.clone())
            .unwrap_or_default();
        let wanted = (res.gpus as usize).max(1);
        if wanted > reserved.len() {
            return Admit::Never {
                wanted: res.gpus,
                available: reserved.len(),
            };
        }
        let free: Vec<GpuId> = self
            .gpu_free
            .iter()
            .filter(|g| reserved.contains_key(g))
            .take(wanted)
            .cloned()
            .collect();
        if self.exclusive || self.cpu_free.is_empty() || free.len() < wanted {
            return Admit::Wait;
        }
        self.gpu_free.retain(|g| !free.contains(g));
        let cpu = self.cpu_free.remove(0);
        self.running += 1;
        let mut cores: Vec<usize> = free.iter().flat_map(|g| reserved[g].clone()).collect();
        cores.sort_unstable();
        Admit::Start(Lease {
            gpus: free,
            cpu: Some(cpu),
            cores: Some(cores),
        })
    }

    /// Gives back what `lease` held.
    pub(crate) fn release(&mut self, lease: Lease) {
        self.gpu_free.extend(lease.gpus);
        // Hand out GPUs in the order they were given.
        let order = &self.gpus;
        self.gpu_free
            .sort_by_key(|g| order.iter().position(|o| o == g).unwrap_or(usize::MAX));
        if let Some(c) = lease.cpu {
            let at = self.cpu_free.partition_point(|&f| f < c);
            self.cpu_free.insert(at, c);
        }
        self.running -= 1;
        self.exclusive = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(gpus: u32, exclusive: bool) -> Resources {
        Resources { gpus, exclusive }
    }

    impl Slots {
        fn admit_plain(&mut self, r: &Resources) -> Admit {
            self.admit(r, false)
        }
    }

    fn ids(l: &Lease) -> Vec<&str> {
        l.gpus.iter().map(|g| g.as_str()).collect()
    }

    #[test]
    fn gpus_are_handed_out_in_order_and_never_shared() {
        let gpus = crate::gpu::parse_visible_devices("2,0,GPU-ab");
        let mut s = Slots::new(8, gpus);
        let Admit::Start(a) = s.admit_plain(&res(2, false)) else {
            panic!()
        };
        assert_eq!(ids(&a), ["2", "0"]);
        let Admit::Start(b) = s.admit_plain(&res(1, false)) else {
            panic!()
        };
        assert_eq!(ids(&b), ["GPU-ab"]);
        assert_eq!(s.admit_plain(&res(1, false)), Admit::Wait);
        s.release(a);
        let Admit::Start(c) = s.admit_plain(&res(1, false)) else {
            panic!()
        };
        assert_eq!(ids(&c), ["2"], "the first given GPU comes back first");
        assert_eq!(
            s.admit_plain(&res(4, false)),
            Admit::Never {
                wanted: 4,
                available: 3
            }
        );
    }

    #[test]
    fn an_exclusive_node_runs_alone() {
        let mut s = Slots::new(4, Vec::new());
        let Admit::Start(a) = s.admit_plain(&res(0, false)) else {
            panic!()
        };
        assert_eq!(s.admit_plain(&res(0, true)), Admit::Wait, "something runs");
        s.release(a);
        let Admit::Start(x) = s.admit_plain(&res(0, true)) else {
            panic!()
        };
        assert_eq!(
            s.admit_plain(&res(0, false)),
            Admit::Wait,
            "the exclusive node holds the machine"
        );
        s.release(x);
        assert!(matches!(s.admit_plain(&res(0, false)), Admit::Start(_)));
    }

    #[test]
    fn isolated_nodes_run_beside_each_other_on_their_gpus_cores() {
        use crate::host::topology::{partition, Topology};
        // 2 NUMA nodes × 8 cores, 4 GPUs on each.
        let t = Topology::simulated(2, 8, 4);
        let gpus: Vec<GpuId> = (0..8).map(GpuId::index).collect();
        let mut s = Slots::new(16, gpus.clone()).with_partition(partition(&t, &gpus));
        let timing = res(1, true);
        let mut leases = Vec::new();
        for g in 0..8 {
            let Admit::Start(l) = s.admit(&timing, true) else {
                panic!("GPU {g} is free")
            };
            assert_eq!(ids(&l), [g.to_string()]);
            let node = t.gpu_node[&l.gpus[0]];
            let cores = l.cores.clone().expect("pinned");
            assert!(
                cores.iter().all(|c| t.nodes[&node].contains(c)),
                "{cores:?}"
            );
            leases.push(l);
        }
        assert_eq!(s.admit(&timing, true), Admit::Wait, "every GPU is taken");
        // An ordinary node runs beside them on the shared cores.
        let Admit::Start(cpu) = s.admit(&res(0, false), false) else {
            panic!()
        };
        assert_eq!(cpu.cores, Some(vec![0, 1, 2, 3, 8, 9, 10, 11]));
        // A node of `isolation: Host` waits for the machine to empty.
        assert_eq!(s.admit(&timing, false), Admit::Wait);
        s.release(cpu);
        for l in leases {
            s.release(l);
        }
        let Admit::Start(host) = s.admit(&timing, false) else {
            panic!()
        };
        assert_eq!(host.cores, None, "the whole machine");
        assert_eq!(s.admit(&timing, true), Admit::Wait);
    }

    #[test]
    fn cpu_slots_bound_what_runs_at_once() {
        let mut s = Slots::new(2, Vec::new());
        let Admit::Start(a) = s.admit_plain(&res(0, false)) else {
            panic!()
        };
        assert!(matches!(s.admit_plain(&res(0, false)), Admit::Start(_)));
        assert_eq!(s.admit_plain(&res(0, false)), Admit::Wait);
        s.release(a);
        assert!(matches!(s.admit_plain(&res(0, false)), Admit::Start(_)));
    }
}
