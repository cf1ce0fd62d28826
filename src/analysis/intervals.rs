//! Interval arithmetic on `[start, end)` nanosecond intervals: the union's
//! length (busy time) and the gaps between its pieces (idle gaps).

/// The union of a set of intervals, as what analysis needs of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Union {
    /// Length of the union of the intervals.
    pub busy: i64,
    /// First start to last end (0 when there are no intervals).
    pub span: i64,
    /// The lengths of the holes between the union's pieces, in time order.
    pub gaps: Vec<i64>,
}

/// Merges `intervals` (sorted in place by start) into their union.
pub fn union(intervals: &mut [(i64, i64)]) -> Union {
    if intervals.is_empty() {
        return Union::default();
    }
    intervals.sort_unstable_by_key(|i| i.0);
    let first = intervals[0].0;
    let mut busy = 0i64;
    let mut gaps = Vec::new();
    let (mut cur_start, mut cur_end) = intervals[0];
    for &(s, e) in &intervals[1..] {
        if s <= cur_end {
            cur_end = cur_end.max(e);
        } else {
            busy += cur_end - cur_start;
            gaps.push(s - cur_end);
            cur_start = s;
            cur_end = e;
        }
    }
    busy += cur_end - cur_start;
    // `cur_end` only grows, so it ends as the latest end of all.
    Union {
        busy,
        span: cur_end - first,
        gaps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_intervals_count_once_and_gaps_are_the_holes() {
        let mut iv = vec![(10, 20), (0, 5), (15, 30), (40, 41), (30, 35)];
        let u = union(&mut iv);
        assert_eq!(u.busy, 5 + 25 + 1);
        assert_eq!(u.span, 41);
        assert_eq!(u.gaps, vec![5, 5]);
    }

    #[test]
    fn contained_interval_does_not_shorten_the_union() {
        let mut iv = vec![(0, 100), (10, 20), (50, 60)];
        let u = union(&mut iv);
        assert_eq!((u.busy, u.span), (100, 100));
        assert!(u.gaps.is_empty());
    }

    #[test]
    fn empty_set_is_all_zero() {
        assert_eq!(union(&mut []), Union::default());
    }
}
