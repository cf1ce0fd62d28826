//! Blocks measured together (`together`): one node per combination of the
//! other params and `rep`, run in rounds, interrupted and resumed as a node,
//! and measured again when the block gains a member.

use super::*;

/// Two blocks (`n` = 1, 2), each measuring `m` = a and b in one process,
/// three repetitions; an analysis follows each block.
const TOGETHER: &str = r#"Pipeline(params: {"ms": ["a", "b"]}, stages: {
    "bench": Stage(matrix: {"m": "${ms}", "n": [1, 2]}, together: ["m"], repeat: 3,
                   task: Command(run: "bench ${m} ${n}", measure: true, outputs: ["results.json"])),
    "trace": Stage(for_each: "bench", task: Command(run: "trace ${needs.bench}", outputs: ["t.txt"])),
})"#;

/// Every block writes one object per member of `ms`.
fn plan_blocks(b: &Bench, ms: &[&str]) {
    let members: serde_json::Map<String, serde_json::Value> = ms
        .iter()
        .map(|m| ((*m).to_owned(), serde_json::json!({"t": {"median": 1.0}})))
        .collect();
    let doc = serde_json::json!({ "members": members }).to_string();
    for n in [1, 2] {
        for rep in 1..=3 {
            b.fake
                .plan(&format!("bench[n={n},rep={rep}]"), Plan::Write(doc.clone()));
        }
    }
}

fn bench_started(o: &Outcome) -> Vec<String> {
    o.started()
        .into_iter()
        .filter(|id| id.starts_with("bench["))
        .collect()
}

#[test]
fn a_block_is_a_node_per_other_params_and_repetition_run_in_rounds() {
    let b = Bench::new(TOGETHER, &[]);
    let ids: Vec<&str> = b.graph.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        &ids[..6],
        [
            "bench[n=1,rep=1]",
            "bench[n=1,rep=2]",
            "bench[n=1,rep=3]",
            "bench[n=2,rep=1]",
            "bench[n=2,rep=2]",
            "bench[n=2,rep=3]"
        ]
    );
    assert_eq!(b.graph.nodes[b.idx("trace[n=2,rep=3]")].rep, Some(3));
    plan_blocks(&b, &["a", "b"]);
    let o = b.build(Opts {
        jobs: 1,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    let rounds: Vec<String> = bench_started(&o)
        .iter()
        .map(|id| id.rsplit_once("rep=").unwrap().1.to_owned())
        .collect();
    assert_eq!(rounds, ["1]", "1]", "2]", "2]", "3]", "3]"]);
}

#[test]
fn an_interrupted_block_is_measured_again_whole_and_nothing_else() {
    let b = Bench::new(TOGETHER, &[]);
    plan_blocks(&b, &["a", "b"]);
    b.fake.plan("bench[n=1,rep=2]", Plan::Hang);
    // Every block starts at once (8 slots); another block's end interrupts
    // the build while this one hangs mid-block.
    let o = b.build(Opts {
        jobs: 8,
        interrupt_when: Some(Box::new(
            |e| matches!(e, Event::Finished { node, .. } if node == "bench[n=2,rep=2]"),
        )),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Interrupted);
    let stale = b.stale();
    assert_eq!(stale["bench[n=1,rep=2]"][0].kind.as_str(), "interrupted");
    assert!(
        !stale.contains_key("bench[n=2,rep=2]"),
        "finished: recorded"
    );
    // The next build measures the interrupted block again, with the blocks
    // that never ran, and none that finished.
    plan_blocks(&b, &["a", "b"]);
    let o = b.build(Opts {
        jobs: 1,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    let mut again = bench_started(&o);
    again.sort();
    assert!(again.contains(&"bench[n=1,rep=2]".to_owned()), "{again:?}");
    assert!(!again.contains(&"bench[n=2,rep=2]".to_owned()), "{again:?}");
}

#[test]
fn a_member_added_measures_every_block_again() {
    let mut b = Bench::new(TOGETHER, &[]);
    plan_blocks(&b, &["a", "b"]);
    assert_eq!(b.build(Opts::default()).status, BuildStatus::Success);
    b.reload(&[("ms", "[a,b,c]")]);
    let stale = b.stale();
    let reason = &stale["bench[n=2,rep=3]"][0];
    assert_eq!(reason.kind.as_str(), "spec_changed");
    assert!(
        reason
            .detail
            .starts_with("members measured together: c added (block a b → a b c)"),
        "{}",
        reason.detail
    );
    plan_blocks(&b, &["a", "b", "c"]);
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    assert_eq!(bench_started(&o).len(), 6);
    // A block that leaves out the new member fails, naming it.
    b.reload(&[("ms", "[a,b,d]")]);
    plan_blocks(&b, &["a", "b"]);
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Failed);
    let failed = o.events.iter().find_map(|e| match e {
        Event::Failed { failure, .. } => Some(failure.message.clone()),
        _ => None,
    });
    assert!(
        failed
            .as_deref()
            .is_some_and(|m| m.contains("has no member `d`")),
        "{failed:?}"
    );
}
