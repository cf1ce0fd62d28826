//! Params that come with a member of a `Vit` or `OpBench` block rather
//! than set blocks apart: an `include` entry's own params beside its
//! together values (HET1's `seqs` beside its `pattern`). A block keeps them
//! in one map param ([`CARRIED`]) until each member's spec is read.

use std::collections::HashMap;

use super::super::de::Param;
use super::super::decl::StageDecl;
use super::super::expand::Combo;
use super::super::syntax::{Kind, Node, Span};
use super::super::value_of;

/// The param under which a block of a `Vit` or `OpBench` stage keeps the
/// params each member carries (see [`carried_names`]): a map from the
/// member's key to its params. No pipeline can name it (it holds a NUL).
pub(super) const CARRIED: &str = "\u{0}carried";

/// The params of a `Vit` or `OpBench` stage measured together that come
/// with each member rather than set the block apart: params an `include`
/// entry adds (no matrix axis) whose value varies and is one function of
/// the together axes' values over the whole stage — HET1's `seqs` and
/// `max_over_mean` beside its `pattern`. Each member's spec is read with
/// its own, and its report row carries them. Any other param that varies
/// makes blocks of its own values, as a matrix axis does.
pub(super) fn carried_names(s: &StageDecl, axes: &[String], combos: &[Combo]) -> Vec<String> {
    let mut names: Vec<&str> = Vec::new();
    for p in combos.iter().flatten() {
        let is_matrix = s.axes.iter().any(|a| a.name == p.name);
        if !is_matrix && !axes.contains(&p.name) && !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    let value = |combo: &Combo, name: &str| {
        combo
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| value_of(&p.node))
            .map(|v| format!("{v:?}"))
    };
    names
        .into_iter()
        .filter(|name| {
            let mut seen: HashMap<String, Option<String>> = HashMap::new();
            let mut distinct: Vec<Option<String>> = Vec::new();
            for combo in combos {
                let key = axes
                    .iter()
                    .map(|a| value(combo, a).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\u{0}");
                let v = value(combo, name);
                if !distinct.contains(&v) {
                    distinct.push(v.clone());
                }
                match seen.get(&key) {
                    Some(before) if *before != v => return false,
                    Some(_) => {}
                    None => {
                        seen.insert(key, v);
                    }
                }
            }
            distinct.len() > 1
        })
        .map(str::to_owned)
        .collect()
}

/// One member's entry in a block's [`CARRIED`] map: its key (its values of
/// the together axes joined by `,`) and a map of the params it carries.
pub(super) fn carry_entry(axes: &[String], mine: &[Param], own: Vec<Param>) -> (Node, Node) {
    let key_of: Vec<&Node> = axes
        .iter()
        .filter_map(|a| mine.iter().find(|p| &p.name == a).map(|p| &p.node))
        .collect();
    let span = key_of.first().map_or(own[0].node.span, |n| n.span);
    let key = Node {
        kind: Kind::Str {
            value: node_key(&key_of),
            raw_offset: 0,
            escaped: true,
        },
        span,
    };
    let params = own
        .into_iter()
        .map(|p| {
            let name = Node {
                kind: Kind::Str {
                    value: p.name,
                    raw_offset: 0,
                    escaped: true,
                },
                span: p.node.span,
            };
            (name, p.node)
        })
        .collect();
    (
        key,
        Node {
            kind: Kind::Map(params),
            span,
        },
    )
}

/// A member's key from its values' nodes: as [`crate::tasks::command::member_key`].
pub(super) fn node_key(values: &[&Node]) -> String {
    let values: Vec<crate::value::Value> = values.iter().filter_map(|n| value_of(n)).collect();
    crate::tasks::command::member_key(&values)
}

/// The params a member carries, from a block's [`CARRIED`] map: those of
/// the member whose key is `key`; none when the block carries none.
pub(super) fn carried_of(carry: Option<&Param>, key: &str) -> Vec<Param> {
    let Some(Kind::Map(entries)) = carry.map(|p| &p.node.kind) else {
        return Vec::new();
    };
    entries
        .iter()
        .find(|(k, _)| matches!(&k.kind, Kind::Str { value, .. } if value == key))
        .and_then(|(_, v)| match &v.kind {
            Kind::Map(params) => Some(params),
            _ => None,
        })
        .into_iter()
        .flatten()
        .filter_map(|(name, node)| match &name.kind {
            Kind::Str { value, .. } => Some(Param {
                name: value.clone(),
                node: node.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// A block's [`CARRIED`] param from its members' entries; none when no
/// member carries anything.
pub(super) fn carry_param(carry: Vec<(Node, Node)>, span: Span) -> Option<Param> {
    (!carry.is_empty()).then(|| Param {
        name: CARRIED.to_owned(),
        node: Node {
            kind: Kind::Map(carry),
            span,
        },
    })
}
