//! Runs measured elsewhere: a hardware node's run that arrived from a
//! bundle or a remote, or was recorded on another host (a workspace on a
//! shared file system), and whose key differs from this machine's only in
//! environment facets, stands for the node; and a run that arrived
//! without its outputs stands for its node without them.

use super::{Evaluator, Reason, ReasonKind, Verdict};
use crate::graph::Node;
use crate::hash::ContentHash;
use crate::store::{RunRecord, StoreError};

impl Evaluator<'_> {
    /// The verdict on a hardware node whose run arrived from elsewhere or
    /// was recorded on another host, and differs from this machine's key
    /// only in environment facets
    /// (`reasons` are all `env_changed`): it stands for the node — fresh,
    /// *measured elsewhere*, or to restore — unless a run for this
    /// machine's key is stored, or the environment says none may stand
    /// (see [`super::EnvProbe::here`]). Its validity was judged where it was
    /// measured: it is not measured again here.
    pub(super) fn elsewhere(
        &self,
        node: &Node,
        run: &RunRecord,
        key: &ContentHash,
        reasons: &[Reason],
    ) -> Result<Option<Verdict>, StoreError> {
        if reasons.is_empty()
            || reasons.iter().any(|r| r.kind != ReasonKind::EnvChanged)
            || !node.task.measures_hardware()
        {
            return Ok(None);
        }
        let Some(here) = self.env.here(node) else {
            return Ok(None);
        };
        let other_host = measured_on(run).is_some_and(|host| host != here);
        let arrived = self.store.is_some_and(|s| s.reader().arrived(&run.key));
        if !(other_host || arrived) {
            return Ok(None);
        }
        if let Some(store) = self.store {
            if store.reader().run_for_key(key)?.is_some() {
                return Ok(None);
            }
        }
        self.intact_or_restore(node, run).map(Some)
    }

    /// Fresh when the run's outputs are intact in `out/` — for a run that
    /// arrived without some of them (a `--results-only` bundle, see
    /// `store::left_behind`), those the store holds —; else to restore
    /// from the store.
    pub(super) fn intact_or_restore(
        &self,
        node: &Node,
        run: &RunRecord,
    ) -> Result<Verdict, StoreError> {
        let Some(reason) = self.check_outputs(node, run)? else {
            return Ok(Verdict::Fresh(run.clone()));
        };
        let part = (reason.kind == ReasonKind::OutputMissing)
            .then(|| self.store.and_then(|s| s.objects().held_part(run)))
            .flatten();
        let reason = match part {
            Some(part) => self.check_outputs(node, &part)?,
            None => Some(reason),
        };
        Ok(match reason {
            None => Verdict::Fresh(run.clone()),
            Some(r) => Verdict::Restore(run.clone(), vec![r]),
        })
    }
}

/// The host a run was measured on, as its environment record says.
pub(crate) fn measured_on(run: &RunRecord) -> Option<String> {
    match run.env.value().get("host") {
        Some(serde_json::Value::String(h)) => Some(h.clone()),
        _ => None,
    }
}
