//! The content-addressed store: `cache/objects/`, `cache/state.sqlite`, locks.
