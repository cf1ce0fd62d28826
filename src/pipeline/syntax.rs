//! A RON parser that keeps the byte span of every value.
//!
//! This is the low-level mirror of a pipeline file: it knows RON's grammar
//! (structs, named and anonymous; maps; lists; strings, raw strings, numbers,
//! bools; enum variants with and without fields; comments; trailing commas)
//! but nothing about pipelines. Spans let every later error underline the
//! exact place in the file.

use std::fmt;

/// A byte range in one source (a pipeline file or a `-p` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub src: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// A sub-range of this span, `offset` bytes in and `len` long.
    pub fn sub(&self, offset: usize, len: usize) -> Span {
        let start = (self.start as usize + offset).min(self.end as usize) as u32;
        let end = (start as usize + len).min(self.end as usize) as u32;
        Span {
            src: self.src,
            start,
            end,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: Kind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string literal; `raw_offset` is where its text starts inside the span
    /// (after `"` or `r#"`), so sub-spans can point into it when it has no escapes.
    Str {
        value: String,
        raw_offset: u32,
        escaped: bool,
    },
    List(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// `Name(field: v, ...)` or `(field: v, ...)`.
    Struct {
        name: Option<Ident>,
        fields: Vec<(Ident, Node)>,
    },
    /// `Name(v, ...)` or `(v, ...)`; `()` is an empty tuple.
    Tuple {
        name: Option<Ident>,
        items: Vec<Node>,
    },
    /// A bare identifier: a unit enum variant (`Sync`, `None`, `Cupti`).
    Unit(Ident),
}

impl Kind {
    /// How the kind reads in an error message ("expected a string, found a list").
    pub fn describe(&self) -> String {
        match self {
            Kind::Bool(_) => "a bool".into(),
            Kind::Int(_) => "an integer".into(),
            Kind::Float(_) => "a float".into(),
            Kind::Str { .. } => "a string".into(),
            Kind::List(_) => "a list".into(),
            Kind::Map(_) => "a map".into(),
            Kind::Struct { name: Some(n), .. } => format!("`{}(…)`", n.name),
            Kind::Struct { name: None, .. } => "a struct".into(),
            Kind::Tuple { name: Some(n), .. } => format!("`{}(…)`", n.name),
            Kind::Tuple { name: None, .. } => "a tuple".into(),
            Kind::Unit(i) => format!("`{}`", i.name),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    pub span: Span,
    pub help: Option<String>,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Parses one RON document (a single value, optionally preceded by `#![enable(..)]`).
pub fn parse(src: u32, text: &str) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        src,
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    p.skip_ws()?;
    while p.peek() == Some(b'#') {
        p.skip_attribute()?;
        p.skip_ws()?;
    }
    if p.peek().is_none() {
        return Err(p.error_at(
            0,
            0,
            "the file is empty",
            Some("a pipeline file holds one `Pipeline(stages: { … })`"),
        ));
    }
    let node = p.value()?;
    p.skip_ws()?;
    if p.pos < p.bytes.len() {
        return Err(p.error_at(
            p.pos,
            p.pos + 1,
            "unexpected text after the end of the pipeline",
            None,
        ));
    }
    Ok(node)
}

/// How deeply brackets may nest. Real pipelines use a handful of levels; the
/// limit keeps a runaway file from overflowing the stack of this recursive parser.
const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    src: u32,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Values being parsed around the current one.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span {
            src: self.src,
            start: start as u32,
            end: end as u32,
        }
    }

    fn error_at(&self, start: usize, end: usize, msg: &str, help: Option<&str>) -> SyntaxError {
        let end = end.min(self.bytes.len()).max(start);
        SyntaxError {
            message: msg.to_string(),
            span: self.span(start, end),
            help: help.map(str::to_string),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    let start = self.pos;
                    self.pos += 2;
                    let mut depth = 1;
                    while depth > 0 {
                        match (self.peek(), self.bytes.get(self.pos + 1)) {
                            (None, _) => {
                                return Err(self.error_at(
                                    start,
                                    start + 2,
                                    "unterminated block comment",
                                    Some("close it with `*/`"),
                                ))
                            }
                            (Some(b'*'), Some(b'/')) => {
                                depth -= 1;
                                self.pos += 2;
                            }
                            (Some(b'/'), Some(b'*')) => {
                                depth += 1;
                                self.pos += 2;
                            }
                            _ => self.pos += 1,
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn skip_attribute(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == b']' {
                return Ok(());
            }
        }
        Err(self.error_at(start, start + 1, "unterminated `#![...]` attribute", None))
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), SyntaxError> {
        self.skip_ws()?;
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn unexpected(&self, expected: &str) -> SyntaxError {
        match self.peek() {
            None => self.error_at(
                self.bytes.len().saturating_sub(1),
                self.bytes.len(),
                &format!("unexpected end of file, expected {expected}"),
                Some("a bracket or parenthesis is probably not closed"),
            ),
            Some(_) => {
                let ch = self.text[self.pos..].chars().next().unwrap_or('?');
                self.error_at(
                    self.pos,
                    self.pos + ch.len_utf8(),
                    &format!("expected {expected}, found `{ch}`"),
                    None,
                )
            }
        }
    }

    /// End of file inside a bracket that opened at `open`: point at the bracket.
    fn unclosed(&self, open: usize) -> SyntaxError {
        let (bracket, close) = match self.bytes.get(open) {
            Some(b'[') => ('[', ']'),
            Some(b'{') => ('{', '}'),
            _ => ('(', ')'),
        };
        self.error_at(
            open,
            open + 1,
            &format!("unexpected end of file: this `{bracket}` is never closed"),
            Some(&format!("add `{close}` after its last entry")),
        )
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error_at(
                self.pos,
                self.pos + 1,
                &format!("values are nested more than {MAX_DEPTH} levels deep"),
                Some("a pipeline needs a few levels of brackets; look for brackets opened over and over"),
            ));
        }
        self.depth += 1;
        let node = self.value_inner();
        self.depth -= 1;
        node
    }

    fn value_inner(&mut self) -> Result<Node, SyntaxError> {
        self.skip_ws()?;
        let start = self.pos;
        let kind = match self.peek() {
            None => return Err(self.unexpected("a value")),
            Some(b'"') => self.string()?,
            Some(b'r') if matches!(self.bytes.get(self.pos + 1), Some(b'"' | b'#')) => {
                self.raw_string()?
            }
            Some(b'[') => self.list()?,
            Some(b'{') => self.map()?,
            Some(b'(') => self.parenthesized(None)?,
            Some(c) if c == b'-' || c == b'+' || c == b'.' || c.is_ascii_digit() => {
                self.number()?
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let ident = self.ident()?;
                match ident.name.as_str() {
                    "true" => Kind::Bool(true),
                    "false" => Kind::Bool(false),
                    _ => {
                        let save = self.pos;
                        self.skip_ws()?;
                        if self.peek() == Some(b'(') {
                            self.parenthesized(Some(ident))?
                        } else {
                            self.pos = save;
                            Kind::Unit(ident)
                        }
                    }
                }
            }
            Some(b'\'') => {
                return Err(self.error_at(
                    self.pos,
                    self.pos + 1,
                    "character literals are not supported",
                    Some("use a double-quoted string"),
                ))
            }
            Some(_) => return Err(self.unexpected("a value")),
        };
        Ok(Node {
            kind,
            span: self.span(start, self.pos),
        })
    }

    fn ident(&mut self) -> Result<Ident, SyntaxError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        if self.pos == start {
            return Err(self.unexpected("a name"));
        }
        Ok(Ident {
            name: self.text[start..self.pos].to_string(),
            span: self.span(start, self.pos),
        })
    }

    fn string(&mut self) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut escaped = false;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error_at(
                    start,
                    start + 1,
                    "unterminated string",
                    Some("add the closing `\"`"),
                ));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    escaped = true;
                    let esc_start = self.pos;
                    self.pos += 1;
                    let Some(e) = self.peek() else { continue };
                    self.pos += 1;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'0' => out.push('\0'),
                        b'\\' => out.push('\\'),
                        b'"' => out.push('"'),
                        b'\'' => out.push('\''),
                        b'\n' => {
                            // Line continuation: skip leading whitespace of the next line.
                            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                                self.pos += 1;
                            }
                        }
                        b'u' => {
                            let ok = self.peek() == Some(b'{');
                            let close = self.text[self.pos..].find('}').map(|i| self.pos + i);
                            let ch = match (ok, close) {
                                (true, Some(close)) => u32::from_str_radix(&self.text[self.pos + 1..close], 16)
                                    .ok()
                                    .and_then(char::from_u32)
                                    .map(|ch| (ch, close)),
                                _ => None,
                            };
                            let Some((ch, close)) = ch else {
                                return Err(self.error_at(esc_start, self.pos, "invalid unicode escape", Some("write it as `\\u{1F600}`")));
                            };
                            out.push(ch);
                            self.pos = close + 1;
                        }
                        _ => {
                            return Err(self.error_at(
                                esc_start,
                                self.pos,
                                "unknown escape sequence",
                                Some("valid escapes are \\n \\t \\r \\0 \\\\ \\\" \\u{…}; for a literal backslash write `\\\\`"),
                            ))
                        }
                    }
                }
                _ => {
                    let ch = self.text[self.pos..].chars().next().unwrap_or('\u{fffd}');
                    out.push(ch);
                    self.pos += ch.len_utf8();
                }
            }
        }
        Ok(Kind::Str {
            value: out,
            raw_offset: 1,
            escaped,
        })
    }

    fn raw_string(&mut self) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let mut hashes = 0;
        while self.peek() == Some(b'#') {
            hashes += 1;
            self.pos += 1;
        }
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("`\"` to open a raw string"));
        }
        self.pos += 1;
        let body_start = self.pos;
        let closing = format!("\"{}", "#".repeat(hashes));
        let Some(rel) = self.text[body_start..].find(&closing) else {
            return Err(self.error_at(
                start,
                body_start,
                "unterminated raw string",
                Some(&format!("close it with `{closing}`")),
            ));
        };
        let value = self.text[body_start..body_start + rel].to_string();
        self.pos = body_start + rel + closing.len();
        Ok(Kind::Str {
            value,
            raw_offset: (body_start - start) as u32,
            escaped: false,
        })
    }

    fn number(&mut self) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.pos += 1;
        }
        let mut is_float = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' | b'_' => self.pos += 1,
                b'.' | b'e' | b'E' => {
                    is_float = true;
                    self.pos += 1;
                    if matches!(c, b'e' | b'E') && matches!(self.peek(), Some(b'-' | b'+')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let raw: String = self.text[start..self.pos]
            .chars()
            .filter(|&c| c != '_')
            .collect();
        let bad = || {
            self.error_at(
                start,
                self.pos,
                &format!("invalid number `{}`", &self.text[start..self.pos]),
                None,
            )
        };
        if is_float {
            raw.parse::<f64>().map(Kind::Float).map_err(|_| bad())
        } else {
            raw.parse::<i64>().map(Kind::Int).map_err(|_| bad())
        }
    }

    /// Items separated by commas up to `close` (a trailing comma allowed),
    /// each read by `item`, the opening bracket at `open` (already passed).
    fn delimited<T>(
        &mut self,
        open: usize,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, SyntaxError>,
    ) -> Result<Vec<T>, SyntaxError> {
        let mut items = Vec::new();
        let expected = format!("`,` or `{}`", close as char);
        loop {
            self.skip_ws()?;
            match self.peek() {
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                None => return Err(self.unclosed(open)),
                _ => {}
            }
            items.push(item(self)?);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {}
                None => return Err(self.unclosed(open)),
                _ => return Err(self.unexpected(&expected)),
            }
        }
    }

    fn list(&mut self) -> Result<Kind, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        Ok(Kind::List(self.delimited(open, b']', Self::value)?))
    }

    fn map(&mut self) -> Result<Kind, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        let entries = self.delimited(open, b'}', |p| {
            let key = p.value()?;
            p.expect(b':', "`:` after a map key")?;
            Ok((key, p.value()?))
        })?;
        Ok(Kind::Map(entries))
    }

    /// `(…)` after an optional name: named fields make a struct, otherwise a tuple.
    fn parenthesized(&mut self, name: Option<Ident>) -> Result<Kind, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_ws()?;
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(Kind::Tuple {
                name,
                items: Vec::new(),
            });
        }
        if self.looks_like_field() {
            let fields = self.delimited(open, b')', |p| {
                let field = p.ident()?;
                p.expect(b':', "`:` after a field name")?;
                Ok((field, p.value()?))
            })?;
            return Ok(Kind::Struct { name, fields });
        }
        let items = self.delimited(open, b')', Self::value)?;
        Ok(Kind::Tuple { name, items })
    }

    /// After `(`: is the next token `ident :` (a struct field)?
    fn looks_like_field(&self) -> bool {
        let mut i = self.pos;
        let b = self.bytes;
        if !matches!(b.get(i), Some(c) if c.is_ascii_alphabetic() || *c == b'_') {
            return false;
        }
        while matches!(b.get(i), Some(c) if c.is_ascii_alphanumeric() || *c == b'_') {
            i += 1;
        }
        while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        b.get(i) == Some(&b':')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Kind {
        parse(0, text).unwrap().kind
    }

    #[test]
    fn scalars() {
        assert_eq!(kind("42"), Kind::Int(42));
        assert_eq!(kind("-1_000"), Kind::Int(-1000));
        assert_eq!(kind("2.5e3"), Kind::Float(2500.0));
        assert_eq!(kind("true"), Kind::Bool(true));
        assert!(matches!(kind(r#""a\"b""#), Kind::Str { value, .. } if value == "a\"b"));
        assert!(matches!(kind(r##"r#"x"y"#"##), Kind::Str { value, .. } if value == "x\"y"));
    }

    #[test]
    fn structures_and_spans() {
        let n = parse(
            0,
            "Stage(matrix: {\"i\": [0, 1,]}, task: Async(queue: 2), x: Some(3), y: None, z: ())",
        )
        .unwrap();
        let Kind::Struct { name, fields } = n.kind else {
            panic!()
        };
        assert_eq!(name.unwrap().name, "Stage");
        assert_eq!(fields.len(), 5);
        assert_eq!(fields[0].0.name, "matrix");
        assert_eq!((fields[0].0.span.start, fields[0].0.span.end), (6, 12));
        assert!(
            matches!(&fields[1].1.kind, Kind::Struct { name: Some(n), .. } if n.name == "Async")
        );
        assert!(
            matches!(&fields[2].1.kind, Kind::Tuple { name: Some(n), items } if n.name == "Some" && items.len() == 1)
        );
        assert!(matches!(&fields[3].1.kind, Kind::Unit(i) if i.name == "None"));
    }

    #[test]
    fn comments_are_skipped() {
        let text = "// hi\n/* a /* nested */ b */ [1, /* x */ 2] // end";
        let one = text.find('1').unwrap() as u32;
        let two = text.find('2').unwrap() as u32;
        assert_eq!(
            kind(text),
            Kind::List(vec![
                Node {
                    kind: Kind::Int(1),
                    span: Span {
                        src: 0,
                        start: one,
                        end: one + 1
                    }
                },
                Node {
                    kind: Kind::Int(2),
                    span: Span {
                        src: 0,
                        start: two,
                        end: two + 1
                    }
                },
            ])
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse(0, "Pipeline(stages: {\"a\": 1,, })").unwrap_err();
        assert_eq!(e.span.start, 25);
        let e = parse(0, "Pipeline(stages: {").unwrap_err();
        assert!(e.message.contains("end of file"), "{}", e.message);
        assert_eq!(
            (e.span.start, e.span.end),
            (17, 18),
            "points at the unclosed `{{`"
        );
        let e = parse(0, "\"abc").unwrap_err();
        assert!(e.message.contains("unterminated string"));
    }

    #[test]
    fn end_of_file_points_at_the_innermost_unclosed_bracket() {
        let text = "Pipeline(\n    stages: {\n        \"a\": Stage(task: Command(run: \"x\")),\n";
        let e = parse(0, text).unwrap_err();
        assert_eq!(e.span.start as usize, text.find('{').unwrap());
        assert_eq!(
            e.message,
            "unexpected end of file: this `{` is never closed"
        );
        assert_eq!(e.help.as_deref(), Some("add `}` after its last entry"));
        let e = parse(0, "[1, 2").unwrap_err();
        assert_eq!(
            (e.span.start, e.message.as_str()),
            (0, "unexpected end of file: this `[` is never closed")
        );
        let e = parse(0, "Stage(task: 1,").unwrap_err();
        assert_eq!(
            (e.span.start, e.message.as_str()),
            (5, "unexpected end of file: this `(` is never closed")
        );
    }

    #[test]
    fn an_empty_file_says_so() {
        for text in ["", "  \n// only a comment\n"] {
            let e = parse(0, text).unwrap_err();
            assert_eq!(e.message, "the file is empty");
            assert_eq!((e.span.start, e.span.end), (0, 0));
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let e = parse(0, &text).unwrap_err();
        assert_eq!(
            e.message,
            format!("values are nested more than {MAX_DEPTH} levels deep")
        );
        assert_eq!(e.span.start as usize, MAX_DEPTH);
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(0, &ok).is_ok());
    }
}
