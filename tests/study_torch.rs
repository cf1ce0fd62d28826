//! The study pipelines run end to end on the CPU at tiny sizes — real
//! libtorch runs, traces, analyses and reports — on a couple of
//! configurations each, selected with `-p` the way a user shortens a study.
#![cfg(feature = "torch")]

use std::process::Command;

mod common;
use common::Study;
#[path = "common/webdriver.rs"]
mod webdriver;

trait BuildReport {
    fn build_report(&self, report: &str, params: &[&str]) -> (String, Vec<String>);
}

impl BuildReport for Study {
    /// Builds `target` with `params`, checks a second build has nothing to
    /// do, and returns the report's markdown and its table's data lines.
    fn build_report(&self, report: &str, params: &[&str]) -> (String, Vec<String>) {
        let mut args = vec!["build", report, "-j", "2"];
        for p in params {
            args.extend(["-p", p]);
        }
        self.ok(&args);
        args[0] = "status";
        args.retain(|a| *a != "-j" && *a != "2");
        let (ok, status, _) = self.run(&args);
        assert!(
            ok && status.contains(" 0 stale"),
            "after the build:\n{status}"
        );
        let dir = self.dir.path().join("out").join(report);
        let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
        let csv = std::fs::read_to_string(dir.join("table.csv")).expect("table.csv");
        let rows = csv.lines().skip(1).map(str::to_owned).collect();
        (md, rows)
    }
}

/// Tiny runs on the CPU, two repetitions of each configuration (the
/// reports fold them), no more.
const TINY: [&str; 6] = [
    "device=cpu",
    "samples=4",
    "warmup=1",
    "image_size=32",
    "repeat=2",
    "max_repeat=2",
];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    TINY.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn rq1_runs_end_to_end_on_the_cpu() {
    let study = Study::new();
    let params = with(&[
        "patch=[16,32]",
        "depth=[1]",
        "dim=[64]",
        "batch=[2]",
        "trace_samples=4",
    ]);
    let (md, rows) = study.build_report("rq1_report", &params);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(md.contains("recorded no GPU"), "{md}");
    let plots = study.dir.path().join("out/rq1_report/plots");
    assert!(plots
        .join("gpu_utilization_vs_dim_by_patch_depth.svg")
        .is_file());
    assert!(plots
        .join("throughput_images_per_s_vs_dim_by_patch_depth.png")
        .is_file());
    // Small multiples: one panel per depth (one depth here).
    let faceted = plots.join("throughput_images_per_s_vs_dim_by_patch_per_depth.svg");
    let svg = std::fs::read_to_string(&faceted).unwrap();
    assert!(svg.contains("depth = 1"), "{svg}");
    // The seed's analysis as a notebook over the table just built.
    if std::env::var_os("VITGRAPH_PYDEPS").is_some() {
        let mut args = vec!["build", "rq1_notebook"];
        for p in &params {
            args.extend(["-p", p]);
        }
        let built = study.ok(&args);
        let out = study.dir.path().join("out/rq1_notebook");
        assert!(out.join("rq1_cliff.png").is_file(), "{built}");
        assert!(out.join("rq1.html").is_file());
        // Its last cell printed the medians below 768 dims (all of them here).
        let executed: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("rq1.ipynb")).unwrap()).unwrap();
        let printed = executed["cells"].as_array().unwrap().last().unwrap()["outputs"].to_string();
        assert!(printed.contains("below 768"), "{printed}");
    }
}

#[test]
fn rq2_runs_end_to_end_on_the_cpu() {
    let study = Study::new();
    let params = [
        "device=cpu",
        "samples=2",
        "warmup=1",
        "model=[vit32x6x384]",
        "res=[32,64]",
        "batch=[1]",
        "repeat=2",
        "max_repeat=2",
    ];
    let (_, rows) = study.build_report("rq2_report", &params);
    assert_eq!(rows.len(), 2, "{rows:?}");
}

#[test]
fn rq4_runs_end_to_end_on_the_cpu_under_numactl() {
    let has_numactl = Command::new("numactl")
        .arg("--show")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numactl {
        // .ci/run installs it where it can (apt); say why the test did nothing.
        eprintln!("skipped: numactl is not installed (apt-get install numactl)");
        return;
    }
    let study = Study::new();
    let params = with(&["numa=[0]", "model=[vit32x2x256]", "batch=[1,2]"]);
    let (md, rows) = study.build_report("rq4_report", &params);
    assert_eq!(rows.len(), 2, "{rows:?}");
    // One NUMA node measured: the comparison says there is nothing to pair.
    assert!(
        md.contains("there is no other value to compare it with"),
        "{md}"
    );
}

#[test]
fn rq5_runs_end_to_end_on_the_cpu() {
    let study = Study::new();
    let params = with(&["model=[vit32x6x384]", "pipeline=[sync,async:2]"]);
    let (md, rows) = study.build_report("rq5_report", &params);
    // Two matrix designs plus the eight the stage always includes.
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert!(md.contains("## Comparison"), "{md}");
    assert!(md.contains("async:2"), "{md}");
}

#[test]
fn quickstart_runs_end_to_end_on_the_cpu() {
    let study = Study::new();
    let (md, rows) = study.build_report(
        "quickstart_report",
        &["samples=8", "warmup=1", "batch=[1,4]", "max_repeat=4"],
    );
    // One row per configuration, folding its 3 or 4 repetitions.
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(md.contains("| repetitions |"), "{md}");
    assert!(md.contains("throughput_images_per_s"), "{md}");
    // The same table from Python keeps each column's type: the params and
    // `reps` integers, the values floats, the model a string; from the CSV
    // and, where pyarrow is, from the Parquet file alike.
    let script = "import vitgraph\n\
        for source in ('csv', 'parquet') if vitgraph.data._has('pyarrow') else ('csv',):\n\
        \x20   rows = vitgraph.table('quickstart_report', backend='records', source=source,\n\
        \x20                         params={'samples': 8, 'warmup': 1, 'batch': [1, 4], 'max_repeat': 4})\n\
        \x20   types = {k: sorted({type(r[k]).__name__ for r in rows if r[k] is not None}) for k in rows[0]}\n\
        \x20   print(source, types['model'], types['batch'], types['reps'], types['throughput_images_per_s'], types['latency_ms.median.ci95_low'])\n";
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/python");
    let pythonpath = match std::env::var("VITGRAPH_PYDEPS") {
        Ok(deps) => format!("{python}:{deps}"),
        Err(_) => python.to_owned(),
    };
    let out = Command::new("python3")
        .args(["-c", script])
        .current_dir(study.dir.path())
        .env("PYTHONPATH", pythonpath)
        .env("VITGRAPH", common::exe())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    for line in printed.lines() {
        assert!(
            line.ends_with("['str'] ['int'] ['int'] ['float'] ['float']"),
            "{printed}"
        );
    }
}

/// The quickstart study's page (`vitgraph report`) in a real browser: no
/// console error, no request, the graph and every plot drawn, a timeline
/// bar per node the build ran. Its screenshot is the book's.
#[test]
fn the_quickstart_page_opens_in_a_browser() {
    let study = Study::new();
    let params = [
        "samples=8",
        "warmup=1",
        "batch=[1,4]",
        "repeat=2",
        "max_repeat=2",
        "-j",
        "2",
    ];
    let mut args = vec!["build", "quickstart"];
    for p in &params[..5] {
        args.extend(["-p", p]);
    }
    args.extend(&params[5..]);
    study.ok(&args);
    let mut report = vec!["report", "quickstart"];
    for p in &params[..5] {
        report.extend(["-p", p]);
    }
    study.ok(&report);
    let page = study.dir.path().join("out/report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() < 5 << 20, "{} bytes", html.len());
    let Some(b) = webdriver::Browser::start() else {
        return;
    };
    b.open(&page);
    let errors = b.problems();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        b.js("return performance.getEntriesByType('resource').length;"),
        serde_json::json!(0)
    );
    // 2 repetitions measuring the 6 configurations together, 6 traced
    // runs, 6 analyses, 1 report.
    assert_eq!(
        b.js("return document.querySelectorAll('#timeline-svg rect.bar').length;"),
        serde_json::json!(15)
    );
    let sizes = b.js("return [...document.querySelectorAll('#stage-graph, figure.plot svg')].map(s => { const r = s.getBoundingClientRect(); return r.width * r.height; });");
    let sizes = sizes.as_array().unwrap();
    assert_eq!(
        sizes.len(),
        3,
        "the graph and the report's two plots: {sizes:?}"
    );
    assert!(
        sizes.iter().all(|a| a.as_f64().unwrap() > 5_000.0),
        "{sizes:?}"
    );
    // The pipeline's own title and description head the page.
    let head = b.js("return [document.querySelector('header h1').textContent, document.querySelector('header p.lead').textContent, document.querySelector('#stage-table tr[data-stage=quickstart_runs] .stage-desc').textContent];");
    assert_eq!(head[0], "Quickstart: ViT inference throughput", "{head}");
    assert!(
        head[1].as_str().unwrap().starts_with("Three small ViTs"),
        "{head}"
    );
    assert!(
        head[2]
            .as_str()
            .unwrap()
            .starts_with("every (model, batch) measured together"),
        "{head}"
    );
    let rows = b.js("return document.querySelectorAll('#table-0 tbody tr').length;");
    assert_eq!(rows, serde_json::json!(6));
    // Sorting by a header click reorders the rows; a param's selector hides the others.
    let column = |name: &str| -> Vec<String> {
        let script = format!(
            "const t = document.getElementById('table-0');
             const j = [...t.querySelectorAll('th')].findIndex(th => th.textContent.trim() === '{name}' || th.textContent.trim().startsWith('{name} '));
             return [...t.querySelectorAll('tbody tr')].filter(tr => !tr.hidden).map(tr => JSON.parse(tr.dataset.cells)[j]);"
        );
        serde_json::from_value(b.js(&script)).unwrap()
    };
    b.click("#table-0 th:nth-child(3)");
    let up: Vec<f64> = column("throughput_images_per_s")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{up:?}");
    b.click("select[data-param='model'] option[value='vit32x4x192']");
    assert_eq!(column("model"), ["vit32x4x192", "vit32x4x192"]);
    b.click("select[data-param='model'] option[value='']");
    // The `nodes` column shows on a row's click, not as a column; the
    // report's files are linked.
    let hidden = b.js(
        "const t = document.getElementById('table-0');
         const th = [...t.querySelectorAll('th')].find(h => h.textContent.trim().startsWith('nodes'));
         const row = t.querySelector('tbody tr.has-nodes');
         row.click();
         const shown = row.nextElementSibling.classList.contains('row-nodes') ? row.nextElementSibling.textContent : '';
         row.click();
         return [th.hidden, shown.startsWith('nodes: quickstart_'), document.querySelectorAll('#report-0 p.downloads a').length];",
    );
    assert_eq!(hidden[0], true, "{hidden}");
    assert_eq!(hidden[1], true, "{hidden}");
    assert!(
        hidden[2].as_u64().unwrap_or(0) >= 3,
        "table.csv, report.md, plots: {hidden}"
    );
    b.click("#node-list td.id");
    // Sorting and details work from the keyboard: Tab reaches them, Enter acts.
    let keyed = b.js(
        "const enter = (e) => { e.focus(); e.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })); };
         const th = document.querySelector('#table-0 th:nth-child(2)');
         enter(th);
         const arrow = th.querySelector('.arrow').textContent;
         const td = [...document.querySelectorAll('#node-list td.id')].find(t => t.textContent.startsWith('quickstart_report'));
         enter(td);
         return [th.tabIndex, arrow, td.tabIndex, document.querySelector('#node-detail h3').textContent];",
    );
    assert_eq!(keyed[0], 0, "{keyed}");
    assert_eq!(keyed[1], "▲", "{keyed}");
    assert_eq!(keyed[2], 0, "{keyed}");
    assert_eq!(keyed[3], "quickstart_report", "{keyed}");
    // A block's details draw each member's batches' latencies and verdict:
    // 3 models at batch 1 (8 batches) and at batch 4 (2 batches).
    let shown = b.js(
        "const td = [...document.querySelectorAll('#node-list td.id')].find(t => t.textContent.startsWith('quickstart_runs'));
         td.click();
         return [document.querySelectorAll('#node-detail svg.strip.latency circle').length,
                 [...document.querySelectorAll('#node-detail h4')].filter(h => h.textContent.startsWith('Measurement: ')).map(h => h.textContent),
                 [...document.querySelectorAll('#node-detail p.verdict .badge')].map(b => b.textContent)];",
    );
    assert_eq!(shown[0], 30, "one dot per batch: {shown}");
    assert_eq!(
        shown[1].as_array().map(Vec::len),
        Some(6),
        "a measurement per member: {shown}"
    );
    assert!(
        shown[1][0]
            .as_str()
            .unwrap()
            .starts_with("Measurement: vit"),
        "{shown}"
    );
    let verdicts = shown[2].as_array().unwrap();
    assert_eq!(verdicts.len(), 6, "{shown}");
    assert!(
        verdicts.iter().all(|v| v == "valid" || v == "invalid"),
        "a verdict each: {shown}"
    );
    // An analysis's small window travels in the page: from this file://
    // page the button hands it to ui.perfetto.dev (here a stand-in tab that
    // answers PING with PONG: a frame's window, as a message's source must
    // be one) by postMessage (N11).
    b.js(
        "window.sent = [];
         const frame = document.createElement('iframe');
         document.body.append(frame);
         const fake = frame.contentWindow;
         fake.postMessage = (m) => {
             if (m === 'PING') window.dispatchEvent(new MessageEvent('message', { data: 'PONG', source: fake }));
             else window.sent.push(m);
         };
         window.open = () => fake;
         [...document.querySelectorAll('#node-list td.id')].find(t => t.textContent.startsWith('quickstart_analysis')).click();
         document.querySelector('#node-detail p.perfetto button').click();
         return 1;",
    );
    let mut sent = serde_json::Value::Null;
    for _ in 0..100 {
        sent = b.js("return window.sent.length ? [window.sent[0].perfetto.buffer.byteLength, document.querySelector('#node-detail p.perfetto a').getAttribute('href')] : null;");
        if !sent.is_null() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let note = b.js("const n = document.querySelector('#node-detail .perfetto-note'); return [document.querySelector('#node-detail h3').textContent, n && n.textContent, document.querySelectorAll('#node-detail p.perfetto').length, JSON.parse(document.getElementById('data').textContent).details.filter(d => d.perfetto).length];");
    let file = page.parent().unwrap().join(
        sent[1]
            .as_str()
            .unwrap_or_else(|| panic!("nothing sent: {note}")),
    );
    assert_eq!(sent[0], std::fs::metadata(&file).unwrap().len(), "{sent}");
    let to = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("page-screenshots")
        .join("quickstart.png");
    b.screenshot(&to);
    eprintln!("screenshot: {}", to.display());
}

/// `vitgraph torch-info` of an executable, as JSON.
fn torch_info(exe: &std::path::Path) -> serde_json::Value {
    let out = Command::new(exe)
        .arg("torch-info")
        .output()
        .expect("run torch-info");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("torch-info prints JSON")
}

#[test]
fn the_torch_free_vitgraph_runs_libtorch_nodes_in_vitgraph_torch() {
    let Some(lean) = common::lean_exe() else {
        eprintln!("skipped: VITGRAPH_LEAN_EXE is unset (scripts/test.sh sets it)");
        return;
    };
    let torch = std::path::Path::new(env!("CARGO_BIN_EXE_vitgraph-torch"));
    assert_eq!(
        torch_info(&lean)["libtorch"],
        "none",
        "the lean build links no libtorch"
    );
    let version = torch_info(torch)["libtorch"].clone();
    assert_ne!(version, "none");

    let study = Study::new();
    let node = "quickstart_traces[model=vit32x4x192,batch=1]";
    let params = ["-p", "trace_samples=4", "-p", "warmup=1", "-p", "batch=[1]"];
    let mut args = vec!["build", node];
    args.extend(params);
    study.ok(&args);
    let results = study
        .dir
        .path()
        .join("out/quickstart_traces/model=vit32x4x192,batch=1/results.json");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results).expect("results.json")).unwrap();
    assert_eq!(results["env"]["key_facets"]["libtorch"], version);
    // The key the lean engine computed carries vitgraph-torch's libtorch.
    let mut args = vec!["explain", "--json", node];
    args.extend(params);
    let explain: serde_json::Value = serde_json::from_str(&study.ok(&args)).unwrap();
    assert_eq!(
        explain["parts"]["current"]["env"]["libtorch"], version,
        "{explain}"
    );
    assert_eq!(explain["state"], "fresh", "{explain}");

    // A lean vitgraph alone (no vitgraph-torch beside it, none named) fails
    // the node saying how to build the libtorch executable.
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("vitgraph");
    std::fs::copy(&lean, &copy).unwrap();
    let out = Command::new(&copy)
        .args(["build", "--force", node])
        .args(params)
        .current_dir(study.dir.path())
        .env("NO_COLOR", "1")
        .env_remove("VITGRAPH_TORCH_EXE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("vitgraph-torch"), "{text}");
}

/// Whether `taskset` runs here and the machine has a core to spare, so a
/// task pinned to core 0 is pinned.
fn taskset_pins() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores > 1
        && Command::new("taskset")
            .args(["-c", "0", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

#[test]
fn a_busy_core_under_a_pinned_run_makes_it_intruded_and_stale() {
    if !taskset_pins() {
        eprintln!("skipped: needs `taskset` and more than one core");
        return;
    }
    let study = Study::new();
    std::fs::write(
        study.dir.path().join("pipelines/intrude.ron"),
        r#"(stages: {
            "intrude": Stage(task: Vit((model: "vit16x2x64", image_size: 32, num_classes: 10,
                                        batch: 1, samples: 4000, warmup: 3, device: "cpu"))),
        })"#,
    )
    .expect("write the pipeline");
    // Another process spinning on the core the task is pinned to.
    let mut burner = Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .spawn()
        .expect("start the burner");
    let out = study
        .command(&["taskset", "-c", "0"])
        .args(["build", "intrude"])
        .env("VITGRAPH_HOST_LOAD", "judge")
        .output();
    let _ = burner.kill();
    let _ = burner.wait();
    let out = out.expect("run vitgraph");
    assert!(out.status.success(), "{out:?}");
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(study.dir.path().join("out/intrude/results.json")).expect("results.json"),
    )
    .expect("JSON");
    let host = &results["telemetry"]["host"];
    assert_eq!(host["cores"], serde_json::json!([0]), "{host}");
    assert_eq!(host["pinned"], true);
    assert!(host["foreign_cores"].as_f64().unwrap() > 0.25, "{host}");
    assert_eq!(results["validity"]["verdict"], "invalid", "{results}");
    assert_eq!(results["validity"]["flags"][0]["kind"], "intruded");
    let status = study.ok(&["status", "intrude"]);
    assert!(
        status.contains("invalid") && status.contains("intruded: other work took"),
        "{status}"
    );
    let explain = study.ok(&["explain", "intrude"]);
    assert!(
        explain.contains("measured 1 of at most 3 times"),
        "{explain}"
    );
}

/// An unpinned run beside busy loops on every core (so the test means the
/// same on 2 cores or 64, idle or under CI's load): the cores it could run
/// on left it no idle time, so the other work intruded.
#[test]
fn busy_loops_beside_an_unpinned_run_make_it_intruded() {
    let study = Study::new();
    std::fs::write(
        study.dir.path().join("pipelines/loaded.ron"),
        r#"(stages: {
            "loaded": Stage(task: Vit((model: "vit16x2x64", image_size: 32, num_classes: 10,
                                       batch: 1, samples: 4000, warmup: 3, device: "cpu"))),
        })"#,
    )
    .expect("write the pipeline");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut burners: Vec<_> = (0..cores)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("start a burner")
        })
        .collect();
    let out = study
        .command(&[])
        .args(["build", "loaded"])
        .env("VITGRAPH_HOST_LOAD", "judge")
        .output();
    for b in &mut burners {
        let _ = b.kill();
        let _ = b.wait();
    }
    let out = out.expect("run vitgraph");
    assert!(out.status.success(), "{out:?}");
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(study.dir.path().join("out/loaded/results.json")).expect("results.json"),
    )
    .expect("JSON");
    let host = &results["telemetry"]["host"];
    assert_eq!(host["pinned"], false, "{host}");
    assert!(host["foreign_cores"].as_f64().unwrap() > 0.25, "{host}");
    assert_eq!(results["validity"]["verdict"], "invalid", "{results}");
    let flag = &results["validity"]["flags"][0];
    assert_eq!(flag["kind"], "intruded");
    assert!(
        flag["detail"]
            .as_str()
            .unwrap()
            .contains("the task could run on, leaving"),
        "{flag}"
    );
    // Measured again, as an intruded GPU run is; still loaded, still invalid.
    let explain = study.ok(&["explain", "loaded"]);
    assert!(
        explain.contains("measured 1 of at most 3 times"),
        "{explain}"
    );
    let status = study.ok(&["status", "loaded"]);
    assert!(
        status.contains("invalid") && status.contains("intruded: other work took"),
        "{status}"
    );
}

#[test]
fn a_scripted_throttle_makes_a_run_invalid_until_it_was_measured_three_times() {
    let study = Study::new();
    std::fs::write(
        study.dir.path().join("pipelines/throttle.ron"),
        r#"(stages: {
            "throttle": Stage(task: Vit((model: "vit16x2x64", image_size: 32, num_classes: 10,
                                         batch: 1, samples: 40, warmup: 2, device: "cpu"))),
        })"#,
    )
    .expect("write the pipeline");
    // A GPU under its power cap the whole time, and another process on it.
    let script = study.dir.path().join("telemetry.json");
    std::fs::write(
        &script,
        r#"[{"after_ms": 0, "sm_mhz": 1600, "temp_c": 71, "reasons": 4, "processes": [0, 4242]}]"#,
    )
    .expect("write the script");
    let build = || {
        let out = study
            .command(&[])
            .args(["build", "throttle"])
            .env("VITGRAPH_TELEMETRY_SCRIPT", &script)
            .output()
            .expect("run vitgraph");
        assert!(out.status.success(), "{out:?}");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    for n in 1..=3 {
        let built = build();
        assert!(built.contains("1 built"), "build {n}: {built}");
        let status = study.ok(&["status", "throttle"]);
        if n < 3 {
            assert!(
                status.contains(&format!("measured {n} of at most 3 times"))
                    && status.contains("throttled in 100 % of batches (sw_power_cap)")
                    && status.contains("pid 4242"),
                "{status}"
            );
        } else {
            assert!(
                status.contains("1 fresh, 0 stale"),
                "kept after 3: {status}"
            );
        }
    }
    assert!(
        build().contains("0 built"),
        "a kept run is not measured again"
    );
    let explain = study.ok(&["explain", "throttle"]);
    assert!(
        explain.contains("measurement (out/throttle/results.json): invalid")
            && explain.contains("GPU (script,")
            && explain.contains("sm_mhz 1600/1600/1600 MHz")
            && explain.contains("clock-event reasons: sw_power_cap; other processes: 4242"),
        "{explain}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&study.ok(&["explain", "--json", "throttle"])).unwrap();
    assert_eq!(json["measurement"]["validity"]["verdict"], "invalid");
    assert!(json["measurement"]["telemetry"].get("series").is_none());
}
