//! A block measured together as `compare` reads it: one configuration per
//! member (`stage[n=1,model=a]`), as a report has one row per member, and
//! the A/A twin left out.

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::Value as Json;

use super::measure::config_of;
use crate::tasks::command::member_key;
use crate::tasks::summary::{self, Doc};
use crate::tasks::Together;

/// The block of a run whose key's parts hold one (a `Command`'s
/// `together`, a `Vit` block's `together.block`); None for any other run.
pub(crate) fn together_of(parts: &str) -> Option<Together> {
    if !parts.contains("\"together\"") {
        return None;
    }
    find(&serde_json::from_str(parts).ok()?)
}

fn find(v: &Json) -> Option<Together> {
    match v {
        Json::Object(map) => map
            .get("together")
            .and_then(|t| serde_json::from_value(t.get("block").unwrap_or(t).clone()).ok())
            .or_else(|| map.values().find_map(find)),
        Json::Array(items) => items.iter().find_map(find),
        _ => None,
    }
}

/// Each member's configuration and its object in `doc` (the block's
/// `results.json`), in the block's order, twins left out; an error says
/// what the file lacks.
pub(crate) fn members(
    node_id: &str,
    together: &Together,
    doc: &Doc,
) -> Result<Vec<(String, Doc)>, String> {
    let raw = doc
        .get("members")
        .ok_or_else(|| format!("{node_id}'s results.json has no `members` object"))?;
    let objects: HashMap<String, Box<RawValue>> = serde_json::from_str(raw.get())
        .map_err(|e| format!("{node_id}'s results.json: `members` is not an object: {e}"))?;
    let base = config_of(node_id);
    let mut out = Vec::new();
    for (values, params) in together.configs().filter(|(v, _)| !together.is_twin(v)) {
        let key = member_key(values);
        let object = objects
            .get(&key)
            .ok_or_else(|| format!("{node_id}'s results.json has no member `{key}`"))?;
        let doc = summary::parse(object.get().as_bytes())
            .map_err(|e| format!("{node_id}'s results.json: member `{key}`: {e}"))?;
        out.push((with_params(&base, &params), doc));
    }
    Ok(out)
}

/// `stage[n=1]` with `model=a` added: `stage[n=1,model=a]`.
fn with_params(base: &str, params: &[(String, crate::value::Value)]) -> String {
    let extra: Vec<String> = params
        .iter()
        .map(|(a, v)| format!("{a}={}", v.display()))
        .collect();
    match base.split_once('[') {
        Some((stage, rest)) => {
            let inner = rest.strip_suffix(']').unwrap_or(rest);
            format!("{stage}[{inner},{}]", extra.join(","))
        }
        None => format!("{base}[{}]", extra.join(",")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_one_configuration_per_member_without_its_twin() {
        let parts = r#"{"kind":"Vit v1","spec":{"Vit":{"model":"a","together":{"block":
            {"axes":["model","batch"],"members":[["a",1],["b",1],["a#2",1]],"check":true},"members":[]}}}}"#;
        let t = together_of(parts).expect("a block");
        assert_eq!(t.axes, ["model", "batch"]);
        assert!(together_of(r#"{"spec":{"Vit":{"model":"a"}}}"#).is_none());
        let doc = summary::parse(
            br#"{"members": {"a,1": {"latency_ms": {"median": 2.0}}, "b,1": {"latency_ms": {"median": 3.0}},
                             "a#2,1": {"latency_ms": {"median": 2.1}}}}"#,
        )
        .unwrap();
        let got = members("s[n=4,rep=2]", &t, &doc).unwrap();
        let configs: Vec<&str> = got.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            configs,
            ["s[n=4,model=a,batch=1]", "s[n=4,model=b,batch=1]"]
        );
        let values = summary::values_of(&got[1].1, &["latency_ms.median"]);
        assert_eq!(values[0].map(|v| v.value), Some(3.0));
        assert_eq!(
            members(
                "s[rep=1]",
                &t,
                &summary::parse(br#"{"members": {"a,1": {}}}"#).unwrap()
            )
            .unwrap_err(),
            "s[rep=1]'s results.json has no member `b,1`"
        );
        let command = r#"{"spec":{"Command":{"run":"x","together":{"axes":["impl"],"members":[["a"],["b"]]}}}}"#;
        assert_eq!(together_of(command).unwrap().keys(), ["a", "b"]);
    }
}
