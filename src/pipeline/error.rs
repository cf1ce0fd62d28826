//! Pipeline errors: a message, the file, the underlined span(s) and a hint.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};

use super::syntax::Span;

/// The texts errors can point into: pipeline files, and `-p` arguments.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    files: Vec<(String, Arc<String>)>,
}

impl Sources {
    pub fn add(&mut self, name: String, text: String) -> u32 {
        self.files.push((name, Arc::new(text)));
        (self.files.len() - 1) as u32
    }

    pub fn name(&self, src: u32) -> &str {
        &self.files[src as usize].0
    }

    pub fn text(&self, src: u32) -> &str {
        &self.files[src as usize].1
    }

    /// `file:line:column` of a span, 1-based.
    pub fn location(&self, span: Span) -> String {
        let text = self.text(span.src);
        let upto = &text[..(span.start as usize).min(text.len())];
        let line = upto.matches('\n').count() + 1;
        let col = upto.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("{}:{line}:{col}", self.name(span.src))
    }

    /// A deserialization error, with its place, and where a param-sourced
    /// value came from.
    pub(super) fn de_error(&self, e: super::de::DeError) -> PipelineError {
        let span = e.span.unwrap_or_default();
        let label = if e.message.starts_with("unknown field") {
            "unknown field".to_string()
        } else if e.message.starts_with("missing field") {
            "in this value".to_string()
        } else {
            "here".to_string()
        };
        let mut err = self.error(e.message.clone(), span, label);
        let mut help = e.help.clone();
        if let Some((param, at)) = &e.origin {
            let from = format!(
                "the value comes from param `{param}`, set at {}",
                self.location(*at)
            );
            help = Some(match help {
                Some(h) => format!("{h}; {from}"),
                None => from,
            });
            if at.src == span.src {
                err = err.with_label(*at, format!("value of `{param}`"));
            } else {
                err = err.with_related(self.error(
                    format!("param `{param}` is set here"),
                    *at,
                    "this value",
                ));
            }
        }
        match help {
            Some(h) => err.with_help(h),
            None => err,
        }
    }

    /// An error at `span`, labelled `label`.
    pub fn error(
        &self,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> PipelineError {
        let (name, text) = &self.files[span.src as usize];
        let (source, window) = shown_source(name, text, span.start as usize);
        PipelineError {
            message: message.into(),
            source: Some(source),
            window,
            labels: vec![(span, label.into())],
            help: None,
            related: Vec::new(),
        }
    }
}

/// The most bytes of one line an error shows.
const MAX_SHOWN_LINE: usize = 400;

/// Where a long line's excerpt sits: bytes `from..to` of the file are shown
/// starting at byte `at` of the excerpt.
#[derive(Debug, Clone, Copy)]
struct Window {
    from: usize,
    to: usize,
    at: usize,
}

/// The text an error shows: the whole file, or — when the line at `pos` is
/// longer than [`MAX_SHOWN_LINE`] (a generated file, a value nested a
/// million deep) — that line's part around `pos`, on the same line number.
fn shown_source(name: &str, text: &str, pos: usize) -> (NamedSource<String>, Option<Window>) {
    let pos = pos.min(text.len());
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    if line_end - line_start <= MAX_SHOWN_LINE {
        return (NamedSource::new(name, text.to_string()), None);
    }
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let from = floor(pos.saturating_sub(MAX_SHOWN_LINE / 2).max(line_start));
    let to = floor((from + MAX_SHOWN_LINE).min(line_end));
    let line_no = text[..line_start].matches('\n').count();
    let mut shown = "\n".repeat(line_no);
    if from > line_start {
        shown.push('…');
    }
    let at = shown.len();
    shown.push_str(&text[from..to]);
    if to < line_end {
        shown.push('…');
    }
    let note = format!(
        "{name}, line {} of {} bytes, shown from byte {} of it",
        line_no + 1,
        line_end - line_start,
        from - line_start + 1
    );
    (NamedSource::new(note, shown), Some(Window { from, to, at }))
}

/// An invalid pipeline (or `-p` argument). Exits with status 2; nothing runs.
#[derive(Debug)]
pub struct PipelineError {
    pub message: String,
    source: Option<NamedSource<String>>,
    /// Set when `source` is an excerpt of one long line.
    window: Option<Window>,
    labels: Vec<(Span, String)>,
    pub help: Option<String>,
    /// Other places involved (in other files), shown after this one.
    pub related: Vec<PipelineError>,
}

impl PipelineError {
    /// An error not tied to a place in a file.
    pub fn plain(message: impl Into<String>) -> PipelineError {
        PipelineError {
            message: message.into(),
            source: None,
            window: None,
            labels: Vec::new(),
            help: None,
            related: Vec::new(),
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> PipelineError {
        self.help = Some(help.into());
        self
    }

    /// Adds a second label in the same file.
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> PipelineError {
        self.labels.push((span, label.into()));
        self
    }

    pub fn with_related(mut self, other: PipelineError) -> PipelineError {
        self.related.push(other);
        self
    }

    /// The first labelled span (tests assert on it).
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.first().map(|(s, _)| *s)
    }
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PipelineError {}

impl Diagnostic for PipelineError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("vitgraph::pipeline"))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        let window = self.window;
        Some(Box::new(self.labels.iter().enumerate().filter_map(
            move |(i, (span, label))| {
                let (start, len) = (span.start as usize, span.len().max(1));
                let ss = match window {
                    None => SourceSpan::new(start.into(), len),
                    // Labels outside a long line's excerpt are left out; the
                    // primary one is inside it by construction.
                    Some(w) if start < w.from || start > w.to => return None,
                    Some(w) => SourceSpan::new(
                        (w.at + start - w.from).into(),
                        len.min(w.to - start).max(1),
                    ),
                };
                Some(if i == 0 {
                    LabeledSpan::new_primary_with_span(Some(label.clone()), ss)
                } else {
                    LabeledSpan::new_with_span(Some(label.clone()), ss)
                })
            },
        )))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(self.related.iter().map(|e| e as &dyn Diagnostic)))
    }
}
