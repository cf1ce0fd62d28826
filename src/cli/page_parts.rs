//! The small pieces of `vitgraph report`: dates and ages, links between
//! files, a shortened key, a CSV table, the lines of a report's environment.

use std::path::{Component, Path};

use crate::page::Table;

/// Key parts longer than this are left to `vitgraph explain`.
const KEY_AT_MOST: usize = 4096;

/// The lane of an attempt that ran as a SLURM job: `job:<id>`.
pub(super) fn job_lane(job: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(job).unwrap_or_default();
    match v.get("id").or_else(|| v.get("job_id")) {
        Some(serde_json::Value::String(s)) => format!("job:{s}"),
        Some(other) => format!("job:{other}"),
        None => "job:?".into(),
    }
}

/// The key parts as the page shows them: the params left out (the page
/// shows them already), hashes cut to 12 hex digits, long maps (a report's
/// thousands of upstream manifests) cut to their size; a key too long even
/// then is left to `vitgraph explain`.
pub(super) fn shortened_key(raw: &crate::store::RawJson) -> serde_json::Value {
    use serde_json::Value;
    fn short(v: &mut Value) {
        match v {
            Value::String(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
                s.truncate(12);
            }
            Value::Object(map) => map.values_mut().for_each(short),
            Value::Array(items) => items.iter_mut().for_each(short),
            _ => {}
        }
    }
    let mut v = raw.value();
    let mut parts = match v.get_mut("parts").map(Value::take) {
        Some(p) => p,
        None => v,
    };
    if let Value::Object(map) = &mut parts {
        map.retain(|_, part| !matches!(part, Value::Object(m) if m.is_empty()));
        for name in ["inputs", "upstream"] {
            if let Some(part) = map.get_mut(name) {
                let n = part.as_object().map_or(0, |m| m.len());
                if n > 8 {
                    *part = Value::String(format!("{n} entries (vitgraph explain lists them)"));
                }
            }
        }
    }
    short(&mut parts);
    if parts.to_string().len() > KEY_AT_MOST {
        return Value::String("too long to show: `vitgraph explain NODE` prints it".into());
    }
    parts
}

/// The lines of `report.md`'s "Environment" section.
pub(super) fn environment_lines(md: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in md.lines() {
        if line.starts_with("## ") {
            inside = line.trim() == "## Environment";
            continue;
        }
        if inside {
            if let Some(item) = line.strip_prefix("- ") {
                lines.push(item.to_string());
            }
        }
    }
    lines
}

/// A CSV text as a table (RFC 4180: quoted fields, doubled quotes).
pub(super) fn parse_csv(text: &str) -> Table {
    let mut records: Vec<Vec<String>> = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => record.push(std::mem::take(&mut field)),
            ('\n', false) => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            ('\r', false) => {}
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    let mut it = records.into_iter();
    Table {
        names: it.next().unwrap_or_default(),
        rows: it.collect(),
    }
}

/// A relative link from the page's folder to `target` (both absolute).
/// Points a measurement strip draws at most.
const STRIP_POINTS: usize = 300;

/// What a node's details show of a measuring run's `results.json`: every
/// timed batch's latency in order (`[ms, 1 if left out as throttled]`,
/// evenly thinned), the verdict and its flags, and the GPU readings
/// (`[t_ms, sm_mhz, temp_c, throttled]`). None when the file is not there.
/// A block measured together (`members` in its `results.json`) gives
/// `{"members": [{"key": …, …view}, …]}`, one view per member.
pub(super) fn measurement_view(path: &Path) -> Option<serde_json::Value> {
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    if let Some(members) = r.get("members").and_then(serde_json::Value::as_object) {
        let views: Vec<serde_json::Value> = members
            .iter()
            .filter_map(|(key, m)| {
                let mut v = view_of(m)?;
                v["key"] = key.clone().into();
                Some(v)
            })
            .collect();
        return (!views.is_empty()).then(|| serde_json::json!({ "members": views }));
    }
    view_of(&r)
}

/// [`measurement_view`] of one run's results.
fn view_of(r: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::{json, Value};
    let numbers = |v: Option<&Value>| -> Vec<f64> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let validity = r.get("validity");
    let kept = numbers(r.get("latency_samples_ms"));
    let excluded_at: Vec<usize> = numbers(validity.and_then(|v| v.get("excluded_batches")))
        .into_iter()
        .map(|i| i as usize)
        .collect();
    let mut excluded = numbers(validity.and_then(|v| v.get("excluded_latency_ms"))).into_iter();
    let mut kept_iter = kept.into_iter();
    let total = excluded_at.len() + kept_iter.len();
    let batches: Vec<(f64, u8)> = (0..total)
        .filter_map(|i| {
            if excluded_at.contains(&i) {
                excluded.next().map(|v| (v, 1))
            } else {
                kept_iter.next().map(|v| (v, 0))
            }
        })
        .collect();
    let step = batches.len().div_ceil(STRIP_POINTS).max(1);
    let lat: Vec<(f64, u8)> = batches.iter().step_by(step).copied().collect();
    let telemetry = r.get("telemetry");
    let series: Vec<(f64, f64, f64, u8)> = telemetry
        .and_then(|t| t.get("series"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| {
                    let f = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                    let reasons = s.get("reasons").and_then(Value::as_u64).unwrap_or(0);
                    let throttled = u8::from(reasons & crate::telemetry::THROTTLE_REASONS != 0);
                    (f("t_ms"), f("sm_mhz"), f("temp_c"), throttled)
                })
                .collect()
        })
        .unwrap_or_default();
    if validity.is_none() && batches.is_empty() {
        return None;
    }
    let flags: Vec<&str> = validity
        .and_then(|v| v.get("flags"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.get("detail")?.as_str()).collect())
        .unwrap_or_default();
    Some(json!({
        "verdict": validity.and_then(|v| v.get("verdict")).cloned().unwrap_or(Value::Null),
        "flags": flags,
        "batches": total,
        "every": step,
        "lat": lat,
        "source": telemetry.and_then(|t| t.get("source")).cloned().unwrap_or(Value::Null),
        "series": series,
    }))
}

/// Kernels a node's details list per device.
const TOP_KERNELS: usize = 10;

/// An analysis's top kernels by GPU time, per device, from its
/// `metrics.json`: `[{device, kernels: [[name, time %, total ns, count,
/// mean ns]]}]`; None without kernels.
pub(super) fn top_kernels(path: &Path) -> Option<serde_json::Value> {
    use serde_json::{json, Value};
    let m: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let devices: Vec<Value> = m
        .get("devices")?
        .as_array()?
        .iter()
        .filter_map(|d| {
            let kernels: Vec<Value> = d
                .get("kernels")?
                .as_array()?
                .iter()
                .take(TOP_KERNELS)
                .map(|k| {
                    json!([
                        k.get("name"),
                        k.get("time_pct"),
                        k.get("total_ns"),
                        k.get("instances"),
                        k.get("avg_ns")
                    ])
                })
                .collect();
            (!kernels.is_empty()).then(|| json!({"device": d.get("device"), "kernels": kernels}))
        })
        .collect();
    (!devices.is_empty()).then_some(Value::Array(devices))
}

/// An analysis's measured window as the page draws it (see
/// `analysis::window_out`): None when the analysis wrote none.
/// An analysis's parts of its node's details: its top kernels, its
/// window's tracks, and its window's Perfetto events when they fit in
/// [`PERFETTO_EMBED`] and what is left of the page's `budget`. Returns the
/// bytes they take.
pub(super) fn analysis_view(dir: &Path, budget: usize, d: &mut crate::page::NodeDetails) -> usize {
    use crate::analysis::window_out::{WINDOW_TRACE, WINDOW_TRACKS};
    d.kernels = top_kernels(&dir.join("metrics.json"));
    d.tracks = window_tracks(&dir.join(WINDOW_TRACKS));
    let mut size: usize = [&d.kernels, &d.tracks]
        .iter()
        .map(|v| v.as_ref().map_or(0, |k| k.to_string().len()))
        .sum();
    let trace = dir.join(WINDOW_TRACE);
    let fits = |n: u64| (n as usize) <= PERFETTO_EMBED && size + n as usize <= budget;
    if std::fs::metadata(&trace).is_ok_and(|m| m.is_file() && fits(m.len())) {
        d.perfetto = std::fs::read_to_string(&trace).ok();
        size += d.perfetto.as_ref().map_or(0, String::len);
    }
    size
}

/// A duration as the page writes it: `45 ms` under a second, `12.3 s`
/// under a minute, `4 min 5 s` beyond (never `0.0 s` for 45 ms).
pub(super) fn duration_words(ms: i64) -> String {
    match ms {
        ..1000 => format!("{} ms", ms.max(0)),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The largest window trace a page carries inside it (`window.perfetto.json`).
const PERFETTO_EMBED: usize = 512 << 10;

pub(super) fn window_tracks(path: &Path) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v.get("kernels")?.as_array()?;
    Some(v)
}

/// A failed or interrupted last attempt as a node's details show it: its
/// status, when it started, the error, the exit status or signal, and the
/// command a `Command` ran. None for an attempt that ran or is running.
pub(super) fn attempt_view(
    attempt: &crate::store::Attempt,
    task: &crate::tasks::TaskSpec,
) -> Option<serde_json::Value> {
    use crate::store::AttemptStatus;
    if !matches!(
        attempt.status,
        AttemptStatus::Failed | AttemptStatus::Interrupted
    ) {
        return None;
    }
    let failure = attempt
        .failure
        .as_ref()
        .map(|f| f.value())
        .unwrap_or_default();
    let error = failure
        .get("error")
        .and_then(|e| e.as_str())
        .map(str::to_owned)
        .or_else(|| attempt.message.clone());
    let command = match task {
        crate::tasks::TaskSpec::Command(c) => Some(c.run.clone()),
        _ => None,
    };
    Some(serde_json::json!({
        "status": attempt.status.as_str(),
        "started": utc(attempt.started_at_ms),
        "error": error,
        "kind": failure.get("kind"),
        "exit_code": failure.get("exit_code"),
        "signal": failure.get("signal"),
        "command": command,
    }))
}

pub(super) fn link(from_dir: &Path, target: &Path) -> String {
    let from: Vec<Component> = from_dir.components().collect();
    let to: Vec<Component> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = Vec::new();
    for _ in common..from.len() {
        parts.push("..".into());
    }
    for c in &to[common..] {
        parts.push(
            c.as_os_str()
                .to_string_lossy()
                .replace('%', "%25")
                .replace('#', "%23")
                .replace('?', "%3F"),
        );
    }
    parts.join("/")
}

/// `90s`, `30m`, `12h`, `2d` (or a bare number of hours) in milliseconds.
pub(super) fn parse_age(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (num, unit) = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((t, "h"), |i| (&t[..i], &t[i..]));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not an age such as `90m`, `12h` or `2d`"))?;
    let ms = match unit {
        "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        _ => {
            return Err(format!(
                "`{text}`: the unit is s, m, h or d (`90m`, `12h`, `2d`)"
            ))
        }
    };
    Ok((n * ms) as i64)
}

pub(super) use crate::clock::utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration_words(45), "45 ms");
        assert_eq!(duration_words(12_340), "12.3 s");
        assert_eq!(duration_words(245_000), "4 min 5 s");
    }

    #[test]
    fn a_measurement_view_puts_left_out_batches_back_in_their_places() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.json");
        std::fs::write(
            &path,
            r#"{"latency_samples_ms": [1.0, 1.1, 1.2],
                "validity": {"verdict": "invalid", "excluded_batches": [1], "excluded_latency_ms": [9.0],
                             "flags": [{"detail": "throttled in 25 % of batches (sw_power_cap)", "invalidates": true}]},
                "telemetry": {"source": "nvml", "series": [{"t_ms": 0.5, "sm_mhz": 1980, "temp_c": 40, "reasons": 4}]}}"#,
        )
        .expect("write");
        let v = measurement_view(&path).expect("a view");
        assert_eq!(
            v["lat"],
            serde_json::json!([[1.0, 0], [9.0, 1], [1.1, 0], [1.2, 0]])
        );
        assert_eq!(v["batches"], 4);
        assert_eq!(v["verdict"], "invalid");
        assert_eq!(v["series"], serde_json::json!([[0.5, 1980.0, 40.0, 1]]));
        assert_eq!(v["flags"][0], "throttled in 25 % of batches (sw_power_cap)");
        assert!(measurement_view(&dir.path().join("missing.json")).is_none());

        // A block measured together: one view per member, with its key.
        std::fs::write(
            &path,
            r#"{"members": {"a": {"latency_samples_ms": [1.0, 2.0], "validity": {"verdict": "valid"}},
                            "b": {"latency_samples_ms": [3.0], "validity": {"verdict": "invalid"}}},
                "method": {"design": "together"}}"#,
        )
        .expect("write");
        let v = measurement_view(&path).expect("a view");
        let members = v["members"].as_array().expect("members");
        assert_eq!(members.len(), 2);
        assert_eq!(members[0]["key"], "a");
        assert_eq!(members[0]["lat"], serde_json::json!([[1.0, 0], [2.0, 0]]));
        assert_eq!(members[1]["key"], "b");
        assert_eq!(members[1]["verdict"], "invalid");
    }

    #[test]
    fn an_analysis_lists_its_top_ten_kernels_per_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("metrics.json");
        let kernels: Vec<serde_json::Value> = (0..12)
            .map(|i| {
                serde_json::json!({"name": format!("k{i}"), "time_pct": 50.0 - f64::from(i),
                                        "total_ns": 1000 - i, "instances": 3, "avg_ns": 333.3})
            })
            .collect();
        std::fs::write(
            &path,
            serde_json::json!({"devices": [{"device": 0, "kernels": kernels}, {"device": 1, "kernels": []}]})
                .to_string(),
        )
        .expect("write");
        let v = top_kernels(&path).expect("kernels");
        assert_eq!(
            v.as_array().map(Vec::len),
            Some(1),
            "a device without kernels is left out"
        );
        assert_eq!(v[0]["kernels"].as_array().map(Vec::len), Some(10));
        assert_eq!(
            v[0]["kernels"][0],
            serde_json::json!(["k0", 50.0, 1000, 3, 333.3])
        );
        std::fs::write(&path, r#"{"devices": [{"device": 0, "kernels": []}]}"#).expect("write");
        assert!(top_kernels(&path).is_none(), "a CPU trace has none");
    }

    #[test]
    fn a_long_run_is_thinned_to_the_strips_points() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.json");
        let samples: Vec<f64> = (0..1000).map(f64::from).collect();
        std::fs::write(
            &path,
            serde_json::json!({"latency_samples_ms": samples}).to_string(),
        )
        .expect("write");
        let v = measurement_view(&path).expect("a view");
        assert_eq!(v["every"], 4);
        assert_eq!(v["lat"].as_array().map(Vec::len), Some(250));
        assert_eq!(v["lat"][1], serde_json::json!([4.0, 0]));
    }
}
