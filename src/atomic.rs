//! Writing a file whole or not at all: the bytes go to a hidden temporary
//! name in the same folder, which is then renamed over the destination. A
//! crash leaves the old file or the new one, never half of one. Every layer
//! writes its files through here and maps the `io::Error` to its own error.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A temporary name beside `path`, unique within this process and across
/// processes: for writers that can only write to a path (SQLite, an image
/// encoder, an external tool), which then rename it over `path` themselves.
pub(crate) fn temp_name(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Writes `bytes` to `path` (creating its folder).
pub(crate) fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Writes `bytes` to `path` durably: the file's data is synced before the
/// rename, and the folder after it, so once this returns the file survives a
/// power cut — for records another machine reads over a shared file system.
pub(crate) fn write_durable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit_durable()
}

/// A file being written under a temporary name; [`AtomicFile::commit`]
/// renames it into place, dropping it uncommitted removes it.
pub(crate) struct AtomicFile {
    file: Option<File>,
    temp: PathBuf,
    dest: PathBuf,
}

impl AtomicFile {
    /// Starts writing `dest` (creating its folder).
    pub(crate) fn create(dest: &Path) -> io::Result<AtomicFile> {
        if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let temp = temp_name(dest);
        let file = File::create(&temp)?;
        Ok(AtomicFile {
            file: Some(file),
            temp,
            dest: dest.to_path_buf(),
        })
    }

    /// The open file, for writers that take a `File`.
    pub(crate) fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("an uncommitted AtomicFile has its file")
    }

    /// Renames the file into place.
    pub(crate) fn commit(mut self) -> io::Result<()> {
        drop(self.file.take());
        std::fs::rename(&self.temp, &self.dest)
    }

    /// [`AtomicFile::commit`], with the data synced first and the folder after.
    pub(crate) fn commit_durable(mut self) -> io::Result<()> {
        if let Some(f) = self.file.take() {
            f.sync_all()?;
        }
        std::fs::rename(&self.temp, &self.dest)?;
        if let Some(dir) = self.dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Committed files have been renamed: this only removes an abandoned temporary.
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_appears_whole_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.txt");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        write_durable(&dir.path().join("sub/b.txt"), b"three").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(entries(&dir.path().join("sub")), ["a.txt", "b.txt"]);
    }

    #[test]
    fn an_abandoned_file_leaves_the_old_one_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write(&path, b"old").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"new, half written").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["a.txt"]);
    }
}
