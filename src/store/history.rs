//! What builds ran, for the build page's timeline: every `vitgraph build`
//! is one process (host, pid, its start time), and its attempts are the
//! nodes it started.

use rusqlite::Row;

use super::error::StoreError;
use super::open::Store;
use super::roles::Reader;

/// One past (or running) build: the attempts of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSummary {
    /// 1 for the first build the store recorded.
    pub number: usize,
    pub host: String,
    pub pid: i64,
    pub(super) pid_start: i64,
    pub started_at_ms: i64,
    /// The last attempt's end (or start, while one runs).
    pub ended_at_ms: i64,
    pub attempts: usize,
    /// The first and the last of its attempts' ids: its attempts lie
    /// between them (with those of builds that ran beside it).
    pub(super) first_attempt: i64,
    pub(super) last_attempt: i64,
}

/// One attempt as the timeline draws it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    pub node_id: String,
    /// `running`, `succeeded`, `failed` or `interrupted`, as stored.
    pub status: String,
    pub started_at_ms: i64,
    /// When its task ended (a succeeded attempt: when its run's task
    /// ended, not when the run was committed); None while it runs.
    pub finished_at_ms: Option<i64>,
    /// `cpu:N` or `gpu:IDS` for a local attempt.
    pub slot: Option<String>,
    /// The SLURM job (JSON), for an attempt that ran as one.
    pub job: Option<String>,
    /// A succeeded attempt whose run a later attempt at the same key
    /// replaced (`build --force`): its end is its own, not that run's.
    pub replaced: bool,
}

impl Reader<'_> {
    /// Every build, oldest first.
    pub fn builds(&self) -> Result<Vec<BuildSummary>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT host, pid, pid_start, MIN(started_at_ms),
                        MAX(COALESCE(finished_at_ms, started_at_ms)), COUNT(*), MIN(id), MAX(id)
                 FROM attempts GROUP BY host, pid, pid_start ORDER BY MIN(id)",
            )
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(BuildSummary {
                    number: 0,
                    host: r.get(0)?,
                    pid: r.get(1)?,
                    pid_start: r.get(2)?,
                    started_at_ms: r.get(3)?,
                    ended_at_ms: r.get(4)?,
                    attempts: r.get::<_, i64>(5)? as usize,
                    first_attempt: r.get(6)?,
                    last_attempt: r.get(7)?,
                })
            })
            .map_err(|e| self.db_err(e))?;
        let mut builds = Vec::new();
        for (i, b) in rows.enumerate() {
            let mut b = b.map_err(|e| self.db_err(e))?;
            b.number = i + 1;
            builds.push(b);
        }
        Ok(builds)
    }

    /// Each node's current run's key parts, by node id, in one query.
    pub fn current_key_parts(
        &self,
    ) -> Result<std::collections::HashMap<String, super::RawJson>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT n.node_id, r.key_parts FROM node_runs n JOIN runs r ON r.seq = n.run_seq",
            )
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, super::RawJson(r.get(1)?)))
            })
            .map_err(|e| self.db_err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.db_err(e))
    }

    /// Every attempt that started at or after `since_ms`, whichever build
    /// made it, in the order they started.
    pub fn attempts_since(&self, since_ms: i64) -> Result<Vec<TimelineEntry>, StoreError> {
        self.timeline("a.started_at_ms >= ?1", rusqlite::params![since_ms])
    }

    /// The attempts of one build, in the order they started.
    pub fn build_attempts(&self, build: &BuildSummary) -> Result<Vec<TimelineEntry>, StoreError> {
        self.timeline(
            "a.host = ?1 AND a.pid = ?2 AND a.pid_start = ?3",
            rusqlite::params![build.host, build.pid, build.pid_start],
        )
    }
}

impl Store {
    fn timeline(
        &self,
        filter: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<TimelineEntry>, StoreError> {
        let conn = self.conn();
        let sql = format!(
            "SELECT a.node_id, a.status, a.started_at_ms,
                    CASE WHEN a.status = 'succeeded' AND r.seq IS NOT NULL
                              AND r.started_at_ms BETWEEN a.started_at_ms
                                  AND COALESCE(a.finished_at_ms, r.started_at_ms)
                         THEN MAX(a.started_at_ms, r.started_at_ms + r.duration_ms)
                         ELSE a.finished_at_ms END,
                    a.slot, a.job,
                    a.status = 'succeeded' AND r.seq IS NOT NULL
                        AND r.started_at_ms > COALESCE(a.finished_at_ms, a.started_at_ms)
             FROM attempts a LEFT JOIN runs r ON r.key = a.key
             WHERE {filter} ORDER BY a.id"
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        let entry = |r: &Row<'_>| {
            Ok(TimelineEntry {
                node_id: r.get(0)?,
                status: r.get(1)?,
                started_at_ms: r.get(2)?,
                finished_at_ms: r.get(3)?,
                slot: r.get(4)?,
                job: r.get(5)?,
                replaced: r.get::<_, Option<bool>>(6)?.unwrap_or(false),
            })
        };
        let rows = stmt.query_map(params, entry).map_err(|e| self.db_err(e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.db_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::ContentHash;
    use crate::store::owner::Owner;

    #[test]
    fn each_process_is_a_build_with_its_attempts_and_slots() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let earlier = Owner {
            host: store.owner.host.clone(),
            pid: 1,
            start: 7,
        };
        store
            .begin_attempt_as(&earlier, "old", &ContentHash([1; 32]), Some("cpu:0"))
            .unwrap();
        let a = store
            .journal()
            .begin_attempt_in("a", &ContentHash([2; 32]), Some("cpu:1"))
            .unwrap();
        store.journal().commit_failure(a, "boom").unwrap();
        store
            .journal()
            .begin_attempt_in("b", &ContentHash([3; 32]), Some("gpu:0"))
            .unwrap();
        let builds = store.reader().builds().unwrap();
        assert_eq!(builds.len(), 2);
        assert_eq!(
            (builds[0].number, builds[0].pid, builds[0].attempts),
            (1, 1, 1)
        );
        assert_eq!((builds[1].number, builds[1].attempts), (2, 2));
        let latest = store.reader().build_attempts(&builds[1]).unwrap();
        let seen: Vec<(&str, &str, Option<&str>)> = latest
            .iter()
            .map(|e| (e.node_id.as_str(), e.status.as_str(), e.slot.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("a", "failed", Some("cpu:1")),
                ("b", "running", Some("gpu:0"))
            ]
        );
        assert!(latest[0].finished_at_ms.is_some() && latest[1].finished_at_ms.is_none());
        // Since a moment: every build's attempts from then on.
        let all = store.reader().attempts_since(0).unwrap();
        assert_eq!(all.len(), 3);
        assert!(store.reader().attempts_since(i64::MAX).unwrap().is_empty());
    }
}
