//! The environment fingerprint as keys see it.
//!
//! Key-affecting facets (GPU model, driver major version, CUDA and libtorch
//! versions, CPU model) enter the key of every node that measures hardware;
//! record-only facets are stored with runs. Probing runs `nvidia-smi`, so it
//! happens at most once per process and only when such a node is planned.
//! `VITGRAPH_FAKE_ENV='{"gpu":"H100"}'` replaces the probe (tests, and
//! rehearsing a study on a machine without the GPU); a `"host"` in it is
//! the host name runs are recorded with, not a facet.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::plan::EnvProbe;
use crate::graph::Node;

#[derive(Default)]
pub(crate) struct HostEnv {
    facets: OnceLock<BTreeMap<String, String>>,
    /// `build --measure-here`: a run measured on another host does not
    /// stand for this one's.
    measure_here: bool,
}

impl HostEnv {
    pub(crate) fn new() -> HostEnv {
        HostEnv::default()
    }

    /// This machine, on which runs measured elsewhere are measured again.
    pub(crate) fn measuring_here(measure_here: bool) -> HostEnv {
        HostEnv {
            measure_here,
            ..HostEnv::default()
        }
    }
}

/// `VITGRAPH_FAKE_ENV`, when set: the facets, and the host name it gives.
fn fake() -> Option<(BTreeMap<String, String>, Option<String>)> {
    let json = std::env::var("VITGRAPH_FAKE_ENV").ok()?;
    let mut facets: BTreeMap<String, String> = serde_json::from_str(&json).unwrap_or_default();
    let host = facets.remove("host");
    Some((facets, host))
}

impl EnvProbe for HostEnv {
    fn facets(&self) -> &BTreeMap<String, String> {
        self.facets.get_or_init(|| match fake() {
            Some((facets, _)) => facets,
            None => crate::host::env::fingerprint().key_facets,
        })
    }

    fn check(&self) -> Result<(), String> {
        if std::env::var_os("VITGRAPH_FAKE_ENV").is_some() {
            return Ok(());
        }
        match crate::host::env::problem() {
            Some(p) => Err(p.to_string()),
            None => Ok(()),
        }
    }

    fn record(&self) -> serde_json::Value {
        match fake() {
            Some((facets, host)) => serde_json::json!({
                "key_facets": facets,
                "host": host.or_else(crate::host::env::hostname_opt),
            }),
            None => crate::host::env::fingerprint().record,
        }
    }

    fn here(&self, _node: &Node) -> Option<String> {
        if self.measure_here {
            return None;
        }
        host_name()
    }
}

/// This machine's host name, as runs measured here record it (the one
/// `VITGRAPH_FAKE_ENV` gives, when it gives one).
pub(crate) fn host_name() -> Option<String> {
    match fake() {
        Some((_, Some(host))) => Some(host),
        _ => crate::host::env::hostname_opt(),
    }
}
