//! A remote's files and how they are written, behind one interface
//! ([`Backend`]) that push, pull, `remote verify`, `remote gc` and
//! `status --remote` use; and the directory remote (a shared or network
//! file system), the first of its kinds (S3-compatible object storage is
//! in `remote_s3`).
//!
//! ```text
//! REMOTE/objects/<2 hex>/<62 hex>   one read-only file per content, as in cache/objects
//! REMOTE/runs/<64 hex>.json         one run record per key (as a bundle carries it)
//! REMOTE/tmp/                       files being written (directories only)
//! ```
//!
//! A folder's objects and records are each written into `tmp/` under a
//! name of their own (host, process, sequence) and hard-linked into place —
//! put-if-absent, so two machines pushing one object at once both succeed
//! and one copy stays. Records are linked only after the file system has
//! been flushed (`syncfs`, objects and records' bytes together), so a
//! record on the remote always has its objects, whatever process dies when.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::arrival::Checked;
use super::fileio::make_read_only;
use crate::hash::ContentHash;

/// The parts of a remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    Runs,
    Objects,
    /// Files being written (a directory remote's `tmp/`).
    Tmp,
}

impl Area {
    pub(crate) fn dir(self) -> &'static str {
        match self {
            Area::Runs => "runs",
            Area::Objects => "objects",
            Area::Tmp => "tmp",
        }
    }
}

/// One file on a remote: its name under the remote (`runs/<key>.json`,
/// `objects/ab/…`), the hash its name gives (a record's key, an object's
/// content), its size and when it was last written (or touched).
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub name: String,
    pub hash: Option<ContentHash>,
    pub size: u64,
    pub modified: Option<SystemTime>,
}

/// The name of a record or object under a remote.
pub(crate) fn record_name(key: &ContentHash) -> String {
    format!("runs/{}.json", key.to_hex())
}

pub(crate) fn object_name(hash: &ContentHash) -> String {
    let hex = hash.to_hex();
    format!("objects/{}/{}", &hex[..2], &hex[2..])
}

/// The hash a listed name gives: a record's key or an object's content.
pub(crate) fn hash_of_name(name: &str) -> Option<ContentHash> {
    if let Some(file) = name.strip_prefix("runs/") {
        return file.strip_suffix(".json").and_then(ContentHash::from_hex);
    }
    let rest = name.strip_prefix("objects/")?;
    let (shard, file) = rest.split_once('/')?;
    ContentHash::from_hex(&format!("{shard}{file}"))
}

/// What a remote can do. Every error is an `io::Error`: `NotFound` for a
/// file that is not there, `InvalidData` for bytes that do not match their
/// name; the caller names the remote.
pub(crate) trait Backend {
    /// Where the remote is, for messages: its folder or URL.
    fn location(&self) -> String;
    /// Where one of its files is, for messages.
    fn location_of(&self, name: &str) -> String;
    /// Whether the remote is there at all (a folder that exists, a bucket
    /// that answers): what a missing area means.
    fn exists(&self) -> bool;
    /// Makes the remote ready to be written (a folder: created).
    fn prepare_write(&self) -> io::Result<()>;
    /// The files of one area; an area nothing was written to yet is empty.
    fn list(&self, area: Area) -> io::Result<Vec<Listed>>;
    /// One file's bytes (records: small).
    fn read(&self, name: &str) -> io::Result<Vec<u8>>;
    /// One file, to read as it arrives.
    fn open(&self, name: &str) -> io::Result<Box<dyn Read + '_>>;
    /// The hash of one file's bytes (`remote verify`).
    fn hash_of(&self, name: &str) -> io::Result<ContentHash> {
        let mut hasher = blake3::Hasher::new();
        io::copy(&mut self.open(name)?, &mut hasher)?;
        Ok(ContentHash(*hasher.finalize().as_bytes()))
    }
    /// The sizes of those of `hashes` the remote holds as objects.
    fn object_sizes(&self, hashes: &[ContentHash]) -> io::Result<HashMap<ContentHash, u64>>;
    /// Marks objects a push relies on as recently used (`remote gc`'s
    /// grace period spares them); best effort.
    fn touch_objects(&self, hashes: &[ContentHash]);
    /// Writes each local file as the object its hash names, unless there
    /// already (put-if-absent); the bytes are checked against the name as
    /// they are read (`InvalidData` naming the file when they differ,
    /// before anything of it is visible). The number written and their
    /// bytes.
    fn put_objects(&self, objects: &[(ContentHash, PathBuf)]) -> io::Result<(usize, u64)>;
    /// Writes run records, each put-if-absent, once every object written
    /// before is durable; how many were new.
    fn put_records(&self, records: &[(ContentHash, Vec<u8>)]) -> io::Result<usize>;
    /// Removes one file; one already gone is no error.
    fn remove(&self, name: &str) -> io::Result<()>;
}

/// A remote in a folder.
pub(crate) struct DirRemote {
    pub root: PathBuf,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl DirRemote {
    /// A file in `tmp/` no other writer uses.
    fn tmp_file(&self) -> PathBuf {
        let host = crate::host::env::hostname();
        self.root.join("tmp").join(format!(
            "{host}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// Writes `tmp` into place at `dest` unless something is there already
    /// (put-if-absent); removes `tmp` either way.
    fn link(&self, tmp: &Path, dest: &Path) -> io::Result<bool> {
        if let Some(dir) = dest.parent() {
            fs::create_dir_all(dir)?;
        }
        let result = match fs::hard_link(tmp, dest) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        };
        let _ = fs::remove_file(tmp);
        result
    }

    fn sync(&self) -> io::Result<()> {
        super::fileio::sync_filesystem_of(&self.root).map_err(io::Error::other)
    }

    /// Copies one local file to `tmp/`, checked against `hash`.
    fn stage_object(&self, hash: &ContentHash, local: &Path) -> io::Result<PathBuf> {
        let tmp = self.tmp_file();
        let mut reader = Checked::new(fs::File::open(local)?);
        {
            // Flushed with the rest by `syncfs` before any record names it.
            let mut file = fs::File::create(&tmp)?;
            io::copy(&mut reader, &mut file)?;
        }
        if reader.hasher.finalize().as_bytes() != &hash.0 {
            let _ = fs::remove_file(&tmp);
            return Err(mismatch(local));
        }
        make_read_only(&tmp)?;
        Ok(tmp)
    }
}

/// The error of a local object whose bytes do not match its name.
pub(crate) fn mismatch(local: &Path) -> io::Error {
    // The message is the path: the caller names the damage.
    io::Error::new(io::ErrorKind::InvalidData, local.display().to_string())
}

impl Backend for DirRemote {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    fn location_of(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    fn exists(&self) -> bool {
        self.root.is_dir()
    }

    fn prepare_write(&self) -> io::Result<()> {
        fs::create_dir_all(self.root.join("tmp"))
    }

    fn list(&self, area: Area) -> io::Result<Vec<Listed>> {
        let dir = self.root.join(area.dir());
        if !dir.exists() && self.root.is_dir() {
            return Ok(Vec::new());
        }
        let depth = if area == Area::Objects { 2 } else { 1 };
        let mut out = Vec::new();
        for entry in walkdir::WalkDir::new(&dir)
            .min_depth(depth)
            .max_depth(depth)
        {
            let entry = entry?;
            let rel = entry
                .path()
                .strip_prefix(&self.root)
                .unwrap_or(entry.path());
            let name = rel.to_string_lossy().into_owned();
            if area == Area::Runs && !name.ends_with(".json") {
                continue;
            }
            let meta = entry.metadata().ok();
            out.push(Listed {
                hash: hash_of_name(&name),
                name,
                size: meta.as_ref().map_or(0, |m| m.len()),
                modified: meta.and_then(|m| m.modified().ok()),
            });
        }
        Ok(out)
    }

    fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        fs::read(self.root.join(name))
    }

    fn open(&self, name: &str) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(fs::File::open(self.root.join(name))?))
    }

    fn hash_of(&self, name: &str) -> io::Result<ContentHash> {
        // As the store hashes its own files: large ones mapped, in parallel.
        let path = self.root.join(name);
        super::fileio::hash_contents(&path, fs::metadata(&path)?.len())
    }

    fn object_sizes(&self, hashes: &[ContentHash]) -> io::Result<HashMap<ContentHash, u64>> {
        let mut out = HashMap::new();
        for hash in hashes {
            match fs::metadata(self.root.join(object_name(hash))) {
                Ok(m) => {
                    out.insert(*hash, m.len());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn touch_objects(&self, hashes: &[ContentHash]) {
        for hash in hashes {
            touch(&self.root.join(object_name(hash)));
        }
    }

    fn put_objects(&self, objects: &[(ContentHash, PathBuf)]) -> io::Result<(usize, u64)> {
        fs::create_dir_all(self.root.join("tmp"))?;
        let (mut added, mut bytes) = (0, 0);
        for (hash, local) in objects {
            let tmp = self.stage_object(hash, local)?;
            let size = fs::metadata(&tmp)?.len();
            if self.link(&tmp, &self.root.join(object_name(hash)))? {
                added += 1;
                bytes += size;
            }
        }
        Ok((added, bytes))
    }

    fn put_records(&self, records: &[(ContentHash, Vec<u8>)]) -> io::Result<usize> {
        fs::create_dir_all(self.root.join("tmp"))?;
        // The records are written, then the objects and the records'
        // bytes flushed (one `syncfs`), and only then linked into place.
        let mut staged = Vec::with_capacity(records.len());
        for (key, json) in records {
            let tmp = self.tmp_file();
            fs::write(&tmp, json)?;
            make_read_only(&tmp)?;
            staged.push((tmp, self.root.join(record_name(key))));
        }
        self.sync()?;
        let mut added = 0;
        for (tmp, dest) in &staged {
            if self.link(tmp, dest)? {
                added += 1;
            }
        }
        self.sync()?;
        Ok(added)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.root.join(name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// Sets a file's modification time to now, if this user may.
fn touch(path: &Path) {
    if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid NUL-terminated path; a null `times` means now.
        unsafe {
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_back_their_hashes() {
        let h = ContentHash([7; 32]);
        assert_eq!(hash_of_name(&record_name(&h)), Some(h));
        assert_eq!(hash_of_name(&object_name(&h)), Some(h));
        assert_eq!(hash_of_name("objects/zz/nothex"), None);
        assert_eq!(hash_of_name("tmp/host-1-2"), None);
    }
}
