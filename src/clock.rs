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
/// `2026-11-24 08:50:12 UTC`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Milliseconds since the epoch at `YYYY-MM-DD` (midnight UTC) or
/// `YYYY-MM-DDTHH:MM` (UTC); None for any other text.
pub fn parse_utc(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (hour, minute) = match time {
        None => (0, 0),
        Some(t) => {
            let (h, mi) = t.split_once(':')?;
            (h.parse::<i64>().ok()?, mi.parse::<i64>().ok()?)
        }
    };
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_back_as_they_print() {
        assert_eq!(parse_utc("1970-01-01"), Some(0));
        let ms = parse_utc("2026-11-28T08:30").unwrap();
        assert_eq!(utc(ms), "2026-11-28 08:30:00 UTC");
        assert_eq!(
            utc(parse_utc("2024-02-29").unwrap()),
            "2024-02-29 00:00:00 UTC"
        );
        for bad in ["2026-13-01", "yesterday", "2026-11", "2026-11-28T25:00"] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
