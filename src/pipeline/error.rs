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

    /// An error at `span`, labelled `label`.
    pub fn error(
        &self,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> PipelineError {
        let (name, text) = &self.files[span.src as usize];
        PipelineError {
            message: message.into(),
            source: Some(NamedSource::new(name.clone(), text.to_string())),
            labels: vec![(span, label.into())],
            help: None,
            related: Vec::new(),
        }
    }
}

/// An invalid pipeline (or `-p` argument). Exits with status 2; nothing runs.
#[derive(Debug)]
pub struct PipelineError {
    pub message: String,
    source: Option<NamedSource<String>>,
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
        Some(Box::new(self.labels.iter().enumerate().map(
            |(i, (span, label))| {
                let ss = SourceSpan::new((span.start as usize).into(), span.len().max(1));
                if i == 0 {
                    LabeledSpan::new_primary_with_span(Some(label.clone()), ss)
                } else {
                    LabeledSpan::new_with_span(Some(label.clone()), ss)
                }
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
