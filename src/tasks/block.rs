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

/// The order a block's timed work runs in: as many rounds as the member
/// with the most batches needs at `block` a round, and every member's
/// batches spread evenly over all of them (a member with an eighth of the
/// batches runs one every other round of four), in an order shuffled afresh
/// each round from `seed`. So every member sees every phase of the process,
/// from its first round to its last, whatever its count: a member that ran
/// its few batches at the start and left the rest of the process to the
/// others would pair a phase of its own with theirs. Each entry is
/// (member, batches); a member with none in a round is not in it.
pub fn schedule(batches: &[u32], block: u32, seed: u64) -> Vec<(usize, u32)> {
    let mut rng = crate::stats::Rng::new(seed);
    let block = u64::from(block.max(1));
    let most = batches.iter().copied().max().unwrap_or(0);
    let rounds = u64::from(most).div_ceil(block);
    // Batches of member `n` run by the end of round `r`: ⌊n·r/R⌋, so its
    // rounds differ by at most one batch and their sum is `n`.
    let by = |n: u32, r: u64| (u64::from(n) * r / rounds) as u32;
    let mut out = Vec::new();
    for r in 0..rounds {
        let mut round: Vec<(usize, u32)> = batches
            .iter()
            .enumerate()
            .map(|(i, &n)| (i, by(n, r + 1) - by(n, r)))
            .filter(|&(_, k)| k > 0)
            .collect();
        rng.shuffle(&mut round);
        out.extend(round);
    }
    out
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
    fn every_member_runs_all_its_batches_spread_over_every_round() {
        let order = schedule(&[12, 3, 8], 4, 7);
        for (member, want) in [(0, 12), (1, 3), (2, 8)] {
            let got: u32 = order
                .iter()
                .filter(|(m, _)| *m == member)
                .map(|(_, n)| n)
                .sum();
            assert_eq!(got, want, "member {member}");
        }
        // Three rounds (12 batches at 4 a round): member 0 runs 4 in each,
        // member 2 runs 2, 3, 3, and member 1 one in each, never all at
        // the start.
        let in_round = |member: usize| -> Vec<u32> {
            let mut seen = 0;
            let mut per = Vec::new();
            for &(m, n) in &order {
                if m == 0 {
                    seen += 1;
                }
                if m == member {
                    per.push((seen, n));
                }
            }
            per.into_iter().map(|(_, n)| n).collect()
        };
        assert_eq!(in_round(0), vec![4, 4, 4]);
        assert_eq!(in_round(1), vec![1, 1, 1]);
        assert_eq!(in_round(2), vec![2, 3, 3]);
        assert_eq!(order.len(), 9);
        // A member of a sixteenth of the batches (the quickstart's batch 8
        // beside its batch 1 at equal images) runs in the last quarter of
        // the rounds as in the first.
        let order = schedule(&[400, 50], 4, 1);
        assert_eq!(order.iter().filter(|(m, _)| *m == 0).count(), 100);
        // (A round is counted where member 0 runs, so member 1 may fall a
        // round either side: 12 or 13 of its 50 batches.)
        let mut round = 0;
        let mut last_quarter = 0;
        for &(m, n) in &order {
            if m == 0 {
                round += 1;
            }
            if m == 1 && round > 75 {
                last_quarter += n;
            }
        }
        assert!((12..=13).contains(&last_quarter), "{last_quarter}");
        assert!(schedule(&[], 4, 1).is_empty());
        assert!(schedule(&[0, 0], 4, 1).is_empty());
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
