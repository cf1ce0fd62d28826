//! Reading the compact binary files vitgraph writes for itself (the graph
//! cache, the no-op snapshot): the next bytes of a buffer.

/// The next `n` bytes of `bytes`, advancing it; None when fewer are left.
pub(crate) fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, tail) = bytes.split_at(n);
    *bytes = tail;
    Some(head)
}
