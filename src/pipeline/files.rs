//! Stages over files: `files: "archive/{rq}/gpu{gpu}_{model}.nsys-rep"`.
//!
//! A pattern is a workspace-relative path whose segments may hold `*` (any
//! text within the segment), `?` (one character), `[…]` (a character class,
//! `[!…]` negated), `**` (a whole segment: zero or more folders) and named
//! captures `{name}` (non-empty text within the segment; where a segment has
//! several, each takes the shortest text that lets the rest match). The
//! walk reads every folder the pattern can reach once, follows symbolic
//! links (never into a folder it is already inside), skips names starting
//! with `.` unless the pattern spells the dot, and skips the workspace's own
//! `out/` and `cache/` unless the pattern names them.
//!
//! Each folder is stat'ed before it is listed; the stats go into the graph
//! ([`crate::graph::Listing`]) so the no-op snapshot can tell in one `stat`
//! per folder that no file came or went.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::de::Param;
use super::expand::Combo;
use super::syntax::{Kind, Node, Span};
use super::{PipelineError, Sources};
use crate::graph::Listing;
use crate::value::Value;

/// A parsed `files:` pattern.
#[derive(Debug)]
pub(super) struct Pattern {
    pub text: String,
    pub span: Span,
    segments: Vec<Segment>,
    /// Capture names in the order they first appear.
    pub captures: Vec<Capture>,
}

#[derive(Debug, Clone)]
pub(super) struct Capture {
    pub name: String,
    /// Where it is written (the `{name}`), for errors.
    pub span: Span,
}

#[derive(Debug)]
enum Segment {
    /// `**`: zero or more folders.
    Globstar,
    /// A name without wildcards or captures.
    Literal(String),
    Match(Vec<Tok>),
}

#[derive(Debug)]
enum Tok {
    Char(char),
    Star,
    Any,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    /// An index into `Pattern::captures`.
    Capture(usize),
}

/// Names a capture may not take: they mean something else in a task.
const RESERVED: &[&str] = &["file", "out", "needs"];

/// A pattern must say something, relative to the workspace.
fn check_relative(
    sources: &Sources,
    node: &Node,
    text: &str,
    first: Span,
) -> Result<(), PipelineError> {
    if text.is_empty() {
        return Err(sources
            .error("`files` is empty", node.span, "no pattern")
            .with_help("write a workspace-relative pattern such as `\"archive/**/*.nsys-rep\"`"));
    }
    if text.starts_with('/') {
        return Err(sources
            .error(
                "`files` must be relative to the workspace",
                first,
                "an absolute path",
            )
            .with_help(
                "link the archive into the workspace (`ln -s /data/archive archive`) and write `files: \"archive/…\"`",
            ));
    }
    Ok(())
}

impl Pattern {
    /// Parses the string node of `files:`. `param_names`: the pipeline's
    /// params, which a capture may not shadow.
    pub(super) fn parse(
        sources: &Sources,
        node: &Node,
        param_names: &[&str],
    ) -> Result<Pattern, PipelineError> {
        let Kind::Str {
            value,
            raw_offset,
            escaped,
        } = &node.kind
        else {
            return Err(sources
                .error(
                    "`files` must be a path pattern",
                    node.span,
                    format!("found {}", node.kind.describe()),
                )
                .with_help("write `files: \"archive/{rq}/{model}.nsys-rep\"`"));
        };
        // A span inside the string when its text maps byte for byte.
        let at = |offset: usize, len: usize| -> Span {
            if *escaped {
                node.span
            } else {
                node.span.sub(*raw_offset as usize + offset, len)
            }
        };
        let text = value.as_str();
        check_relative(sources, node, text, at(0, 1))?;
        let mut captures: Vec<Capture> = Vec::new();
        let mut segments = Vec::new();
        let mut offset = 0;
        for seg in text.split('/') {
            let seg_at = offset;
            offset += seg.len() + 1;
            match seg {
                "" => {
                    return Err(sources
                        .error(
                            "`files` has an empty path segment",
                            at(seg_at.saturating_sub(1), 1),
                            "`//` or a trailing `/`",
                        )
                        .with_help(
                            "write each folder once, and end the pattern with a file name",
                        ));
                }
                "." | ".." => {
                    return Err(sources
                        .error(
                            format!("`files` may not use `{seg}`"),
                            at(seg_at, seg.len()),
                            "leaves or repeats a folder",
                        )
                        .with_help("write the path from the workspace root, without `.` or `..`; link an outside archive into the workspace"));
                }
                "**" => {
                    segments.push(Segment::Globstar);
                    continue;
                }
                _ => {}
            }
            let toks = parse_segment(sources, seg, seg_at, &at, &mut captures, param_names)?;
            if toks.iter().all(|t| matches!(t, Tok::Char(_))) {
                segments.push(Segment::Literal(seg.to_string()));
            } else {
                segments.push(Segment::Match(toks));
            }
        }
        if matches!(segments.last(), Some(Segment::Globstar)) {
            return Err(sources
                .error(
                    "`files` ends with `**`",
                    node.span,
                    "matches folders, not files",
                )
                .with_help("end the pattern with a file name pattern, e.g. `**/*.sqlite`"));
        }
        Ok(Pattern {
            text: text.to_string(),
            span: node.span,
            segments,
            captures,
        })
    }
}

fn parse_segment(
    sources: &Sources,
    seg: &str,
    seg_at: usize,
    at: &dyn Fn(usize, usize) -> Span,
    captures: &mut Vec<Capture>,
    param_names: &[&str],
) -> Result<Vec<Tok>, PipelineError> {
    let mut toks = Vec::new();
    let mut chars = seg.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '*' => {
                if matches!(toks.last(), Some(Tok::Capture(_))) {
                    return Err(sources
                        .error(
                            "two wildcards side by side in `files`",
                            at(seg_at + i, 1),
                            "no text between this and the capture before",
                        )
                        .with_help(
                            "put literal text between a capture and `*`, or the split is ambiguous",
                        ));
                }
                if matches!(chars.peek(), Some((_, '*'))) {
                    return Err(sources
                        .error(
                            "`**` must be a whole path segment",
                            at(seg_at + i, 2),
                            "inside a name",
                        )
                        .with_help(
                            "write `**/` for any folders, or `*` for any text within a name",
                        ));
                }
                toks.push(Tok::Star);
            }
            '?' => toks.push(Tok::Any),
            '[' => {
                let mut negated = false;
                let mut ranges = Vec::new();
                let mut closed = false;
                if matches!(chars.peek(), Some((_, '!' | '^'))) {
                    negated = true;
                    chars.next();
                }
                let mut first = true;
                while let Some((_, c)) = chars.next() {
                    if c == ']' && !first {
                        closed = true;
                        break;
                    }
                    first = false;
                    let mut hi = c;
                    if matches!(chars.peek(), Some((_, '-'))) {
                        let mut ahead = chars.clone();
                        ahead.next();
                        if let Some((_, h)) = ahead.next().filter(|(_, h)| *h != ']') {
                            chars.next();
                            chars.next();
                            hi = h;
                        }
                    }
                    ranges.push((c, hi));
                }
                if !closed {
                    return Err(sources
                        .error(
                            "`[` without a closing `]` in `files`",
                            at(seg_at + i, 1),
                            "opened here",
                        )
                        .with_help("close the character class, e.g. `[0-9]`"));
                }
                toks.push(Tok::Class { ranges, negated });
            }
            '{' => {
                let rest = &seg[i + 1..];
                let Some(close) = rest.find('}') else {
                    return Err(sources
                        .error(
                            "`{` without a closing `}` in `files`",
                            at(seg_at + i, 1),
                            "opened here",
                        )
                        .with_help("write a capture as `{name}`; captures hold no `/`"));
                };
                let name = &rest[..close];
                let span = at(seg_at + i, close + 2);
                if name.is_empty() {
                    return Err(sources
                        .error("a capture without a name in `files`", span, "empty `{}`")
                        .with_help(
                            "name it: `{model}` makes the matched text the node's param `model`",
                        ));
                }
                if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    || name.starts_with(|c: char| c.is_ascii_digit())
                {
                    return Err(sources
                        .error(format!("`{{{name}}}` is not a capture name"), span, "not a name")
                        .with_help("a capture name is letters, digits and `_`, starting with a letter or `_`"));
                }
                if RESERVED.contains(&name) {
                    return Err(sources
                        .error(
                            format!("a capture may not be named `{name}`"),
                            span,
                            "reserved",
                        )
                        .with_help(format!(
                            "`${{{name}}}` already means something in a task: choose another name"
                        )));
                }
                if param_names.contains(&name) {
                    return Err(sources
                        .error(
                            format!("capture `{name}` shadows the pipeline param `{name}`"),
                            span,
                            "same name as a param",
                        )
                        .with_help(format!("rename the capture (e.g. `{{{name}_file}}`) or the param: a node cannot have both")));
                }
                let idx = match captures.iter().position(|c| c.name == name) {
                    Some(idx) => idx,
                    None => {
                        captures.push(Capture {
                            name: name.to_string(),
                            span,
                        });
                        captures.len() - 1
                    }
                };
                if matches!(toks.last(), Some(Tok::Capture(_) | Tok::Star)) {
                    return Err(sources
                        .error("two wildcards side by side in `files`", span, "no text between this and the one before")
                        .with_help("put literal text between captures (`{gpu}_{model}`), or the split is ambiguous"));
                }
                for _ in 0..close + 1 {
                    chars.next();
                }
                toks.push(Tok::Capture(idx));
            }
            '}' => {
                return Err(sources
                    .error(
                        "`}` without an opening `{` in `files`",
                        at(seg_at + i, 1),
                        "here",
                    )
                    .with_help("write a capture as `{name}`"));
            }
            c => toks.push(Tok::Char(c)),
        }
    }
    Ok(toks)
}

/// One matched file: its path relative to the workspace, and each capture's
/// text (by index into [`Pattern::captures`]), with every place a capture
/// appears in.
#[derive(Debug, Clone)]
pub(super) struct Matched {
    pub rel: String,
    pub values: Vec<Vec<String>>,
}

impl Matched {
    /// Each capture's value, as a param value: a number when the text is one
    /// written the way the number prints (`8`, `0.5`; not `08` or `1e3`).
    pub(super) fn value(&self, idx: usize) -> Value {
        let text = &self.values[idx][0];
        if let Ok(i) = text.parse::<i64>() {
            if i.to_string() == *text {
                return Value::Int(i);
            }
        }
        if let Ok(x) = text.parse::<f64>() {
            let v = Value::Float(x);
            if x.is_finite() && v.to_string() == *text {
                return v;
            }
        }
        Value::Str(text.clone())
    }
}

/// What a walk found.
#[derive(Debug, Default)]
pub(super) struct Walk {
    pub matched: Vec<Matched>,
    pub listings: Vec<Listing>,
    /// The deepest existing folder on the pattern's literal prefix (for the
    /// warning when nothing matched).
    pub nearest: String,
}

/// Finds every file under `root` that `pattern` matches, sorted by path.
pub(super) fn walk(root: &Path, pattern: &Pattern) -> Result<Walk, String> {
    let mut w = Walk::default();
    let mut nearest = String::new();
    for seg in &pattern.segments {
        let Segment::Literal(name) = seg else { break };
        let next = join(&nearest, name);
        if root.join(&next).is_dir() {
            nearest = next;
        } else {
            break;
        }
    }
    w.nearest = if nearest.is_empty() {
        ".".into()
    } else {
        nearest
    };
    let mut walker = Walker {
        root,
        pattern,
        out: &mut w,
        listed: HashSet::new(),
        inside: Vec::new(),
    };
    let bound = vec![Vec::new(); pattern.captures.len()];
    walker.descend("", 0, &bound)?;
    w.matched.sort_by(|a, b| a.rel.cmp(&b.rel));
    w.matched.dedup_by(|a, b| a.rel == b.rel);
    w.listings.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(w)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

struct Walker<'a> {
    root: &'a Path,
    pattern: &'a Pattern,
    out: &'a mut Walk,
    /// Folders already stat'ed and listed (by path).
    listed: HashSet<String>,
    /// (device, inode) of the folders the walk is inside: a link back to one is a loop.
    inside: Vec<(u64, u64)>,
}

/// One entry of a folder: its name and whether it is (or links to) a folder or a file.
struct Entry {
    name: String,
    dir: bool,
    file: bool,
}

impl Walker<'_> {
    /// Matches segments `seg..` below the folder `dir` (relative; "" is the root).
    fn descend(&mut self, dir: &str, seg: usize, bound: &[Vec<String>]) -> Result<(), String> {
        let last = seg + 1 == self.pattern.segments.len();
        match &self.pattern.segments[seg] {
            Segment::Literal(name) => {
                let rel = join(dir, name);
                let Ok(meta) = fs::metadata(self.root.join(&rel)) else {
                    return Ok(());
                };
                if last {
                    if meta.is_file() {
                        self.matched(rel, bound);
                    }
                } else if meta.is_dir() {
                    self.enter(&meta, |w| w.descend(&rel, seg + 1, bound))?;
                }
            }
            Segment::Match(toks) => {
                let toplevel = dir.is_empty();
                for e in self.list(dir)? {
                    if skipped(&e.name, toks, toplevel) {
                        continue;
                    }
                    let Some(found) = match_segment(toks, &e.name, self.pattern.captures.len())
                    else {
                        continue;
                    };
                    let mut now = bound.to_vec();
                    for (i, v) in found.into_iter().enumerate() {
                        now[i].extend(v);
                    }
                    let rel = join(dir, &e.name);
                    if last {
                        if e.file {
                            self.matched(rel, &now);
                        }
                    } else if e.dir {
                        let Ok(meta) = fs::metadata(self.root.join(&rel)) else {
                            continue;
                        };
                        self.enter(&meta, |w| w.descend(&rel, seg + 1, &now))?;
                    }
                }
            }
            Segment::Globstar => {
                // Zero folders, then one more folder with `**` still to match.
                self.descend(dir, seg + 1, bound)?;
                let toplevel = dir.is_empty();
                for e in self.list(dir)? {
                    if !e.dir
                        || e.name.starts_with('.')
                        || (toplevel && WORKSPACE_OWN.contains(&e.name.as_str()))
                    {
                        continue;
                    }
                    let rel = join(dir, &e.name);
                    let Ok(meta) = fs::metadata(self.root.join(&rel)) else {
                        continue;
                    };
                    self.enter(&meta, |w| w.descend(&rel, seg, bound))?;
                }
            }
        }
        Ok(())
    }

    /// Runs `f` inside the folder `rel`, unless the walk is inside it already
    /// (a link that loops).
    fn enter(
        &mut self,
        meta: &fs::Metadata,
        f: impl FnOnce(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        let id = (meta.dev(), meta.ino());
        if self.inside.contains(&id) {
            return Ok(());
        }
        self.inside.push(id);
        let r = f(self);
        self.inside.pop();
        r
    }

    fn matched(&mut self, rel: String, bound: &[Vec<String>]) {
        self.out.matched.push(Matched {
            rel,
            values: bound.to_vec(),
        });
    }

    /// The entries of `dir`, noting its stat (taken before the listing, so a
    /// file added while it is read changes the stat the snapshot checks).
    fn list(&mut self, dir: &str) -> Result<Vec<Entry>, String> {
        let path = if dir.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(dir)
        };
        let shown = if dir.is_empty() { "." } else { dir };
        let at_ns = crate::store::now_ns();
        let meta = fs::metadata(&path).map_err(|e| format!("cannot read folder `{shown}`: {e}"))?;
        if self.listed.insert(dir.to_string()) {
            self.out.listings.push(Listing {
                rel: if dir.is_empty() {
                    ".".into()
                } else {
                    dir.to_string()
                },
                ..Listing::of(&meta, at_ns)
            });
        }
        let mut entries = Vec::new();
        let reader =
            fs::read_dir(&path).map_err(|e| format!("cannot read folder `{shown}`: {e}"))?;
        for entry in reader {
            let entry = entry.map_err(|e| format!("cannot read folder `{shown}`: {e}"))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Ok(mut ty) = entry.file_type() else {
                continue;
            };
            if ty.is_symlink() {
                match fs::metadata(entry.path()) {
                    Ok(m) => ty = m.file_type(),
                    // A dangling link is no file.
                    Err(_) => continue,
                }
            }
            entries.push(Entry {
                name,
                dir: ty.is_dir(),
                file: ty.is_file(),
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }
}

/// The workspace's own folders, which a wildcard at the top level never enters.
const WORKSPACE_OWN: &[&str] = &["out", "cache"];

/// Whether a wildcard segment passes over `name`: hidden names unless the
/// segment starts with a literal `.`, and the workspace's own folders.
fn skipped(name: &str, toks: &[Tok], toplevel: bool) -> bool {
    (name.starts_with('.') && !matches!(toks.first(), Some(Tok::Char('.'))))
        || (toplevel && WORKSPACE_OWN.contains(&name))
}

/// Matches one name against a segment's tokens; each capture's texts (one
/// per place it appears in the segment) when it matches.
fn match_segment(toks: &[Tok], name: &str, captures: usize) -> Option<Vec<Vec<String>>> {
    let chars: Vec<char> = name.chars().collect();
    let mut found: Vec<Vec<String>> = vec![Vec::new(); captures];
    m(toks, &chars, &mut found).then_some(found)
}

fn m(toks: &[Tok], s: &[char], found: &mut Vec<Vec<String>>) -> bool {
    let Some((tok, rest)) = toks.split_first() else {
        return s.is_empty();
    };
    match tok {
        Tok::Char(c) => s.first() == Some(c) && m(rest, &s[1..], found),
        Tok::Any => !s.is_empty() && m(rest, &s[1..], found),
        Tok::Class { ranges, negated } => {
            let Some(&c) = s.first() else { return false };
            let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
            inside != *negated && m(rest, &s[1..], found)
        }
        Tok::Star => (0..=s.len()).any(|n| m(rest, &s[n..], found)),
        Tok::Capture(idx) => {
            for n in 1..=s.len() {
                let before = found[*idx].len();
                found[*idx].push(s[..n].iter().collect());
                if m(rest, &s[n..], found) {
                    return true;
                }
                found[*idx].truncate(before);
            }
            false
        }
    }
}

/// The nodes of a `files:` stage: one combination (its id params) and file
/// per matching file, sorted by path.
pub(super) struct FileNodes {
    pub combos: Vec<(Combo, String)>,
    pub listings: Vec<Listing>,
    /// When nothing matched: what to say, with the place.
    pub warning: Option<String>,
}

/// Walks the pattern written at `node` and turns each match into a
/// combination: its captures, in pattern order (or `file` when there are
/// none), less those `exclude` removes.
pub(super) fn expand(
    root: &Path,
    sources: &Sources,
    stage: &str,
    node: &Node,
    exclude: &[Node],
    param_names: &[&str],
) -> Result<FileNodes, PipelineError> {
    let pattern = Pattern::parse(sources, node, param_names)?;
    let walk = walk(root, &pattern).map_err(|e| {
        sources
            .error(
                format!("cannot list the files of stage `{stage}`: {e}"),
                node.span,
                "this pattern",
            )
            .with_help("make the folder readable, or change the pattern")
    })?;
    let mut combos = Vec::with_capacity(walk.matched.len());
    for m in &walk.matched {
        let mut combo = Combo::with_capacity(pattern.captures.len().max(1));
        for (i, c) in pattern.captures.iter().enumerate() {
            if let Some(other) = m.values[i].iter().find(|v| **v != m.values[i][0]) {
                return Err(sources
                    .error(
                        format!(
                            "capture `{}` reads `{}` and `{other}` in `{}`",
                            c.name, m.values[i][0], m.rel
                        ),
                        c.span,
                        "used more than once",
                    )
                    .with_help("the places a capture appears must agree: rename the file, or give the second place its own capture name"));
            }
            combo.push(Param {
                name: c.name.clone(),
                node: node_of(m.value(i), c.span),
            });
        }
        if pattern.captures.is_empty() {
            combo.push(Param {
                name: "file".into(),
                node: node_of(Value::Str(m.rel.clone()), pattern.span),
            });
        }
        combos.push((combo, m.rel.clone()));
    }
    let names: Vec<&str> = pattern.captures.iter().map(|c| c.name.as_str()).collect();
    super::expand::exclude_files(sources, &names, exclude, &mut combos)?;
    let warning = walk.matched.is_empty().then(|| {
        format!(
            "{}: stage `{stage}`: `files: \"{}\"` matches no file (the deepest folder of it that exists is `{}`); the stage has no nodes",
            sources.location(pattern.span),
            pattern.text,
            walk.nearest
        )
    });
    Ok(FileNodes {
        combos,
        listings: walk.listings,
        warning,
    })
}

/// A param value as the node a combination holds, placed at `span`.
fn node_of(v: Value, span: Span) -> Node {
    let kind = match v {
        Value::Int(i) => Kind::Int(i),
        Value::Float(x) => Kind::Float(x),
        Value::Bool(b) => Kind::Bool(b),
        other => Kind::Str {
            value: other.to_string(),
            raw_offset: 0,
            escaped: true,
        },
    };
    Node { kind, span }
}

/// A folder's stat as a listing records it (`rel` left empty), taken at `at_ns`.
#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> Result<Pattern, PipelineError> {
        let mut sources = Sources::default();
        let src_text = format!("\"{text}\"");
        let src = sources.add("p.ron".into(), src_text.clone());
        let node = super::super::syntax::parse(src, &src_text).unwrap();
        Pattern::parse(&sources, &node, &["samples"])
    }

    fn found(text: &str, name: &str) -> Option<Vec<String>> {
        let p = pattern(text).unwrap();
        let Segment::Match(toks) = &p.segments[0] else {
            return Some(vec![]);
        };
        match_segment(toks, name, p.captures.len()).map(|v| v.into_iter().flatten().collect())
    }

    #[test]
    fn captures_take_the_shortest_text_that_lets_the_rest_match() {
        assert_eq!(
            found(
                "gpu{gpu}_numa{numa}_{model}.nsys-rep",
                "gpu0_numa1_vit_base.nsys-rep"
            ),
            Some(vec!["0".into(), "1".into(), "vit_base".into()])
        );
        assert_eq!(found("{a}.json", "x.y.json"), Some(vec!["x.y".into()]));
        assert_eq!(found("*.json", "x.json.gz"), None);
        assert_eq!(found("r[0-9]?.txt", "r5a.txt"), Some(vec![]));
        assert_eq!(found("r[!0-9]?.txt", "r5a.txt"), None);
        assert_eq!(found("{a}.json", ".json"), None, "a capture is never empty");
    }

    #[test]
    fn numbers_stay_numbers_when_they_read_back_the_same() {
        let m = |t: &str| {
            Matched {
                rel: String::new(),
                values: vec![vec![t.to_string()]],
            }
            .value(0)
        };
        assert_eq!(m("8"), Value::Int(8));
        assert_eq!(m("0.5"), Value::Float(0.5));
        assert_eq!(m("08"), Value::Str("08".into()));
        assert_eq!(m("1e3"), Value::Str("1e3".into()));
        assert_eq!(m("vit"), Value::Str("vit".into()));
    }

    #[test]
    fn bad_patterns_are_refused_with_the_fix() {
        for (p, says) in [
            ("/data/*.json", "relative to the workspace"),
            ("a//b.json", "empty path segment"),
            ("../x/*.json", "may not use `..`"),
            ("a/**", "ends with `**`"),
            ("a/x**.json", "whole path segment"),
            ("{}.json", "without a name"),
            ("{file}.json", "may not be named `file`"),
            ("{samples}.json", "shadows the pipeline param"),
            ("{a}{b}.json", "side by side"),
            ("{a.json", "without a closing"),
            ("[a.json", "without a closing"),
        ] {
            let e = pattern(p).expect_err(p);
            assert!(e.message.contains(says), "{p}: {}", e.message);
            assert!(e.help.is_some(), "{p}: no help");
        }
    }
}
