//! The diagnostic switches that change what a hardware-measuring task
//! measures: `VITGRAPH_COPY_STREAMS` (`Vit`'s async copies), and
//! `VITGRAPH_CUPTI_API` / `VITGRAPH_CUPTI_KINDS` (what `trace: Cupti`
//! records), `VITGRAPH_TELEMETRY_AB` (the GPU sampler paused in every other
//! block of batches). A node measured with one set is not the node measured without:
//! the ones that are set enter the node's key (as `diag.<NAME>` facets) and
//! its `results.json`, so a diagnostic run is never taken for a normal one.

use std::collections::BTreeMap;

/// The variables, in the order they are listed.
pub const VARS: [&str; 4] = [
    "VITGRAPH_COPY_STREAMS",
    "VITGRAPH_CUPTI_API",
    "VITGRAPH_CUPTI_KINDS",
    "VITGRAPH_TELEMETRY_AB",
];

/// The switches set in this process's environment, by name.
pub fn current() -> BTreeMap<String, String> {
    VARS.iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|v| (name.to_string(), v.to_string_lossy().into_owned()))
        })
        .collect()
}

/// [`current`] as key facets: `diag.<NAME>` → value.
pub fn key_facets() -> BTreeMap<String, String> {
    current()
        .into_iter()
        .map(|(k, v)| (format!("diag.{k}"), v))
        .collect()
}
