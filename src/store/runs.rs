//! Recording attempts and runs, and reading them back.
//!
//! `load_states` is the engine's one read per command: two scans (each node's
//! current run, each node's latest attempt) into a HashMap.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::error::StoreError;
use super::fileio::now_ms;
use super::open::Store;
use super::owner::{Liveness, Owner};
use super::record::RawJson;
use super::record::{
    decode_outputs, encode_outputs, Attempt, AttemptId, AttemptStatus, NodeState, RunRecord,
};
use super::roles::{Journal, Reader};
use crate::hash::ContentHash;

/// The columns `decode_run` reads, in order (after the node id and stage).
pub(super) const RUN_COLUMNS: &str =
    "r.key, r.key_parts, r.env_hash, r.outputs, r.log, r.started_at_ms, r.duration_ms";

/// As [`RUN_COLUMNS`], with the key parts left out: `load_states` reads every
/// run, and the parts (the largest column) are needed only for stale nodes,
/// through [`Store::key_parts`].
const RUN_COLUMNS_WITHOUT_PARTS: &str =
    "r.key, '', r.env_hash, r.outputs, r.log, r.started_at_ms, r.duration_ms";

/// Environment records by hash, each parsed once per query.
type EnvCache = HashMap<Vec<u8>, RawJson>;

impl Reader<'_> {
    /// Everything recorded, by node id, in one pass. An attempt left `running`
    /// by a dead process of this host reads as `Interrupted`.
    pub fn load_states(&self) -> Result<HashMap<String, NodeState>, StoreError> {
        self.load_states_of(None, None)
    }

    /// [`Store::load_states`] for the nodes `ids` only.
    pub fn load_states_for(&self, ids: &[&str]) -> Result<HashMap<String, NodeState>, StoreError> {
        self.load_states_of(Some(ids), Some(ids))
    }

    /// The latest runs of the nodes `ids`, and the last attempts of the nodes
    /// `attempted` only (the ones to be judged; an upstream node whose run
    /// is all that is needed costs no attempt lookup).
    pub fn load_states_with_attempts_of(
        &self,
        ids: &[&str],
        attempted: &[&str],
    ) -> Result<HashMap<String, NodeState>, StoreError> {
        self.load_states_of(Some(ids), Some(attempted))
    }

    /// The manifest hash of each of `ids`' latest successful run: all that a
    /// judged node reads of an upstream node that is not judged itself (an
    /// incremental build's report over 33,333 analyses needs no more of
    /// them). Nodes without a run are left out.
    pub fn manifests_of(&self, ids: &[&str]) -> Result<HashMap<String, ContentHash>, StoreError> {
        let conn = self.conn();
        let ids_json = serde_json::to_string(ids).unwrap_or_default();
        let mut stmt = conn
            .prepare_cached(
                "SELECT n.node_id, r.outputs FROM node_runs n JOIN runs r ON r.seq = n.run_seq
                 WHERE n.node_id IN (SELECT value FROM json_each(?1))",
            )
            .map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query([&ids_json]).map_err(|e| self.db_err(e))?;
        let mut out = HashMap::with_capacity(ids.len());
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let id: String = row.get(0).map_err(|e| self.db_err(e))?;
            let bytes: Vec<u8> = row.get(1).map_err(|e| self.db_err(e))?;
            let outputs =
                decode_outputs(&bytes).ok_or_else(|| self.damaged("an output list".into()))?;
            out.insert(id, super::record::manifest_hash(&outputs));
        }
        Ok(out)
    }

    /// The key parts recorded with `run` (loaded on demand when `load_states`
    /// left them out).
    pub fn key_parts(&self, run: &RunRecord) -> Result<RawJson, StoreError> {
        if !run.key_parts.0.is_empty() {
            return Ok(run.key_parts.clone());
        }
        let conn = self.conn();
        let text: Option<String> = conn
            .prepare_cached("SELECT key_parts FROM runs WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([&run.key.0[..]], |r| r.get(0)).optional())
            .map_err(|e| self.db_err(e))?;
        Ok(RawJson(text.unwrap_or_default()))
    }

    /// The host names the environment records of recorded runs name (a
    /// handful: most runs share one record).
    pub fn hosts_recorded(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT DISTINCT json_extract(json, '$.host') FROM envs
                 WHERE json_valid(json) AND json_type(json, '$.host') = 'text'",
            )
            .map_err(|e| self.db_err(e))?;
        let hosts = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.db_err(e))?;
        Ok(hosts)
    }

    /// Who signed each run that arrived signed (see `signing`): by key,
    /// as the importing workspace named the signer. Empty for a store
    /// that never received a signed run.
    pub fn signers(&self) -> Result<HashMap<ContentHash, String>, StoreError> {
        self.text_by_key("SELECT key, signer FROM signers")
    }

    /// A table of a text by run key (`sql` selects the two), read whole;
    /// empty when the table does not exist (a store that never received
    /// what it records).
    pub(super) fn text_by_key(
        &self,
        sql: &str,
    ) -> Result<HashMap<ContentHash, String>, StoreError> {
        let conn = self.conn();
        let Ok(mut stmt) = conn.prepare_cached(sql) else {
            return Ok(HashMap::new());
        };
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.db_err(e))?;
        let mut out = HashMap::with_capacity(rows.len());
        for (key, text) in rows {
            out.insert(self.hash_column(key)?, text);
        }
        Ok(out)
    }

    /// Whether the run of `key` arrived from a bundle or a remote.
    pub fn arrived(&self, key: &ContentHash) -> bool {
        let conn = self.conn();
        conn.prepare_cached("SELECT 1 FROM arrived WHERE key = ?1")
            .and_then(|mut stmt| stmt.exists([&key.0[..]]))
            .unwrap_or(false)
    }

    /// Whether any run arrived from a bundle or a remote.
    pub fn any_arrived(&self) -> bool {
        let conn = self.conn();
        conn.prepare_cached("SELECT 1 FROM arrived LIMIT 1")
            .and_then(|mut stmt| stmt.exists([]))
            .unwrap_or(false)
    }

    /// The successful run recorded for `key`, if any (its `node_id` is the node
    /// that recorded it).
    pub fn run_for_key(&self, key: &ContentHash) -> Result<Option<RunRecord>, StoreError> {
        let conn = self.conn();
        self.query_run(&conn, key)
    }
}

impl Store {
    fn load_states_of(
        &self,
        ids: Option<&[&str]>,
        attempted: Option<&[&str]>,
    ) -> Result<HashMap<String, NodeState>, StoreError> {
        // Materialization stats come along, so check_outputs never queries.
        drop(self.stat_cache()?);
        let conn = self.conn();
        let mut states: HashMap<String, NodeState> = HashMap::new();
        // The ids go in as one JSON array parameter.
        let ids_json = serde_json::to_string(&ids.unwrap_or_default()).unwrap_or_default();
        let attempted_json =
            serde_json::to_string(&attempted.unwrap_or_default()).unwrap_or_default();
        let where_runs = match ids {
            Some(_) => " WHERE n.node_id IN (SELECT value FROM json_each(?1))",
            None => "",
        };
        let where_attempts = match attempted {
            Some(_) => " WHERE node_id IN (SELECT value FROM json_each(?1))",
            None => "",
        };
        let params: &[&dyn rusqlite::ToSql] = if ids.is_some() { &[&ids_json] } else { &[] };
        let attempted_params: &[&dyn rusqlite::ToSql] = if attempted.is_some() {
            &[&attempted_json]
        } else {
            &[]
        };
        let sql = format!(
            "SELECT n.node_id, n.stage, {RUN_COLUMNS_WITHOUT_PARTS} FROM node_runs n JOIN runs r ON r.seq = n.run_seq{where_runs}"
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query(params).map_err(|e| self.db_err(e))?;
        let mut envs = EnvCache::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let run = self.decode_run(&conn, row, &mut envs)?;
            let node_id = run.node_id.clone();
            states.entry(node_id).or_default().latest_success = Some(run);
        }
        drop(rows);
        let sql = format!(
            "SELECT a.node_id, a.key, a.status, a.started_at_ms, a.message, a.host, a.pid, a.pid_start, a.failure, a.job
             FROM attempts a WHERE a.id IN (SELECT MAX(id) FROM attempts{where_attempts} GROUP BY node_id)"
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query(attempted_params).map_err(|e| self.db_err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let (node_id, attempt) = self.decode_attempt(row)?;
            states.entry(node_id).or_default().last_attempt = Some(attempt);
        }
        Ok(states)
    }

    pub(super) fn begin_attempt_as(
        &self,
        owner: &Owner,
        node_id: &str,
        key: &ContentHash,
        slot: Option<&str>,
    ) -> Result<AttemptId, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO attempts (node_id, key, status, host, pid, pid_start, started_at_ms, slot)
                 VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(|e| self.db_err(e))?;
        stmt.execute(params![
            node_id,
            &key.0[..],
            owner.host,
            owner.pid,
            owner.start as i64,
            now_ms(),
            slot
        ])
        .map_err(|e| self.db_err(e))?;
        Ok(AttemptId(conn.last_insert_rowid()))
    }

    /// Inserts a run (a key is recorded once), points its node at it and marks
    /// the attempt succeeded, inside the caller's transaction.
    pub(super) fn insert_run(
        &self,
        tx: &Connection,
        attempt: AttemptId,
        run: &RunRecord,
        replace: bool,
    ) -> Result<RunRecord, StoreError> {
        let env_hash = ContentHash::of_bytes(run.env.0.as_bytes());
        tx.prepare_cached(
            "INSERT INTO envs (hash, json) VALUES (?1, ?2) ON CONFLICT(hash) DO NOTHING",
        )
        .and_then(|mut stmt| stmt.execute(params![&env_hash.0[..], run.env.0]))
        .map_err(|e| self.db_err(e))?;
        let sql = if replace {
            "INSERT INTO runs (key, node_id, stage, key_parts, env_hash, outputs, log, started_at_ms, duration_ms, committed_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT(key) DO UPDATE SET
             node_id = excluded.node_id, stage = excluded.stage, key_parts = excluded.key_parts, env_hash = excluded.env_hash,
             outputs = excluded.outputs, log = excluded.log, started_at_ms = excluded.started_at_ms,
             duration_ms = excluded.duration_ms, committed_at_ms = excluded.committed_at_ms"
        } else {
            "INSERT INTO runs (key, node_id, stage, key_parts, env_hash, outputs, log, started_at_ms, duration_ms, committed_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT(key) DO NOTHING"
        };
        tx.prepare_cached(sql)
            .and_then(|mut stmt| {
                stmt.execute(params![
                    &run.key.0[..],
                    run.node_id,
                    run.stage,
                    run.key_parts.0,
                    &env_hash.0[..],
                    encode_outputs(&run.outputs),
                    run.log.map(|h| h.0.to_vec()),
                    run.started_at_ms,
                    run.duration_ms,
                    now_ms()
                ])
            })
            .map_err(|e| self.db_err(e))?;
        point_node_at(tx, &run.node_id, &run.stage, &run.key).map_err(|e| self.db_err(e))?;
        let changed = set_attempt_status(tx, attempt, AttemptStatus::Succeeded, None, None)
            .map_err(|e| self.db_err(e))?;
        if changed == 0 {
            return Err(StoreError::UnknownAttempt {
                id: attempt.0,
                path: self.db_path.clone(),
            });
        }
        let mut recorded = self
            .query_run(tx, &run.key)?
            .ok_or_else(|| self.damaged("run vanished".into()))?;
        recorded.node_id = run.node_id.clone();
        recorded.stage = run.stage.clone();
        Ok(recorded)
    }

    pub(super) fn query_run(
        &self,
        conn: &Connection,
        key: &ContentHash,
    ) -> Result<Option<RunRecord>, StoreError> {
        let sql = format!("SELECT r.node_id, r.stage, {RUN_COLUMNS} FROM runs r WHERE r.key = ?1");
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query([&key.0[..]]).map_err(|e| self.db_err(e))?;
        match rows.next().map_err(|e| self.db_err(e))? {
            Some(row) => Ok(Some(self.decode_run(conn, row, &mut EnvCache::new())?)),
            None => Ok(None),
        }
    }

    /// Decodes `node_id, stage, RUN_COLUMNS`.
    fn decode_run(
        &self,
        conn: &Connection,
        row: &Row<'_>,
        envs: &mut EnvCache,
    ) -> Result<RunRecord, StoreError> {
        let db = |e| self.db_err(e);
        let key_parts: String = row.get(3).map_err(db)?;
        let env_hash: Vec<u8> = row.get(4).map_err(db)?;
        let outputs: Vec<u8> = row.get(5).map_err(db)?;
        let log: Option<Vec<u8>> = row.get(6).map_err(db)?;
        let env = match envs.get(&env_hash) {
            Some(env) => env.clone(),
            None => {
                let env = self.query_env(conn, &env_hash)?;
                envs.insert(env_hash, env.clone());
                env
            }
        };
        Ok(RunRecord {
            node_id: row.get(0).map_err(db)?,
            stage: row.get(1).map_err(db)?,
            key: self.hash_column(row.get(2).map_err(db)?)?,
            key_parts: RawJson(key_parts),
            env,
            outputs: decode_outputs(&outputs)
                .ok_or_else(|| self.damaged("an output list".into()))?,
            log: log.map(|bytes| self.hash_column(bytes)).transpose()?,
            started_at_ms: row.get(7).map_err(db)?,
            duration_ms: row.get(8).map_err(db)?,
        })
    }

    fn query_env(&self, conn: &Connection, hash: &[u8]) -> Result<RawJson, StoreError> {
        let json: String = conn
            .prepare_cached("SELECT json FROM envs WHERE hash = ?1")
            .and_then(|mut stmt| stmt.query_row([hash], |r| r.get(0)))
            .map_err(|e| self.db_err(e))?;
        Ok(RawJson(json))
    }

    fn decode_attempt(&self, row: &Row<'_>) -> Result<(String, Attempt), StoreError> {
        let db = |e| self.db_err(e);
        let status: String = row.get(2).map_err(db)?;
        let mut status = AttemptStatus::parse(&status)
            .ok_or_else(|| self.damaged(format!("attempt status `{status}`")))?;
        let job: Option<String> = row.get(9).map_err(db)?;
        // A cluster job outlives its driver: still running until settled.
        if status == AttemptStatus::Running && job.is_none() {
            let owner = Owner {
                host: row.get(5).map_err(db)?,
                pid: row.get(6).map_err(db)?,
                start: row.get::<_, i64>(7).map_err(db)? as u64,
            };
            if owner.liveness(&self.owner.host) == Liveness::Dead {
                status = AttemptStatus::Interrupted;
            }
        }
        let attempt = Attempt {
            key: self.hash_column(row.get(1).map_err(db)?)?,
            status,
            started_at_ms: row.get(3).map_err(db)?,
            message: row.get(4).map_err(db)?,
            failure: row.get::<_, Option<String>>(8).map_err(db)?.map(RawJson),
            job: job.map(RawJson),
        };
        Ok((row.get(0).map_err(db)?, attempt))
    }

    pub(super) fn hash_column(&self, bytes: Vec<u8>) -> Result<ContentHash, StoreError> {
        <[u8; 32]>::try_from(bytes.as_slice())
            .map(ContentHash)
            .map_err(|_| self.damaged(format!("a hash of {} bytes", bytes.len())))
    }

    pub(super) fn damaged(&self, detail: String) -> StoreError {
        StoreError::DamagedRecord {
            path: self.db_path.clone(),
            detail,
        }
    }
}

impl Journal<'_> {
    /// Records that an attempt started (`running`, with this process as owner).
    pub fn begin_attempt(&self, node_id: &str, key: &ContentHash) -> Result<AttemptId, StoreError> {
        self.begin_attempt_as(&self.owner, node_id, key, None)
    }

    /// [`Store::begin_attempt`] in a local slot (`cpu:0`, `gpu:1`): the lane
    /// the build page draws the attempt in.
    pub fn begin_attempt_in(
        &self,
        node_id: &str,
        key: &ContentHash,
        slot: Option<&str>,
    ) -> Result<AttemptId, StoreError> {
        self.begin_attempt_as(&self.owner, node_id, key, slot)
    }

    /// Records a failed attempt with its message.
    pub fn commit_failure(&self, attempt: AttemptId, message: &str) -> Result<(), StoreError> {
        self.end_attempt(attempt, AttemptStatus::Failed, Some(message), None)
    }

    /// Records how an attempt ended without a run: failed, or interrupted
    /// (SIGINT, or a failure that may go away by itself); with its message
    /// and the failure as the engine describes it (JSON).
    pub fn end_attempt(
        &self,
        attempt: AttemptId,
        status: AttemptStatus,
        message: Option<&str>,
        failure: Option<&RawJson>,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        let changed = set_attempt_status(&conn, attempt, status, message, failure)
            .map_err(|e| self.db_err(e))?;
        if changed == 0 {
            return Err(StoreError::UnknownAttempt {
                id: attempt.0,
                path: self.db_path.clone(),
            });
        }
        Ok(())
    }
}

/// Makes `key`'s run the node's current one.
pub(super) fn point_node_at(
    conn: &Connection,
    node_id: &str,
    stage: &str,
    key: &ContentHash,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO node_runs (node_id, stage, run_seq) SELECT ?1, ?2, seq FROM runs WHERE key = ?3
         ON CONFLICT(node_id) DO UPDATE SET stage = excluded.stage, run_seq = excluded.run_seq",
    )?
    .execute(params![node_id, stage, &key.0[..]])?;
    Ok(())
}

/// Marks an attempt succeeded (it adopted a run recorded before).
pub(super) fn mark_succeeded(conn: &Connection, attempt: AttemptId) -> rusqlite::Result<usize> {
    set_attempt_status(conn, attempt, AttemptStatus::Succeeded, None, None)
}

fn set_attempt_status(
    conn: &Connection,
    attempt: AttemptId,
    status: AttemptStatus,
    message: Option<&str>,
    failure: Option<&RawJson>,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "UPDATE attempts SET status = ?2, finished_at_ms = ?3, message = ?4, failure = ?5 WHERE id = ?1",
    )?
    .execute(params![
        attempt.0,
        status.as_str(),
        now_ms(),
        message,
        failure.map(|f| f.0.as_str())
    ])
}

/// The node ids whose records refer to each object (runs' outputs and logs,
/// and those of saved baselines, named `baseline NAME: NODE`).
/// Every object a recorded run (but those of `skip`, by key) or a saved
/// baseline names, with the node ids that name it.
pub(super) fn object_references(
    store: &Store,
    skip: &HashMap<ContentHash, String>,
) -> Result<HashMap<ContentHash, Vec<String>>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT r.node_id, r.outputs, r.log, (SELECT group_concat(n.node_id, char(10)) FROM node_runs n WHERE n.run_seq = r.seq), r.key FROM runs r
             UNION ALL SELECT 'baseline ' || b.name || ': ' || b.node_id, b.outputs, b.log, NULL, NULL FROM baselines b",
        )
        .map_err(|e| store.db_err(e))?;
    let mut rows = stmt.query([]).map_err(|e| store.db_err(e))?;
    let mut refs: HashMap<ContentHash, Vec<String>> = HashMap::new();
    while let Some(row) = rows.next().map_err(|e| store.db_err(e))? {
        let db = |e| store.db_err(e);
        if !skip.is_empty() {
            if let Some(key) = row.get::<_, Option<Vec<u8>>>(4).map_err(db)? {
                if skip.contains_key(&store.hash_column(key)?) {
                    continue;
                }
            }
        }
        let mut nodes = vec![row.get::<_, String>(0).map_err(db)?];
        if let Some(current) = row.get::<_, Option<String>>(3).map_err(db)? {
            nodes.extend(current.split('\n').map(str::to_string));
        }
        nodes.sort();
        nodes.dedup();
        let outputs: Vec<u8> = row.get(1).map_err(db)?;
        let outputs =
            decode_outputs(&outputs).ok_or_else(|| store.damaged("an output list".into()))?;
        let log: Option<Vec<u8>> = row.get(2).map_err(db)?;
        let log = log.map(|bytes| store.hash_column(bytes)).transpose()?;
        for hash in outputs.iter().map(|o| o.hash).chain(log) {
            let list = refs.entry(hash).or_default();
            list.extend(nodes.iter().cloned());
            list.sort();
            list.dedup();
        }
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use rusqlite::params;
    use serde_json::json;

    use super::super::record::OutputEntry;
    use super::super::test_support::{key, workspace};
    use super::super::{OutputCheck, RunRecord};

    /// Records `n` nodes straight through SQL (committing through the file
    /// system would take minutes), with key parts and environments of a
    /// realistic size, and materializes nothing.
    fn bulk_record(store: &super::Store, n: usize) {
        let mut conn = store.conn();
        let tx = conn.transaction().unwrap();
        let env = json!({"gpu": "NVIDIA H100 80GB HBM3", "driver": "570.86.15", "cuda": "12.8", "libtorch": "2.7.1",
            "cpu": "AMD EPYC 9654 96-Core Processor", "numa": "node0", "host": "gpu-node-17", "gpu_uuid": "GPU-5f1c",
            "clocks": {"sm": 1980, "mem": 2619}, "free_mib": 80000});
        let env = env.to_string();
        let env_hash = key(&env);
        tx.execute(
            "INSERT INTO envs (hash, json) VALUES (?1, ?2)",
            params![&env_hash.0[..], env],
        )
        .unwrap();
        for i in 0..n {
            let id = format!("rq2_runs[model=vit32x6x384,res={},batch={}]", i % 97, i);
            let parts = json!({"kind": "Vit", "version": 3, "spec": {"model": "vit32x6x384", "image_size": i % 97,
                "batch": i, "warmup": 20, "iters": 200, "dtype": "fp16", "compile": false, "outputs": ["timings.csv", "summary.json"]},
                "inputs": {"configs/vit.ron": key("cfg").to_hex()}, "upstream": {"prep": key(&format!("m{i}")).to_hex()},
                "env": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "570", "cuda": "12.8"}});
            let outputs: Vec<OutputEntry> = ["summary.json", "timings.csv", "trace.nsys-rep"]
                .iter()
                .map(|name| OutputEntry {
                    name: name.to_string(),
                    hash: key(&format!("{i}{name}")),
                    size: 1000,
                })
                .collect();
            tx.execute(
                "INSERT INTO runs (key, node_id, stage, key_parts, env_hash, outputs, started_at_ms, duration_ms, committed_at_ms)
                 VALUES (?1, ?2, 'rq2_runs', ?3, ?4, ?5, 0, 0, 0)",
                params![&key(&id).0[..], id, parts.to_string(), &env_hash.0[..], super::encode_outputs(&outputs)],
            )
            .unwrap();
            super::point_node_at(&tx, &id, "rq2_runs", &key(&id)).unwrap();
            tx.execute(
                "INSERT INTO attempts (node_id, key, status, host, pid, pid_start, started_at_ms)
                 VALUES (?1, ?2, 'succeeded', 'h', 1, 1, 0)",
                params![id, &key(&id).0[..]],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }

    #[test]
    fn load_states_reads_ten_thousand_nodes_quickly() {
        let (_dir, store) = workspace();
        bulk_record(&store, 10_000);
        let started = Instant::now();
        let states = store.reader().load_states().unwrap();
        let elapsed = started.elapsed();
        assert_eq!(states.len(), 10_000);
        let one = &states["rq2_runs[model=vit32x6x384,res=5,batch=5]"];
        let run: &RunRecord = one.latest_success.as_ref().unwrap();
        let parts = store.reader().key_parts(run).unwrap();
        assert_eq!(
            (run.outputs.len(), parts.value()["spec"]["batch"].as_u64()),
            (3, Some(5))
        );
        assert_eq!(run.env.value()["driver"], "570.86.15");
        eprintln!("load_states on 10,000 nodes: {elapsed:?}");
        // Generous for unoptimized test builds on a loaded machine; release builds take a few ms.
        assert!(elapsed.as_millis() < 2_000, "load_states took {elapsed:?}");
    }

    #[test]
    fn check_outputs_on_absent_directories_is_a_stat_per_node() {
        let (dir, store) = workspace();
        bulk_record(&store, 2_000);
        let states = store.reader().load_states().unwrap();
        let started = Instant::now();
        for (id, state) in &states {
            let run = state.latest_success.as_ref().unwrap();
            let check = store
                .hasher()
                .check_outputs(run, &dir.path().join("out/rq2_runs").join(id))
                .unwrap();
            assert_eq!(check, OutputCheck::Missing("summary.json".into()));
        }
        eprintln!(
            "check_outputs on 2,000 missing nodes: {:?}",
            started.elapsed()
        );
        assert_eq!(store.hashes_computed(), 0);
    }
}
