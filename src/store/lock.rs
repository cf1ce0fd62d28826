//! Cross-process locks, all `flock(2)` on files: one per node key
//! (`cache/locks/<hex>.lock`), so two processes never build one key at once,
//! and `cache/store.lock`, held shared while a commit places objects and
//! exclusively by `gc`, so gc never removes an object a commit is about to
//! record. The kernel releases a flock when its holder dies, even by kill -9.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::error::{IoContext, StoreError};
use super::open::Store;
use super::roles::Journal;
use crate::hash::ContentHash;

/// An exclusive lock on one node key, released on drop.
#[derive(Debug)]
pub struct KeyLock {
    _file: File,
    path: PathBuf,
}

impl KeyLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A lock on `cache/store.lock`, released on drop.
pub(super) struct StoreLock {
    _file: File,
}

impl Journal<'_> {
    /// Exclusive lock for a node key across processes; blocks until held.
    pub fn lock_key(&self, key: &ContentHash) -> Result<KeyLock, StoreError> {
        let path = self.key_lock_path(key);
        loop {
            if let Some(file) = acquire(&path, libc::LOCK_EX, true)? {
                return Ok(KeyLock { _file: file, path });
            }
        }
    }

    /// Like [`Store::lock_key`], but `Ok(None)` when another holder has it.
    pub fn try_lock_key(&self, key: &ContentHash) -> Result<Option<KeyLock>, StoreError> {
        let path = self.key_lock_path(key);
        Ok(acquire(&path, libc::LOCK_EX, false)?.map(|file| KeyLock { _file: file, path }))
    }
}

impl Store {
    fn key_lock_path(&self, key: &ContentHash) -> PathBuf {
        self.cache
            .join("locks")
            .join(format!("{}.lock", key.to_hex()))
    }

    /// Shared for commits, exclusive for gc; blocks until held.
    pub(super) fn store_lock(&self, exclusive: bool) -> Result<StoreLock, StoreError> {
        let path = self.cache.join("store.lock");
        let mode = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        loop {
            if let Some(file) = acquire(&path, mode, true)? {
                return Ok(StoreLock { _file: file });
            }
        }
    }
}

/// Removes a key lock file nobody holds; true when removed. Lockers re-check
/// the file after locking (see [`acquire`]), so removing it under the lock is safe.
pub(super) fn remove_if_unheld(path: &Path) -> bool {
    match acquire(path, libc::LOCK_EX, false) {
        Ok(Some(_held)) => fs::remove_file(path).is_ok(),
        _ => false,
    }
}

/// Opens (creating) `path` and flocks it. `Ok(None)` when non-blocking and held
/// elsewhere. Retries when the file was removed between open and flock (by gc),
/// since a lock on a removed file excludes nobody.
fn acquire(path: &Path, mode: libc::c_int, blocking: bool) -> Result<Option<File>, StoreError> {
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .ctx("open lock file", path)?;
        let op = if blocking { mode } else { mode | libc::LOCK_NB };
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) if !blocking => return Ok(None),
                _ => return Err(StoreError::io("lock", path, err)),
            }
        }
        let held = file.metadata().ctx("read metadata of", path)?.ino();
        match fs::metadata(path) {
            Ok(now) if now.ino() == held => return Ok(Some(file)),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io("read metadata of", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{key, workspace};
    use super::super::Store;

    #[test]
    fn a_key_lock_excludes_a_second_holder_until_dropped() {
        let (dir, store) = workspace();
        let other = Store::open(dir.path()).unwrap();
        let held = store.journal().lock_key(&key("k")).unwrap();
        assert!(other.journal().try_lock_key(&key("k")).unwrap().is_none());
        assert!(
            store.journal().try_lock_key(&key("k")).unwrap().is_none(),
            "threads of one process are excluded too"
        );
        assert!(other
            .journal()
            .try_lock_key(&key("another"))
            .unwrap()
            .is_some());
        drop(held);
        assert!(other.journal().try_lock_key(&key("k")).unwrap().is_some());
    }

    #[test]
    fn a_blocked_locker_gets_the_lock_when_released() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let (dir, store) = workspace();
        let held = store.journal().lock_key(&key("k")).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let (root, flag) = (dir.path().to_path_buf(), released.clone());
        let waiter = std::thread::spawn(move || {
            let other = Store::open(&root).unwrap();
            let _lock = other.journal().lock_key(&key("k")).unwrap();
            flag.load(Ordering::SeqCst)
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        released.store(true, Ordering::SeqCst);
        drop(held);
        assert!(
            waiter.join().unwrap(),
            "the waiter got the lock before it was released"
        );
    }

    #[test]
    fn removing_an_unheld_lock_file_keeps_exclusion() {
        let (_dir, store) = workspace();
        let path = store
            .journal()
            .lock_key(&key("k"))
            .unwrap()
            .path()
            .to_path_buf();
        assert!(super::remove_if_unheld(&path));
        let held = store.journal().lock_key(&key("k")).unwrap();
        assert!(!super::remove_if_unheld(&path), "a held lock file is kept");
        assert!(store.journal().try_lock_key(&key("k")).unwrap().is_none());
        drop(held);
    }
}
