//! Low-level file operations of the store: stat snapshots, content hashing,
//! fsync of files and directories, and reflink-or-copy.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::SystemTime;

use crate::hash::ContentHash;

/// Files at least this large are hashed through mmap with blake3's parallel mode.
pub(crate) const LARGE_FILE: u64 = 1 << 20;

/// The parts of a file's stat that change when its content may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
}

impl Stat {
    pub(crate) fn of(meta: &Metadata) -> Stat {
        Stat {
            size: meta.size(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
            ctime_ns: meta
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.ctime_nsec()),
            inode: meta.ino(),
        }
    }
}

/// Hashes a file's content; `size` decides between a plain read and mmap + rayon.
/// Flushes the whole file system that holds `dir` (`syncfs(2)`): one call
/// makes every file written there durable, however many.
pub(crate) fn sync_filesystem_of(dir: &Path) -> Result<(), super::error::StoreError> {
    let file = File::open(dir).map_err(|e| super::error::StoreError::io("open", dir, e))?;
    // SAFETY: syncfs(2) on a valid descriptor we own for the call's duration.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(super::error::StoreError::io(
            "flush the file system of",
            dir,
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

pub(crate) fn hash_contents(path: &Path, size: u64) -> io::Result<ContentHash> {
    let mut hasher = blake3::Hasher::new();
    if size >= LARGE_FILE {
        hasher.update_mmap_rayon(path)?;
    } else {
        hasher.update(&fs::read(path)?);
    }
    Ok(ContentHash(*hasher.finalize().as_bytes()))
}

/// Creates `dst` (which must not exist) with `src`'s content: a reflink where
/// the file system supports it (btrfs, XFS), else a copy. Never a hard link:
/// users edit materialized outputs, and objects must stay intact. With
/// `mtime`, the new file's modification time is set to it.
pub(crate) fn clone_or_copy(src: &Path, dst: &Path, mtime: Option<SystemTime>) -> io::Result<()> {
    let mut from = File::open(src)?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(dst)?;
    // SAFETY: both descriptors are open for the duration of the call; FICLONE
    // takes the source descriptor as its argument.
    let rc = unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) };
    if rc != 0 {
        // Not supported here (or across file systems): copy. std uses
        // copy_file_range, which the kernel may still turn into a server-side copy.
        io::copy(&mut from, &mut to)?;
    }
    match mtime {
        Some(mtime) => to.set_modified(mtime),
        None => Ok(()),
    }
}

/// Makes a file read-only for everyone (objects are never written after commit).
pub(crate) fn make_read_only(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o444))
}

pub(crate) use crate::clock::{now_ms, now_ns};

/// Removes a directory tree, also when some files in it are read-only.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_files_hash_like_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        for size in [0usize, 5, LARGE_FILE as usize + 3] {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            let path = dir.path().join(format!("f{size}"));
            fs::write(&path, &bytes).unwrap();
            assert_eq!(
                hash_contents(&path, size as u64).unwrap(),
                ContentHash::of_bytes(&bytes)
            );
        }
    }

    #[test]
    fn clone_or_copy_gives_a_writable_independent_file() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let dst = dir.path().join("dst");
        fs::write(&src, b"object").unwrap();
        make_read_only(&src).unwrap();
        let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        clone_or_copy(&src, &dst, Some(mtime)).unwrap();
        assert_eq!(fs::metadata(&dst).unwrap().modified().unwrap(), mtime);
        assert_eq!(fs::read(&dst).unwrap(), b"object");
        fs::write(&dst, b"edited").unwrap();
        assert_eq!(fs::read(&src).unwrap(), b"object");
        assert!(
            clone_or_copy(&src, &dst, None).is_err(),
            "an existing destination is never overwritten"
        );
    }
}
