//! Invalid runs: a measurement whose `results.json` says `validity.verdict:
//! "invalid"` (the GPU throttled, another process intruded, the latency
//! was still warming up; see `telemetry::verdict`) is recorded like any
//! run, with its verdict and how many times in a row its key has now been
//! measured invalid in its record (`env.validity`). Such a run is stale
//! (`invalid`) and measured again, until [`MAX_INVALID`] measurements of
//! the key were invalid: then it is kept with its verdict, and what reads
//! it sees the flag. `--accept-invalid` keeps what there is at once.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::RunRecord;

/// Measurements of one key that may come out invalid before the last one
/// is kept.
pub(crate) const MAX_INVALID: u32 = 3;

/// What a run's record says about its validity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Invalid {
    /// The invalidating flags, in words.
    pub reason: String,
    /// How many measurements of the key in a row were invalid, this one
    /// included.
    pub measured: u32,
}

impl Invalid {
    /// Why the run is stale (the detail of the reason `invalid`), or None
    /// once it is to be kept.
    pub(crate) fn stale_reason(&self, accept: bool) -> Option<String> {
        (!accept && self.measured < MAX_INVALID).then(|| {
            format!(
                "{} (measured {} of at most {MAX_INVALID} times)",
                self.reason, self.measured
            )
        })
    }
}

/// The validity of a recorded run, if it was invalid.
pub(crate) fn of_run(run: &RunRecord) -> Option<Invalid> {
    // Most records have none: a substring test spares parsing them.
    if !run.env.0.contains("\"validity\"") {
        return None;
    }
    let env: serde_json::Value = run.env.value();
    serde_json::from_value(env.get("validity")?.clone()).ok()
}

/// The environment record of a run that has just finished in `staging`:
/// `env`, with `validity` added when its `results.json` says it is
/// invalid or its A/A check (`aa`, with its reason when off) failed, and
/// `aa_check` with the check's ratio. `before`: the key's run it replaces,
/// if any.
pub(crate) fn record_env(
    env: &serde_json::Value,
    staging: &Path,
    before: Option<&RunRecord>,
    aa: Option<&(crate::tasks::aa_check::AaCheck, Option<String>)>,
) -> Option<serde_json::Value> {
    let reasons: Vec<String> = invalid_reason(&staging.join("results.json"))
        .into_iter()
        .chain(aa.and_then(|(_, reason)| reason.clone()))
        .collect();
    if reasons.is_empty() && aa.is_none() {
        return None;
    }
    let mut env = match env {
        serde_json::Value::Object(map) => map.clone(),
        serde_json::Value::Null => serde_json::Map::new(),
        other => {
            let mut map = serde_json::Map::new();
            map.insert("record".into(), other.clone());
            map
        }
    };
    if let Some((check, _)) = aa {
        env.insert("aa_check".into(), serde_json::to_value(check).ok()?);
    }
    if !reasons.is_empty() {
        let measured = before.and_then(of_run).map_or(0, |i| i.measured) + 1;
        let reason = reasons.join("; ");
        env.insert(
            "validity".into(),
            serde_json::to_value(Invalid { reason, measured }).ok()?,
        );
    }
    Some(serde_json::Value::Object(env))
}

/// The invalidating flags of a `results.json` whose verdict is `invalid`;
/// for a block measured together (`members`), those of every invalid
/// member, each named: one disturbed member measures the block again.
fn invalid_reason(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    if !text.contains("\"validity\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    if let Some(members) = value.get("members").and_then(|m| m.as_object()) {
        let reasons: Vec<String> = members
            .iter()
            .filter_map(|(key, m)| Some(format!("member `{key}`: {}", reason_of(m)?)))
            .collect();
        return (!reasons.is_empty()).then(|| reasons.join("; "));
    }
    reason_of(&value)
}

/// One run's invalidating flags, where its verdict is `invalid`.
fn reason_of(value: &serde_json::Value) -> Option<String> {
    let validity = value.get("validity")?;
    if validity.get("verdict")?.as_str()? != "invalid" {
        return None;
    }
    let reasons: Vec<&str> = validity
        .get("flags")?
        .as_array()?
        .iter()
        .filter(|f| f.get("invalidates").and_then(|v| v.as_bool()) == Some(true))
        .filter_map(|f| f.get("detail")?.as_str())
        .collect();
    Some(if reasons.is_empty() {
        "the run's verdict is invalid".to_owned()
    } else {
        reasons.join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RawJson;

    fn run_with_env(env: serde_json::Value) -> RunRecord {
        RunRecord {
            node_id: "bench".into(),
            stage: "bench".into(),
            key: crate::hash::ContentHash([1; 32]),
            key_parts: RawJson("{}".into()),
            outputs: Vec::new(),
            env: RawJson(env.to_string()),
            started_at_ms: 0,
            duration_ms: 1,
            log: None,
        }
    }

    #[test]
    fn an_invalid_results_json_adds_its_verdict_and_counts_the_measurements() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("results.json"),
            r#"{"validity": {"verdict": "invalid", "flags": [
                {"kind": "throttled", "detail": "throttled in 18 % of batches (sw_power_cap)", "invalidates": true},
                {"kind": "undersampled", "detail": "undersampled: 6 batches", "invalidates": false}]}}"#,
        )
        .expect("write");
        let env = serde_json::json!({"gpu": "H100"});
        let first = record_env(&env, dir.path(), None, None).expect("invalid");
        assert_eq!(first["gpu"], "H100");
        assert_eq!(first["validity"]["measured"], 1);
        assert_eq!(
            first["validity"]["reason"],
            "throttled in 18 % of batches (sw_power_cap)"
        );
        let before = run_with_env(first);
        let invalid = of_run(&before).expect("recorded invalid");
        let reason = invalid.stale_reason(false).expect("stale after 1");
        assert!(reason.contains("measured 1 of at most 3 times"), "{reason}");
        assert!(
            invalid.stale_reason(true).is_none(),
            "--accept-invalid keeps it"
        );
        let second = record_env(&env, dir.path(), Some(&before), None).expect("invalid");
        let third =
            record_env(&env, dir.path(), Some(&run_with_env(second)), None).expect("invalid");
        let kept = of_run(&run_with_env(third)).expect("recorded invalid");
        assert_eq!(kept.measured, 3);
        assert!(kept.stale_reason(false).is_none(), "kept after the third");
    }

    #[test]
    fn a_block_with_an_invalid_member_is_invalid_and_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let member = |verdict: &str| {
            serde_json::json!({"validity": {"verdict": verdict, "flags": [
                {"detail": "intruded: 31 % of the window", "invalidates": verdict == "invalid"}]}})
        };
        let write = |b: &str| {
            let doc = serde_json::json!({"members": {"a": member("valid"), "b": member(b)}});
            std::fs::write(dir.path().join("results.json"), doc.to_string()).expect("write");
        };
        let env = serde_json::json!({});
        write("invalid");
        let rec = record_env(&env, dir.path(), None, None).expect("invalid");
        assert_eq!(
            rec["validity"]["reason"],
            "member `b`: intruded: 31 % of the window"
        );
        write("valid");
        assert!(record_env(&env, dir.path(), None, None).is_none());
    }

    #[test]
    fn a_valid_or_absent_results_json_leaves_the_record_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = serde_json::json!({"gpu": "H100"});
        assert!(record_env(&env, dir.path(), None, None).is_none());
        std::fs::write(
            dir.path().join("results.json"),
            r#"{"validity": {"verdict": "valid", "flags": []}}"#,
        )
        .expect("write");
        assert!(record_env(&env, dir.path(), None, None).is_none());
        assert!(of_run(&run_with_env(env)).is_none());
    }
}
