//! `build --json`: one JSON object per line for each event.

use std::io::Write;

use crate::engine::events::{Event, Reporter};

pub(crate) struct JsonLines<W: Write + Send> {
    out: W,
}

impl<W: Write + Send> JsonLines<W> {
    pub(crate) fn new(out: W) -> JsonLines<W> {
        JsonLines { out }
    }
}

impl<W: Write + Send> Reporter for JsonLines<W> {
    fn event(&mut self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(self.out, "{line}");
        }
    }
}
