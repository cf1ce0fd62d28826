//! The order nodes are taken in: repetitions round by round.
//!
//! The repetitions of a repeated stage (`repeat: N`) are not run as they
//! come (every repetition of one configuration back to back) but in
//! rounds: the first repetition of every configuration, then every second
//! one, and so on; within a round the configurations come in a shuffled
//! order, seeded and different from round to round. Drift in the machine
//! (clocks, heat, a neighbour) then falls on all configurations alike
//! instead of on the ones that happened to run late. Every other node
//! keeps the order it came in, ahead of the repetitions.

use std::collections::{BTreeMap, VecDeque};

use crate::graph::{Graph, NodeIdx};

/// The seed of the rounds' shuffles when the build names none.
pub(crate) const DEFAULT_SEED: u64 = 1;

/// A repetition's place: its round, its rank in the round, the node.
pub(super) type Round = (u32, u64, NodeIdx);

/// Where node `i` goes: its round when it measures a repetition and the
/// build interleaves (`seed`), None otherwise (an analysis of a repetition
/// is taken as it comes).
pub(super) fn round_of(graph: &Graph, i: NodeIdx, seed: Option<u64>) -> Option<Round> {
    let node = &graph.nodes[i];
    let (rep, seed) = (node.rep?, seed?);
    if !node.task.measures() {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(&seed.to_le_bytes());
    h.update(&rep.to_le_bytes());
    h.update(node.stage.as_bytes());
    for (k, v) in node.configuration() {
        h.update(b"\0");
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.to_string().as_bytes());
    }
    let rank = u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap_or([0; 8]));
    Some((rep, rank, i))
}

/// A line of nodes (or of what waits with them): the plain ones first in
/// the order they came, then the repetitions by round.
pub(super) struct Line<T> {
    plain: VecDeque<T>,
    rounds: BTreeMap<Round, T>,
}

impl<T> Line<T> {
    pub(super) fn new() -> Line<T> {
        Line {
            plain: VecDeque::new(),
            rounds: BTreeMap::new(),
        }
    }

    pub(super) fn push_back(&mut self, round: Option<Round>, item: T) {
        match round {
            Some(r) => {
                self.rounds.insert(r, item);
            }
            None => self.plain.push_back(item),
        }
    }

    /// Puts an item back where it was taken from (a repetition goes back
    /// to its place in the rounds wherever it is pushed).
    pub(super) fn push_front(&mut self, round: Option<Round>, item: T) {
        match round {
            Some(r) => {
                self.rounds.insert(r, item);
            }
            None => self.plain.push_front(item),
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<(Option<Round>, T)> {
        if let Some(item) = self.plain.pop_front() {
            return Some((None, item));
        }
        self.rounds.pop_first().map(|(r, item)| (Some(r), item))
    }

    pub(super) fn len(&self) -> usize {
        self.plain.len() + self.rounds.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The plain items, to reorder before anything is taken.
    pub(super) fn plain_mut(&mut self) -> &mut VecDeque<T> {
        &mut self.plain
    }
}

impl<T> FromIterator<(Option<Round>, T)> for Line<T> {
    fn from_iter<I: IntoIterator<Item = (Option<Round>, T)>>(iter: I) -> Line<T> {
        let mut line = Line::new();
        for (round, item) in iter {
            line.push_back(round, item);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_items_come_first_then_rounds_in_order() {
        let mut line = Line::new();
        line.push_back(Some((2, 5, 10)), "b2");
        line.push_back(None, "x");
        line.push_back(Some((1, 9, 11)), "a1");
        line.push_back(Some((1, 3, 12)), "c1");
        line.push_back(None, "y");
        let (r, first) = line.pop_front().unwrap();
        assert_eq!((r, first), (None, "x"));
        line.push_front(r, first);
        let order: Vec<&str> = std::iter::from_fn(|| line.pop_front().map(|(_, t)| t)).collect();
        assert_eq!(order, ["x", "y", "c1", "a1", "b2"]);
        assert!(line.is_empty());
    }
}
