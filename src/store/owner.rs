//! Which process owns a staging directory or a `running` attempt, and whether
//! that process is still alive. A pid alone is not enough (pids are reused), so
//! an owner is (host, pid, process start time); on another host nothing can be
//! decided, so its leftovers are left alone.

use std::fs;

/// The identity of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub host: String,
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat`, field 22); 0 when unknown.
    pub start: u64,
}

/// What can be said about an owner from this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    Alive,
    Dead,
    /// It ran on another host.
    Unknown,
}

impl Owner {
    /// This process.
    pub(super) fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            host: host_name(),
            pid,
            start: process_start(pid).unwrap_or(0),
        }
    }

    /// This host's process `pid` (for tests that need a dead one).
    #[cfg(test)]
    pub(super) fn local(pid: u32, start: u64) -> Owner {
        Owner {
            host: host_name(),
            pid,
            start,
        }
    }

    pub(super) fn liveness(&self, local_host: &str) -> Liveness {
        if self.host != local_host {
            return Liveness::Unknown;
        }
        match process_start(self.pid) {
            None => Liveness::Dead,
            // Unknown start times (0) only compare the pid.
            Some(start) if self.start == 0 || start == self.start => Liveness::Alive,
            Some(_) => Liveness::Dead,
        }
    }

    /// The staging directory name prefix of this owner: `<pid>-<start>-`.
    pub(super) fn staging_prefix(&self) -> String {
        format!("{}-{}-", self.pid, self.start)
    }

    /// Reads back `<pid>-<start>-<seq>`.
    pub(super) fn from_staging_name(host: &str, name: &str) -> Option<Owner> {
        let mut parts = name.split('-');
        let pid = parts.next()?.parse().ok()?;
        let start = parts.next()?.parse().ok()?;
        let _seq: u64 = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Owner {
            host: host.to_string(),
            pid,
            start,
        })
    }
}

/// The start time of a live (not zombie) process, or None when it does not exist.
pub(super) fn process_start(pid: u32) -> Option<u64> {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat),
        // No /proc (not Linux): fall back to asking the kernel whether the pid exists.
        Err(_) if !std::path::Path::new("/proc/self/stat").exists() => pid_exists(pid).then_some(0),
        Err(_) => None,
    }
}

/// Parses `/proc/<pid>/stat`: the command name (field 2) may hold spaces and
/// parentheses, so fields are counted after the last `)`.
fn parse_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None; // exited, only waiting to be reaped
    }
    // `state` was field 3; the start time is field 22.
    fields.nth(18)?.parse().ok()
}

fn pid_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_string();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        let me = Owner::current();
        assert_ne!(me.start, 0);
        assert_eq!(me.liveness(&me.host), Liveness::Alive);
    }

    #[test]
    fn reused_pid_with_other_start_time_is_dead() {
        let me = Owner::current();
        let impostor = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert_eq!(impostor.liveness(&me.host), Liveness::Dead);
    }

    #[test]
    fn exited_child_is_dead_and_other_hosts_are_unknown() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn `true`");
        let pid = child.id();
        let start = process_start(pid);
        child.wait().expect("wait for `true`");
        let owner = Owner::local(pid, start.unwrap_or(1));
        assert_eq!(owner.liveness(&Owner::current().host), Liveness::Dead);
        let elsewhere = Owner {
            host: "another-host".into(),
            ..Owner::current()
        };
        assert_eq!(
            elsewhere.liveness(&Owner::current().host),
            Liveness::Unknown
        );
    }

    #[test]
    fn stat_parsing_handles_odd_command_names() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some(987654));
        let zombie = "42 (x) Z 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(zombie), None);
    }

    #[test]
    fn staging_names_round_trip() {
        let me = Owner::current();
        let name = format!("{}7", me.staging_prefix());
        assert_eq!(Owner::from_staging_name(&me.host, &name), Some(me.clone()));
        assert_eq!(Owner::from_staging_name(&me.host, "junk"), None);
        assert_eq!(Owner::from_staging_name(&me.host, "1-2-3-4"), None);
    }
}
