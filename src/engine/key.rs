//! A node's key: blake3 over a canonical encoding of its [`KeyParts`].
//!
//! The parts are a serializable struct with sorted maps, encoded as JSON, so
//! the encoding is canonical and `explain` can diff the parts field by field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hash::ContentHash;

/// Everything a node's result may depend on — and nothing else (no mtimes,
/// no absolute paths).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeyParts {
    /// Task kind (`Command`, `Vit`, …).
    pub kind: String,
    /// The task implementation's version number.
    pub version: u32,
    /// The fully substituted task spec (`${out}`/`${needs.S}` left symbolic),
    /// as canonical JSON text (struct fields in declaration order, maps sorted).
    pub spec: Box<serde_json::value::RawValue>,
    /// Content hash of every declared workspace input, by path.
    pub inputs: BTreeMap<String, ContentHash>,
    /// Code cells of a notebook input (`PATH#N`, `PATH#kernel`; see
    /// `tasks::notebook::code_cells`), which stands in `inputs` for none
    /// of its bytes. Empty, and left out of the encoding, for other tasks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cells: BTreeMap<String, ContentHash>,
    /// Output manifest hash of every upstream node, by node id.
    pub upstream: BTreeMap<String, ContentHash>,
    /// Key-affecting environment facets (GPU model, driver major, …), for
    /// tasks that measure hardware; empty otherwise.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The repetition a node of a repeated stage measures, from the second
    /// on: repetitions of one configuration share every other part. The
    /// first repetition has none, so it keeps the key the configuration
    /// had before the stage took `repeat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<u32>,
}

impl PartialEq for KeyParts {
    fn eq(&self, other: &KeyParts) -> bool {
        self.kind == other.kind
            && self.version == other.version
            && self.spec.get() == other.spec.get()
            && self.inputs == other.inputs
            && self.cells == other.cells
            && self.upstream == other.upstream
            && self.env == other.env
            && self.repetition == other.repetition
    }
}

impl KeyParts {
    pub(crate) fn key(&self) -> ContentHash {
        let mut hasher = blake3::Hasher::new();
        {
            // Writing plain maps and strings into a hasher cannot fail.
            // Buffered: serde_json writes a token at a time.
            let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut hasher);
            let _ = serde_json::to_writer(&mut w, self);
            let _ = std::io::Write::flush(&mut w);
        }
        ContentHash(*hasher.finalize().as_bytes())
    }

    /// The spec as a JSON tree (for diffs and display).
    pub(crate) fn spec_value(&self) -> serde_json::Value {
        serde_json::from_str(self.spec.get()).unwrap_or(serde_json::Value::Null)
    }
}

/// Canonical JSON text of a serializable value, as a raw JSON value.
pub(crate) fn raw_json<T: Serialize>(value: &T) -> Box<serde_json::value::RawValue> {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    serde_json::value::RawValue::from_string(text)
        .unwrap_or_else(|_| serde_json::value::RawValue::from_string("null".into()).unwrap())
}

/// What is stored with a run besides its key: the parts, and the params the
/// node had (for `spec_changed` diffs in terms users wrote).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecordedParts {
    pub parts: KeyParts,
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
}

/// A difference between two JSON values, as `path: old → new` lines.
pub(crate) fn json_diff(
    path: &str,
    old: &serde_json::Value,
    new: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value as J;
    match (old, new) {
        (J::Object(a), J::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => json_diff(&p, x, y, out),
                    (Some(x), None) => out.push(format!("{p}: {} → (absent)", short(x))),
                    (None, Some(y)) => out.push(format!("{p}: (absent) → {}", short(y))),
                    (None, None) => {}
                }
            }
        }
        // Lists too long to read whole (a report's `plots`) name the
        // element that differs, or the one added or removed.
        (J::Array(a), J::Array(b))
            if old != new && (short(old).ends_with('…') || short(new).ends_with('…')) =>
        {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{path}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => json_diff(&p, x, y, out),
                    (Some(x), None) => out.push(format!("{p}: {} → (absent)", short(x))),
                    (None, Some(y)) => out.push(format!("{p}: (absent) → {}", short(y))),
                    (None, None) => {}
                }
            }
        }
        _ if old != new => out.push(format!(
            "{}: {} → {}",
            if path.is_empty() { "value" } else { path },
            short(old),
            short(new)
        )),
        _ => {}
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(79).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> KeyParts {
        KeyParts {
            kind: "Command".into(),
            version: 1,
            spec: raw_json(&serde_json::json!({"run": "echo 1", "outputs": ["v.txt"]})),
            inputs: BTreeMap::new(),
            cells: BTreeMap::new(),
            upstream: BTreeMap::new(),
            env: BTreeMap::new(),
            repetition: None,
        }
    }

    #[test]
    fn key_is_stable_and_sensitive() {
        let a = parts();
        assert_eq!(a.key(), parts().key());
        let mut b = parts();
        b.spec = raw_json(&serde_json::json!({"outputs": ["v.txt"], "run": "echo 1"}));
        assert_eq!(a.key(), b.key(), "object key order must not matter");
        b.spec = raw_json(&serde_json::json!({"outputs": ["v.txt"], "run": "echo 2"}));
        assert_ne!(a.key(), b.key());
        b.version = 2;
        assert_ne!(a.key(), b.key());
        let mut c = parts();
        c.env.insert("driver".into(), "580".into());
        assert_ne!(a.key(), c.key());
        let mut d = parts();
        d.repetition = Some(2);
        assert_ne!(a.key(), d.key());
        // Without a repetition the encoding is the one keys had before it.
        let text = serde_json::to_string(&a).unwrap();
        assert!(!text.contains("repetition"), "{text}");
    }

    #[test]
    fn diff_names_paths() {
        let mut out = Vec::new();
        json_diff(
            "",
            &serde_json::json!({"a": 1, "b": {"c": "x"}}),
            &serde_json::json!({"a": 2, "b": {"c": "x"}, "d": true}),
            &mut out,
        );
        assert_eq!(out, ["a: 1 → 2", "d: (absent) → true"]);
    }

    /// A long list (a report's plots) names the element that differs, so
    /// the two sides never read alike; a short one reads whole.
    #[test]
    fn diff_names_the_element_of_a_long_list() {
        let plot = |y: &str| serde_json::json!({"x": "batch", "y": y, "series": "model", "log_x": true, "title": "throughput by batch and model"});
        let mut out = Vec::new();
        json_diff(
            "Report.plots",
            &serde_json::json!([plot("throughput_images_per_s"), plot("latency_ms.median")]),
            &serde_json::json!([plot("throughput_images_per_s"), plot("latency_ms.p99")]),
            &mut out,
        );
        assert_eq!(
            out,
            [r#"Report.plots[1].y: "latency_ms.median" → "latency_ms.p99""#]
        );
        out.clear();
        json_diff(
            "Report.plots",
            &serde_json::json!([plot("a")]),
            &serde_json::json!([plot("a"), plot("b")]),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert!(
            out[0].starts_with("Report.plots[1]: (absent) → {"),
            "{out:?}"
        );
        out.clear();
        json_diff(
            "batch",
            &serde_json::json!([1, 2]),
            &serde_json::json!([1, 2, 4]),
            &mut out,
        );
        assert_eq!(out, ["batch: [1,2] → [1,2,4]"]);
    }
}
