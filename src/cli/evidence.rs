//! What `explain` shows of a measuring run's `results.json`: its verdict,
//! the flags with their evidence, the batches left out, and the GPU's and
//! the host's state during the timed window.

use std::path::Path;

use serde_json::Value;

/// The run's `results.json` at `rel` under `root` (its `validity`,
/// `telemetry` and `settle`), and the lines `explain` prints for it; None
/// without a verdict.
pub(super) fn of(root: &Path, rel: &Path) -> Option<(Value, Vec<String>)> {
    let r: Value = serde_json::from_slice(&std::fs::read(root.join(rel)).ok()?).ok()?;
    let results = rel;
    let validity = r.get("validity")?;
    let mut lines = vec![format!(
        "measurement ({}): {}",
        results.display(),
        validity.get("verdict")?.as_str()?
    )];
    for f in validity
        .get("flags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(detail) = f.get("detail").and_then(Value::as_str) {
            lines.push(format!("  {detail}"));
        }
    }
    let telemetry = r.get("telemetry");
    let batches = telemetry
        .and_then(|t| t.get("batch_sm_mhz"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let excluded = validity
        .get("excluded_batches")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if excluded > 0 {
        lines.push(format!(
            "  left out of the summary (throttled): {excluded} of {batches} batches"
        ));
    }
    if let Some(t) = telemetry {
        lines.push(gpu_line(t));
        if let Some(h) = t.get("host").filter(|h| h.is_object()) {
            let cores = h.get("cores").and_then(Value::as_array).map_or(0, Vec::len);
            let pinned = h.get("pinned").and_then(Value::as_bool) == Some(true);
            let foreign = h
                .get("foreign_cores")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            lines.push(format!(
                "  host: {cores} core(s) ({}), other work {foreign:.2} core(s)",
                if pinned {
                    "pinned"
                } else {
                    "not pinned: judged when they were busy"
                }
            ));
        }
        if let Some(w) = t.get("waited_for_gpu").filter(|w| w.is_object()) {
            lines.push(format!(
                "  waited {:.1} s for other processes on the GPU ({}){}",
                w.get("seconds").and_then(Value::as_f64).unwrap_or(0.0),
                w.get("processes").map(Value::to_string).unwrap_or_default(),
                if w.get("alone").and_then(Value::as_bool) == Some(true) {
                    ""
                } else {
                    "; they stayed"
                }
            ));
        }
    }
    if let Some(s) = r.get("settle").filter(|s| s.is_object()) {
        lines.push(format!(
            "  settle: {} more warm-up batches, {}",
            s.get("batches").and_then(Value::as_u64).unwrap_or(0),
            if s.get("settled").and_then(Value::as_bool) == Some(true) {
                "settled"
            } else {
                "did not settle"
            }
        ));
    }
    let evidence = serde_json::json!({
        "validity": validity,
        "telemetry": telemetry.map(|t| {
            let mut t = t.clone();
            if let Some(o) = t.as_object_mut() {
                for long in ["series", "batch_sm_mhz", "batch_reasons"] {
                    o.remove(long);
                }
            }
            t
        }),
        "settle": r.get("settle"),
    });
    Some((evidence, lines))
}

/// `GPU (nvml, 356 readings every 20 ms): SM clock 1980/1980/1980 MHz, …`.
fn gpu_line(t: &Value) -> String {
    let source = t.get("source").and_then(Value::as_str).unwrap_or("?");
    let samples = t.get("samples").and_then(Value::as_u64).unwrap_or(0);
    if samples == 0 {
        return format!("  GPU: no readings ({source})");
    }
    let spread = |k: &str, unit: &str| -> Option<String> {
        let s = t.get(k)?;
        let f = |q: &str| {
            s.get(q)
                .and_then(Value::as_f64)
                .map_or("?".to_owned(), |v| format!("{v:.0}"))
        };
        Some(format!(
            "{k} {}/{}/{} {unit}",
            f("min"),
            f("median"),
            f("max")
        ))
    };
    let parts: Vec<String> = [("sm_mhz", "MHz"), ("temp_c", "°C"), ("power_w", "W")]
        .iter()
        .filter_map(|(k, u)| spread(k, u))
        .collect();
    let reasons = t
        .get("reasons_seen")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .map_or("none".to_owned(), |a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        });
    let others = t
        .get("other_processes")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .map_or("none".to_owned(), |a| {
            a.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        });
    format!(
        "  GPU ({source}, {samples} readings every {} ms; min/median/max): {}; clock-event reasons: {reasons}; other processes: {others}",
        t.get("interval_ms").and_then(Value::as_f64).unwrap_or(0.0),
        parts.join(", ")
    )
}
