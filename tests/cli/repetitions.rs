//! Repeated measurements end to end on the CPU: a measuring `Command` with
//! injected noise (a known level per configuration, shifted per process
//! and jittered per sample), repeated and interleaved, folded by a report.

use super::harness::Ws;

/// Writes `results.json` as the book documents for a measuring command:
/// the median of 50 samples around `level`, each process shifted by up to
/// ±5 % (seeded by configuration and repetition), each sample by ±10 %.
const BENCH: &str = r#"import json, random, statistics, sys
impl, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
level = {"fast": 5.0, "slow": 8.0}[impl]
rng = random.Random(f"{impl}-{rep}")
shift = level * (1 + 0.05 * rng.gauss(0, 1))
samples = [shift * (1 + 0.1 * rng.gauss(0, 1)) for _ in range(50)]
with open(out, "w") as f:
    json.dump({"latency_ms": {"median": statistics.median(samples)}, "samples": {"latency_ms": samples}}, f)
"#;

const PIPELINE: &str = r#"Pipeline(params: {"reps": 4}, stages: {
  "bench": Stage(matrix: {"impl": ["fast", "slow"]}, repeat: "${reps}",
                 task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "summary": Stage(needs: ["bench"],
                   task: Report(title: "bench", sources: ["bench"], columns: ["latency_ms.median"], target: Some(0.1),
                                compare: Some(Compare(param: "impl", baseline: "slow", metric: "latency_ms.median")))),
})"#;

fn workspace() -> Ws {
    let ws = Ws::new(&[("p.ron", PIPELINE)]);
    ws.write("bench.py", BENCH);
    ws
}

/// `bench` nodes in the order they started, as `impl/rep`.
fn started(r: &super::harness::Run) -> Vec<String> {
    r.events()
        .iter()
        .filter(|e| e["event"] == "started")
        .filter_map(|e| {
            let id = e["node"].as_str()?;
            let inner = id.strip_prefix("bench[impl=")?.strip_suffix(']')?;
            let (i, rep) = inner.split_once(",rep=")?;
            Some(format!("{i}/{rep}"))
        })
        .collect()
}

fn column(csv: &str, name: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header
        .iter()
        .position(|h| *h == name)
        .unwrap_or_else(|| panic!("no `{name}` in {header:?}"));
    lines
        .map(|l| l.split(',').nth(i).unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_repeated_measurement_runs_in_rounds_and_reports_an_interval_over_its_runs() {
    let ws = workspace();
    let r = ws.run(&["build", "--json", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let order = started(&r);
    assert_eq!(order.len(), 8);
    let rounds: Vec<&str> = order.iter().map(|s| s.split('/').nth(1).unwrap()).collect();
    assert_eq!(
        rounds,
        ["1", "1", "2", "2", "3", "3", "4", "4"],
        "{order:?}"
    );

    let table = ws.read("out/summary/table.csv");
    assert_eq!(column(&table, "impl"), ["fast", "slow"]);
    assert_eq!(column(&table, "reps"), ["4", "4"]);
    assert_eq!(column(&table, "interval"), ["repetitions", "repetitions"]);
    for (level, (lo, hi)) in [5.0, 8.0].iter().zip(
        column(&table, "latency_ms.median.ci95_low")
            .iter()
            .zip(column(&table, "latency_ms.median.ci95_high")),
    ) {
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(
            lo < *level && *level < hi,
            "{lo}..{hi} misses the level {level}"
        );
    }
    let compare = ws.read("out/summary/compare.csv");
    let ratio: f64 = column(&compare, "ratio")[0].parse().unwrap();
    let lo: f64 = column(&compare, "ci95_low")[0].parse().unwrap();
    let hi: f64 = column(&compare, "ci95_high")[0].parse().unwrap();
    assert!(lo < 0.625 && 0.625 < hi && hi < 1.0, "{lo} {ratio} {hi}");
    assert_eq!(column(&compare, "interval"), ["repetitions"]);
    assert_eq!(
        column(&compare, "note"),
        [""],
        "fast is faster, and it shows"
    );

    // Two more repetitions each: four new runs and the report, nothing else.
    let r = ws.run(&["build", "--json", "-p", "reps=6"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let order = started(&r);
    let rounds: Vec<&str> = order.iter().map(|s| s.split('/').nth(1).unwrap()).collect();
    assert_eq!(rounds, ["5", "5", "6", "6"], "{order:?}");
    assert_eq!(r.nodes_with("started").len(), 5);
    assert_eq!(
        column(&ws.read("out/summary/table.csv"), "reps"),
        ["6", "6"]
    );
}

#[test]
fn without_interleaving_each_configuration_runs_its_repetitions_back_to_back() {
    let ws = workspace();
    let r = ws.run(&["build", "--json", "-j", "1", "--no-interleave", "bench"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(
        started(&r),
        ["fast/1", "fast/2", "fast/3", "fast/4", "slow/1", "slow/2", "slow/3", "slow/4"]
    );
}
