//! Integration tests: the real `vitgraph` binary on throwaway workspaces.
//! One test binary (faster to link than one per file); each module is an area.

mod pipeline_errors;
mod support;
