//! A streaming scanner over one large JSON document: it walks the top-level
//! object and hands out each top-level value, and each element of one chosen
//! array, as a byte slice that serde_json then parses on its own. Memory stays
//! bounded by the largest single event, however large the file.

use std::io::Read;

/// A JSON syntax problem at a byte offset, or an I/O error of the source.
#[derive(Debug)]
pub(crate) enum ScanError {
    Io(std::io::Error),
    Syntax { offset: u64, message: String },
}

pub(super) struct Scanner<R> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// Bytes of the source before `buf[0]`.
    base: u64,
}

const CHUNK: usize = 1 << 20;

impl<R: Read> Scanner<R> {
    pub(super) fn new(src: R) -> Self {
        Scanner {
            src,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            base: 0,
        }
    }

    /// The offset of the next unread byte.
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(super) fn syntax(&self, message: impl Into<String>) -> ScanError {
        ScanError::Syntax {
            offset: self.offset(),
            message: message.into(),
        }
    }

    fn fill(&mut self) -> Result<bool, ScanError> {
        if self.pos < self.len {
            return Ok(true);
        }
        self.base += self.len as u64;
        self.pos = 0;
        self.len = 0;
        loop {
            match self.src.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ScanError::Io(e)),
            }
        }
    }

    /// The next byte that is not white space, without consuming it.
    pub(super) fn peek_non_ws(&mut self) -> Result<Option<u8>, ScanError> {
        while self.fill()? {
            let b = self.buf[self.pos];
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Ok(Some(b));
            }
            self.pos += 1;
        }
        Ok(None)
    }

    /// Consumes the next non-white-space byte, which must be `want`.
    pub(super) fn expect(&mut self, want: u8) -> Result<(), ScanError> {
        match self.peek_non_ws()? {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(self.syntax(format!(
                "expected `{}`, found `{}`",
                want as char, b as char
            ))),
            None => Err(self.syntax(format!(
                "unexpected end of file, expected `{}`",
                want as char
            ))),
        }
    }

    /// Consumes `,` (returning true) or `close` (returning false).
    pub(super) fn comma_or(&mut self, close: u8) -> Result<bool, ScanError> {
        match self.peek_non_ws()? {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            Some(b) => Err(self.syntax(format!(
                "expected `,` or `{}`, found `{}`",
                close as char, b as char
            ))),
            None => Err(self.syntax("unexpected end of file (truncated?)")),
        }
    }

    /// Calls `f` on the next complete JSON value's text: straight from the
    /// read buffer when the value lies within it (most do), else copied into
    /// `out` first.
    pub(super) fn with_value<T>(
        &mut self,
        out: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, ScanError> {
        if self.peek_non_ws()?.is_none() {
            return Err(self.syntax("unexpected end of file, expected a value"));
        }
        let mut st = ValueState::default();
        if let Some(n) = st.advance(&self.buf[self.pos..self.len]) {
            let start = self.pos;
            self.pos += n;
            return Ok(f(&self.buf[start..start + n]));
        }
        self.value_into(out)?;
        Ok(f(out))
    }

    /// Copies the next complete JSON value (object, array, string, number or
    /// literal) into `out`, replacing its contents.
    pub(super) fn value_into(&mut self, out: &mut Vec<u8>) -> Result<(), ScanError> {
        out.clear();
        if self.peek_non_ws()?.is_none() {
            return Err(self.syntax("unexpected end of file, expected a value"));
        }
        let mut st = ValueState::default();
        loop {
            if !self.fill()? {
                return Err(self.syntax("unexpected end of file inside a value (truncated?)"));
            }
            let chunk = &self.buf[self.pos..self.len];
            match st.advance(chunk) {
                Some(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    self.pos += n;
                    return Ok(());
                }
                None => {
                    out.extend_from_slice(chunk);
                    self.pos = self.len;
                }
            }
        }
    }
}

/// Byte classes outside strings: 0 plain, 1 quote, 2 open, 3 close, 4 a
/// separator that ends a scalar (comma or white space).
static OUTSIDE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = 1;
    t[b'{' as usize] = 2;
    t[b'[' as usize] = 2;
    t[b'}' as usize] = 3;
    t[b']' as usize] = 3;
    t[b',' as usize] = 4;
    t[b' ' as usize] = 4;
    t[b'\n' as usize] = 4;
    t[b'\r' as usize] = 4;
    t[b'\t' as usize] = 4;
    t
};

/// Where the scan of one value stands between chunks.
#[derive(Default)]
struct ValueState {
    depth: usize,
    in_string: bool,
    /// The chunk ended right after a backslash inside a string.
    escaped: bool,
}

impl ValueState {
    /// Scans `chunk`; returns how many of its bytes complete the value, or
    /// `None` when the value goes on past it. Table lookups let the loops
    /// skip plain bytes quickly: this is the importer's innermost loop.
    fn advance(&mut self, chunk: &[u8]) -> Option<usize> {
        let n = chunk.len();
        let mut i = 0;
        if self.escaped {
            self.escaped = false;
            i = 1;
        }
        while i < n {
            if self.in_string {
                // Strings are the long stretches: skip them with memchr.
                match memchr::memchr2(b'"', b'\\', &chunk[i..]) {
                    Some(k) => i += k,
                    None => return None,
                }
                if chunk[i] == b'\\' {
                    if i + 1 >= n {
                        self.escaped = true;
                        return None;
                    }
                    i += 2;
                    continue;
                }
                self.in_string = false;
                i += 1;
                if self.depth == 0 {
                    return Some(i);
                }
                continue;
            }
            while i < n && OUTSIDE[chunk[i] as usize] == 0 {
                i += 1;
            }
            if i >= n {
                return None;
            }
            match OUTSIDE[chunk[i] as usize] {
                1 => self.in_string = true,
                2 => self.depth += 1,
                3 if self.depth == 0 => return Some(i),
                3 => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ if self.depth == 0 => return Some(i),
                _ => {}
            }
            i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(json: &str) -> Vec<String> {
        let mut s = Scanner::new(json.as_bytes());
        let mut out = Vec::new();
        let mut v = Vec::new();
        s.expect(b'[').unwrap();
        loop {
            s.value_into(&mut v).unwrap();
            out.push(String::from_utf8(v.clone()).unwrap());
            if !s.comma_or(b']').unwrap() {
                break;
            }
        }
        out
    }

    #[test]
    fn splits_values_with_nested_brackets_and_escaped_quotes() {
        let got = values(r#"[ {"a": "x}\"]", "b": [1, {"c": 2}]}, 12.5,"s,t" ,true]"#);
        assert_eq!(
            got,
            [
                r#"{"a": "x}\"]", "b": [1, {"c": 2}]}"#,
                "12.5",
                r#""s,t""#,
                "true"
            ]
        );
    }

    /// Hands out one byte per read, so every value crosses chunk boundaries.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn values_split_the_same_across_chunk_boundaries() {
        let json = r#"[{"a": "x}\"]\\", "b": [1, {"c": 2}]},12.5,"s,t\\" ,true]"#;
        let mut s = Scanner::new(Trickle(json.as_bytes()));
        let mut got = Vec::new();
        let mut v = Vec::new();
        s.expect(b'[').unwrap();
        loop {
            s.value_into(&mut v).unwrap();
            got.push(String::from_utf8(v.clone()).unwrap());
            if !s.comma_or(b']').unwrap() {
                break;
            }
        }
        assert_eq!(got, values(json));
        assert_eq!(got[0], r#"{"a": "x}\"]\\", "b": [1, {"c": 2}]}"#);
        assert_eq!(got[2], r#""s,t\\""#);
    }

    #[test]
    fn truncated_value_is_an_error_with_offset() {
        let mut s = Scanner::new(&b"[{\"a\": 1"[..]);
        s.expect(b'[').unwrap();
        let mut v = Vec::new();
        match s.value_into(&mut v) {
            Err(ScanError::Syntax { offset, message }) => {
                assert_eq!(offset, 8);
                assert!(message.contains("truncated"), "{message}");
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }
}
