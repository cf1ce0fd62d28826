//! `Command`: a shell command run under `sh -c` in the workspace root.

use serde::{Deserialize, Serialize};

use super::Resources;

pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The command line, run under `sh -c` with the workspace root as working directory.
    pub run: String,
    /// Workspace files whose content is part of the key.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Files the command must create in `${out}`.
    #[serde(default)]
    pub outputs: Vec<String>,
    #[serde(default)]
    pub resources: Resources,
    /// The command measures (a timing, a rate): it may take `repeat`, and
    /// it writes `results.json` (see the book's Repetitions chapter). Left
    /// out of the serialized spec when false, so other commands keep their keys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub measure: bool,
    /// The software the command runs with (`env: Python(interpreter:
    /// "python3")`): probed once per process, its versions are part of the
    /// key, so upgrading them makes the node stale (`env_changed`). Left out
    /// of the serialized spec when absent.
    #[serde(
        default,
        deserialize_with = "bare_env",
        skip_serializing_if = "Option::is_none"
    )]
    pub env: Option<SoftwareEnv>,
    /// The members of a block measured together (a stage's `together`
    /// axes): set when the stage expands, never written in a pipeline file.
    /// Left out of the serialized spec when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<Together>,
}

/// The configurations one process measures side by side: the together
/// axes, and each member's values of them, in matrix order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Together {
    pub axes: Vec<String>,
    pub members: Vec<Vec<crate::value::Value>>,
    /// `check: true`: the first member is measured a second time, as the
    /// member whose first value is `NAME#2` (see `tasks::aa_check`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// Params that come with each member beside its values of the axes
    /// (one list per member, in member order; empty when there are none):
    /// an `include` entry's own params in a `Vit` or `OpBench` block, such
    /// as HET1's `seqs` beside its `pattern` (`pipeline::together`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<Vec<(String, crate::value::Value)>>,
}

impl Together {
    /// Each member's values and its configuration's params: the together
    /// axes' values, then the params it carries.
    pub fn configs(
        &self,
    ) -> impl Iterator<Item = (&[crate::value::Value], Vec<(String, crate::value::Value)>)> + '_
    {
        self.members.iter().enumerate().map(|(i, values)| {
            let mut params: Vec<(String, crate::value::Value)> = self
                .axes
                .iter()
                .cloned()
                .zip(values.iter().cloned())
                .collect();
            params.extend(self.carried.get(i).into_iter().flatten().cloned());
            (values.as_slice(), params)
        })
    }

    /// The A/A check's two members' keys, the first member's and its
    /// twin's, where the block has `check: true`.
    pub fn aa(&self) -> Option<(String, String)> {
        let first = self.members.first().filter(|_| self.check)?;
        let twin = self.twin_of(first)?;
        Some((member_key(first), member_key(&twin)))
    }

    /// Whether `values` are an A/A twin's (no configuration of their own:
    /// reports leave twins out). With several together axes the first
    /// axis's twin value is measured beside every value of the others.
    pub fn is_twin(&self, values: &[crate::value::Value]) -> bool {
        self.members
            .first()
            .filter(|_| self.check)
            .and_then(|first| self.twin_of(first))
            .is_some_and(|twin| !twin.is_empty() && twin.first() == values.first())
    }

    fn twin_of(&self, first: &[crate::value::Value]) -> Option<Vec<crate::value::Value>> {
        let mut twin = first.to_vec();
        let v = twin.first_mut()?;
        *v = crate::value::Value::Str(format!("{}#2", v.display()));
        Some(twin)
    }

    /// Each member's key in `results.json`'s `members`: its values joined
    /// by `,` in axis order.
    pub fn keys(&self) -> Vec<String> {
        self.members.iter().map(|m| member_key(m)).collect()
    }
}

/// A member's key: its values joined by `,`.
pub fn member_key(values: &[crate::value::Value]) -> String {
    values
        .iter()
        .map(|v| v.display())
        .collect::<Vec<_>>()
        .join(",")
}

/// The software environment a `Command` declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SoftwareEnv {
    /// A Python interpreter (a name on `PATH`, or a path relative to the
    /// workspace root): its version, those of torch, triton and cuDNN, and
    /// a hash of every installed package's name and version.
    Python { interpreter: String },
}

pub(crate) fn bare_env<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SoftwareEnv>, D::Error> {
    SoftwareEnv::deserialize(d).map(Some)
}

/// What a measuring command writes in `${out}`.
pub const RESULTS_JSON: &str = "results.json";

/// Checks a measurement's `results.json` as it is recorded: a JSON object
/// (NaN and Infinity, which Python's `json.dump` writes, are not JSON), and
/// for a block measured together (`members`: its member keys) an object
/// `members` holding one object per member, no more, no fewer. The error
/// is what is wrong and how to fix it.
pub fn check_results(
    path: &std::path::Path,
    members: Option<&[String]>,
) -> Result<(), (String, String)> {
    let contract = "a measurement writes `results.json` as a JSON object of its numbers (the book's Repetitions chapter)";
    let bytes =
        std::fs::read(path).map_err(|e| (format!("cannot be read: {e}"), contract.to_owned()))?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        let text = String::from_utf8_lossy(&bytes);
        let help = if ["NaN", "Infinity"].iter().any(|w| text.contains(w)) {
            "NaN and Infinity are not JSON (Python's `json.dump` writes them): leave the metric out or write null; `json.dump(..., allow_nan=False)` finds them where they are made".to_owned()
        } else {
            contract.to_owned()
        };
        (format!("is not JSON: {e}"), help)
    })?;
    let serde_json::Value::Object(top) = &doc else {
        return Err((
            format!("is not a JSON object (found {})", json_kind(&doc)),
            contract.to_owned(),
        ));
    };
    let Some(keys) = members else {
        return Ok(());
    };
    let shape = "a block measured together writes `{\"members\": {\"<value>\": {…}, …}}`, one object per member, each shaped like one run's `results.json`";
    let Some(serde_json::Value::Object(got)) = top.get("members") else {
        let found = top
            .get("members")
            .map_or("has no `members`".to_owned(), |m| {
                format!("has `members` as {}, not an object", json_kind(m))
            });
        return Err((found, shape.to_owned()));
    };
    let listed = || {
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for key in keys {
        match got.get(key) {
            None => {
                return Err((
                    format!("has no member `{key}` (the block is {})", listed()),
                    shape.to_owned(),
                ))
            }
            Some(serde_json::Value::Object(_)) => {}
            Some(other) => {
                return Err((
                    format!("member `{key}` is {}, not an object", json_kind(other)),
                    shape.to_owned(),
                ))
            }
        }
    }
    if let Some(extra) = got.keys().find(|k| !keys.contains(k)) {
        return Err((
            format!("has member `{extra}`, which is not in the block ({})", listed()),
            "write one member per value the command was given; a member's key is its values joined by `,`".to_owned(),
        ));
    }
    Ok(())
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::check_results;

    fn check(text: &str, members: Option<&[String]>) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        std::fs::write(&path, text).unwrap();
        check_results(&path, members).map_err(|(d, h)| format!("{d} | {h}"))
    }

    #[test]
    fn a_measurement_is_a_json_object_without_nan() {
        assert!(check(r#"{"latency_ms": {"median": 1.5}}"#, None).is_ok());
        let nan = check(r#"{"latency_ms": {"median": NaN}}"#, None).unwrap_err();
        assert!(
            nan.contains("is not JSON") && nan.contains("allow_nan=False"),
            "{nan}"
        );
        let inf = check(r#"{"t": Infinity}"#, None).unwrap_err();
        assert!(inf.contains("NaN and Infinity"), "{inf}");
        let huge = check(r#"{"t": 1e400}"#, None).unwrap_err();
        assert!(huge.contains("is not JSON"), "{huge}");
        for (text, kind) in [("[1, 2]", "an array"), ("3", "a number"), ("null", "null")] {
            let e = check(text, None).unwrap_err();
            assert!(
                e.contains(&format!("not a JSON object (found {kind})")),
                "{e}"
            );
        }
        assert!(check("", None).unwrap_err().contains("is not JSON"));
    }

    #[test]
    fn a_block_writes_one_object_per_member() {
        let keys = vec!["a".to_owned(), "b".to_owned()];
        let keys = Some(keys.as_slice());
        assert!(check(r#"{"members": {"a": {"t": 1}, "b": {"t": 2}}}"#, keys).is_ok());
        let e = check(r#"{"t": 1}"#, keys).unwrap_err();
        assert!(e.starts_with("has no `members`"), "{e}");
        let e = check(r#"{"members": [1]}"#, keys).unwrap_err();
        assert!(
            e.starts_with("has `members` as an array, not an object"),
            "{e}"
        );
        let e = check(r#"{"members": {"a": {"t": 1}}}"#, keys).unwrap_err();
        assert!(
            e.starts_with("has no member `b` (the block is `a`, `b`)"),
            "{e}"
        );
        let e = check(r#"{"members": {"a": {"t": 1}, "b": 2}}"#, keys).unwrap_err();
        assert!(
            e.starts_with("member `b` is a number, not an object"),
            "{e}"
        );
        let e = check(r#"{"members": {"a": {}, "b": {}, "c": {}}}"#, keys).unwrap_err();
        assert!(
            e.starts_with("has member `c`, which is not in the block"),
            "{e}"
        );
    }
}
