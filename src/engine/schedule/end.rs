//! How started nodes end: staged, restored, done (built, reused, failed,
//! skipped, detached), interrupted; and how the build ends.

use std::time::Instant;

use super::super::events::{Event, Reporter};
use super::super::failure::{FailureKind, NodeFailure};
use super::super::job::{Progress, Ran};
use super::super::plan::{Reason, ReasonKind};
use super::{Build, BuildStatus, Done};
use crate::graph::NodeIdx;

impl Build<'_, '_> {
    pub(super) fn on_progress(&mut self, msg: Progress, reporter: &mut dyn Reporter) {
        // A node can see the interrupt (and end with it) before this loop
        // does: the build is interrupted first, so its end is not a failure.
        if !self.interrupted && self.b.interrupt.is_set() {
            self.on_interrupt(reporter);
        }
        match msg {
            Progress::Staged { idx, run } => {
                if let Some(lease) = self.running.get_mut(&idx).and_then(Option::take) {
                    self.lanes.free_slots(lease);
                }
                // Its outputs are in `out/`: dependents may start (their
                // runs wait for this one's commit, see `job`).
                self.staged.insert(idx);
                self.note_run(idx, run.duration_ms);
                self.finish_node(idx, Done::Ok(run.manifest_hash()));
            }
            Progress::Restored { idx, result } => {
                self.running.remove(&idx);
                let pending = self.restoring.remove(&idx);
                match result {
                    // Never restored from itself: the task runs again and
                    // its run replaces the damaged one.
                    Err(failure) if failure.kind == FailureKind::Damaged && !self.stopping => {
                        let mut p = pending.expect("a restoring node keeps its pending run");
                        p.reasons = vec![Reason::new(
                            ReasonKind::ObjectDamaged,
                            failure.message.lines().next().unwrap_or_default(),
                        )];
                        let round = self.round(idx);
                        self.queue.push_front(round, p);
                    }
                    Ok(run) => {
                        self.note_run(idx, run.duration_ms);
                        reporter.event(&Event::Cached {
                            node: self.b.graph.nodes[idx].id.clone(),
                            restored: true,
                            reused_from: None,
                        });
                        self.counts.cached += 1;
                        self.finish_node(idx, Done::Ok(run.manifest_hash()));
                    }
                    Err(failure) => self.fail(idx, failure, 0, reporter),
                }
            }
            Progress::Done {
                idx,
                result,
                started,
                record_ms,
            } => {
                if let Some(lease) = self.running.remove(&idx).flatten() {
                    self.lanes.free_slots(lease);
                }
                self.lanes.leave(self.lanes.lane_of(idx));
                if let Some(commit) = self.commits.remove(&idx) {
                    let _ = commit.send(Some(result.is_ok()));
                }
                let duration_ms = started.elapsed().as_millis() as u64;
                self.finish(idx, result, duration_ms, record_ms, reporter);
            }
        }
    }

    /// A started node ended.
    pub(super) fn finish(
        &mut self,
        idx: NodeIdx,
        result: Result<Ran, NodeFailure>,
        duration_ms: u64,
        record_ms: u64,
        reporter: &mut dyn Reporter,
    ) {
        let node = &self.b.graph.nodes[idx];
        let released = self.staged.remove(&idx);
        let run = match result {
            Ok(Ran::Built(run)) => {
                reporter.event(&Event::Finished {
                    node: node.id.clone(),
                    duration_ms,
                    record_ms,
                });
                self.counts.built += 1;
                run
            }
            Ok(Ran::Reused { run, from }) => {
                reporter.event(&Event::Cached {
                    node: node.id.clone(),
                    restored: true,
                    reused_from: Some(from),
                });
                self.counts.cached += 1;
                run
            }
            // An upstream run could not be recorded: this one was discarded.
            Err(f) if f.kind == FailureKind::Upstream => {
                reporter.event(&Event::Skipped {
                    node: node.id.clone(),
                    because: f.message,
                });
                self.counts.skipped += 1;
                self.end(idx, Done::Skipped, released);
                return;
            }
            Err(f) if f.kind == FailureKind::Detached => {
                reporter.event(&Event::Detached {
                    node: node.id.clone(),
                    job: f.message.clone(),
                });
                self.counts.detached += 1;
                self.end(idx, Done::Detached, released);
                return;
            }
            // Interrupted nodes were named by the `interrupted` event.
            Err(_) if self.interrupted => {
                self.done.insert(idx, Done::Failed);
                return;
            }
            Err(failure) if released => {
                // Its dependents were released when it was staged: they
                // see it failed (those still queued are skipped at start,
                // those running discard their runs).
                reporter.event(&Event::Failed {
                    node: node.id.clone(),
                    failure,
                    duration_ms,
                });
                self.counts.failed += 1;
                self.stopping |= !self.b.options.keep_going;
                self.done.insert(idx, Done::Failed);
                return;
            }
            Err(failure) => {
                self.fail(idx, failure, duration_ms, reporter);
                return;
            }
        };
        self.end(idx, Done::Ok(run.manifest_hash()), released);
    }

    /// Marks a node done; its dependents are released unless they already
    /// were (when it was staged).
    pub(super) fn end(&mut self, idx: NodeIdx, done: Done, released: bool) {
        if released {
            self.done.insert(idx, done);
        } else {
            self.finish_node(idx, done);
        }
    }

    /// A node is fresh (or was restored) without running.
    pub(super) fn cached(&mut self, i: NodeIdx, done: Done, reporter: &mut dyn Reporter) {
        reporter.event(&Event::Cached {
            node: self.b.graph.nodes[i].id.clone(),
            restored: false,
            reused_from: None,
        });
        self.counts.cached += 1;
        self.finish_node(i, done);
    }

    /// A node failed: reported, its dependents will be skipped, and without
    /// `-k` nothing new starts.
    pub(super) fn fail(
        &mut self,
        i: NodeIdx,
        failure: NodeFailure,
        duration_ms: u64,
        reporter: &mut dyn Reporter,
    ) {
        reporter.event(&Event::Failed {
            node: self.b.graph.nodes[i].id.clone(),
            failure,
            duration_ms,
        });
        self.counts.failed += 1;
        self.stopping |= !self.b.options.keep_going;
        self.finish_node(i, Done::Failed);
    }

    /// A node's upstream `bad` failed or was skipped.
    pub(super) fn skip(&mut self, i: NodeIdx, bad: NodeIdx, reporter: &mut dyn Reporter) {
        reporter.event(&Event::Skipped {
            node: self.b.graph.nodes[i].id.clone(),
            because: format!("`{}` failed", self.b.graph.nodes[bad].id),
        });
        self.counts.skipped += 1;
        self.finish_node(i, Done::Skipped);
    }

    /// Marks `i` done: dependents whose upstream is now all done become ready.
    pub(super) fn finish_node(&mut self, i: NodeIdx, done: Done) {
        self.done.insert(i, done);
        for &d in &self.dependents[i] {
            if !self.selected.contains(&d) {
                continue;
            }
            if let Some(r) = self.remaining.get_mut(&d) {
                *r -= 1;
                if *r == 0 {
                    let round = self.round(d);
                    self.ready.push_back(round, d);
                }
            }
        }
    }

    /// SIGINT: nothing new starts, running nodes are stopped.
    pub(super) fn on_interrupt(&mut self, reporter: &mut dyn Reporter) {
        self.interrupted = true;
        self.stopping = true;
        let mut running: Vec<NodeIdx> = self.running.keys().copied().collect();
        running.sort_unstable();
        let running = running
            .into_iter()
            .map(|i| self.b.graph.nodes[i].id.clone())
            .collect();
        reporter.event(&Event::Interrupted { running });
        self.lanes.interrupt_all();
    }

    /// Flushes what the build learned and reports how it ended.
    pub(super) fn wrap_up(mut self, reporter: &mut dyn Reporter, t0: Instant) -> BuildStatus {
        let _ = self.b.store.hasher().flush();
        let c = &self.counts;
        if !self.interrupted && c.failed == 0 && c.skipped == 0 {
            let plan = std::mem::take(&mut self.snapshot);
            let done = &self.done;
            let known = |d: NodeIdx| match done.get(&d) {
                Some(Done::Ok(manifest)) => Some(*manifest),
                _ => None,
            };
            super::super::incremental::refresh_snapshot(
                &self.b.ctx(),
                self.selection,
                plan,
                &known,
            );
        }
        let c = &self.counts;
        reporter.event(&Event::Done {
            built: c.built,
            cached: c.cached,
            failed: c.failed,
            skipped: c.skipped,
            detached: c.detached,
            unneeded: c.unneeded,
            duration_ms: t0.elapsed().as_millis() as u64,
        });
        if self.interrupted {
            BuildStatus::Interrupted
        } else if c.failed > 0 || c.skipped > 0 {
            BuildStatus::Failed
        } else {
            BuildStatus::Success
        }
    }
}
