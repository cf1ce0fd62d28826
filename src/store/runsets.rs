//! Sets of recorded runs for `vitgraph compare`: the runs nodes stand on
//! now, the runs one build measured, every run ever recorded, and baselines
//! (runs saved under a name, as copies, by `vitgraph baseline save`).

use rusqlite::{params, TransactionBehavior};

use super::error::StoreError;
use super::fileio::now_ms;
use super::history::BuildSummary;
use super::open::Store;
use super::record::RunRecord;
use super::runs::{EnvCache, RUN_COLUMNS};

/// A saved baseline, as `vitgraph baseline list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineSummary {
    pub name: String,
    pub runs: usize,
    pub saved_at_ms: i64,
}

impl Store {
    /// Each node's current run (the one a fresh node stands on).
    pub fn current_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.run_set(
            &format!(
                "SELECT n.node_id, n.stage, {RUN_COLUMNS} FROM node_runs n
                 JOIN runs r ON r.seq = n.run_seq ORDER BY r.seq"
            ),
            params![],
        )
    }

    /// Every run recorded and not replaced since, oldest first.
    pub fn recorded_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.run_set(
            &format!("SELECT r.node_id, r.stage, {RUN_COLUMNS} FROM runs r ORDER BY r.seq"),
            params![],
        )
    }

    /// The runs `build` measured and that are still recorded as it measured
    /// them: a run measured again with the same key (`build --force`, an
    /// invalid run) replaces the record, and the replaced one is gone.
    pub fn build_runs(&self, build: &BuildSummary) -> Result<Vec<RunRecord>, StoreError> {
        self.run_set(
            &format!(
                "SELECT a.node_id, r.stage, {RUN_COLUMNS} FROM attempts a
                 JOIN runs r ON r.key = a.key
                 WHERE a.host = ?1 AND a.pid = ?2 AND a.pid_start = ?3
                   AND a.status = 'succeeded'
                   AND r.started_at_ms >= a.started_at_ms
                   AND r.started_at_ms <= COALESCE(a.finished_at_ms, r.started_at_ms)
                 ORDER BY a.id"
            ),
            params![build.host, build.pid, build.pid_start],
        )
    }

    /// The runs saved as baseline `name`; None when there is no such baseline.
    pub fn baseline_runs(&self, name: &str) -> Result<Option<Vec<RunRecord>>, StoreError> {
        let runs = self.run_set(
            "SELECT r.node_id, r.stage, r.key, r.key_parts, r.env_hash, r.outputs, r.log,
                    r.started_at_ms, r.duration_ms
             FROM baselines r WHERE r.name = ?1 ORDER BY r.node_id",
            params![name],
        )?;
        Ok((!runs.is_empty()).then_some(runs))
    }

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

    /// Forgets baseline `name`; false when there was none.
    pub fn remove_baseline(&self, name: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        let removed = conn
            .execute("DELETE FROM baselines WHERE name = ?1", [name])
            .map_err(|e| self.db_err(e))?;
        Ok(removed > 0)
    }

    fn run_set(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query(params).map_err(|e| self.db_err(e))?;
        let mut envs = EnvCache::new();
        let mut runs = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            runs.push(self.decode_run(&conn, row, &mut envs)?);
        }
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{commit, key, workspace};

    #[test]
    fn a_baseline_is_a_copy_that_outlives_the_run_it_copied() {
        let (_dir, store) = workspace();
        commit(&store, "a", "k1", &[("results.json", "{}")]);
        commit(&store, "b", "k2", &[("results.json", "[]")]);
        assert_eq!(store.save_baseline("main", &["a", "b", "gone"]).unwrap(), 2);
        assert_eq!(store.current_runs().unwrap().len(), 2);
        // A new run for `a` does not change the baseline.
        commit(&store, "a", "k3", &[("results.json", "{\"x\": 1}")]);
        let saved = store.baseline_runs("main").unwrap().unwrap();
        let ids: Vec<&str> = saved.iter().map(|r| r.node_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(saved[0].key, key("k1"));
        let listed = store.baselines().unwrap();
        assert_eq!((listed[0].name.as_str(), listed[0].runs), ("main", 2));
        assert!(store.baseline_runs("other").unwrap().is_none());
        // gc keeps the objects a baseline refers to, when no run does.
        store
            .conn()
            .execute("DELETE FROM runs WHERE key = ?1", [&key("k1").0[..]])
            .unwrap();
        assert_eq!(store.gc().unwrap().objects_removed, 0);
        assert!(store.object_path(&saved[0].outputs[0].hash).exists());
        assert!(store.remove_baseline("main").unwrap());
        assert!(!store.remove_baseline("main").unwrap());
        assert!(store.baselines().unwrap().is_empty());
    }
}
