//! Invalid runs: a measurement whose `results.json` says it is invalid is
//! stale and measured again in its place, until its key was measured
//! invalid `MAX_INVALID` times; then it is kept. `--accept-invalid` keeps
//! it at once; a valid measurement clears the verdict.

use super::*;
use crate::engine::plan::ReasonKind;
use crate::engine::validity::MAX_INVALID;

const MEASURED: &str = r#"Pipeline(stages: {
    "bench": Stage(matrix: {"m": ["a", "b"]},
                   task: Command(run: "bench ${m}", measure: true, outputs: ["results.json"])),
    "report": Stage(needs: ["bench"], task: Command(run: "report ${needs.bench}", outputs: ["r.txt"])),
})"#;

const INVALID: &str = r#"{"t": {"median": 1.0}, "validity": {"verdict": "invalid", "flags": [
    {"kind": "throttled", "detail": "throttled in 18 % of batches (sw_power_cap)", "invalidates": true}]}}"#;
const VALID: &str = r#"{"t": {"median": 1.0}, "validity": {"verdict": "valid", "flags": []}}"#;

fn bench() -> Bench {
    let b = Bench::new(MEASURED, &[]);
    b.fake.plan("bench[m=a]", Plan::Write(INVALID.into()));
    b.fake.plan("bench[m=b]", Plan::Write(VALID.into()));
    b
}

fn invalid_detail(b: &Bench, id: &str) -> Option<String> {
    let stale = b.stale();
    let reasons = stale.get(id)?;
    reasons
        .iter()
        .find(|r| r.kind == ReasonKind::Invalid)
        .map(|r| r.detail.clone())
}

#[test]
fn an_invalid_run_is_measured_again_until_the_limit_then_kept() {
    let b = bench();
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    assert_eq!(
        invalid_detail(&b, "bench[m=a]").as_deref(),
        Some("throttled in 18 % of batches (sw_power_cap) (measured 1 of at most 3 times)")
    );
    assert!(
        !b.stale().contains_key("bench[m=b]"),
        "a valid run is fresh"
    );
    for n in 2..=MAX_INVALID {
        let o = b.build(Opts::default());
        assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
        // The same results again: the report is not run (early cutoff).
        assert_eq!(o.started(), ["bench[m=a]"], "build {n}");
        if n < MAX_INVALID {
            let detail = invalid_detail(&b, "bench[m=a]").expect("still invalid");
            assert!(detail.contains(&format!("measured {n} of")), "{detail}");
        }
    }
    // Measured invalid MAX_INVALID times: kept, with its verdict.
    assert!(b.stale().is_empty(), "{:?}", b.stale());
    let o = b.build(Opts::default());
    assert!(o.started().is_empty(), "{:?}", o.started());
}

#[test]
fn a_valid_measurement_clears_the_verdict_and_accept_invalid_keeps_it() {
    let b = bench();
    b.build(Opts::default());
    let kept = b.build(Opts {
        accept_invalid: true,
        ..Opts::default()
    });
    assert!(kept.started().is_empty(), "--accept-invalid runs nothing");
    assert!(
        invalid_detail(&b, "bench[m=a]").is_some(),
        "and changes no record"
    );
    b.fake.plan("bench[m=a]", Plan::Write(VALID.into()));
    let o = b.build(Opts::default());
    // Its results changed, so the report that reads them runs too.
    assert_eq!(o.started(), ["bench[m=a]", "report"]);
    assert!(b.stale().is_empty(), "{:?}", b.stale());
}
