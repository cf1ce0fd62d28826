//! Where started nodes run: a build's *lanes*, each an [`Executor`] and the
//! [`Pool`] that bounds how many of its nodes run at once. A local build has
//! one lane (the machine's slots); `--executor slurm` adds the cluster's
//! (at most so many jobs at once) for the nodes placed there. Every node is
//! started the same way whatever its lane; only admission differs.

use std::collections::HashMap;
use std::sync::Arc;

use super::executor::Executor;
use super::slots::{Admit, Lease, Slots};
use crate::graph::NodeIdx;
use crate::store::LiveJob;
use crate::tasks::Resources;

/// An executor and what bounds it.
pub(crate) struct Lane {
    pub executor: Arc<dyn Executor>,
    pub pool: Pool,
    /// Jobs a driver that ended left running in this lane, by node id: a
    /// node adopts its job instead of starting one.
    pub live: HashMap<String, LiveJob>,
}

/// What bounds a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pool {
    /// The machine's CPU and GPU slots (`-j`, `--gpus`, exclusive nodes).
    Machine,
    /// At most this many nodes at once (a cluster's jobs).
    Count(usize),
}

impl Lane {
    /// The machine's lane: `executor` within its slots.
    pub(crate) fn machine(executor: Arc<dyn Executor>) -> Lane {
        Lane {
            executor,
            pool: Pool::Machine,
            live: HashMap::new(),
        }
    }
}

/// Whether a node may start, and in which lane with what.
pub(super) enum Admitted {
    Start {
        lane: usize,
        lease: Lease,
    },
    /// Not now: wait for a running node of its lane to end.
    Wait,
    /// Never in this build: it needs more GPUs than there are.
    Never {
        wanted: u32,
        available: usize,
    },
}

/// A build's lanes with what runs in each.
pub(super) struct Lanes<'a> {
    lanes: &'a [Lane],
    /// Each node's lane, by index; empty: every node in lane 0.
    lane_of: &'a [usize],
    slots: Slots,
    in_lane: Vec<usize>,
    live: Vec<HashMap<String, LiveJob>>,
}

impl<'a> Lanes<'a> {
    pub(super) fn new(lanes: &'a [Lane], lane_of: &'a [usize], slots: Slots) -> Lanes<'a> {
        Lanes {
            in_lane: vec![0; lanes.len()],
            live: lanes.iter().map(|l| l.live.clone()).collect(),
            lanes,
            lane_of,
            slots,
        }
    }

    pub(super) fn lane_of(&self, node: NodeIdx) -> usize {
        self.lane_of.get(node).copied().unwrap_or(0)
    }

    pub(super) fn executor(&self, lane: usize) -> Arc<dyn Executor> {
        self.lanes[lane].executor.clone()
    }

    /// Whether `lane` runs on the machine's slots (its nodes record a slot).
    pub(super) fn on_machine(&self, lane: usize) -> bool {
        self.lanes[lane].pool == Pool::Machine
    }

    /// Whether no node of any lane can start now.
    pub(super) fn full(&self) -> bool {
        self.lanes.iter().enumerate().all(|(i, l)| match l.pool {
            Pool::Machine => self.slots.full(),
            Pool::Count(n) => self.in_lane[i] >= n,
        })
    }

    /// Free CPU slots of the machine.
    pub(super) fn cpu_free(&self) -> usize {
        self.slots.cpu_free()
    }

    /// Admits `node` with `res` into its lane, counting it there.
    pub(super) fn admit(&mut self, node: NodeIdx, res: &Resources, isolated: bool) -> Admitted {
        let lane = self.lane_of(node);
        let admitted = match self.lanes[lane].pool {
            Pool::Count(n) if self.in_lane[lane] < n => Admitted::Start {
                lane,
                lease: Lease::default(),
            },
            Pool::Count(_) => Admitted::Wait,
            Pool::Machine => match self.slots.admit(res, isolated) {
                Admit::Start(lease) => Admitted::Start { lane, lease },
                Admit::Wait => Admitted::Wait,
                Admit::Never { wanted, available } => Admitted::Never { wanted, available },
            },
        };
        if let Admitted::Start { lane, .. } = admitted {
            self.in_lane[lane] += 1;
        }
        admitted
    }

    /// The job a dead driver left for `node` in `lane`, taken once.
    pub(super) fn take_live(&mut self, lane: usize, node: &str) -> Option<LiveJob> {
        self.live[lane].remove(node)
    }

    /// Gives back the machine's slots a node held (its task ended).
    pub(super) fn free_slots(&mut self, lease: Lease) {
        self.slots.release(lease);
    }

    /// A node of `lane` is done (or never started after admission).
    pub(super) fn leave(&mut self, lane: usize) {
        self.in_lane[lane] = self.in_lane[lane].saturating_sub(1);
    }

    /// Stops everything every lane runs.
    pub(super) fn interrupt_all(&self) {
        for lane in self.lanes {
            lane.executor.interrupt();
        }
    }
}
