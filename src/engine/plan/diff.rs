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
        if let Some((axes, members)) = block_change(&old.spec_value(), &now.spec_value()) {
            lines.retain(|l| !axes.iter().any(|a| l.starts_with(&format!("{a}: "))));
            lines.insert(0, members);
        }
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

/// How the members of a block measured together (`together`) changed, in
/// words (`measured together: c added (block a,b → a,b,c)`), with the
/// together axes; None when they did not.
fn block_change(old: &serde_json::Value, now: &serde_json::Value) -> Option<(Vec<String>, String)> {
    // The members as the task holds them: their keys are the block's.
    let block = |spec: &serde_json::Value| {
        spec.pointer("/Command/together")
            .or_else(|| spec.pointer("/Vit/together/block"))
            .and_then(|t| serde_json::from_value::<crate::tasks::Together>(t.clone()).ok())
    };
    let keys = |spec| block(spec).map(|t| t.keys()).unwrap_or_default();
    let (before, after) = (keys(old), keys(now));
    if before == after {
        return None;
    }
    let axes = block(now)
        .or_else(|| block(old))
        .map(|t| t.axes)
        .unwrap_or_default();
    let list = |ks: &[String]| -> String {
        if ks.is_empty() {
            "none".to_owned()
        } else {
            ks.join(" ")
        }
    };
    let added: Vec<String> = after
        .iter()
        .filter(|k| !before.contains(k))
        .cloned()
        .collect();
    let removed: Vec<String> = before
        .iter()
        .filter(|k| !after.contains(k))
        .cloned()
        .collect();
    let mut what = Vec::new();
    if !added.is_empty() {
        what.push(format!("{} added", list(&added)));
    }
    if !removed.is_empty() {
        what.push(format!("{} removed", list(&removed)));
    }
    if what.is_empty() {
        what.push("the same members in another order".to_owned());
    }
    Some((
        axes,
        format!(
            "members measured together: {} (block {} → {})",
            what.join(", "),
            list(&before),
            list(&after)
        ),
    ))
}
