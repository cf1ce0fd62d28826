//! Runs whose outputs were left behind: a bundle exported with
//! `--results-only` carries the record of every run of its targets'
//! closure but the objects only of the runs the targets read, so a laptop
//! gets a study's results without its raw traces. Such a run stands for
//! its node as any run does (its record gives the key and the manifest
//! that downstream keys read); the store notes which host holds its bytes
//! (`bytes_elsewhere`, a table a store gets with its first import), and a
//! node that must read them fails saying how to bring them. The note goes
//! when the run's objects arrive (a full bundle or a pull).

use std::collections::HashMap;

use super::error::StoreError;
use super::record::RunRecord;
use super::roles::{Objects, Reader};
use crate::hash::ContentHash;

/// The host that has a run's outputs, as messages name it: `` `gpu-box` ``,
/// or "another machine" when the bundle did not say.
pub(crate) fn host_text(host: &str) -> String {
    match host {
        "" => "another machine".to_owned(),
        h => format!("`{h}`"),
    }
}

/// Created with the other tables of arrivals (see `arrival`).
pub(super) const LEFT_BEHIND_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS bytes_elsewhere (key BLOB PRIMARY KEY, host TEXT NOT NULL) WITHOUT ROWID;";

/// Notes in an import's transaction where the outputs of the run of `key`
/// are (`host`), or, when they arrived (None), that they are here.
pub(super) fn note(
    tx: &rusqlite::Transaction<'_>,
    key: &ContentHash,
    host: Option<&String>,
) -> rusqlite::Result<usize> {
    match host {
        Some(host) => tx
            .prepare_cached("INSERT OR REPLACE INTO bytes_elsewhere (key, host) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(rusqlite::params![&key.0[..], host])),
        None => tx
            .prepare_cached("DELETE FROM bytes_elsewhere WHERE key = ?1")
            .and_then(|mut stmt| stmt.execute([&key.0[..]])),
    }
}

impl Reader<'_> {
    /// Whether any run arrived without its outputs (one query; a store
    /// that never imported a results-only bundle answers false).
    pub fn any_bytes_elsewhere(&self) -> bool {
        let conn = self.conn();
        conn.prepare_cached("SELECT 1 FROM bytes_elsewhere LIMIT 1")
            .and_then(|mut stmt| stmt.exists([]))
            .unwrap_or(false)
    }

    /// The host holding the outputs of the run of `key`, when that run
    /// arrived without them ("" when the bundle did not say).
    pub fn bytes_elsewhere(&self, key: &ContentHash) -> Option<String> {
        let conn = self.conn();
        conn.prepare_cached("SELECT host FROM bytes_elsewhere WHERE key = ?1")
            .and_then(|mut stmt| {
                use rusqlite::OptionalExtension;
                stmt.query_row([&key.0[..]], |r| r.get::<_, String>(0))
                    .optional()
            })
            .ok()
            .flatten()
    }

    /// Every run that arrived without its outputs, with the host that has
    /// them.
    pub fn all_bytes_elsewhere(&self) -> Result<HashMap<ContentHash, String>, StoreError> {
        self.text_by_key("SELECT key, host FROM bytes_elsewhere")
    }

    /// The host that holds the outputs of `node_id`'s current run, when
    /// that run arrived without them and the store still lacks one of its
    /// outputs (of those named in `files`, when given).
    pub fn node_bytes_elsewhere(
        &self,
        node_id: &str,
        files: Option<&[&str]>,
    ) -> Result<Option<String>, StoreError> {
        let run = {
            let conn = self.conn();
            let key: Option<Vec<u8>> = match conn.prepare_cached(
                "SELECT r.key FROM node_runs n JOIN runs r ON r.seq = n.run_seq
                 JOIN bytes_elsewhere e ON e.key = r.key WHERE n.node_id = ?1",
            ) {
                Ok(mut stmt) => {
                    use rusqlite::OptionalExtension;
                    stmt.query_row([node_id], |r| r.get(0))
                        .optional()
                        .map_err(|e| self.db_err(e))?
                }
                Err(_) => None,
            };
            let Some(key) = key else { return Ok(None) };
            self.hash_column(key)?
        };
        let Some(run) = self.run_for_key(&run)? else {
            return Ok(None);
        };
        let read = |name: &str| files.is_none_or(|f| f.contains(&name));
        let objects = self.objects();
        if run
            .outputs
            .iter()
            .filter(|o| read(&o.name))
            .all(|o| objects.holds(&o.hash, o.size))
        {
            return Ok(None);
        }
        Ok(self.bytes_elsewhere(&run.key))
    }
}

impl super::open::Store {
    /// Whether `error` (reading an object or a file of `run`) means only
    /// that the output is one `run` arrived without: restoring such a run
    /// places the outputs it has.
    pub(super) fn left_out(&self, run: &RunRecord, error: &std::io::Error) -> bool {
        error.kind() == std::io::ErrorKind::NotFound
            && self.reader().bytes_elsewhere(&run.key).is_some()
    }
}

impl Objects<'_> {
    /// `run` with only the outputs whose objects the store holds, when it
    /// arrived without some of them (a `--results-only` bundle); None for
    /// any other run.
    pub fn held_part(&self, run: &RunRecord) -> Option<RunRecord> {
        if self.reader().bytes_elsewhere(&run.key).is_none() || self.holds_run(run) {
            return None;
        }
        let mut part = run.clone();
        part.outputs.retain(|o| self.holds(&o.hash, o.size));
        Some(part)
    }

    /// Whether every object `run` names (outputs and log) is in the store.
    pub fn holds_run(&self, run: &RunRecord) -> bool {
        run.outputs.iter().all(|o| self.holds(&o.hash, o.size))
            && run.log.is_none_or(|l| self.path(&l).is_file())
    }
}
