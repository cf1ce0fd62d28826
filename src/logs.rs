//! Reading a task's log for people: a bounded excerpt, whatever the log's size.
//!
//! A failing task's log can be gigabytes (a progress bar without newlines, a
//! loop printing an error), and its excerpt goes into the failure message,
//! the state database, `status` and every `failed` event. So an excerpt
//! reads at most [`HEAD_SCAN`] bytes from the start and [`TAIL_WINDOW`] from
//! the end, and holds at most [`MAX_EXCERPT`] bytes: the first line that
//! looks like an error (it often names the cause), then the last lines.
//! The message always names the full log's path besides.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// How many of the log's last lines an excerpt shows.
pub(crate) const TAIL_LINES: usize = 15;
/// The most bytes of one line an excerpt keeps.
const MAX_LINE: usize = 240;
/// The most bytes an excerpt holds.
pub(crate) const MAX_EXCERPT: usize = 4096;
/// How much of the log's end is read for its last lines.
const TAIL_WINDOW: u64 = 64 * 1024;
/// How much of the log's start is searched for its first error line.
const HEAD_SCAN: u64 = 1024 * 1024;

/// The last `max` bytes of a file, and whether anything came before them.
pub(crate) fn tail_bytes(path: &Path, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(max);
    f.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity((len - from) as usize);
    f.take(max).read_to_end(&mut bytes)?;
    Ok((bytes, from > 0))
}

/// The excerpt of the log at `path` for an error message: empty when the
/// log cannot be read or is empty.
pub(crate) fn excerpt(path: &Path) -> String {
    excerpt_of(path, TAIL_LINES).unwrap_or_default()
}

fn excerpt_of(path: &Path, lines: usize) -> io::Result<String> {
    let (tail, cut) = tail_bytes(path, TAIL_WINDOW)?;
    let text = String::from_utf8_lossy(&tail);
    let mut all: Vec<&str> = text.lines().collect();
    if cut && all.len() > 1 {
        all.remove(0); // the first line of the window is only a part of one
    }
    let last: Vec<String> = all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| clip(l))
        .collect();
    let mut out = String::new();
    let shown_from_start = !cut && all.len() <= lines;
    if !shown_from_start {
        if let Some(first) = first_error_line(path)? {
            let first = clip(&first);
            if !last.contains(&first) {
                out.push_str(&first);
                out.push_str("\n…\n");
            }
        }
    }
    for line in &last {
        if out.len() + line.len() + 1 > MAX_EXCERPT {
            // Keep the end: drop from the front of the tail.
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    if out.len() > MAX_EXCERPT {
        out.truncate(floor_char_boundary(&out, MAX_EXCERPT));
    }
    Ok(out.trim_end_matches('\n').to_string())
}

/// The first line in the log's first [`HEAD_SCAN`] bytes that reads like an
/// error (`error`, `exception`, `traceback`, `fatal`, `panicked`), clipped.
fn first_error_line(path: &Path) -> io::Result<Option<String>> {
    let mut head = Vec::new();
    File::open(path)?.take(HEAD_SCAN).read_to_end(&mut head)?;
    let text = String::from_utf8_lossy(&head);
    let markers = ["error", "exception", "traceback", "fatal", "panicked"];
    Ok(text
        .lines()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            markers.iter().any(|m| l.contains(m))
        })
        .map(clip))
}

/// A line cut to [`MAX_LINE`] bytes (at a character boundary), marked `…` when cut.
fn clip(line: &str) -> String {
    if line.len() <= MAX_LINE {
        return line.to_string();
    }
    let end = floor_char_boundary(line, MAX_LINE);
    format!("{}…", &line[..end])
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i.min(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(text: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.log");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_short_log_is_shown_whole() {
        let (_d, p) = log(b"one\ntwo\nerror: three\n");
        assert_eq!(excerpt(&p), "one\ntwo\nerror: three");
    }

    #[test]
    fn a_long_log_shows_its_first_error_line_and_its_last_lines() {
        let mut text = String::from("starting\nTraceback (most recent call last):\n");
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        let (_d, p) = log(text.as_bytes());
        let e = excerpt(&p);
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines[0], "Traceback (most recent call last):");
        assert_eq!(lines[1], "…");
        assert_eq!(lines[2], "line 85");
        assert_eq!(*lines.last().unwrap(), "line 99");
        assert_eq!(lines.len(), 2 + TAIL_LINES);
    }

    #[test]
    fn a_huge_log_without_newlines_gives_a_bounded_excerpt() {
        let (_d, p) = log(&vec![b'x'; 20_000_000]);
        let e = excerpt(&p);
        assert!(e.len() <= MAX_EXCERPT, "{} bytes", e.len());
        assert!(e.starts_with("xxx"));
        assert!(e.ends_with('…'), "{e}");
    }

    #[test]
    fn tail_bytes_reads_only_the_end() {
        let (_d, p) = log(b"0123456789");
        assert_eq!(tail_bytes(&p, 4).unwrap(), (b"6789".to_vec(), true));
        assert_eq!(tail_bytes(&p, 40).unwrap(), (b"0123456789".to_vec(), false));
    }

    #[test]
    fn a_missing_log_gives_nothing() {
        assert_eq!(excerpt(Path::new("/nonexistent/vitgraph/task.log")), "");
    }
}
