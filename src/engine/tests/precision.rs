//! Precision targets: repetitions beyond `repeat` run, in rounds, only
//! while a configuration's interval is wider than its target and its
//! budget lasts; the others are not needed, and say why.

use super::*;
use crate::engine::plan::{ReasonKind, Verdict};

/// Three configurations, at least three repetitions each, at most `${maxr}`,
/// until the median is known within ±`${ci}`.
const PRECISE: &str = r#"Pipeline(params: {"ci": 0.05, "maxr": 6}, stages: {
    "bench": Stage(matrix: {"m": ["a", "b", "c"]},
                   precision: (metric: "t.median", ci_rel: "${ci}", max_repeat: "${maxr}"),
                   task: Command(run: "bench ${m}", measure: true, outputs: ["results.json"])),
    "report": Stage(needs: ["bench"], task: Command(run: "report ${needs.bench}", outputs: ["r.txt"])),
})"#;

/// What each repetition measures: `a` is steady (precise after 3), `b`
/// wanders (never precise: its budget of 6 runs is spent), `c` settles
/// after 4.
const VALUES: [(&str, [f64; 8]); 3] = [
    ("a", [10.0, 10.1, 9.9, 10.0, 10.0, 10.0, 10.0, 10.0]),
    ("b", [10.0, 12.0, 8.0, 11.0, 9.0, 10.0, 12.0, 8.0]),
    ("c", [10.0, 10.3, 9.7, 10.0, 10.0, 10.0, 10.0, 10.0]),
];

fn precise() -> Bench {
    let b = Bench::new(PRECISE, &[]);
    plan_values(&b);
    b
}

fn plan_values(b: &Bench) {
    for (m, values) in VALUES {
        for (k, v) in values.iter().enumerate() {
            b.fake.plan(
                &format!("bench[m={m},rep={}]", k + 1),
                Plan::Write(format!(r#"{{"t": {{"median": {v}}}}}"#)),
            );
        }
    }
}

fn unneeded(o: &Outcome) -> Vec<(String, String)> {
    o.events
        .iter()
        .filter_map(|e| match e {
            Event::Unneeded { node, why } => Some((node.clone(), why.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn repetitions_are_added_in_rounds_until_precise_or_the_budget_is_spent() {
    let b = precise();
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    let bench: Vec<String> = o
        .started()
        .into_iter()
        .filter(|id| id.starts_with("bench["))
        .collect();
    let rounds: Vec<&str> = bench
        .iter()
        .map(|id| id.rsplit("rep=").next().unwrap().trim_end_matches(']'))
        .collect();
    // Three rounds for all; a fourth for b and c; b alone after.
    assert_eq!(
        rounds,
        ["1", "1", "1", "2", "2", "2", "3", "3", "3", "4", "4", "5", "6"],
        "{bench:?}"
    );
    assert!(bench[9..11].contains(&"bench[m=b,rep=4]".to_string()));
    assert!(bench[9..11].contains(&"bench[m=c,rep=4]".to_string()));
    let skipped: BTreeMap<String, String> = unneeded(&o).into_iter().collect();
    assert_eq!(
        skipped.keys().cloned().collect::<Vec<_>>(),
        [
            "bench[m=a,rep=4]",
            "bench[m=a,rep=5]",
            "bench[m=a,rep=6]",
            "bench[m=c,rep=5]",
            "bench[m=c,rep=6]"
        ]
    );
    assert!(
        skipped["bench[m=a,rep=4]"].starts_with("precise at ±2.5 % after 3 runs"),
        "{skipped:?}"
    );
    assert!(
        skipped["bench[m=c,rep=5]"].starts_with("precise at ±3.9 % after 4 runs"),
        "{skipped:?}"
    );
    assert_eq!(
        skipped["bench[m=a,rep=5]"],
        "repetition 4 was not needed either"
    );
    // The report ran once, after the last repetition, over those needed.
    assert_eq!(o.started().last().map(String::as_str), Some("report"));
    let reasons = o.reasons();
    assert_eq!(
        reasons["bench[m=b,rep=4]"],
        ["imprecise: ±51.8 % > ±5 % after 3 runs"],
        "imprecise replaces never_built"
    );
    assert!(b.stale().is_empty(), "{:?}", b.stale());

    // A second build runs nothing and reaches the same verdicts.
    let again = b.build(Opts::default());
    assert!(again.started().is_empty(), "{:?}", again.started());
    assert_eq!(unneeded(&again).len(), 5);
}

#[test]
fn the_plan_says_why_a_repetition_runs_and_why_it_does_not() {
    let b = precise();
    // Before any build, only the first three repetitions are known to run.
    let stale = b.stale();
    assert_eq!(
        stale.len(),
        10,
        "9 first repetitions and the report: {:?}",
        stale.keys()
    );
    b.build(Opts::default());
    let all: Vec<usize> = (0..b.graph.nodes.len()).collect();
    let plan = b.plan();
    let verdict = |id: &str| &plan[&b.idx(id)].verdict;
    assert!(
        matches!(verdict("bench[m=a,rep=4]"), Verdict::Unneeded(w) if w.starts_with("precise"))
    );
    assert!(verdict("bench[m=b,rep=6]").is_fresh());
    let standings = crate::engine::standing::standings(&b.graph, b.root(), &all, |i| {
        plan.get(&i).map(|e| &e.verdict)
    });
    let by: BTreeMap<&str, (&str, usize)> = standings
        .iter()
        .map(|s| (s.configuration.as_str(), (s.state, s.runs)))
        .collect();
    assert_eq!(by["bench[m=a]"], ("precise", 3));
    assert_eq!(by["bench[m=b]"], ("budget_spent", 6));
    assert_eq!(by["bench[m=c]"], ("precise", 4));
    let spent = standings
        .iter()
        .find(|s| s.state == "budget_spent")
        .unwrap();
    assert!(
        spent.detail.starts_with("budget spent at ±"),
        "{}",
        spent.detail
    );
    assert!(
        spent.detail.ends_with("after 6 runs (max_repeat 6)"),
        "{}",
        spent.detail
    );
}

#[test]
fn raising_the_budget_or_the_target_makes_exactly_those_stale_again() {
    let mut b = precise();
    b.build(Opts::default());
    // More budget: b's seventh repetition, for that reason alone (and the
    // report, which will see it).
    b.reload(&[("maxr", "8")]);
    plan_values(&b);
    let stale = b.stale();
    let ids: Vec<&String> = stale.keys().collect();
    assert_eq!(ids, ["bench[m=b,rep=7]", "report"], "{stale:?}");
    let reason = &stale["bench[m=b,rep=7]"][0];
    assert_eq!(reason.kind, ReasonKind::Imprecise);
    assert!(
        reason.detail.starts_with("±") && reason.detail.ends_with("after 6 runs"),
        "{}",
        reason.detail
    );
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    let ran: Vec<String> = o
        .started()
        .into_iter()
        .filter(|id| id.starts_with("bench"))
        .collect();
    assert_eq!(ran, ["bench[m=b,rep=7]", "bench[m=b,rep=8]"]);
    assert!(
        o.started().contains(&"report".to_string()),
        "the report sees two more repetitions"
    );

    // A tighter target: a and c need more, b has spent its budget.
    b.reload(&[("maxr", "8"), ("ci", "0.001")]);
    plan_values(&b);
    let stale = b.stale();
    let ids: Vec<&String> = stale.keys().collect();
    assert_eq!(
        ids,
        ["bench[m=a,rep=4]", "bench[m=c,rep=5]", "report"],
        "{stale:?}"
    );
    assert!(stale["bench[m=a,rep=4]"][0]
        .detail
        .starts_with("±2.5 % > ±0.1 % after 3 runs"));
}

#[test]
fn a_metric_the_results_lack_fails_the_repetition_that_needs_it() {
    let b = Bench::new(&PRECISE.replace("t.median", "t.p99"), &[]);
    plan_values(&b);
    let o = b.build(Opts {
        keep_going: true,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Failed);
    let failure = o.failure("bench[m=a,rep=4]");
    assert!(
        failure.message.contains("no number at `t.p99`"),
        "{}",
        failure.message
    );
    assert!(failure.message.contains("precision"), "{}", failure.message);
}

#[test]
fn a_stage_that_follows_a_repetition_is_not_needed_with_it() {
    let pipeline = PRECISE.replace(
        r#"    "report": Stage("#,
        r#"    "post": Stage(for_each: "bench", task: Command(run: "post ${needs.bench}", outputs: ["p.txt"])),
    "report": Stage("#,
    );
    let b = Bench::new(&pipeline, &[]);
    plan_values(&b);
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    let skipped: BTreeMap<String, String> = unneeded(&o).into_iter().collect();
    assert_eq!(
        skipped["post[m=a,rep=4]"],
        "follows bench[m=a,rep=4], which was not needed"
    );
    assert_eq!(skipped.len(), 10, "5 repetitions and their 5 followers");
    assert!(o.started().contains(&"post[m=b,rep=6]".to_string()));
    assert!(b.stale().is_empty(), "{:?}", b.stale());
    let plan = b.plan();
    assert!(matches!(
        &plan[&b.idx("post[m=c,rep=6]")].verdict,
        Verdict::Unneeded(w) if w == "follows bench[m=c,rep=6], which was not needed"
    ));
}
