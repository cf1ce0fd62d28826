//! Sets of recorded runs for `vitgraph compare`: the runs nodes stand on
//! now, the runs one build measured, every run ever recorded, and baselines
//! (runs saved under a name, as copies, by `vitgraph baseline save`).

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{params, TransactionBehavior};

use super::error::StoreError;
use super::fileio::now_ms;
use super::history::BuildSummary;
use super::open::Store;
use super::record::decode_outputs;
use super::roles::{Journal, Reader};
use crate::hash::ContentHash;

/// A saved baseline, as `vitgraph baseline list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineSummary {
    pub name: String,
    pub runs: usize,
    pub saved_at_ms: i64,
}

/// A recorded run as `compare` reads it: what pairs it, what it was made
/// of, and its measurement (`results.json`) or analysis (`metrics.json`).
/// Only runs with one of the two are returned.
#[derive(Debug, Clone)]
pub struct RecordedRun {
    pub node_id: String,
    /// Shared by the runs of a stage.
    pub stage: Arc<str>,
    /// The key's parts (task kind and version, spec, inputs, environment
    /// facets) as JSON text, without the upstream manifests; shared by the
    /// runs whose parts are equal (the repetitions of a configuration).
    pub parts: Arc<str>,
    /// The run's verdict when telemetry judged it invalid (`throttled…`).
    pub invalid: Option<String>,
    pub started_at_ms: i64,
    pub results: Option<ContentHash>,
    pub metrics: Option<ContentHash>,
}

/// The columns `run_set` reads (`r`: a runs or baselines row, `e`: its
/// environment).
const COLUMNS: &str = "r.stage, json_remove(json_extract(r.key_parts, '$.parts'), '$.upstream'),
     json_extract(e.json, '$.validity.reason'), r.started_at_ms, r.outputs";

/// Which runs a run set holds: measurements (a `results.json`), and
/// analyses (a `metrics.json`) when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    Measurements,
    MeasurementsAndAnalyses,
}

impl Holding {
    fn filter(self) -> &'static str {
        match self {
            Holding::Measurements => "instr(r.outputs, CAST('results.json' AS BLOB)) > 0",
            Holding::MeasurementsAndAnalyses => {
                "(instr(r.outputs, CAST('results.json' AS BLOB)) > 0
                  OR instr(r.outputs, CAST('metrics.json' AS BLOB)) > 0)"
            }
        }
    }
}

impl Reader<'_> {
    /// Each node's current run (the one a fresh node stands on).
    pub fn current_runs(&self, holding: Holding) -> Result<Vec<RecordedRun>, StoreError> {
        self.run_set(
            &format!(
                "SELECT n.node_id, {COLUMNS} FROM node_runs n
                 JOIN runs r ON r.seq = n.run_seq JOIN envs e ON e.hash = r.env_hash
                 WHERE {} ORDER BY r.seq",
                holding.filter()
            ),
            params![],
        )
    }

    /// Every run recorded and not replaced since, oldest first.
    pub fn recorded_runs(&self, holding: Holding) -> Result<Vec<RecordedRun>, StoreError> {
        self.run_set(
            &format!(
                "SELECT r.node_id, {COLUMNS} FROM runs r JOIN envs e ON e.hash = r.env_hash
                 WHERE {} ORDER BY r.seq",
                holding.filter()
            ),
            params![],
        )
    }

    /// The runs `build` measured and that are still recorded as it measured
    /// them: a run measured again with the same key (`build --force`, an
    /// invalid run) replaces the record, and the replaced one is gone.
    pub fn build_runs(
        &self,
        build: &BuildSummary,
        holding: Holding,
    ) -> Result<Vec<RecordedRun>, StoreError> {
        self.run_set(
            &format!(
                "SELECT a.node_id, {COLUMNS} FROM attempts a
                 JOIN runs r ON r.key = a.key JOIN envs e ON e.hash = r.env_hash
                 WHERE a.host = ?1 AND a.pid = ?2 AND a.pid_start = ?3
                   AND a.status = 'succeeded'
                   AND r.started_at_ms >= a.started_at_ms
                   AND r.started_at_ms <= COALESCE(a.finished_at_ms, r.started_at_ms)
                   AND {}
                 ORDER BY a.id",
                holding.filter()
            ),
            params![build.host, build.pid, build.pid_start],
        )
    }

    /// The runs saved as baseline `name`; None when there is no such baseline.
    pub fn baseline_runs(
        &self,
        name: &str,
        holding: Holding,
    ) -> Result<Option<Vec<RecordedRun>>, StoreError> {
        let exists: i64 = self
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM baselines WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .map_err(|e| self.db_err(e))?;
        if exists == 0 {
            return Ok(None);
        }
        self.run_set(
            &format!(
                "SELECT r.node_id, {COLUMNS} FROM baselines r JOIN envs e ON e.hash = r.env_hash
                 WHERE r.name = ?1 AND {} ORDER BY r.node_id",
                holding.filter()
            ),
            params![name],
        )
        .map(Some)
    }

    /// Every baseline, by name.
    pub fn baselines(&self) -> Result<Vec<BaselineSummary>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT name, COUNT(*), MAX(saved_at_ms) FROM baselines GROUP BY name ORDER BY name",
            )
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(BaselineSummary {
                    name: r.get(0)?,
                    runs: r.get::<_, i64>(1)? as usize,
                    saved_at_ms: r.get(2)?,
                })
            })
            .map_err(|e| self.db_err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.db_err(e))
    }
}

impl Journal<'_> {
    /// Saves the current runs of `node_ids` as baseline `name`, replacing a
    /// baseline of that name. Returns how many runs were saved.
    pub fn save_baseline(&self, name: &str, node_ids: &[&str]) -> Result<usize, StoreError> {
        let ids = serde_json::to_string(node_ids).unwrap_or_default();
        let mut conn = self.conn();
        let db = |e| self.db_err(e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        tx.execute("DELETE FROM baselines WHERE name = ?1", [name])
            .map_err(db)?;
        let saved = tx
            .execute(
                "INSERT INTO baselines (name, node_id, stage, key, key_parts, env_hash, outputs,
                                        log, started_at_ms, duration_ms, saved_at_ms)
                 SELECT ?1, n.node_id, n.stage, r.key, r.key_parts, r.env_hash, r.outputs,
                        r.log, r.started_at_ms, r.duration_ms, ?3
                 FROM node_runs n JOIN runs r ON r.seq = n.run_seq
                 WHERE n.node_id IN (SELECT value FROM json_each(?2))",
                params![name, ids, now_ms()],
            )
            .map_err(db)?;
        tx.commit().map_err(db)?;
        Ok(saved)
    }

    /// Forgets baseline `name`; false when there was none.
    pub fn remove_baseline(&self, name: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        let removed = conn
            .execute("DELETE FROM baselines WHERE name = ?1", [name])
            .map_err(|e| self.db_err(e))?;
        Ok(removed > 0)
    }
}

impl Store {
    fn run_set(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<RecordedRun>, StoreError> {
        let conn = self.conn();
        // A run set reads every row once: through the memory map the whole
        // database would count in this process's resident memory (900 MB
        // for 1.2 million runs); read through SQLite's small page cache.
        conn.pragma_update(None, "mmap_size", 0)
            .map_err(|e| self.db_err(e))?;
        let mut stmt = conn.prepare(sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query(params).map_err(|e| self.db_err(e))?;
        let mut runs = Vec::new();
        let db = |e| self.db_err(e);
        let mut shared: HashMap<String, Arc<str>> = HashMap::new();
        let mut share = |text: String| -> Arc<str> {
            if let Some(s) = shared.get(&text) {
                return s.clone();
            }
            let s: Arc<str> = Arc::from(text.as_str());
            shared.insert(text, s.clone());
            s
        };
        while let Some(row) = rows.next().map_err(db)? {
            let outputs: Vec<u8> = row.get(5).map_err(db)?;
            let outputs =
                decode_outputs(&outputs).ok_or_else(|| self.damaged("an output list".into()))?;
            let find = |name: &str| outputs.iter().find(|o| o.name == name).map(|o| o.hash);
            runs.push(RecordedRun {
                node_id: row.get(0).map_err(db)?,
                stage: share(row.get(1).map_err(db)?),
                parts: share(
                    row.get::<_, Option<String>>(2)
                        .map_err(db)?
                        .unwrap_or_default(),
                ),
                invalid: row.get(3).map_err(db)?,
                started_at_ms: row.get(4).map_err(db)?,
                results: find("results.json"),
                metrics: find("metrics.json"),
            });
        }
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{commit, key, workspace};
    use super::Holding;

    #[test]
    fn a_baseline_is_a_copy_that_outlives_the_run_it_copied() {
        let (_dir, store) = workspace();
        let first = commit(&store, "a", "k1", &[("results.json", "{}")]);
        commit(&store, "b", "k2", &[("results.json", "[]")]);
        // Runs with neither results.json nor metrics.json are not measurements.
        commit(&store, "c", "k4", &[("report.md", "# r")]);
        assert_eq!(
            store
                .journal()
                .save_baseline("main", &["a", "b", "gone"])
                .unwrap(),
            2
        );
        assert_eq!(
            store
                .reader()
                .current_runs(Holding::Measurements)
                .unwrap()
                .len(),
            2
        );
        let current = store.reader().current_runs(Holding::Measurements).unwrap();
        assert_eq!(current[0].results, Some(first.outputs[0].hash));
        assert_eq!(
            (current[0].metrics, current[0].invalid.as_deref()),
            (None, None)
        );
        // A new run for `a` does not change the baseline.
        commit(&store, "a", "k3", &[("results.json", "{\"x\": 1}")]);
        let saved = store
            .reader()
            .baseline_runs("main", Holding::Measurements)
            .unwrap()
            .unwrap();
        let ids: Vec<&str> = saved.iter().map(|r| r.node_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(saved[0].results, Some(first.outputs[0].hash));
        let listed = store.reader().baselines().unwrap();
        assert_eq!((listed[0].name.as_str(), listed[0].runs), ("main", 2));
        assert!(store
            .reader()
            .baseline_runs("other", Holding::Measurements)
            .unwrap()
            .is_none());
        // gc keeps the objects a baseline refers to, when no run does.
        store
            .conn()
            .execute("DELETE FROM runs WHERE key = ?1", [&key("k1").0[..]])
            .unwrap();
        assert_eq!(store.objects().gc().unwrap().objects_removed, 0);
        assert!(store.objects().path(&saved[0].results.unwrap()).exists());
        assert!(store.journal().remove_baseline("main").unwrap());
        assert!(!store.journal().remove_baseline("main").unwrap());
        assert!(store.reader().baselines().unwrap().is_empty());
    }
}
