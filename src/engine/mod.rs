//! Planning (fresh or stale, with reasons) and scheduling.
