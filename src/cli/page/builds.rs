//! The timeline's builds for the page: the build shown (the latest, `--build
//! N`, or every attempt `--since` a moment), its bars, and the other recent
//! builds the page's build picker switches to.

use std::collections::HashMap;

use super::super::page_parts::{job_lane, utc};
use super::super::Failure;
use super::Gather;
use crate::clock::now_ms;
use crate::exit;
use crate::page::{Bar, BuildRef, BuildView};
use crate::store::{BuildSummary, Store};

/// Builds the page's picker lists.
const LISTED: usize = 50;
/// Bars of other builds the page holds for its picker.
const OTHER_BARS: usize = 3000;

impl Gather<'_> {
    /// The timeline of build `which` (default the latest).
    pub(super) fn build(
        &self,
        store: &Store,
        which: Option<usize>,
        index: &HashMap<&str, usize>,
    ) -> Result<Option<BuildView>, Failure> {
        let builds = store.reader().builds()?;
        let Some(chosen) = (match which {
            Some(n) => builds.iter().find(|b| b.number == n),
            None => builds.last(),
        }) else {
            if let Some(n) = which {
                let help = format!(
                    "the store has recorded builds 1 to {}; leave out `--build` for the latest",
                    builds.len()
                );
                return Err(Failure::Report(
                    miette::miette!(help = help, "there is no build {n}"),
                    exit::USAGE,
                ));
            }
            return Ok(None);
        };
        Ok(Some(self.view(store, chosen, builds.len(), index)?))
    }

    /// Build `chosen` (of `of`) as the timeline draws it.
    fn view(
        &self,
        store: &Store,
        chosen: &BuildSummary,
        of: usize,
        index: &HashMap<&str, usize>,
    ) -> Result<BuildView, Failure> {
        let entries = self.bars(store.reader().build_attempts(chosen)?, index);
        let end = entries
            .iter()
            .map(|b| b.end_ms)
            .max()
            .unwrap_or(chosen.ended_at_ms);
        Ok(BuildView {
            number: chosen.number,
            of,
            host: chosen.host.clone(),
            started: utc(chosen.started_at_ms),
            seconds: (end - chosen.started_at_ms).max(0) as f64 / 1000.0,
            bars: entries.len(),
            since: None,
            entries,
        })
    }

    /// The builds the page's picker lists, latest first (at most
    /// [`LISTED`]), and the timelines of those it can switch to without a
    /// new page: the most recent ones other than `shown`, while their bars
    /// add up to at most [`OTHER_BARS`] (a cold build of a large sweep would
    /// double the page).
    pub(super) fn other_builds(
        &self,
        store: &Store,
        shown: usize,
        index: &HashMap<&str, usize>,
    ) -> Result<(Vec<BuildRef>, Vec<BuildView>), Failure> {
        let builds = store.reader().builds()?;
        let (mut listed, mut views, mut bars) = (Vec::new(), Vec::new(), 0);
        for b in builds.iter().rev().take(LISTED) {
            let embed = b.number != shown && bars + b.attempts <= OTHER_BARS;
            if embed {
                bars += b.attempts;
                views.push(self.view(store, b, builds.len(), index)?);
            }
            listed.push(BuildRef {
                number: b.number,
                host: b.host.clone(),
                started: utc(b.started_at_ms),
                seconds: (b.ended_at_ms - b.started_at_ms).max(0) as f64 / 1000.0,
                bars: b.attempts,
                embedded: embed || b.number == shown,
            });
        }
        Ok((listed, views))
    }

    /// Every attempt since `since_ms` as a timeline.
    pub(super) fn since(
        &self,
        store: &Store,
        since_ms: i64,
        index: &HashMap<&str, usize>,
    ) -> Result<Option<BuildView>, Failure> {
        let builds = store.reader().builds()?;
        let entries = self.bars(store.reader().attempts_since(since_ms)?, index);
        let end = entries.iter().map(|b| b.end_ms).max().unwrap_or(since_ms);
        let start = entries.iter().map(|b| b.start_ms).min().unwrap_or(since_ms);
        Ok(Some(BuildView {
            number: 0,
            of: builds.len(),
            host: String::new(),
            started: utc(start),
            seconds: (end - start).max(0) as f64 / 1000.0,
            bars: entries.len(),
            since: Some(utc(since_ms)),
            entries,
        }))
    }

    /// Timeline bars of attempts: lane, stage and end of each.
    fn bars(
        &self,
        attempts: Vec<crate::store::TimelineEntry>,
        index: &HashMap<&str, usize>,
    ) -> Vec<Bar> {
        let stage_index = self.stage_index();
        let now = now_ms();
        attempts
            .into_iter()
            .map(|e| {
                let node = self.graph.find(&e.node_id);
                let stage = node
                    .and_then(|i| stage_index.get(self.graph.nodes[i].stage.as_str()).copied())
                    .unwrap_or(self.shown.len());
                let lane = match (&e.slot, &e.job) {
                    (Some(s), _) => s.clone(),
                    (None, Some(job)) => job_lane(job),
                    (None, None) => "~".into(),
                };
                Bar {
                    index: index.get(e.node_id.as_str()).copied(),
                    stage,
                    lane,
                    start_ms: e.started_at_ms,
                    end_ms: e.finished_at_ms.unwrap_or(now).max(e.started_at_ms),
                    status: e.status,
                    alone: node.is_some_and(|i| self.graph.runs_alone(i)) && e.job.is_none(),
                    replaced: e.replaced,
                }
            })
            .collect()
    }
}
