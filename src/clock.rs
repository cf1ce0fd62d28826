//! Time, read in one place: the wall clock, and the racy window.
//!
//! A file's recorded stat vouches for its content only when the file's
//! modification time is older than the moment the stat was taken by more
//! than the *racy window*: a write in the same timestamp tick leaves the
//! stat unchanged. One second covers local file systems and coarse network
//! and FAT-like mounts. `VITGRAPH_RACY_WINDOW_MS` sets another window; it is
//! the seam the test suite drives time through, so that "a file written a
//! moment ago" holds however slowly a loaded machine runs the next command.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The racy window when `VITGRAPH_RACY_WINDOW_MS` is not set.
pub const DEFAULT_RACY_WINDOW_NS: i64 = 1_000_000_000;

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    now_ns() / 1_000_000
}

/// The racy window in nanoseconds (read once per process).
pub fn racy_window_ns() -> i64 {
    static WINDOW: OnceLock<i64> = OnceLock::new();
    *WINDOW.get_or_init(|| {
        std::env::var("VITGRAPH_RACY_WINDOW_MS")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&ms| ms >= 0)
            .map_or(DEFAULT_RACY_WINDOW_NS, |ms| ms.saturating_mul(1_000_000))
    })
}
