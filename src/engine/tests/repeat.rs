//! Repeated stages (`repeat: N`): each repetition a node of its own, run in
//! rounds across the configurations, resumed and extended one repetition
//! at a time.

use super::*;

/// Six configurations of a measuring command, each repeated `${reps}` times.
const REPEATED: &str = r#"Pipeline(params: {"reps": 3}, stages: {
    "bench": Stage(matrix: {"m": ["a", "b", "c", "d", "e", "f"]}, repeat: "${reps}",
                   task: Command(run: "bench ${m}", measure: true, outputs: ["results.json"])),
    "trace": Stage(for_each: "bench", task: Command(run: "trace ${needs.bench}", outputs: ["t.txt"])),
})"#;

fn repeated() -> Bench {
    Bench::new(REPEATED, &[])
}

/// The `bench` nodes that started, as (configuration, repetition).
fn bench_runs(o: &Outcome) -> Vec<(String, u32)> {
    o.started()
        .iter()
        .filter_map(|id| {
            let inner = id.strip_prefix("bench[m=")?.strip_suffix(']')?;
            let (m, rep) = inner.split_once(",rep=")?;
            Some((m.to_owned(), rep.parse().ok()?))
        })
        .collect()
}

fn configs(runs: &[(String, u32)]) -> Vec<String> {
    runs.iter().map(|(m, _)| m.clone()).collect()
}

#[test]
fn a_repeated_stage_has_a_node_per_repetition() {
    let b = repeated();
    let ids: Vec<&str> = b.graph.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        &ids[..4],
        [
            "bench[m=a,rep=1]",
            "bench[m=a,rep=2]",
            "bench[m=a,rep=3]",
            "bench[m=b,rep=1]"
        ]
    );
    assert_eq!(b.graph.nodes.len(), 36);
    let trace = &b.graph.nodes[b.idx("trace[m=a,rep=2]")];
    assert_eq!(
        trace.rep,
        Some(2),
        "what follows a repetition belongs to it"
    );
    assert_eq!(b.graph.nodes[b.idx("bench[m=c,rep=3]")].rep, Some(3));
    assert_eq!(b.graph.stage("bench").unwrap().repeat, 3);
    assert_eq!(b.graph.stage("trace").unwrap().repeat, 1);
}

#[test]
fn repetitions_run_in_rounds_across_configurations_in_a_seeded_order() {
    let b = repeated();
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    let runs = bench_runs(&o);
    assert_eq!(runs.len(), 18);
    let rounds: Vec<u32> = runs.iter().map(|(_, r)| *r).collect();
    assert_eq!(
        rounds,
        [[1; 6], [2; 6], [3; 6]].concat(),
        "round by round: {runs:?}"
    );
    let order: Vec<Vec<String>> = runs.chunks(6).map(configs).collect();
    for round in &order {
        assert_eq!(sorted(round.clone()), ids(&["a", "b", "c", "d", "e", "f"]));
    }
    assert!(
        order[0] != order[1] || order[1] != order[2],
        "each round is shuffled anew: {order:?}"
    );
    assert_ne!(order[0], ids(&["a", "b", "c", "d", "e", "f"]), "shuffled");

    // The same seed gives the same order; another seed another.
    let again = repeated().build(Opts::default());
    assert_eq!(bench_runs(&again), runs);
    let other = repeated().build(Opts {
        interleave: Some(7),
        ..Opts::default()
    });
    assert_ne!(bench_runs(&other), runs);
    assert_eq!(sorted(o.started()), sorted(other.started()));
}

#[test]
fn without_interleaving_repetitions_run_one_configuration_after_another() {
    let b = repeated();
    let o = b.build(Opts {
        interleave: None,
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success);
    let expected: Vec<(String, u32)> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .flat_map(|m| (1..=3).map(move |r| (m.to_string(), r)))
        .collect();
    assert_eq!(bench_runs(&o), expected);
}

#[test]
fn raising_repeat_runs_only_the_new_repetitions_in_rounds() {
    let mut b = repeated();
    b.build(Opts::default());
    b.reload(&[("reps", "5")]);
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    let runs = bench_runs(&o);
    let rounds: Vec<u32> = runs.iter().map(|(_, r)| *r).collect();
    assert_eq!(rounds, [[4; 6], [5; 6]].concat(), "{runs:?}");
    // Besides the new repetitions, only what follows them runs.
    let others: Vec<String> = o
        .started()
        .into_iter()
        .filter(|id| !id.starts_with("bench["))
        .collect();
    assert_eq!(others.len(), 12);
    assert!(
        others
            .iter()
            .all(|id| id.ends_with(",rep=4]") || id.ends_with(",rep=5]")),
        "{others:?}"
    );
    assert_eq!(o.cached().len(), 36, "the first three repetitions stay");
    assert!(b.stale().is_empty());

    // And lowering it again runs nothing: the first three are fresh.
    b.reload(&[("reps", "3")]);
    let o = b.build(Opts::default());
    assert!(o.started().is_empty(), "{:?}", o.started());
}

#[test]
fn the_first_repetition_keeps_the_key_of_the_unrepeated_configuration() {
    let mut b = repeated();
    b.reload(&[("reps", "1")]);
    assert_eq!(b.graph.nodes[0].id, "bench[m=a]");
    assert_eq!(b.graph.nodes[0].rep, None);
    b.build(Opts::default());
    b.reload(&[("reps", "2")]);
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    let runs = bench_runs(&o);
    assert!(runs.iter().all(|(_, r)| *r == 2), "{runs:?}");
    assert_eq!(runs.len(), 6);
    // Repetition 1 is the run made without `repeat`, restored to its folder.
    assert!(o.cached().contains(&"bench[m=a,rep=1]".to_string()));
    assert_eq!(
        b.out("bench/m=a,rep=1/results.json"),
        r#"{"text":"bench[m=a]"}"#
    );
}

#[test]
fn an_interrupted_sweep_resumes_with_the_repetitions_it_lacks() {
    let b = repeated();
    // The sixth repetition to start hangs until the interrupt.
    let first = repeated().build(Opts::default());
    let sixth = first.started()[5].clone();
    b.fake.plan(&sixth, Plan::Hang);
    let target = sixth.clone();
    let o = b.build(Opts {
        interrupt_when: Some(Box::new(
            move |e| matches!(e, Event::Started { node, .. } if *node == target),
        )),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Interrupted);
    let done: Vec<String> = o.started().into_iter().filter(|id| *id != sixth).collect();
    b.fake.plan(&sixth, Plan::Write("ok".into()));
    let o = b.build(Opts::default());
    assert_eq!(o.status, BuildStatus::Success);
    for id in &done {
        assert!(!o.started().contains(id), "{id} ran again");
    }
    assert_eq!(
        o.started()[0],
        sixth,
        "the interrupted one comes first in its round"
    );
    assert_eq!(done.len() + o.started().len(), 36);
    assert!(b.stale().is_empty());
}
