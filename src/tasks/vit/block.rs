//! A `Vit` block measured together: the members of a stage's `together`
//! axes, each a spec of its own, measured in one process (see
//! [`together`](super::together) for how, with the `torch` feature).

use super::spec::{Trace, VitSpec};
use crate::tasks::block::Block;

/// The members of a `Vit` block (see [`Block`]).
pub type VitBlock = Block<VitSpec>;

/// Timed batches a member runs before the next member's turn: short blocks
/// spread every member over the speed phases a process goes through (on an
/// H200, blocks of 20 left eager A/A ratios at ±7–8 %, blocks of 4 at
/// ±0.5–1.5 %; the book's Repetitions chapter).
pub const BLOCK_BATCHES: u32 = 4;

impl Block<VitSpec> {
    /// Checks that the members can share a process: one spec per member,
    /// each valid, all on one device and NUMA node, none traced.
    pub fn validate(&self) -> Result<(), String> {
        self.check_count()?;
        let keys = self.block.keys();
        let first = &self.members[0];
        for (key, member) in keys.iter().zip(&self.members) {
            if member.together.is_some() {
                return Err(format!("member `{key}` holds a block of its own"));
            }
            member
                .resolve()
                .map_err(|e| format!("member `{key}`: {e}"))?;
            if member.device != first.device || member.numa != first.numa {
                return Err(format!(
                    "member `{key}` runs on `device: {:?}`{}, the block's first member on {:?}{}: one process measures a block, on one device; `device` and `numa` cannot be measured together",
                    member.device,
                    numa(member.numa),
                    first.device,
                    numa(first.numa)
                ));
            }
            if member.trace != Trace::None {
                return Err(format!(
                    "member `{key}` has `trace: {:?}`, and a block measured together records timings only: trace the configurations in a stage of their own, without `together`",
                    member.trace
                ));
            }
        }
        Ok(())
    }
}

fn numa(n: Option<u32>) -> String {
    n.map(|n| format!(" (`numa: {n}`)")).unwrap_or_default()
}
