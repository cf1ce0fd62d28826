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

/// A CSV column by name (cells without commas).
pub(super) fn column(csv: &str, name: &str) -> Vec<String> {
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

/// A steady configuration and a noisy one, with a ±2 % target on the
/// median: the steady one is precise after its three repetitions, the
/// noisy one spends its budget of `${maxr}`.
const PRECISE: &str = r#"Pipeline(params: {"maxr": 5}, stages: {
  "bench": Stage(matrix: {"impl": ["steady", "noisy"]},
                 precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: "${maxr}"),
                 task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "summary": Stage(needs: ["bench"],
                   task: Report(title: "bench", sources: ["bench"], columns: ["latency_ms.median"])),
})"#;

const NOISY_BENCH: &str = r#"import json, random, statistics, sys
impl, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
level, between = {"steady": (5.0, 0.001), "noisy": (8.0, 0.2)}[impl]
rng = random.Random(f"{impl}-{rep}")
shift = level * (1 + between * rng.gauss(0, 1))
samples = [shift * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(50)]
with open(out, "w") as f:
    json.dump({"latency_ms": {"median": statistics.median(samples)}, "samples": {"latency_ms": samples}}, f)
"#;

#[test]
fn a_precision_target_adds_repetitions_and_status_says_where_each_configuration_stands() {
    let ws = Ws::new(&[("p.ron", PRECISE)]);
    ws.write("bench.py", NOISY_BENCH);
    let before = ws.run(&["status"]);
    super::support::snapshot("repetitions", "status_before_any_build", &before.stdout());
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let text = r.stderr();
    assert!(
        text.contains("not needed bench[impl=steady,rep=4]: precise at ±"),
        "{text}"
    );
    assert!(text.contains("repetitions not needed"), "{text}");
    // The report folds the repetitions that ran, and flags the configuration
    // whose budget ran out with the stage's target.
    let table = ws.read("out/summary/table.csv");
    assert_eq!(column(&table, "impl"), ["noisy", "steady"]);
    assert_eq!(column(&table, "reps"), ["5", "3"]);
    let wide = column(&table, "wide");
    assert!(wide[0].starts_with("latency_ms.median ±"), "{wide:?}");
    assert_eq!(wide[1], "");

    let status = ws.run(&["status"]);
    assert_eq!(status.code(), 0);
    super::support::snapshot("repetitions", "status_budget_spent", &status.stdout());
    let json: serde_json::Value =
        serde_json::from_str(&ws.run(&["status", "--json"]).stdout()).unwrap();
    let standings = json["precision"].as_array().unwrap();
    let state = |c: &str| {
        standings
            .iter()
            .find(|s| s["configuration"] == c)
            .map(|s| {
                (
                    s["state"].as_str().unwrap().to_owned(),
                    s["runs"].as_u64().unwrap(),
                )
            })
            .unwrap()
    };
    assert_eq!(state("bench[impl=steady]"), ("precise".to_owned(), 3));
    assert_eq!(state("bench[impl=noisy]"), ("budget_spent".to_owned(), 5));
    let node = |id: &str| {
        json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(node("bench[impl=steady,rep=4]")["state"], "not_needed");
    assert!(node("bench[impl=steady,rep=4]")["why"]
        .as_str()
        .unwrap()
        .starts_with("precise at ±"));

    // A larger budget: the noisy configuration is stale again, for that reason.
    let raised = ws.run(&["status", "-p", "maxr=6"]);
    super::support::snapshot("repetitions", "status_budget_raised", &raised.stdout());
    let json: serde_json::Value =
        serde_json::from_str(&ws.run(&["status", "--json", "-p", "maxr=6"]).stdout()).unwrap();
    let stale: Vec<&serde_json::Value> = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["state"] == "stale" && n["stage"] == "bench")
        .collect();
    assert_eq!(stale.len(), 1, "{json}");
    let noisy = json["precision"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["configuration"] == "bench[impl=noisy]")
        .unwrap();
    assert_eq!(noisy["state"], "imprecise", "{noisy}");
    assert_eq!(noisy["detail"], "±31.8 % > ±2 % after 5 runs", "{noisy}");
    assert_eq!(stale[0]["id"], "bench[impl=noisy,rep=6]");
    assert_eq!(stale[0]["reasons"][0]["kind"], "imprecise");
    super::support::snapshot(
        "repetitions",
        "status_json_imprecise_reason",
        &serde_json::to_string_pretty(&stale[0]).unwrap(),
    );
    let explain = ws.run(&["explain", "bench[impl=noisy,rep=6]", "-p", "maxr=6"]);
    assert!(
        explain.stdout().contains("stale: imprecise: ±"),
        "{}",
        explain.stdout()
    );
    let r = ws.run(&["build", "-p", "maxr=6"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("2 built"), "{}", r.stderr());
}

/// A stage without repetitions beside a repeated one, of the same params
/// (a traced run and its analysis beside repetitions measured together),
/// joins each configuration's row: its values are the configuration's.
#[test]
fn a_run_without_repetitions_joins_the_configuration_of_equal_params() {
    let text = r#"Pipeline(params: {"reps": 3}, stages: {
  "bench": Stage(matrix: {"impl": ["fast", "slow"]}, repeat: "${reps}",
                 task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "once": Stage(matrix: {"impl": ["fast", "slow"]},
                task: Command(run: "echo '{\"kernels\": {\"count\": '$(printf ${impl} | wc -c)'}}' > ${out}/results.json",
                              outputs: ["results.json"])),
  "summary": Stage(needs: ["bench", "once"],
                   task: Report(title: "bench", sources: ["once", "bench"], columns: ["latency_ms.median", "kernels.count"])),
})"#;
    let ws = Ws::new(&[("p.ron", text)]);
    ws.write("bench.py", BENCH);
    let r = ws.run(&["build", "-j", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let table = ws.read("out/summary/table.csv");
    assert_eq!(column(&table, "impl"), ["fast", "slow"], "{table}");
    assert_eq!(column(&table, "reps"), ["3", "3"], "{table}");
    assert_eq!(column(&table, "kernels.count"), ["4", "4"], "{table}");
    assert!(
        column(&table, "latency_ms.median")
            .iter()
            .all(|v| v.parse::<f64>().is_ok()),
        "{table}"
    );
}

/// The state a precision target gives depends on the pipeline and params,
/// not on the targets of earlier builds: a workspace built first under a
/// tighter `ci_rel` and then under the looser one sees, reports and
/// counts what a workspace built under the looser one alone does; the
/// extra repetitions stay in the store, unseen, and come back without
/// running when the tighter target returns.
#[test]
fn a_precision_decision_depends_on_the_pipeline_not_on_its_history() {
    let bench = r#"import sys, json, random
impl, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = random.Random(f"{impl}-{rep}")
json.dump({"latency_ms": {"median": 10 * (1 + 0.03 * r.gauss(0, 1))}}, open(out, "w"))
"#;
    let text = r#"Pipeline(params: {"ci": 0.05}, stages: {
  "bench": Stage(matrix: {"impl": ["mid"]}, repeat: 3,
    precision: (metric: "latency_ms.median", ci_rel: "${ci}", max_repeat: 8),
    task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json", inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "seen": Stage(needs: ["bench"], task: Command(run: "echo ${needs.bench} | wc -w > ${out}/n.txt", outputs: ["n.txt"])),
  "rep": Stage(needs: ["bench"], task: Report(title: "t", sources: ["bench"], columns: ["latency_ms.median"])),
})"#;
    let make = || {
        let ws = Ws::new(&[("p.ron", text)]);
        ws.write("bench.py", bench);
        ws
    };
    let (a, b) = (make(), make());
    assert_eq!(a.run(&["build"]).code(), 0);
    let tight = b.run(&["build", "-p", "ci=0.025"]);
    assert_eq!(tight.code(), 0, "{}", tight.stderr());
    let runs = |ws: &Ws, extra: &[&str]| ws.status(extra)["precision"][0]["runs"].clone();
    assert!(
        runs(&b, &["-p", "ci=0.025"]).as_u64().unwrap() > 3,
        "the tighter target ran more"
    );
    assert_eq!(b.run(&["build"]).code(), 0);
    assert_eq!(runs(&a, &[]), runs(&b, &[]));
    assert_eq!(a.status(&[])["summary"], b.status(&[])["summary"]);
    assert_eq!(a.read("out/seen/n.txt"), b.read("out/seen/n.txt"));
    assert_eq!(a.read("out/seen/n.txt").trim(), "3");
    assert_eq!(a.read("out/rep/table.csv"), b.read("out/rep/table.csv"));
    let status = b.status(&[]);
    let rep4 = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "bench[impl=mid,rep=4]")
        .expect("repetition 4");
    assert_eq!(rep4["state"], "not_needed", "{rep4}");
    assert!(rep4["why"].as_str().unwrap().contains("precise"), "{rep4}");
    // The tighter target again: its repetitions come back from the store.
    let again = b.run(&["build", "--json", "-p", "ci=0.025"]);
    assert_eq!(again.code(), 0, "{}", again.stderr());
    assert!(again.nodes_with("started").is_empty(), "{}", again.stdout());
}
