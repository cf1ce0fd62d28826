//! The load on the cores a task may run on, over its timed window: the busy
//! time of those cores (`/proc/stat`) less this process's own CPU time
//! (`/proc/self/stat`, all its threads) is work of other processes — a
//! second task, a compiler, another user — that took the cores from it.

use serde::{Deserialize, Serialize};

/// Counters read at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Counters {
    /// The cores this process may run on (its affinity mask).
    pub cores: Vec<usize>,
    /// The machine's online cores.
    pub online: usize,
    /// Busy ticks of each of `cores`, in their order.
    pub busy_ticks: Vec<u64>,
    /// This process's user + system ticks.
    pub own_ticks: u64,
}

/// The load on the task's cores over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// The cores the task may run on.
    pub cores: Vec<usize>,
    /// Whether that is fewer than the machine's cores (pinned by a core set,
    /// `taskset`, `numactl` or a cluster's cgroup).
    pub pinned: bool,
    pub window_s: f64,
    /// Busy time of those cores, in core-seconds.
    pub busy_core_s: f64,
    /// This process's CPU time, in core-seconds.
    pub own_core_s: f64,
    /// Work of other processes on those cores, in cores (busy − own over
    /// the window: 1.0 is one core taken the whole time).
    pub foreign_cores: f64,
}

impl Counters {
    /// The counters now; `None` where `/proc` cannot be read.
    pub fn read() -> Option<Counters> {
        let cores = affinity()?;
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let per_core = parse_stat(&stat);
        let online = per_core.len();
        let busy_ticks = cores
            .iter()
            .map(|c| per_core.iter().find(|(n, _)| n == c).map_or(0, |(_, b)| *b))
            .collect();
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        Some(Counters {
            cores,
            online,
            busy_ticks,
            own_ticks: parse_own_ticks(&own)?,
        })
    }
}

impl Load {
    /// What the tick counters cannot tell apart over the window, in cores:
    /// two ticks on each core.
    pub fn resolution_cores(&self) -> f64 {
        if self.window_s > 0.0 {
            2.0 * self.cores.len() as f64 / (ticks_per_second() * self.window_s)
        } else {
            f64::INFINITY
        }
    }

    /// The load between two readings `window_s` apart.
    pub fn between(start: &Counters, end: &Counters, window_s: f64) -> Load {
        let tick = ticks_per_second();
        let busy: u64 = end
            .busy_ticks
            .iter()
            .zip(&start.busy_ticks)
            .map(|(e, s)| e.saturating_sub(*s))
            .sum();
        let busy_core_s = busy as f64 / tick;
        let own_core_s = end.own_ticks.saturating_sub(start.own_ticks) as f64 / tick;
        let foreign_cores = if window_s > 0.0 {
            ((busy_core_s - own_core_s) / window_s).max(0.0)
        } else {
            0.0
        };
        Load {
            cores: start.cores.clone(),
            pinned: start.cores.len() < start.online,
            window_s,
            busy_core_s,
            own_core_s,
            foreign_cores,
        }
    }
}

/// `(core, busy ticks)` of each `cpuN` line of `/proc/stat`: user, nice,
/// system, irq, softirq and steal (idle and iowait are not busy; guest time
/// is already in user).
pub fn parse_stat(text: &str) -> Vec<(usize, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let core = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            Some((core, at(0) + at(1) + at(2) + at(5) + at(6) + at(7)))
        })
        .collect()
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15; the
/// command name in parentheses may hold spaces).
pub fn parse_own_ticks(text: &str) -> Option<u64> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_ascii_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The cores this process may run on.
pub fn affinity() -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ok != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `set` is initialized and the index is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_ticks_leave_out_idle_and_iowait() {
        let stat = "cpu  10 0 5 100 7 0 0 0 0 0\n\
                    cpu0 4 1 2 50 3 1 1 1 9 0\n\
                    cpu1 6 0 3 50 4 0 0 0 0 0\n\
                    intr 5\n";
        assert_eq!(parse_stat(stat), [(0, 10), (1, 9)]);
    }

    #[test]
    fn own_ticks_survive_a_name_with_spaces_and_parentheses() {
        let line = "4242 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 111 222 0 0 20 0 1";
        assert_eq!(parse_own_ticks(line), Some(333));
    }

    #[test]
    fn foreign_load_is_busy_time_less_our_own() {
        let at = |busy: Vec<u64>, own| Counters {
            cores: vec![0, 1],
            online: 4,
            busy_ticks: busy,
            own_ticks: own,
        };
        let tick = ticks_per_second();
        let t = tick as u64;
        // Over 2 s, the two cores were busy 3 s in all, 1 s of it ours.
        let load = Load::between(&at(vec![0, 0], 0), &at(vec![2 * t, t], t), 2.0);
        assert!(load.pinned);
        assert!((load.busy_core_s - 3.0).abs() < 1e-9);
        assert!((load.foreign_cores - 1.0).abs() < 1e-9, "{load:?}");
    }

    #[test]
    fn this_process_reads_its_own_counters() {
        let c = Counters::read().expect("/proc is readable on Linux");
        assert!(!c.cores.is_empty() && c.online >= c.cores.len());
        assert_eq!(c.busy_ticks.len(), c.cores.len());
    }
}
