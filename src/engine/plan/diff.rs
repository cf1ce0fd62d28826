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
    cell_changes(old, now, out);
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

/// Which of a notebook's code cells changed (`notebooks/rq1.ipynb: code
/// cell 3 changed, code cell 5 added`), in cell order: one reason per notebook.
fn cell_changes(old_parts: &KeyParts, now_parts: &KeyParts, out: &mut Vec<Reason>) {
    use crate::tasks::notebook::describe_part;
    let (old, now) = (&old_parts.cells, &now_parts.cells);
    let mut parts: Vec<&String> = old.keys().chain(now.keys()).collect();
    parts.sort_by_key(|p| {
        let n = p
            .rsplit_once('#')
            .and_then(|(_, n)| n.parse::<usize>().ok());
        (
            p.rsplit_once('#').map(|(path, _)| path.to_owned()),
            n.unwrap_or(usize::MAX),
            p.to_string(),
        )
    });
    parts.dedup();
    let mut by_file: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in parts {
        let (a, b) = (old.get(p), now.get(p));
        if a == b {
            continue;
        }
        let Some((path, what)) = describe_part(p) else {
            continue;
        };
        // A notebook gone missing (or back) is said so by `inputs`.
        if old_parts.inputs.contains_key(path) || now_parts.inputs.contains_key(path) {
            continue;
        }
        let how = match (a, b) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        by_file
            .entry(path)
            .or_default()
            .push(format!("{what} {how}"));
    }
    for (path, changes) in by_file {
        out.push(Reason::new(
            ReasonKind::InputChanged,
            format!("{path}: {}", changes.join(", ")),
        ));
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
            .or_else(|| spec.pointer("/OpBench/together/block"))
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

#[cfg(test)]
mod tests {
    use super::block_change;

    #[test]
    fn a_member_added_to_a_native_block_is_said_in_words() {
        let spec = |task: &str, members: &str| -> serde_json::Value {
            serde_json::from_str(&format!(
                r#"{{"{task}": {{"together": {{"block": {{"axes": ["pattern"], "members": {members}}}, "members": []}}}}}}"#
            ))
            .unwrap()
        };
        for task in ["Vit", "OpBench"] {
            let (axes, words) = block_change(
                &spec(task, r#"[["uniform"], ["mild"]]"#),
                &spec(task, r#"[["uniform"], ["mild"], ["severe"]]"#),
            )
            .unwrap_or_else(|| panic!("{task}: no change found"));
            assert_eq!(axes, ["pattern"]);
            assert_eq!(
                words,
                "members measured together: severe added (block uniform mild → uniform mild severe)"
            );
        }
    }
}
