//! Sets of recorded runs for `vitgraph compare`: the runs nodes stand on
//! now, the runs one build measured, every run ever recorded, and baselines
//! (runs saved under a name, as copies, by `vitgraph baseline save`).

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{params, OptionalExtension, TransactionBehavior};

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
    /// The summary kept for `results` (see `tasks::summary`), where one is.
    pub summary: Option<Vec<u8>>,
}

/// The columns `run_set` reads (`r`: a runs or baselines row, `s`: the
/// summary of its `results.json`, see [`SUMMARY`]). The key's parts and
/// the environment's verdict are taken apart in Rust, once per distinct
/// text and environment ([`Shared`]), not once per row in SQL.
const COLUMNS: &str =
    "r.stage, r.key_parts, r.env_hash, r.started_at_ms, r.outputs, s.object, s.data";

/// Joins each run to the summary of its `results.json` (where a run set's
/// query says `{SUMMARY}`): in the output list (`record::encode_outputs`)
/// the digest follows the name and its 4-byte length (the blob is the
/// length 12 and `results.json`). `run_set` keeps a
/// joined summary only where its object is the digest decoded.
const SUMMARY: &str = "LEFT JOIN summaries s
     ON s.object = substr(r.outputs, instr(r.outputs, X'0C000000726573756C74732E6A736F6E') + 16, 32)";

/// The same in a database from before summaries were kept.
const NO_SUMMARY: &str = "LEFT JOIN (SELECT NULL AS object, NULL AS data) s ON 0";

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
    /// Reads this connection's rows through SQLite's small page cache
    /// rather than the memory map, for a command that reads most rows of
    /// a large store once (`compare`): through the map every page read
    /// counts in the process's resident memory (at 1.2 million runs,
    /// finding the builds alone mapped 230 MB of `attempts`).
    pub fn read_once(&self) -> Result<(), StoreError> {
        self.conn()
            .pragma_update(None, "mmap_size", 0)
            .map_err(|e| self.db_err(e))
    }

    /// Each node's current run (the one a fresh node stands on).
    pub fn current_runs(&self, holding: Holding) -> Result<Vec<RecordedRun>, StoreError> {
        self.run_set(
            &format!(
                "SELECT n.node_id, {COLUMNS} FROM node_runs n
                 JOIN runs r ON r.seq = n.run_seq {{SUMMARY}}
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
                "SELECT r.node_id, {COLUMNS} FROM runs r {{SUMMARY}}
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
                 JOIN runs r ON r.key = a.key {{SUMMARY}}
                 WHERE a.id BETWEEN ?4 AND ?5
                   AND a.host = ?1 AND a.pid = ?2 AND a.pid_start = ?3
                   AND a.status = 'succeeded'
                   AND r.started_at_ms >= a.started_at_ms
                   AND r.started_at_ms <= COALESCE(a.finished_at_ms, r.started_at_ms)
                   AND {}
                 ORDER BY a.id",
                holding.filter()
            ),
            params![
                build.host,
                build.pid,
                build.pid_start,
                build.first_attempt,
                build.last_attempt
            ],
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
                "SELECT r.node_id, {COLUMNS} FROM baselines r {{SUMMARY}}
                 WHERE r.name = ?1 AND {} ORDER BY r.node_id",
                holding.filter()
            ),
            params![name],
        )
        .map(Some)
    }

    /// The keys of every run a baseline names.
    pub fn baseline_keys(&self) -> Result<std::collections::HashSet<ContentHash>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT DISTINCT key FROM baselines")
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .map_err(|e| self.db_err(e))?;
        let mut keys = std::collections::HashSet::new();
        for row in rows {
            let bytes = row.map_err(|e| self.db_err(e))?;
            if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
                keys.insert(ContentHash(key));
            }
        }
        Ok(keys)
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

    /// Keeps the summaries of `results.json` objects (object hash, encoded
    /// summary), replacing any kept before, in one transaction.
    pub fn save_summaries(&self, summaries: &[(ContentHash, Vec<u8>)]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let db = |e| self.db_err(e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR REPLACE INTO summaries (object, data) VALUES (?1, ?2)")
                .map_err(db)?;
            for (hash, data) in summaries {
                stmt.execute(params![&hash.0[..], data]).map_err(db)?;
            }
        }
        tx.commit().map_err(db)
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
        let db = |e| self.db_err(e);
        let has_summaries: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'summaries'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(db)?
            > 0;
        let sql = sql.replace(
            "{SUMMARY}",
            if has_summaries { SUMMARY } else { NO_SUMMARY },
        );
        // A run set reads every row once: through the memory map the whole
        // database would count in this process's resident memory (900 MB
        // for 1.2 million runs); read through SQLite's small page cache.
        conn.pragma_update(None, "mmap_size", 0)
            .map_err(|e| self.db_err(e))?;
        let mut stmt = conn.prepare(&sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query(params).map_err(|e| self.db_err(e))?;
        let mut runs = Vec::new();
        let mut shared = Shared::default();
        while let Some(row) = rows.next().map_err(db)? {
            let outputs: Vec<u8> = row.get(5).map_err(db)?;
            let outputs =
                decode_outputs(&outputs).ok_or_else(|| self.damaged("an output list".into()))?;
            let find = |name: &str| outputs.iter().find(|o| o.name == name).map(|o| o.hash);
            let results = find("results.json");
            let object: Option<Vec<u8>> = row.get(6).map_err(db)?;
            let summary = match (results, object) {
                (Some(hash), Some(object)) if object == hash.0 => row.get(7).map_err(db)?,
                _ => None,
            };
            let text = |i: usize| -> Result<&str, StoreError> {
                let value = row.get_ref(i).map_err(db)?;
                value.as_str().map_err(|e| db(e.into()))
            };
            let env_hash = row.get_ref(3).map_err(db)?;
            let env_hash = env_hash.as_blob().map_err(|e| db(e.into()))?;
            runs.push(RecordedRun {
                node_id: row.get(0).map_err(db)?,
                stage: shared.text(text(1)?),
                parts: shared.parts(text(2)?),
                invalid: shared.verdict(&conn, env_hash).map_err(db)?,
                started_at_ms: row.get(4).map_err(db)?,
                results,
                metrics: find("metrics.json"),
                summary,
            });
        }
        Ok(runs)
    }
}

/// What the rows of a run set share, taken apart once: stage names, the
/// key's parts (without the upstream manifests) by their text, and each
/// environment's verdict.
#[derive(Default)]
struct Shared {
    texts: HashMap<String, Arc<str>>,
    parts: HashMap<String, Arc<str>>,
    verdicts: HashMap<Vec<u8>, Option<String>>,
}

impl Shared {
    fn text(&mut self, text: &str) -> Arc<str> {
        if let Some(s) = self.texts.get(text) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(text);
        self.texts.insert(text.to_owned(), s.clone());
        s
    }

    /// The `parts` of a key's recorded parts, less `upstream`, as JSON
    /// text ("" where there are none); shared by the runs whose parts'
    /// text is the same (the repetitions of a configuration).
    fn parts(&mut self, key_parts: &str) -> Arc<str> {
        #[derive(serde::Deserialize)]
        struct KeyParts<'a> {
            #[serde(borrow)]
            parts: Option<&'a serde_json::value::RawValue>,
        }
        let raw = serde_json::from_str::<KeyParts<'_>>(key_parts)
            .ok()
            .and_then(|k| k.parts)
            .map_or("", |p| p.get());
        if let Some(s) = self.parts.get(raw) {
            return s.clone();
        }
        let text = match serde_json::from_str::<serde_json::Value>(raw) {
            Ok(serde_json::Value::Object(mut fields)) => {
                fields.remove("upstream");
                serde_json::Value::Object(fields).to_string()
            }
            Ok(serde_json::Value::Null) | Err(_) => String::new(),
            Ok(other) => other.to_string(),
        };
        let s: Arc<str> = Arc::from(text.as_str());
        self.parts.insert(raw.to_owned(), s.clone());
        s
    }

    /// The verdict of environment `hash` when telemetry judged its run
    /// invalid (`validity.reason`).
    fn verdict(
        &mut self,
        conn: &rusqlite::Connection,
        hash: &[u8],
    ) -> Result<Option<String>, rusqlite::Error> {
        if let Some(v) = self.verdicts.get(hash) {
            return Ok(v.clone());
        }
        let v: Option<String> = conn
            .prepare_cached(
                "SELECT json_extract(json, '$.validity.reason') FROM envs WHERE hash = ?1",
            )?
            .query_row([hash], |r| r.get(0))
            .optional()?
            .flatten();
        self.verdicts.insert(hash.to_vec(), v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{commit, key, workspace};
    use super::Holding;

    #[test]
    fn summaries_are_kept_by_object_and_go_with_it() {
        let (_dir, store) = workspace();
        let kept = commit(&store, "a", "k1", &[("results.json", "{\"x\": 1}")]);
        let gone = commit(&store, "b", "k2", &[("results.json", "{\"x\": 2}")]);
        let (kh, gh) = (kept.outputs[0].hash, gone.outputs[0].hash);
        let unknown = key("no such object");
        store
            .journal()
            .save_summaries(&[(kh, vec![1, 2]), (gh, vec![3])])
            .unwrap();
        // Saved again: the newer replaces the older.
        store.journal().save_summaries(&[(kh, vec![1, 9])]).unwrap();
        let summaries = |store: &crate::store::Store| -> Vec<(String, Option<Vec<u8>>)> {
            let runs = store.reader().recorded_runs(Holding::Measurements).unwrap();
            runs.into_iter().map(|r| (r.node_id, r.summary)).collect()
        };
        assert_eq!(
            summaries(&store),
            [("a".into(), Some(vec![1, 9])), ("b".into(), Some(vec![3]))]
        );
        // A run whose other output's name ends in `results.json` is joined
        // to its own results.json's summary.
        let two = commit(
            &store,
            "c",
            "k5",
            &[
                ("aresults.json", "{\"y\": 1}"),
                ("results.json", "{\"y\": 2}"),
            ],
        );
        let (other, own) = (two.outputs[0].hash, two.outputs[1].hash);
        store
            .journal()
            .save_summaries(&[(other, vec![5]), (own, vec![6])])
            .unwrap();
        assert_eq!(summaries(&store)[2], ("c".into(), Some(vec![6])));
        store
            .conn()
            .execute("DELETE FROM summaries WHERE object = ?1", [&own.0[..]])
            .unwrap();
        assert_eq!(summaries(&store)[2], ("c".into(), None));
        // Kept for an object no run has: no run shows it.
        store
            .journal()
            .save_summaries(&[(unknown, vec![7])])
            .unwrap();
        // gc drops the summary of an object no run refers to any more.
        commit(&store, "b", "k3", &[("results.json", "{\"x\": 3}")]);
        store
            .conn()
            .execute("DELETE FROM runs WHERE key = ?1", [&key("k2").0[..]])
            .unwrap();
        store.objects().gc().unwrap();
        let left: Vec<Vec<u8>> = store
            .conn()
            .prepare("SELECT object FROM summaries")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(left, [kh.0.to_vec(), other.0.to_vec()]);
        let now = summaries(&store);
        assert_eq!(now[0], ("a".into(), Some(vec![1, 9])));
        assert_eq!(now[2], ("b".into(), None));
    }

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
