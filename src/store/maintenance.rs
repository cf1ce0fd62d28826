//! `verify` (re-hash every object, report damage) and `gc` (remove what no
//! recorded run refers to). Every run is kept: a run is small, and an old key
//! comes back whenever a change is reverted.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::TransactionBehavior;

use super::error::{IoContext, StoreError};
use super::fileio::{hash_contents, remove_tree};
use super::lock::remove_if_unheld;
use super::open::Store;
use super::record::{Damage, DamageKind, GcStats, Repair};
use super::roles::Objects;
use super::runs::object_references;
use crate::hash::ContentHash;

impl Objects<'_> {
    /// Re-hashes every object. Reports objects whose content no longer matches
    /// their name, objects a run refers to that are missing, and unreadable
    /// ones, each with the node ids whose runs refer to it; sorted by path.
    /// A run that arrived without its outputs (see `left_behind`) names
    /// objects that are not here by design: they are not reported.
    pub fn verify(&self) -> Result<Vec<Damage>, StoreError> {
        let refs = object_references(self, &self.reader().all_bytes_elsewhere()?)?;
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
                named,
                kind,
                runs,
            });
        }
        for (hash, runs) in refs {
            if !seen.contains(&hash) {
                let object = self.path(&hash).display().to_string();
                damage.push(Damage {
                    object,
                    named: hash,
                    kind: DamageKind::Missing,
                    runs,
                });
            }
        }
        damage.sort_by(|a, b| a.object.cmp(&b.object));
        Ok(damage)
    }

    /// SQLite's own check of the state database (`PRAGMA quick_check`):
    /// None when it is sound, else what SQLite found (first lines).
    pub fn check_database(&self) -> Result<Option<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("PRAGMA quick_check(20)")
            .map_err(|e| self.db_err(e))?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.db_err(e))?;
        Ok((lines != ["ok"]).then(|| lines.join("; ")))
    }

    /// Mends what [`Store::verify`] found, never from the damaged object
    /// itself: a damaged object is set aside (`cache/damaged/`), then each
    /// damaged or missing object is rewritten from a materialized copy in
    /// `out/` whose bytes hash to its name (the stat cache knows where each
    /// content was materialized). What has no intact copy stays missing;
    /// the node whose run needs it runs again when a build must restore it.
    pub fn repair(&self, damage: Vec<Damage>) -> Result<Repair, StoreError> {
        let _exclusive = self.store_lock(true)?;
        let mut copies: HashMap<ContentHash, Vec<String>> = HashMap::new();
        for (key, entry) in self.stat_cache()?.entries() {
            copies.entry(entry.hash).or_default().push(key.clone());
        }
        let scratch = self.new_staging_dir()?;
        let damaged: std::collections::HashSet<ContentHash> =
            damage.iter().map(|d| d.named).collect();
        let mut repair = Repair::default();
        for d in damage {
            let object = self.path(&d.named);
            if !matches!(d.kind, DamageKind::Missing) {
                self.quarantine(&object, &d.named)?;
            }
            let mut candidates = copies.remove(&d.named).unwrap_or_default();
            candidates.sort();
            let source = candidates.into_iter().find_map(|key| {
                let path = self.stat_key_path(&key);
                let size = fs::metadata(&path).ok()?.len();
                (hash_contents(&path, size).ok()? == d.named).then_some(path)
            });
            match source.map(|path| (self.ingest(&path, &scratch), path)) {
                Some((Ok((hash, _)), path)) if hash == d.named => repair
                    .repaired
                    .push((d.object.clone(), path.display().to_string())),
                _ => repair.unrepaired.push(d),
            }
        }
        let _ = remove_tree(&scratch);
        // A summary read from a damaged object may hold its damage: it is
        // read again from the object, repaired or not.
        self.forget_summaries(|hash| !damaged.contains(hash))?;
        self.sync_filesystem()?;
        Ok(repair)
    }

    /// Removes objects no recorded run or saved baseline refers to, staging directories of dead
    /// processes, unheld key lock files and the directories of finished
    /// cluster jobs; forgets superseded attempts and stat-cache entries of
    /// files that are gone. Waits for commits in progress.
    pub fn gc(&self) -> Result<GcStats, StoreError> {
        let _exclusive = self.store_lock(true)?;
        let refs = object_references(self, &Default::default())?;
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
        stats.staging_removed = self.remove_dead_staging()
            + self.remove_dead_scratch()
            + self.remove_old_scratch()
            + self.remove_damaged();
        stats.locks_removed = self.remove_unheld_locks();
        self.forget_stale_rows()?;
        self.forget_summaries(|hash| refs.contains_key(hash))?;
        stats.job_dirs_removed = self.remove_finished_job_dirs()?;
        Ok(stats)
    }
}

impl Store {
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

    /// Folders that vitgraph before 0.2 left beside node folders when it was
    /// killed mid-restore (`<node>.vitgraph-tmp-<pid>`, `<node>.vitgraph-old-<pid>`),
    /// for processes of this host that are gone.
    fn remove_old_scratch(&self) -> u64 {
        let out = self.root.join("out");
        let Ok(stages) = fs::read_dir(&out) else {
            return 0;
        };
        let mut dirs = vec![out.clone()];
        dirs.extend(stages.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        let mut removed = 0;
        for dir in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let pid = ["vitgraph-tmp-", "vitgraph-old-"].iter().find_map(|m| {
                    let rest = &name[name.rfind(m)? + m.len()..];
                    rest.split('-').next()?.parse::<u32>().ok()
                });
                let dead = pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
                if dead && super::objects::remove_any(&entry.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Damaged objects set aside by restores (`cache/damaged/`).
    fn remove_damaged(&self) -> u64 {
        let dir = self.cache.join(super::objects::DAMAGED_DIR);
        let Ok(entries) = fs::read_dir(&dir) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| fs::remove_file(e.path()).is_ok())
            .count() as u64
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

    /// Keeps each node's latest attempt, running and succeeded ones (they say
    /// which build measured a run: `vitgraph compare build:N`) and each
    /// build's first (so builds keep their numbers), and the stat-cache
    /// entries of files that still exist.
    /// Drops the summaries of objects no run or baseline refers to.
    fn forget_summaries(&self, kept: impl Fn(&ContentHash) -> bool) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let db = |e| self.db_err(e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        let objects: Vec<Vec<u8>> = {
            let mut stmt = tx.prepare("SELECT object FROM summaries").map_err(db)?;
            let rows = stmt.query_map([], |r| r.get(0)).map_err(db)?;
            rows.collect::<Result<_, _>>().map_err(db)?
        };
        for object in objects {
            let hash = <[u8; 32]>::try_from(object.as_slice()).map(ContentHash);
            if hash.as_ref().is_ok_and(&kept) {
                continue;
            }
            tx.execute("DELETE FROM summaries WHERE object = ?1", [&object])
                .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

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
            "DELETE FROM attempts WHERE status NOT IN ('running', 'succeeded')
             AND id NOT IN (SELECT MAX(id) FROM attempts GROUP BY node_id)
             AND id NOT IN (SELECT MIN(id) FROM attempts GROUP BY host, pid, pid_start)",
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
        assert!(store.objects().verify().unwrap().is_empty());
        let a = commit(&store, "a", "ka", &[("x.txt", "xxxx"), ("y.txt", "yyyy")]);
        commit(&store, "b", "kb", &[("z.txt", "xxxx")]);
        assert!(
            store.objects().verify().unwrap().is_empty(),
            "a fresh store is intact"
        );

        let tampered = store.objects().path(&a.outputs[0].hash);
        fs::set_permissions(&tampered, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&tampered, "xxxX").unwrap();
        let missing = store.objects().path(&a.outputs[1].hash);
        fs::remove_file(&missing).unwrap();

        let damage = store.objects().verify().unwrap();
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
    fn repair_rewrites_from_an_intact_copy_in_out_and_never_from_the_damage() {
        let (dir, store) = workspace();
        let run = commit(&store, "a", "ka", &[("x.txt", "xxxx"), ("y.txt", "yyyy")]);
        store
            .objects()
            .materialize("a", "a", &run, &dir.path().join("out/a"))
            .unwrap();
        let (x, y) = (run.outputs[0].hash, run.outputs[1].hash);
        for (hash, text) in [(x, "xxxX"), (y, "")] {
            let object = store.objects().path(&hash);
            fs::set_permissions(&object, fs::Permissions::from_mode(0o644)).unwrap();
            fs::write(&object, text).unwrap();
        }
        // y's copy in out/ is lost too: nothing intact is left of it.
        fs::write(dir.path().join("out/a/y.txt"), "edited").unwrap();
        let damage = store.objects().verify().unwrap();
        assert_eq!(damage.len(), 2);
        let repair = store.objects().repair(damage).unwrap();
        assert_eq!(repair.repaired.len(), 1, "{repair:?}");
        assert!(repair.repaired[0].1.ends_with("out/a/x.txt"));
        assert_eq!(
            fs::read_to_string(store.objects().path(&x)).unwrap(),
            "xxxx"
        );
        assert_eq!(repair.unrepaired.len(), 1);
        assert_eq!(repair.unrepaired[0].named, y);
        assert!(
            !store.objects().path(&y).exists(),
            "the damaged y is set aside"
        );
        let left = store.objects().verify().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].kind, DamageKind::Missing);
    }

    #[test]
    fn a_sound_database_passes_its_check() {
        let (_dir, store) = workspace();
        commit(&store, "a", "ka", &[("x.txt", "x")]);
        assert_eq!(store.objects().check_database().unwrap(), None);
    }

    #[test]
    fn gc_removes_only_unreferenced_objects() {
        let (dir, store) = workspace();
        let kept = commit(&store, "a", "ka", &[("x.txt", "kept")]);
        // An object placed by a commit whose transaction never happened.
        let orphan = crate::hash::ContentHash::of_bytes(b"orphan!");
        let orphan_path = store.objects().path(&orphan);
        fs::create_dir_all(orphan_path.parent().unwrap()).unwrap();
        fs::write(&orphan_path, "orphan!").unwrap();
        let stray = dir.path().join("cache/objects/zz/not-a-hash");
        fs::create_dir_all(stray.parent().unwrap()).unwrap();
        fs::write(&stray, "?").unwrap();
        let _held = store
            .journal()
            .lock_key(&crate::hash::ContentHash::of_bytes(b"held"))
            .unwrap();
        drop(
            store
                .journal()
                .lock_key(&crate::hash::ContentHash::of_bytes(b"free"))
                .unwrap(),
        );

        let stats = store.objects().gc().unwrap();
        assert_eq!((stats.objects_removed, stats.bytes_freed), (2, 8));
        assert_eq!(stats.locks_removed, 1, "the held lock file stays");
        assert!(!orphan_path.exists() && !stray.exists());
        assert!(store.objects().path(&kept.outputs[0].hash).exists());
        assert!(store.objects().verify().unwrap().is_empty());
        assert_eq!(store.objects().gc().unwrap().objects_removed, 0);
        let reopened = Store::open(dir.path()).unwrap();
        assert!(reopened.reader().load_states().unwrap()["a"]
            .latest_success
            .is_some());
    }

    #[test]
    fn gc_keeps_every_run_and_the_latest_attempt() {
        let (_dir, store) = workspace();
        let first = commit(&store, "n", "k1", &[("v.txt", "1")]);
        let superseded = store
            .journal()
            .begin_attempt("n", &super::super::test_support::key("k0"))
            .unwrap();
        store
            .journal()
            .commit_failure(superseded, "exit status 1")
            .unwrap();
        commit(&store, "n", "k2", &[("v.txt", "2")]);
        let failed = store
            .journal()
            .begin_attempt("n", &super::super::test_support::key("k3"))
            .unwrap();
        store
            .journal()
            .commit_failure(failed, "exit status 3")
            .unwrap();
        assert_eq!(
            store.objects().gc().unwrap().objects_removed,
            0,
            "superseded runs keep their objects"
        );
        assert!(store.objects().path(&first.outputs[0].hash).exists());
        let states = store.reader().load_states().unwrap();
        let attempt = states["n"].last_attempt.as_ref().unwrap();
        assert_eq!(attempt.message.as_deref(), Some("exit status 3"));
        let count: i64 = store
            .conn()
            .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))
            .unwrap();
        // The two succeeded attempts and the latest; the superseded failure goes.
        assert_eq!(count, 3);
        assert_eq!(store.reader().builds().unwrap()[0].attempts, 3);
    }
}
