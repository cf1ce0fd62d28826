//! The local machine's slots: how many CPU nodes run at once (`-j`), which
//! GPUs are free, and whether an exclusive node holds the machine.
//!
//! A GPU node takes its GPUs out of the free list and hands them to its task
//! through `CUDA_VISIBLE_DEVICES`, so two GPU nodes never share a card. An
//! exclusive node (every timing node) starts only when nothing runs, and
//! nothing starts beside it.

use crate::gpu::GpuId;
use crate::tasks::Resources;

#[derive(Debug)]
pub(crate) struct Slots {
    /// The free CPU slots, by number (0..jobs), lowest first.
    cpu_free: Vec<usize>,
    gpus: Vec<GpuId>,
    gpu_free: Vec<GpuId>,
    running: usize,
    exclusive: bool,
}

/// What a node holds while it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lease {
    pub gpus: Vec<GpuId>,
    /// The CPU slot's number (what the build page draws a lane for); None
    /// for a node on the cluster.
    pub cpu: Option<usize>,
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
        }
    }

    pub(crate) fn cpu_free(&self) -> usize {
        self.cpu_free.len()
    }

    /// Whether no node could start now, whatever it needs: every node takes
    /// a CPU slot, and none are free (or an exclusive node runs).
    pub(crate) fn full(&self) -> bool {
        self.exclusive || self.cpu_free.is_empty()
    }

    /// Takes the slots a node with `res` needs, if they are free.
    pub(crate) fn admit(&mut self, res: &Resources) -> Admit {
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
        Admit::Start(Lease {
            gpus: self.gpu_free.drain(..wanted).collect(),
            cpu: Some(cpu),
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

    fn ids(l: &Lease) -> Vec<&str> {
        l.gpus.iter().map(|g| g.as_str()).collect()
    }

    #[test]
    fn gpus_are_handed_out_in_order_and_never_shared() {
        let gpus = crate::gpu::parse_visible_devices("2,0,GPU-ab");
        let mut s = Slots::new(8, gpus);
        let Admit::Start(a) = s.admit(&res(2, false)) else {
            panic!()
        };
        assert_eq!(ids(&a), ["2", "0"]);
        let Admit::Start(b) = s.admit(&res(1, false)) else {
            panic!()
        };
        assert_eq!(ids(&b), ["GPU-ab"]);
        assert_eq!(s.admit(&res(1, false)), Admit::Wait);
        s.release(a);
        let Admit::Start(c) = s.admit(&res(1, false)) else {
            panic!()
        };
        assert_eq!(ids(&c), ["2"], "the first given GPU comes back first");
        assert_eq!(
            s.admit(&res(4, false)),
            Admit::Never {
                wanted: 4,
                available: 3
            }
        );
    }

    #[test]
    fn an_exclusive_node_runs_alone() {
        let mut s = Slots::new(4, Vec::new());
        let Admit::Start(a) = s.admit(&res(0, false)) else {
            panic!()
        };
        assert_eq!(s.admit(&res(0, true)), Admit::Wait, "something runs");
        s.release(a);
        let Admit::Start(x) = s.admit(&res(0, true)) else {
            panic!()
        };
        assert_eq!(
            s.admit(&res(0, false)),
            Admit::Wait,
            "the exclusive node holds the machine"
        );
        s.release(x);
        assert!(matches!(s.admit(&res(0, false)), Admit::Start(_)));
    }

    #[test]
    fn cpu_slots_bound_what_runs_at_once() {
        let mut s = Slots::new(2, Vec::new());
        let Admit::Start(a) = s.admit(&res(0, false)) else {
            panic!()
        };
        assert!(matches!(s.admit(&res(0, false)), Admit::Start(_)));
        assert_eq!(s.admit(&res(0, false)), Admit::Wait);
        s.release(a);
        assert!(matches!(s.admit(&res(0, false)), Admit::Start(_)));
    }
}
