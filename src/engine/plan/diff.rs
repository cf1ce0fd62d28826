//! Why a stale node's key differs from its recorded run's, part by part.

use std::collections::BTreeMap;

use super::{Reason, ReasonKind};
use crate::engine::key::{json_diff, KeyParts, RecordedParts};
use crate::graph::Node;

/// The reasons a node's current parts differ from its recorded run's.
pub(super) fn diff_parts(
    node: &Node,
    rec: &RecordedParts,
    now: &KeyParts,
    pending: &[&String],
    out: &mut Vec<Reason>,
) {
    let old = &rec.parts;
    if old.kind != now.kind || old.version != now.version {
        out.push(Reason::new(
            ReasonKind::TaskVersionChanged,
            format!(
                "{} {} → {} {}",
                old.kind, old.version, now.kind, now.version
            ),
        ));
    } else if old.spec.get() != now.spec.get() && old.spec_value() != now.spec_value() {
        let params_now: BTreeMap<String, serde_json::Value> = node
            .params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v)))
            .collect();
        let mut lines = Vec::new();
        json_diff(
            "",
            &serde_json::to_value(&rec.params).unwrap_or_default(),
            &serde_json::to_value(&params_now).unwrap_or_default(),
            &mut lines,
        );
        if lines.is_empty() {
            json_diff("", &old.spec_value(), &now.spec_value(), &mut lines);
        }
        out.push(Reason::new(ReasonKind::SpecChanged, lines.join("; ")));
    }
    let paths: std::collections::BTreeSet<&String> =
        old.inputs.keys().chain(now.inputs.keys()).collect();
    for p in paths {
        if old.inputs.get(p) != now.inputs.get(p) {
            let detail = match now.inputs.get(p) {
                Some(h) if h.0 == [0; 32] => format!("{p} (missing)"),
                None => format!("{p} (no longer an input)"),
                _ => p.clone(),
            };
            out.push(Reason::new(ReasonKind::InputChanged, detail));
        }
    }
    let ids: std::collections::BTreeSet<&String> =
        old.upstream.keys().chain(now.upstream.keys()).collect();
    for id in ids {
        if pending.contains(&id) {
            continue;
        }
        if old.upstream.get(id) != now.upstream.get(id) {
            out.push(Reason::new(ReasonKind::UpstreamChanged, id.clone()));
        }
    }
    let facets: std::collections::BTreeSet<&String> =
        old.env.keys().chain(now.env.keys()).collect();
    for f in facets {
        let (a, b) = (old.env.get(f), now.env.get(f));
        if a != b {
            let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(absent)".into());
            out.push(Reason::new(
                ReasonKind::EnvChanged,
                format!("{f} {} → {}", show(a), show(b)),
            ));
        }
    }
}
