//! The process groups of the tasks a build started, written down so that the
//! next command can end what a killed build left running.
//!
//! Each task leads its own process group. SIGINT, SIGTERM and SIGHUP end the
//! groups of a build that is still alive; a task's `sh` dies with vitgraph
//! (`PR_SET_PDEATHSIG`) even on `kill -9`, but what it started does not. So
//! every build appends `<group id> <leader start time>` to
//! `cache/tasks/<host>/<pid>-<start>` for each task (a write to the page
//! cache, no flush: it only has to outlive the process, not the machine),
//! and removes the file when it ends. The task writes its own line, after
//! it leads its group and before it execs (`engine::spawn`): a build killed
//! at any moment after that leaves no group unnoted, which a line written
//! by the build once the task had started could not promise. The next command that opens
//! the store reads the files of this host's dead builds and kills what is
//! left of each group ([`Store::end_dead_task_groups`]).
//!
//! A group id is a pid and pids are reused, so a group is matched by its
//! leader's start time: while the leader lives (or is a zombie) its id
//! cannot be reused; once it is gone, a process counts as the group's when it
//! is in the group and started no earlier than the leader did.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::open::Store;
use super::owner::{process_start, Liveness, Owner};
use super::roles::Journal;

/// The task groups one process started (see the module's comment).
pub struct TaskGroups {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl TaskGroups {
    /// The file a task notes its group in, opened for appending (one write
    /// per line: O_APPEND keeps lines whole); None when it cannot be made.
    /// It stays open while `self` lives.
    pub fn fd(&self) -> Option<i32> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            if let Some(dir) = self.path.parent() {
                let _ = fs::create_dir_all(dir);
            }
            *file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ok();
        }
        file.as_ref().map(|f| f.as_raw_fd())
    }
}

impl Drop for TaskGroups {
    /// Every task of a build that ends normally has ended with it.
    fn drop(&mut self) {
        let file = self.file.get_mut().unwrap_or_else(|e| e.into_inner());
        if file.take().is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Journal<'_> {
    /// Where this process notes the groups of the tasks it starts.
    pub fn task_groups(&self) -> TaskGroups {
        TaskGroups {
            path: self
                .tasks_dir()
                .join(format!("{}0", self.owner.staging_prefix())),
            file: Mutex::new(None),
        }
    }

    /// Kills what is left of the task groups of this host's dead builds and
    /// forgets them; returns how many processes were killed.
    pub fn end_dead_task_groups(&self) -> usize {
        let Ok(entries) = fs::read_dir(self.tasks_dir()) else {
            return 0;
        };
        let mut groups = Vec::new();
        let mut files = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(owner) = Owner::from_staging_name(&self.owner.host, &name) else {
                continue;
            };
            if owner.liveness(&self.owner.host) != Liveness::Dead {
                continue;
            }
            groups.extend(read_groups(&entry.path()));
            files.push(entry.path());
        }
        let killed = if groups.is_empty() {
            0
        } else {
            kill_groups(&groups)
        };
        for f in files {
            let _ = fs::remove_file(f);
        }
        killed
    }
}

impl Store {
    fn tasks_dir(&self) -> PathBuf {
        self.cache.join("tasks").join(&self.owner.host)
    }
}

fn read_groups(path: &Path) -> Vec<(i32, u64)> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (g, s) = l.split_once(' ')?;
            Some((g.parse().ok()?, s.trim().parse().ok()?))
        })
        .collect()
}

/// Kills every process that belongs to one of `groups` (group id, leader's
/// start time); returns how many.
fn kill_groups(groups: &[(i32, u64)]) -> usize {
    let wanted: HashMap<i32, u64> = groups.iter().copied().collect();
    let mut killed = 0;
    for (pid, (pgrp, start)) in processes() {
        let Some(&leader_start) = wanted.get(&pgrp) else {
            continue;
        };
        // The leader alive with another start time: the id was reused, and
        // the group is someone else's.
        let leader = process_start(pgrp as u32);
        if leader.is_some_and(|s| s != leader_start) || start < leader_start {
            continue;
        }
        // SAFETY: kill(2) on one process id; no memory is touched.
        if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            killed += 1;
        }
    }
    killed
}

/// This user's live processes: pid → (process group, start time).
fn processes() -> Vec<(i32, (i32, u64))> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // Fields counted from 3 (state): pgrp is field 5, start time 22.
            if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
                return None;
            }
            let pgrp = fields.get(2)?.parse().ok()?;
            let start = fields.get(19)?.parse().ok()?;
            Some((pid, (pgrp, start)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::super::test_support::workspace;
    use super::*;

    /// Whether `pid` runs (not a zombie).
    fn runs(pid: i32) -> bool {
        process_start(pid as u32).is_some()
    }

    #[test]
    fn the_groups_of_a_dead_build_are_ended_and_no_other() {
        let (_dir, store) = workspace();
        // A "task" leading its own group, with a grandchild in it.
        let mut task = Command::new("sh")
            .args(["-c", "sleep 60 & echo $!; wait"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(task.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        // A bystander in a group of its own.
        let mut other = Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();

        // The notes of a build whose process is dead.
        let dead = {
            let mut c = Command::new("true").spawn().unwrap();
            let pid = c.id();
            c.wait().unwrap();
            Owner::local(pid, 1)
        };
        let dir = store.tasks_dir();
        fs::create_dir_all(&dir).unwrap();
        let pgid = task.id() as i32;
        let start = process_start(pgid as u32).unwrap();
        let reused = other.id() as i32; // a group id noted with a wrong start time
        fs::write(
            dir.join(format!("{}0", dead.staging_prefix())),
            format!("{pgid} {start}\n{reused} 1\n"),
        )
        .unwrap();
        // The notes of this (live) process stay untouched.
        let mine = store.journal().task_groups();
        assert!(mine.fd().is_some());
        let line = format!("{} {}\n", other.id(), process_start(other.id()).unwrap());
        fs::write(&mine.path, line).unwrap();

        assert_eq!(
            store.journal().end_dead_task_groups(),
            2,
            "the task and its grandchild"
        );
        task.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while runs(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!runs(grandchild), "the grandchild is ended");
        assert!(runs(other.id() as i32), "the bystander runs on");
        assert!(mine.path.exists(), "a live build's notes are kept");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "the dead build's notes are gone"
        );
        other.kill().unwrap();
        other.wait().unwrap();
        drop(mine);
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "a build that ends removes its notes"
        );
    }
}
