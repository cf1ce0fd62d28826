//! The terminal reporter: a progress bar (done/total, running nodes, ETA)
//! on a terminal; plain, escape-free lines in a pipe.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::events::{Event, Reporter};
use crate::engine::failure::NodeFailure;
use crate::engine::plan::ReasonKind;

pub(crate) struct Human {
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    running: BTreeSet<String>,
    failures: Vec<(String, String, Option<String>)>,
}

impl Human {
    /// A progress bar when stderr is a terminal, plain lines otherwise.
    pub(crate) fn new() -> Human {
        let tty =
            std::io::stderr().is_terminal() && std::env::var_os("VITGRAPH_NO_PROGRESS").is_none();
        let bar = tty.then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(10));
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30.cyan/blue} {pos}/{len} [{elapsed_precise} ETA {eta}] {wide_msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Human {
            bar,
            total: 0,
            done: 0,
            running: BTreeSet::new(),
            failures: Vec::new(),
        }
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let _ = writeln!(std::io::stderr(), "{text}");
            }
        }
    }

    fn step(&mut self) {
        self.done += 1;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done as u64);
        }
    }

    fn show_running(&self) {
        if let Some(bar) = &self.bar {
            let mut names: Vec<&str> = self.running.iter().map(String::as_str).take(3).collect();
            let more = self.running.len().saturating_sub(names.len());
            let extra = if more > 0 {
                format!(" +{more}")
            } else {
                String::new()
            };
            if names.is_empty() {
                names.push("");
            }
            bar.set_message(format!("{}{extra}", names.join(", ")));
        }
    }
}

impl Default for Human {
    fn default() -> Self {
        Human::new()
    }
}

fn ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

impl Human {
    fn finished(&mut self, node: &str, duration_ms: u64) {
        self.running.remove(node);
        self.step();
        if self.bar.is_none() {
            self.line(&format!(
                "[{}/{}] built {node} ({})",
                self.done,
                self.total,
                ms(duration_ms)
            ));
        }
        self.show_running();
    }

    fn cached(&mut self, node: &str, restored: bool, reused_from: Option<&String>) {
        self.running.remove(node);
        self.step();
        if let Some(from) = reused_from {
            let what = if from == node {
                "built meanwhile by another vitgraph process".to_string()
            } else {
                format!("same key as `{from}`: its result was reused")
            };
            self.line(&format!("[{}/{}] {node}: {what}", self.done, self.total));
        } else if restored {
            self.line(&format!(
                "[{}/{}] restored {node} from the store",
                self.done, self.total
            ));
        }
    }

    fn failed(&mut self, node: &str, failure: &NodeFailure) {
        if node.is_empty() {
            // The build could not start (its store could not be read): no
            // node ran, so no step is counted.
            let first = failure.message.lines().next().unwrap_or("");
            self.line(&format!("FAILED before any node ran: {first}"));
            return;
        }
        self.running.remove(node);
        self.step();
        let first = failure.message.lines().next().unwrap_or("");
        self.line(&format!(
            "[{}/{}] FAILED {node}: {first}",
            self.done, self.total
        ));
        let log = failure
            .log
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        self.failures
            .push((node.to_string(), failure.message.clone(), log));
        self.show_running();
    }

    fn done(&mut self, counts: [usize; 6], duration_ms: u64) {
        let [built, cached, failed, skipped, detached, unneeded] = counts;
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        for (node, error, log) in &self.failures {
            let mut text = format!("\nerror: `{node}` failed: {error}");
            if let Some(log) = log {
                text.push_str(&format!("\n  full log: {log}"));
            }
            self.line(&text);
        }
        let mut parts = vec![format!("{built} built"), format!("{cached} fresh")];
        if failed > 0 {
            parts.push(format!("{failed} failed"));
        }
        if skipped > 0 {
            parts.push(format!("{skipped} skipped"));
        }
        if unneeded > 0 {
            parts.push(format!("{unneeded} repetitions not needed"));
        }
        if detached > 0 {
            parts.push(format!(
                "{detached} left running on the cluster (`vitgraph build` collects them)"
            ));
        }
        self.line(&format!("{} in {}", parts.join(", "), ms(duration_ms)));
    }
}

impl Reporter for Human {
    fn event(&mut self, event: &Event) {
        match event {
            Event::Planned { total } => {
                self.total = *total;
                if let Some(bar) = &self.bar {
                    bar.set_length(*total as u64);
                }
            }
            Event::Started { node, reasons, .. } => {
                // A stored run that could not be restored: say why it runs.
                for r in reasons
                    .iter()
                    .filter(|r| r.kind == ReasonKind::ObjectDamaged)
                {
                    self.line(&format!("warning: {node} runs again: {}", r.detail));
                }
                self.running.insert(node.clone());
                self.show_running();
            }
            Event::Finished {
                node, duration_ms, ..
            } => self.finished(node, *duration_ms),
            Event::Cached {
                node,
                restored,
                reused_from,
            } => self.cached(node, *restored, reused_from.as_ref()),
            Event::Failed { node, failure, .. } => self.failed(node, failure),
            Event::Skipped { node, because } => {
                self.step();
                self.line(&format!(
                    "[{}/{}] skipped {node}: {because}",
                    self.done, self.total
                ));
            }
            Event::Unneeded { node, why } => {
                self.step();
                // One line per configuration: the later repetitions only
                // follow the first one not needed (counted in the summary).
                if why.ends_with(crate::engine::events::NOT_NEEDED_EITHER)
                    || why.ends_with(crate::engine::events::NOT_NEEDED_WITH)
                {
                    return;
                }
                self.line(&format!(
                    "[{}/{}] not needed {node}: {why}",
                    self.done, self.total
                ));
            }
            Event::Interrupted { running } => {
                let list = if running.is_empty() {
                    String::new()
                } else {
                    format!("; terminating {}", running.join(", "))
                };
                self.line(&format!("interrupted{list}"));
            }
            Event::Detached { node, job } => {
                self.step();
                self.line(&format!("[{}/{}] {node}: {job}", self.done, self.total));
            }
            Event::Done {
                built,
                cached,
                failed,
                skipped,
                detached,
                unneeded,
                duration_ms,
            } => self.done(
                [*built, *cached, *failed, *skipped, *detached, *unneeded],
                *duration_ms,
            ),
        }
    }
}
