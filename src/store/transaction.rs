//! Reading the database in one transaction ([`Store::read`]) and its change
//! counter ([`Store::generation`]): a counter that triggers bump on every
//! change to what verdicts read (see `schema`), so a later command can tell
//! that nothing was recorded since a plan read its states (the no-op
//! snapshot, `engine::noop`).

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use super::error::StoreError;
use super::open::Store;
use super::record::NodeState;
use super::roles::Reader;

impl Reader<'_> {
    /// How many times this process's own writes moved the change counter
    /// (0 for a read-only store).
    pub fn own_generation(&self) -> i64 {
        self.conn()
            .query_row("SELECT n FROM temp.own_generation", [], |r| r.get(0))
            .unwrap_or(0)
    }

    /// The database's change counter; None for a database without one (a
    /// version-1 store opened read-only).
    pub fn generation(&self) -> Result<Option<i64>, StoreError> {
        let conn = self.conn();
        read_generation(&conn).map_err(|e| self.db_err(e))
    }

    /// [`Store::load_states`] and the change counter, read in one transaction
    /// so the counter names exactly the records loaded.
    pub fn load_states_at(&self) -> Result<(HashMap<String, NodeState>, Option<i64>), StoreError> {
        self.read(|s| {
            let generation = s.generation()?;
            Ok((s.load_states()?, generation))
        })
    }
}

impl Store {
    /// Runs `reads` in one read transaction: every query it makes sees one
    /// state of the database (the change counter names exactly the records
    /// read). The transaction ends whatever `reads` returns.
    pub fn read<T>(
        &self,
        reads: impl FnOnce(&Reader<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.begin_read()?;
        let result = reads(&self.reader());
        let end = self.end_read();
        let value = result?;
        end?;
        Ok(value)
    }

    /// Starts a read transaction (see [`Store::read`]).
    fn begin_read(&self) -> Result<(), StoreError> {
        // The stat cache first (lock order: the stat cache before the connection).
        drop(self.stat_cache()?);
        self.conn()
            .execute_batch("BEGIN DEFERRED")
            .map_err(|e| self.db_err(e))
    }

    fn end_read(&self) -> Result<(), StoreError> {
        self.conn()
            .execute_batch("COMMIT")
            .map_err(|e| self.db_err(e))
    }
}

fn read_generation(conn: &rusqlite::Connection) -> rusqlite::Result<Option<i64>> {
    let exists: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'generation')",
        )?
        .query_row([], |r| r.get(0))?;
    if !exists {
        return Ok(None);
    }
    conn.prepare_cached("SELECT n FROM generation WHERE id = 0")?
        .query_row([], |r| r.get(0))
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::ContentHash;

    #[test]
    fn own_generation_counts_only_this_processs_changes() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(dir.path()).unwrap();
        let b = Store::open(dir.path()).unwrap();
        let start = a.reader().generation().unwrap().unwrap();
        let (own_a, own_b) = (a.reader().own_generation(), b.reader().own_generation());
        b.journal()
            .begin_attempt("n", &ContentHash([1; 32]))
            .unwrap();
        b.journal()
            .begin_attempt("m", &ContentHash([2; 32]))
            .unwrap();
        assert_eq!(a.reader().own_generation(), own_a, "b's writes are not a's");
        let moved = a.reader().generation().unwrap().unwrap() - start;
        assert!(moved >= 2);
        assert_eq!(b.reader().own_generation() - own_b, moved);
        a.journal()
            .begin_attempt("n", &ContentHash([3; 32]))
            .unwrap();
        assert_eq!(
            a.reader().generation().unwrap().unwrap() - start,
            (a.reader().own_generation() - own_a) + (b.reader().own_generation() - own_b)
        );
    }

    #[test]
    fn states_of_some_nodes_match_the_full_load() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (id, k) in [("x", 1u8), ("y", 2), ("z", 3)] {
            store
                .journal()
                .begin_attempt(id, &ContentHash([k; 32]))
                .unwrap();
        }
        let all = store.reader().load_states().unwrap();
        let some = store
            .reader()
            .load_states_for(&["x", "z", "absent"])
            .unwrap();
        assert_eq!(some.len(), 2);
        for id in ["x", "z"] {
            assert_eq!(
                some[id].last_attempt.as_ref().map(|a| a.key),
                all[id].last_attempt.as_ref().map(|a| a.key)
            );
        }
        // Attempts of the judged nodes only.
        let judged = store
            .reader()
            .load_states_with_attempts_of(&["x", "y", "z"], &["y"])
            .unwrap();
        assert_eq!(judged.keys().map(String::as_str).collect::<Vec<_>>(), ["y"]);
        assert_eq!(
            judged["y"].last_attempt.as_ref().map(|a| a.key),
            Some(ContentHash([2; 32]))
        );
    }
}
