//! Reporters: engine events → terminal progress or JSON lines.
