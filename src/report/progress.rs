//! A running build's progress in `cache/progress.json` — its process id,
//! when it started, how many of its planned nodes are done — so the study
//! page written during the build can say "k of n". Written when the plan
//! is known, then at most every [`EVERY`] as nodes end, and removed when
//! the build ends; a build killed before that leaves a file whose process
//! is gone, which the page ignores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::events::{Event, Reporter};

/// How often the file is written at most while nodes end.
const EVERY: Duration = Duration::from_millis(200);

/// The file's name under `cache/`.
pub(crate) const FILE: &str = "progress.json";

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub pid: u32,
    pub started_at_ms: i64,
    /// Nodes built, restored, failed, skipped or found not needed.
    pub done: usize,
    /// Nodes the build planned to go through.
    pub total: usize,
}

impl Snapshot {
    /// The progress of a build running now in the workspace whose cache is
    /// `cache`; None when no build runs (no file, or its process is gone).
    pub(crate) fn of_running_build(cache: &std::path::Path) -> Option<Snapshot> {
        let text = std::fs::read(cache.join(FILE)).ok()?;
        let s: Snapshot = serde_json::from_slice(&text).ok()?;
        std::path::Path::new("/proc")
            .join(s.pid.to_string())
            .exists()
            .then_some(s)
    }
}

/// Passes every event on to `inner`, keeping the file up to date.
pub(crate) struct Progress {
    inner: Box<dyn Reporter>,
    path: PathBuf,
    snapshot: Snapshot,
    written: Option<Instant>,
}

impl Progress {
    pub(crate) fn new(inner: Box<dyn Reporter>, cache: &std::path::Path) -> Progress {
        Progress {
            inner,
            path: cache.join(FILE),
            snapshot: Snapshot {
                pid: std::process::id(),
                started_at_ms: crate::clock::now_ms(),
                done: 0,
                total: 0,
            },
            written: None,
        }
    }

    fn write(&mut self, now: bool) {
        if !now && self.written.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        // Progress is a courtesy to the page: a file that cannot be written
        // changes nothing about the build.
        let _ = crate::atomic::write(
            &self.path,
            &serde_json::to_vec(&self.snapshot).unwrap_or_default(),
        );
        self.written = Some(Instant::now());
    }
}

impl Reporter for Progress {
    fn event(&mut self, event: &Event) {
        self.inner.event(event);
        match event {
            Event::Planned { total } => {
                self.snapshot.total = *total;
                self.write(true);
            }
            Event::Finished { .. }
            | Event::Cached { .. }
            | Event::Failed { .. }
            | Event::Skipped { .. }
            | Event::Unneeded { .. } => {
                self.snapshot.done += 1;
                self.write(false);
            }
            Event::Done { .. } => {
                let _ = std::fs::remove_file(&self.path);
            }
            _ => {}
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Null;
    impl Reporter for Null {
        fn event(&mut self, _: &Event) {}
    }

    #[test]
    fn the_file_follows_the_build_and_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Progress::new(Box::new(Null), dir.path());
        p.event(&Event::Planned { total: 3 });
        let s = Snapshot::of_running_build(dir.path()).expect("written when planned");
        assert_eq!((s.done, s.total, s.pid), (0, 3, std::process::id()));
        p.event(&Event::Skipped {
            node: "a".into(),
            because: "b".into(),
        });
        // Within the interval the file is left as it was; the count goes on.
        assert_eq!(p.snapshot.done, 1);
        p.write(true);
        assert_eq!(Snapshot::of_running_build(dir.path()).unwrap().done, 1);
        drop(p);
        assert!(
            Snapshot::of_running_build(dir.path()).is_none(),
            "removed at the end"
        );
        // A build killed -9 leaves its file; its process is gone.
        let gone = Snapshot {
            pid: u32::MAX - 1,
            started_at_ms: 0,
            done: 1,
            total: 2,
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&gone).unwrap()).unwrap();
        assert!(Snapshot::of_running_build(dir.path()).is_none());
    }
}
