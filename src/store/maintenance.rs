//! `verify` (re-hash every object, report damage) and `gc` (remove what no
//! recorded run refers to). Every run is kept: a run is small, and an old key
//! comes back whenever a change is reverted.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::TransactionBehavior;

use super::error::{IoContext, StoreError};
use super::fileio::hash_contents;
use super::lock::remove_if_unheld;
use super::open::Store;
use super::record::{Damage, DamageKind, GcStats};
use super::runs::object_references;
use crate::hash::ContentHash;

impl Store {
    /// Re-hashes every object. Reports objects whose content no longer matches
    /// their name, objects a run refers to that are missing, and unreadable
    /// ones, each with the node ids whose runs refer to it; sorted by path.
    pub fn verify(&self) -> Result<Vec<Damage>, StoreError> {
        let refs = object_references(self)?;
        let mut seen = HashSet::new();
        let mut damage = Vec::new();
        for (path, named) in self.list_objects()? {
            let runs = refs.get(&named).cloned().unwrap_or_default();
            seen.insert(named);
            let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let kind = match hash_contents(&path, size) {
                Ok(actual) if actual == named => continue,
                Ok(actual) => DamageKind::Corrupt { actual },
                Err(e) => DamageKind::Unreadable(e.to_string()),
            };
            damage.push(Damage {
                object: path.display().to_string(),
                kind,
                runs,
            });
        }
        for (hash, runs) in refs {
            if !seen.contains(&hash) {
                let object = self.object_path(&hash).display().to_string();
                damage.push(Damage {
                    object,
                    kind: DamageKind::Missing,
                    runs,
                });
            }
        }
        damage.sort_by(|a, b| a.object.cmp(&b.object));
        Ok(damage)
    }

    /// Removes objects no recorded run refers to, staging directories of dead
    /// processes, unheld key lock files and the directories of finished
    /// cluster jobs; forgets superseded attempts and stat-cache entries of
    /// files that are gone. Waits for commits in progress.
    pub fn gc(&self) -> Result<GcStats, StoreError> {
        let _exclusive = self.store_lock(true)?;
        let refs = object_references(self)?;
        let mut stats = GcStats::default();
        for (path, hash) in self.list_objects()? {
            if refs.contains_key(&hash) {
                continue;
            }
            let size = fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
            fs::remove_file(&path).ctx("remove object", &path)?;
            stats.objects_removed += 1;
            stats.bytes_freed += size;
        }
        stats.staging_removed = self.remove_dead_staging();
        stats.locks_removed = self.remove_unheld_locks();
        self.forget_stale_rows()?;
        stats.job_dirs_removed = self.remove_finished_job_dirs()?;
        Ok(stats)
    }

    /// Every file under `objects/`, with the hash its path names. Files whose
    /// path is not a hash are reported with a hash that cannot match, so
    /// `verify` flags them and `gc` removes them.
    fn list_objects(&self) -> Result<Vec<(PathBuf, ContentHash)>, StoreError> {
        let root = self.cache.join("objects");
        let mut objects = Vec::new();
        let shards = match fs::read_dir(&root) {
            Ok(shards) => shards,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(objects),
            Err(e) => return Err(StoreError::io("list", &root, e)),
        };
        for shard in shards {
            let shard = shard.ctx("list", &root)?;
            let shard_name = shard.file_name().to_string_lossy().into_owned();
            if !shard.path().is_dir() {
                continue;
            }
            for object in fs::read_dir(shard.path()).ctx("list", &shard.path())? {
                let object = object.ctx("list", &shard.path())?;
                let name = format!("{shard_name}{}", object.file_name().to_string_lossy());
                let hash = ContentHash::from_hex(&name).unwrap_or(ContentHash([0; 32]));
                objects.push((object.path(), hash));
            }
        }
        objects.sort();
        Ok(objects)
    }

    fn remove_unheld_locks(&self) -> u64 {
        let dir = self.cache.join("locks");
        let Ok(entries) = fs::read_dir(&dir) else {
            return 0;
        };
        let is_lock = |p: &Path| p.extension().is_some_and(|e| e == "lock");
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_lock(p) && remove_if_unheld(p))
            .count() as u64
    }

    /// Keeps each node's latest attempt (and running ones) and the stat-cache
    /// entries of files that still exist.
    fn forget_stale_rows(&self) -> Result<(), StoreError> {
        let keys: Vec<String> = {
            let cache = self.stat_cache()?;
            let gone = cache
                .entries_keys()
                .filter(|k| !self.stat_key_path(k).exists());
            gone.cloned().collect()
        };
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        tx.execute(
            "DELETE FROM attempts WHERE status != 'running'
             AND id NOT IN (SELECT MAX(id) FROM attempts GROUP BY node_id)",
            [],
        )
        .map_err(|e| self.db_err(e))?;
        for key in &keys {
            tx.execute("DELETE FROM file_stats WHERE path = ?1", [key])
                .map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))?;
        drop(conn);
        self.forget_stats(&keys);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::super::test_support::{commit, workspace};
    use super::super::{DamageKind, Store};

    #[test]
    fn verify_finds_tampered_and_missing_objects() {
        let (_dir, store) = workspace();
        assert!(store.verify().unwrap().is_empty());
        let a = commit(&store, "a", "ka", &[("x.txt", "xxxx"), ("y.txt", "yyyy")]);
        commit(&store, "b", "kb", &[("z.txt", "xxxx")]);
        assert!(
            store.verify().unwrap().is_empty(),
            "a fresh store is intact"
        );

        let tampered = store.object_path(&a.outputs[0].hash);
        fs::set_permissions(&tampered, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&tampered, "xxxX").unwrap();
        let missing = store.object_path(&a.outputs[1].hash);
        fs::remove_file(&missing).unwrap();

        let damage = store.verify().unwrap();
        assert_eq!(damage.len(), 2, "{damage:?}");
        let corrupt = damage
            .iter()
            .find(|d| d.object == tampered.display().to_string())
            .expect("tampered found");
        assert_eq!(
            corrupt.kind,
            DamageKind::Corrupt {
                actual: crate::hash::ContentHash::of_bytes(b"xxxX")
            }
        );
        assert_eq!(corrupt.runs, ["a", "b"]);
        let gone = damage
            .iter()
            .find(|d| d.object == missing.display().to_string())
            .expect("missing found");
        assert_eq!(
            (&gone.kind, gone.runs.as_slice()),
            (&DamageKind::Missing, &["a".to_string()][..])
        );
    }

    #[test]
    fn gc_removes_only_unreferenced_objects() {
        let (dir, store) = workspace();
        let kept = commit(&store, "a", "ka", &[("x.txt", "kept")]);
        // An object placed by a commit whose transaction never happened.
        let orphan = crate::hash::ContentHash::of_bytes(b"orphan!");
        let orphan_path = store.object_path(&orphan);
        fs::create_dir_all(orphan_path.parent().unwrap()).unwrap();
        fs::write(&orphan_path, "orphan!").unwrap();
        let stray = dir.path().join("cache/objects/zz/not-a-hash");
        fs::create_dir_all(stray.parent().unwrap()).unwrap();
        fs::write(&stray, "?").unwrap();
        let _held = store
            .lock_key(&crate::hash::ContentHash::of_bytes(b"held"))
            .unwrap();
        drop(
            store
                .lock_key(&crate::hash::ContentHash::of_bytes(b"free"))
                .unwrap(),
        );

        let stats = store.gc().unwrap();
        assert_eq!((stats.objects_removed, stats.bytes_freed), (2, 8));
        assert_eq!(stats.locks_removed, 1, "the held lock file stays");
        assert!(!orphan_path.exists() && !stray.exists());
        assert!(store.object_path(&kept.outputs[0].hash).exists());
        assert!(store.verify().unwrap().is_empty());
        assert_eq!(store.gc().unwrap().objects_removed, 0);
        let reopened = Store::open(dir.path()).unwrap();
        assert!(reopened.load_states().unwrap()["a"]
            .latest_success
            .is_some());
    }

    #[test]
    fn gc_keeps_every_run_and_the_latest_attempt() {
        let (_dir, store) = workspace();
        let first = commit(&store, "n", "k1", &[("v.txt", "1")]);
        commit(&store, "n", "k2", &[("v.txt", "2")]);
        let failed = store
            .begin_attempt("n", &super::super::test_support::key("k3"))
            .unwrap();
        store.commit_failure(failed, "exit status 3").unwrap();
        assert_eq!(
            store.gc().unwrap().objects_removed,
            0,
            "superseded runs keep their objects"
        );
        assert!(store.object_path(&first.outputs[0].hash).exists());
        let states = store.load_states().unwrap();
        let attempt = states["n"].last_attempt.as_ref().unwrap();
        assert_eq!(attempt.message.as_deref(), Some("exit status 3"));
        let count: i64 = store
            .conn()
            .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 1);
    }
}
