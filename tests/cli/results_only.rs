//! `vitgraph export --results-only`: a study's results carried to a laptop
//! without its raw traces. The records of every run go, the outputs only
//! of what the targets read; on the laptop the runs stand for their nodes,
//! the report builds without measuring, and a node that must read a trace
//! left behind fails saying where it is.

use super::support::{Output, Workspace};
use super::transfer::{measured, ok, vg, GPU_HOST, LAPTOP};

/// Two measured configurations, each writing a raw trace of 200 kB; an
/// analysis that reads the traces (`analysis_cmd`) and a report over it.
/// Each measurement appends a line to `measured.txt` in `log_dir`.
fn study(log_dir: &std::path::Path, analysis_cmd: &str) -> String {
    let log = log_dir.join("measured.txt");
    format!(
        r#"Pipeline(stages: {{
    "trace": Stage(task: Command(run: "head -c 200000 /dev/urandom > ${{out}}/trace.bin; echo '{{\"v\": ${{n}}}}' > ${{out}}/results.json; echo ${{n}} >> {log}", outputs: ["trace.bin", "results.json"], measure: true), matrix: {{"n": [1, 2]}}),
    "analysis": Stage(task: Command(run: "for d in ${{needs.trace}}; do {analysis_cmd} < $d/trace.bin; done > ${{out}}/sizes.txt", outputs: ["sizes.txt"]), needs: ["trace"]),
    "report": Stage(task: Command(run: "cat ${{needs.analysis}}/sizes.txt > ${{out}}/report.txt", outputs: ["report.txt"]), needs: ["analysis"]),
}})"#,
        log = log.display()
    )
}

/// What a command said, on one line (miette wraps its messages).
fn said(out: &Output) -> String {
    format!("{}{}", out.stdout, out.stderr)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn a_results_only_bundle_builds_the_report_and_names_what_it_left_behind() {
    let logs = tempfile::tempdir().unwrap();
    let gpu = Workspace::with_pipelines(&[("s.ron", &study(logs.path(), "wc -c"))]);
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    assert_eq!(measured(logs.path()), 2);
    let full = logs.path().join("full.vgb");
    let results = logs.path().join("results.vgb");
    ok(&vg(
        &gpu,
        GPU_HOST,
        &["export", "-o", full.to_str().unwrap()],
    ));
    let out = vg(
        &gpu,
        GPU_HOST,
        &[
            "export",
            "report",
            "--results-only",
            "-o",
            results.to_str().unwrap(),
        ],
    );
    ok(&out);
    assert!(
        out.stdout.contains("exported 4 runs")
            && out
                .stdout
                .contains("2 of the runs go without all their outputs"),
        "{}",
        out.stdout
    );
    // The traces (400 kB) stay on the GPU host.
    assert!(size(&full) > 400_000, "{}", size(&full));
    assert!(size(&results) < 100_000, "{}", size(&results));

    let laptop = Workspace::with_pipelines(&[("s.ron", &study(logs.path(), "wc -c"))]);
    let out = vg(&laptop, LAPTOP, &["import", results.to_str().unwrap()]);
    ok(&out);
    assert!(
        out.stdout.contains("4 runs, 4 new here")
            && out.stdout.contains("2 runs came without all their outputs"),
        "{}",
        out.stdout
    );
    // The report builds from the analysis; nothing is measured, no trace
    // is written, and nothing is left stale.
    ok(&vg(&laptop, LAPTOP, &["build", "report"]));
    assert_eq!(measured(logs.path()), 2);
    assert_eq!(
        std::fs::read_to_string(laptop.path().join("out/report/report.txt")).unwrap(),
        std::fs::read_to_string(gpu.path().join("out/report/report.txt")).unwrap()
    );
    assert!(!laptop.path().join("out/trace/n=1/trace.bin").exists());
    let status = vg(&laptop, LAPTOP, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(s["summary"]["stale"], 0, "{s}");
    assert_eq!(s["summary"]["fresh"], 4, "{s}");
    assert_eq!(s["summary"]["without_outputs"], 2, "{s}");
    let text = vg(&laptop, LAPTOP, &["status"]).stdout;
    assert!(
        text.contains("without outputs: 2 runs stand here without all their outputs")
            && text.contains("trace  2, the rest on `gpu-box`"),
        "{text}"
    );
    // The store is sound: the traces are absent by design.
    let verify = vg(&laptop, LAPTOP, &["verify"]);
    ok(&verify);
    // A full export from the laptop cannot carry what it does not have.
    let again = logs.path().join("again.vgb");
    let out = vg(&laptop, LAPTOP, &["export", "-o", again.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        said(&out).contains("arrived here without its outputs")
            && said(&out).contains("they are on `gpu-box`")
            && !again.exists(),
        "{}",
        out.stderr
    );
    // ...but passes the results on, still naming where the traces are.
    let out = vg(
        &laptop,
        LAPTOP,
        &["export", "--results-only", "-o", again.to_str().unwrap()],
    );
    ok(&out);

    // An analysis edited on the laptop needs the traces: it fails saying
    // where they are; nothing is measured.
    let edited = study(logs.path(), "od -c | wc -l");
    std::fs::write(laptop.path().join("pipelines/s.ron"), &edited).unwrap();
    let out = vg(&laptop, LAPTOP, &["build", "report"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let said = said(&out);
    assert!(
        said.contains("reads the outputs of `trace[n=")
            && said.contains("arrived without all of them")
            && said.contains("the rest are on `gpu-box`")
            && said.contains("with `--measure-here`"),
        "{said}"
    );
    assert_eq!(measured(logs.path()), 2);

    // The full bundle brings the traces: the analysis runs on them.
    let out = vg(&laptop, LAPTOP, &["import", full.to_str().unwrap()]);
    ok(&out);
    assert!(
        !out.stdout.contains("without all their outputs"),
        "{}",
        out.stdout
    );
    ok(&vg(&laptop, LAPTOP, &["build", "report"]));
    assert_eq!(measured(logs.path()), 2);
    assert!(laptop.path().join("out/trace/n=1/trace.bin").is_file());
    let status = vg(&laptop, LAPTOP, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert!(s["summary"].get("without_outputs").is_none(), "{s}");
    ok(&vg(
        &laptop,
        LAPTOP,
        &["export", "-o", again.to_str().unwrap()],
    ));
}

/// As in RQ2, the report reads the measurements themselves (their
/// `results.json`), whose runs also wrote the raw trace: the bundle carries
/// `results.json` and leaves the trace behind; an edited report builds on
/// the laptop, and a node that reads the trace fails saying where it is.
#[test]
fn a_report_over_measurements_takes_their_results_and_leaves_their_traces() {
    let logs = tempfile::tempdir().unwrap();
    let study = |title: &str| {
        format!(
            r#"Pipeline(stages: {{
    "runs": Stage(task: Command(run: "head -c 200000 /dev/urandom > ${{out}}/trace.bin; echo '{{\"v\": ${{n}}}}' > ${{out}}/results.json; echo ${{n}} >> {log}", outputs: ["trace.bin", "results.json"], measure: true), matrix: {{"n": [1, 2]}}),
    "report": Stage(needs: ["runs"], task: Report(title: "{title}", sources: ["runs"], columns: ["v"])),
}})"#,
            log = logs.path().join("measured.txt").display()
        )
    };
    let gpu = Workspace::with_pipelines(&[("s.ron", &study("V by n"))]);
    ok(&vg(&gpu, GPU_HOST, &["build"]));
    let results = logs.path().join("results.vgb");
    let out = vg(
        &gpu,
        GPU_HOST,
        &["export", "--results-only", "-o", results.to_str().unwrap()],
    );
    ok(&out);
    assert!(
        out.stdout.contains("exported 3 runs")
            && out
                .stdout
                .contains("2 of the runs go without all their outputs"),
        "{}",
        out.stdout
    );
    assert!(size(&results) < 100_000, "{}", size(&results));

    let laptop = Workspace::with_pipelines(&[("s.ron", &study("V by n"))]);
    ok(&vg(&laptop, LAPTOP, &["import", results.to_str().unwrap()]));
    ok(&vg(&laptop, LAPTOP, &["build"]));
    assert_eq!(measured(logs.path()), 2);
    let runs = laptop.path().join("out/runs/n=1");
    assert!(runs.join("results.json").is_file());
    assert!(!runs.join("trace.bin").exists());
    assert_eq!(
        std::fs::read_to_string(laptop.path().join("out/report/report.md")).unwrap(),
        std::fs::read_to_string(gpu.path().join("out/report/report.md")).unwrap()
    );
    let explain = vg(&laptop, LAPTOP, &["explain", "runs[n=1]"]);
    assert!(
        explain.stdout.contains(
            "without outputs: 1 of its 2 outputs are not here (`trace.bin`), they are on `gpu-box`"
        ),
        "{}",
        explain.stdout
    );
    // A second build finds everything fresh: nothing restored again.
    let again = vg(&laptop, LAPTOP, &["build"]);
    ok(&again);
    assert!(
        again.stderr.contains("0 built, 3 fresh"),
        "{}",
        again.stderr
    );

    // The report edited on the laptop reads only `results.json`: it builds.
    std::fs::write(laptop.path().join("pipelines/s.ron"), study("V against n")).unwrap();
    ok(&vg(&laptop, LAPTOP, &["build"]));
    assert!(
        std::fs::read_to_string(laptop.path().join("out/report/report.md"))
            .unwrap()
            .contains("V against n")
    );
    assert_eq!(measured(logs.path()), 2);

    // A node that reads the traces cannot run here.
    let with_sizes = study("V against n").replace(
        "\n})",
        "\n    \"sizes\": Stage(needs: [\"runs\"], task: Command(run: \"cat ${needs.runs}/trace.bin | wc -c > ${out}/n.txt\", outputs: [\"n.txt\"])),\n})",
    );
    std::fs::write(laptop.path().join("pipelines/s.ron"), &with_sizes).unwrap();
    let out = vg(&laptop, LAPTOP, &["build", "sizes"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        said(&out).contains("`sizes` reads the outputs of `runs[n=")
            && said(&out).contains("the rest are on `gpu-box`"),
        "{}",
        said(&out)
    );

    // Through a remote: the laptop pushes no run it lacks outputs of; the
    // GPU host pushes them whole, and the laptop's pull brings the rest.
    let remote = logs.path().join("remote");
    let settings = format!(
        r#"Workspace(remotes: {{"lab": Remote(path: "{}")}})"#,
        remote.display()
    );
    for ws in [&gpu, &laptop] {
        std::fs::write(ws.path().join("vitgraph.ron"), &settings).unwrap();
    }
    std::fs::write(gpu.path().join("pipelines/s.ron"), &with_sizes).unwrap();
    let pushed = vg(&laptop, LAPTOP, &["push", "runs"]);
    ok(&pushed);
    assert!(
        pushed.stdout.contains("0 new there")
            && pushed
                .stdout
                .contains("2 runs not pushed: they are here without all their outputs"),
        "{}",
        pushed.stdout
    );
    ok(&vg(&gpu, GPU_HOST, &["push", "runs"]));
    // What the laptop lacks of them counts as there only, for a pull.
    let there = vg(&laptop, LAPTOP, &["status", "--remote"]);
    assert!(
        there
            .stdout
            .contains("2 nodes have 2 runs there that this store lacks"),
        "{}",
        there.stdout
    );
    let pulled = vg(&laptop, LAPTOP, &["pull", "runs"]);
    ok(&pulled);
    ok(&vg(&laptop, LAPTOP, &["build", "sizes"]));
    assert_eq!(measured(logs.path()), 2);
    assert!(runs.join("trace.bin").is_file());
    let verify = vg(&laptop, LAPTOP, &["verify"]);
    ok(&verify);
    let explain = vg(&laptop, LAPTOP, &["explain", "runs[n=1]"]);
    assert!(
        !explain.stdout.contains("without outputs"),
        "{}",
        explain.stdout
    );
}
