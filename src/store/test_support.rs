//! Helpers for the store's unit tests: a workspace in a temp dir and a way to
//! commit a node's outputs in one line.

use std::fs;
use std::path::Path;

use serde_json::json;

use super::{NewRun, RawJson, RunRecord, Store};
use crate::hash::ContentHash;

pub(crate) fn workspace() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("open store");
    (dir, store)
}

pub(crate) fn key(seed: &str) -> ContentHash {
    ContentHash::of_bytes(seed.as_bytes())
}

/// Stages `files` (name, content) and commits them as a run of `node_id` with key `key(key_seed)`.
pub(crate) fn commit(
    store: &Store,
    node_id: &str,
    key_seed: &str,
    files: &[(&str, &str)],
) -> RunRecord {
    let staging = stage(store, files);
    let names: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
    let attempt = store
        .journal()
        .begin_attempt(node_id, &key(key_seed))
        .expect("begin attempt");
    let parts = json!({ "spec": key_seed });
    let env = json!({ "host": "test" });
    store
        .objects()
        .commit_success(
            attempt,
            new_run(node_id, key(key_seed), &parts, &names, &env),
            &staging,
        )
        .expect("commit")
}

pub(crate) fn stage(store: &Store, files: &[(&str, &str)]) -> std::path::PathBuf {
    let staging = store.objects().new_staging_dir().expect("staging dir");
    for (name, content) in files {
        write(&staging.join(name), content);
    }
    staging
}

pub(crate) fn new_run<'a>(
    node_id: &'a str,
    key: ContentHash,
    parts: &'a serde_json::Value,
    outputs: &'a [String],
    env: &'a serde_json::Value,
) -> NewRun<'a> {
    let stage = node_id.split('[').next().unwrap_or(node_id);
    NewRun {
        node_id,
        stage,
        key,
        key_parts: RawJson::from(parts),
        outputs,
        env,
        started_at_ms: 1,
        duration_ms: 2,
        log: None,
        replace: false,
    }
}

pub(crate) fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create parent");
    }
    fs::write(path, content).expect("write file");
}

/// Hooks for the engine's tests: what the database says, and commits made
/// to fail.
impl Store {
    /// The node ids of the recorded runs, in commit order.
    pub(crate) fn commit_order(&self) -> Vec<String> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT node_id FROM runs ORDER BY seq")
            .expect("query runs");
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .expect("read runs");
        rows.map(|r| r.expect("a node id")).collect()
    }

    /// Makes every commit of a run of `node_id` fail (a trigger aborts it).
    pub(crate) fn fail_commits_of(&self, node_id: &str) {
        let sql = format!(
            "CREATE TRIGGER IF NOT EXISTS test_fail_commit BEFORE INSERT ON runs \
             WHEN NEW.node_id = '{node_id}' BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
        );
        self.conn().execute_batch(&sql).expect("create the trigger");
    }
}
