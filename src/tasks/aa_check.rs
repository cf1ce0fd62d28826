//! The A/A self-check of a block measured together with `check: true`: the
//! block's first member is measured a second time, as `NAME#2`, beside
//! itself, so every process carries a ratio whose truth is 1.
//!
//! The ratio judged is the twin's `latency_ms.median` over the first
//! member's (or, where a member has no `latency_ms`, the first `X.median`
//! it has). Its expected noise is what the two members' own batches give:
//! each median's standard error relative to it (the order statistics
//! `√(n/4)` ranks either side, [`Statistic::rel_se`]), summed in square.
//! A process whose `|ln ratio|` is beyond [`LIMIT_SE`] such standard errors
//! measured its members under conditions that changed within the process —
//! a drift, a burst of foreign work — so its other ratios are suspect: the
//! run is recorded invalid with the ratio in its reason, and measured again
//! like a run the GPU's telemetry invalidated. On a quiet process the
//! chance of a false alarm is that of a normal beyond 4 standard
//! deviations, 6 in 100,000, more where the batches' noise is not normal.

use serde_json::Value as Json;

use crate::stats;
use crate::tasks::summary;

/// How many standard errors of the A/A ratio's log a process may be off.
pub const LIMIT_SE: f64 = 4.0;

/// One process's A/A ratio and the limit its batches allow.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AaCheck {
    /// The metric judged (`latency_ms.median`).
    pub metric: String,
    /// The twin's value over the first member's.
    pub ratio: f64,
    /// The largest `|ln ratio|` the batches allow ([`LIMIT_SE`] standard
    /// errors).
    pub limit: f64,
}

impl AaCheck {
    /// Whether the ratio is beyond what the batches allow.
    pub fn off(&self) -> bool {
        self.ratio.ln().abs() > self.limit
    }

    /// The run's invalid reason when [`off`](Self::off).
    pub fn reason(&self, baseline: &str, twin: &str) -> String {
        format!(
            "A/A check: `{twin}` / `{baseline}` {} = {:.4}, beyond the ±{:.2} % its batches allow ({LIMIT_SE} standard errors): the process's conditions changed while it measured the block",
            self.metric,
            self.ratio,
            100.0 * (self.limit.exp() - 1.0)
        )
    }
}

/// The A/A check of a block's `results.json` (`doc`), whose first member
/// is `baseline` and its twin `twin`; None where either lacks the metric or
/// its batches. Each member is read as `compare` reads a run
/// ([`summary::values_of`]: the value and its batches' standard error),
/// the limit is [`stats::ratio::aa_limit`]'s.
pub fn judge(doc: &Json, baseline: &str, twin: &str) -> Option<AaCheck> {
    let members = doc.get("members")?;
    let (b, t) = (members.get(baseline)?, members.get(twin)?);
    let head = if b.get("latency_ms").is_some() {
        "latency_ms".to_owned()
    } else {
        b.as_object()?
            .iter()
            .find(|(_, v)| v.get("median").is_some_and(Json::is_number))
            .map(|(k, _)| k.clone())?
    };
    let metric = format!("{head}.median");
    let value = |m: &Json| -> Option<stats::Value> {
        let doc = summary::parse(&serde_json::to_vec(m).ok()?).ok()?;
        summary::values_of(&doc, &[metric.as_str()])[0]
    };
    let (ratio, limit) = stats::ratio::aa_limit(value(b)?, value(t)?, LIMIT_SE)?;
    Some(AaCheck {
        metric,
        ratio,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Rng;
    use serde_json::json;

    fn member(rng: &mut Rng, level: f64) -> Json {
        let samples: Vec<f64> = (0..200)
            .map(|_| level * (1.0 + 0.01 * rng.normal()))
            .collect();
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        json!({"latency_ms": {"median": (sorted[99] + sorted[100]) / 2.0},
               "samples": {"latency_ms": samples}})
    }

    #[test]
    fn a_twin_at_its_level_passes_and_one_that_moved_is_off() {
        let mut rng = Rng::new(3);
        let doc = json!({"members": {"a": member(&mut rng, 2.0), "b": member(&mut rng, 3.7),
                                     "a#2": member(&mut rng, 2.0)}});
        let c = judge(&doc, "a", "a#2").expect("a check");
        assert_eq!(c.metric, "latency_ms.median");
        assert!(!c.off(), "{c:?}");
        // 1 % noise per batch, 200 batches: the median's error is about
        // 0.09 %, the limit about ±0.5 %.
        assert!(c.limit > 0.003 && c.limit < 0.008, "{c:?}");
        let moved = json!({"members": {"a": member(&mut rng, 2.0), "a#2": member(&mut rng, 2.04)}});
        let c = judge(&moved, "a", "a#2").unwrap();
        assert!(c.off(), "{c:?}");
        assert!(c
            .reason("a", "a#2")
            .starts_with("A/A check: `a#2` / `a` latency_ms.median = 1.0"));
        // No batches: nothing to judge by.
        let bare = json!({"members": {"a": {"latency_ms": {"median": 2.0}}, "a#2": {"latency_ms": {"median": 2.2}}}});
        assert!(judge(&bare, "a", "a#2").is_none());
    }

    #[test]
    fn false_alarms_on_quiet_processes_are_rare() {
        // 2,000 quiet processes (1 % noise per batch, no drift): the check
        // should fire on almost none.
        let mut rng = Rng::new(11);
        let fired = (0..2000)
            .filter(|_| {
                let doc =
                    json!({"members": {"a": member(&mut rng, 2.0), "a#2": member(&mut rng, 2.0)}});
                judge(&doc, "a", "a#2").unwrap().off()
            })
            .count();
        eprintln!("A/A false alarms on 2,000 quiet processes: {fired}");
        assert!(fired <= 4, "{fired}");
    }
}
