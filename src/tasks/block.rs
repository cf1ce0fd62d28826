//! A block measured together, whatever its task: the members of a stage's
//! `together` axes, each a spec of its own, measured in one process, and
//! the order their timed work runs in (shuffled rounds, seeded by the
//! node), which `Vit` and `OpBench` blocks share.

use serde::{Deserialize, Serialize};

use super::Together;

/// The members of a block: `block` names them (axes and values, in matrix
/// order), `members` holds each one's spec, in the same order. The A/A
/// twin of `check: true` is a second instance of the first member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block<S> {
    pub block: Together,
    pub members: Vec<S>,
}

impl<S> Block<S> {
    /// Each member's key (its values joined by `,`) with its spec.
    pub fn keyed(&self) -> impl Iterator<Item = (String, &S)> {
        self.block.keys().into_iter().zip(&self.members)
    }

    /// That the block holds one spec per member it names, and at least one.
    pub fn check_count(&self) -> Result<(), String> {
        if self.members.len() != self.block.members.len() || self.members.is_empty() {
            return Err(format!(
                "a block measured together names {} members and holds {} specs",
                self.block.members.len(),
                self.members.len()
            ));
        }
        Ok(())
    }
}

/// The order a block's timed work runs in: rounds in which every member
/// with batches left runs `block` of them (fewer at its end), in an order
/// shuffled afresh each round from `seed`, so that every member sees every
/// phase of the process. Each entry is (member, batches).
pub fn schedule(batches: &[u32], block: u32, seed: u64) -> Vec<(usize, u32)> {
    let mut rng = crate::stats::Rng::new(seed);
    let mut left = batches.to_vec();
    let mut out = Vec::new();
    let block = block.max(1);
    loop {
        let mut round: Vec<usize> = (0..left.len()).filter(|&i| left[i] > 0).collect();
        if round.is_empty() {
            return out;
        }
        rng.shuffle(&mut round);
        for i in round {
            let n = left[i].min(block);
            left[i] -= n;
            out.push((i, n));
        }
    }
}

/// A seed for a block's order from the node's id: each repetition of a
/// block (its own id) runs its members in another order, the same one
/// every time it is measured again.
pub fn seed_of(node: &str) -> u64 {
    node.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_runs_all_its_batches_once_a_round_in_shuffled_order() {
        let order = schedule(&[10, 3, 8], 4, 7);
        for (member, want) in [(0, 10), (1, 3), (2, 8)] {
            let got: u32 = order
                .iter()
                .filter(|(m, _)| *m == member)
                .map(|(_, n)| n)
                .sum();
            assert_eq!(got, want, "member {member}");
        }
        // Round one holds all three members, once each; round two members 0
        // and 2 (member 1 ran its 3 batches in one block); round three member 0.
        let rounds: Vec<Vec<usize>> = vec![
            order[..3].iter().map(|(m, _)| *m).collect(),
            order[3..5].iter().map(|(m, _)| *m).collect(),
            order[5..].iter().map(|(m, _)| *m).collect(),
        ];
        let sorted = |r: &Vec<usize>| {
            let mut r = r.clone();
            r.sort();
            r
        };
        assert_eq!(sorted(&rounds[0]), vec![0, 1, 2]);
        assert_eq!(sorted(&rounds[1]), vec![0, 2]);
        assert_eq!(rounds[2], vec![0]);
        assert_eq!(order.len(), 6);
    }

    #[test]
    fn the_order_changes_between_rounds_and_seeds_but_not_between_runs() {
        let firsts = |seed| -> Vec<usize> {
            schedule(&[400; 4], 4, seed)
                .chunks(4)
                .map(|round| round[0].0)
                .collect()
        };
        assert_eq!(firsts(1), firsts(1));
        assert_ne!(firsts(1), firsts(2));
        // Over 100 rounds each of 4 members leads a round 25 times on
        // average: none is never first, none always.
        let leads = firsts(1);
        for m in 0..4 {
            let n = leads.iter().filter(|&&l| l == m).count();
            assert!(
                (10..=40).contains(&n),
                "member {m} first in {n} of 100 rounds"
            );
        }
        assert_ne!(seed_of("s[rep=1]"), seed_of("s[rep=2]"));
    }
}
