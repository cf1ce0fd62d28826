//! The environment fingerprint as keys see it.
//!
//! Key-affecting facets (GPU model, driver major version, CUDA and libtorch
//! versions, CPU model) enter the key of every node that measures hardware;
//! record-only facets are stored with runs. Probing runs `nvidia-smi`, so it
//! happens at most once per process and only when such a node is planned.
//! `VITGRAPH_FAKE_ENV='{"gpu":"H100"}'` replaces the probe (tests, and
//! rehearsing a study on a machine without the GPU).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::plan::EnvProbe;

#[derive(Default)]
pub(crate) struct HostEnv {
    facets: OnceLock<BTreeMap<String, String>>,
}

impl HostEnv {
    pub(crate) fn new() -> HostEnv {
        HostEnv::default()
    }
}

impl EnvProbe for HostEnv {
    fn facets(&self) -> &BTreeMap<String, String> {
        self.facets
            .get_or_init(|| match std::env::var("VITGRAPH_FAKE_ENV") {
                Ok(json) => serde_json::from_str(&json).unwrap_or_default(),
                Err(_) => crate::host::env::fingerprint().key_facets,
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
        if std::env::var_os("VITGRAPH_FAKE_ENV").is_some() {
            return serde_json::json!({ "key_facets": self.facets() });
        }
        crate::host::env::fingerprint().record
    }
}
