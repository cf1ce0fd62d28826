//! Reporters: engine events → terminal progress or JSON lines.
//!
//! Two consumers of one event stream: [`human::Human`] (a live progress
//! display on a terminal, plain lines in a pipe) and [`json::JsonLines`]
//! (one JSON object per event, no escape codes).

pub(crate) mod human;
pub(crate) mod json;
pub(crate) mod progress;
