//! `vitgraph report`'s page in a real browser (headless Chromium through
//! chromedriver): it loads without console errors or requests, its drawings
//! render, tables sort and filter, the timeline has a bar per built node,
//! and failed, stale and unbuilt studies say what they are. Each test
//! writes a screenshot under the target folder for a reviewer to look at.

#[path = "common/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use webdriver::Browser;

const STUDY: &str = r#"Pipeline(
    params: { "fail": 0 },
    stages: {
        "runs": Stage(
            matrix: { "model": ["vit1", "vit2", "vit3"], "batch": [1, 8, 64] },
            task: Command(
                run: "n=$(echo ${model} | tr -dc 0-9); echo \"{\\\"throughput_images_per_s\\\": $(( ${batch} * 10 + n )), \\\"latency_ms\\\": {\\\"median\\\": $n.5}}\" > ${out}/results.json",
                inputs: ["data.txt"],
                outputs: ["results.json"],
            ),
        ),
        "flaky": Stage(
            for_each: "runs",
            task: Command(run: "(test ${fail} = 0 || test ${batch} != 8) && cp ${needs.runs}/results.json ${out}/results.json", outputs: ["results.json"]),
        ),
        "notes": Stage(task: Command(run: "cat notes.txt > ${out}/n.txt", inputs: ["notes.txt"], outputs: ["n.txt"])),
        "report": Stage(
            needs: ["runs"],
            task: Report(
                title: "Throughput by model",
                sources: ["runs"],
                columns: ["throughput_images_per_s", "latency_ms.median"],
                plots: [Plot(x: "batch", y: "throughput_images_per_s", series: "model", log_x: true)],
            ),
        ),
    },
)"#;

struct Ws(tempfile::TempDir);

impl Ws {
    fn new() -> Ws {
        Ws::with(STUDY)
    }

    fn with(study: &str) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
        std::fs::write(dir.path().join("pipelines/study.ron"), study).unwrap();
        std::fs::write(dir.path().join("data.txt"), "1\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "a\n").unwrap();
        Ws(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn vitgraph(&self, args: &[&str]) -> (i32, String) {
        self.vitgraph_with(args, &[])
    }

    /// `vitgraph ARGS…` with `env` set on top.
    fn vitgraph_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
            .arg("-C")
            .arg(self.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("VITGRAPH_NO_PROGRESS", "1")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Writes the page and returns its path.
    fn page(&self) -> PathBuf {
        let (code, err) = self.vitgraph(&["report"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("wrote out/report.html") || err.contains("report.html"),
            "{err}"
        );
        self.path().join("out/report.html")
    }
}

fn screenshot(b: &Browser, name: &str) {
    let to = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("page-screenshots")
        .join(name);
    b.screenshot(&to);
    eprintln!("screenshot: {}", to.display());
}

/// The text of every element `css` selects, in document order.
fn texts(b: &Browser, css: &str) -> Vec<String> {
    let script = format!("return [...document.querySelectorAll({css:?})].map(e => e.textContent);");
    b.js(&script)
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The checks every page must pass: no console error, no request, the
/// graph drawn.
fn sound(b: &Browser) {
    let errors = b.problems();
    assert!(errors.is_empty(), "console: {errors:?}");
    assert_eq!(
        b.js("return performance.getEntriesByType('resource').length;"),
        json!(0),
        "the page requested something"
    );
    let graph = b.js("const r = document.getElementById('stage-graph').getBoundingClientRect(); return [r.width, r.height];");
    assert!(
        graph[0].as_f64().unwrap() > 100.0 && graph[1].as_f64().unwrap() > 30.0,
        "{graph}"
    );
}

/// A report table's column, top to bottom, visible rows only.
fn column(b: &Browser, table: &str, name: &str) -> Vec<String> {
    let script = format!(
        "const t = document.getElementById('{table}');
         const j = [...t.querySelectorAll('th')].findIndex(th => th.textContent.trim().startsWith('{name} ') || th.textContent.trim() === '{name}');
         return [...t.querySelectorAll('tbody tr')].filter(tr => !tr.hidden).map(tr => JSON.parse(tr.dataset.cells)[j]);"
    );
    match b.js(&script) {
        Value::Array(a) => a
            .into_iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect(),
        other => panic!("{other}"),
    }
}

#[test]
fn the_page_of_a_built_study_renders_sorts_and_filters() {
    let ws = Ws::new();
    let (code, err) = ws.vitgraph(&["build", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let page = ws.page();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") || html.matches("http://").all(|_| true));
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);

    // A table of contents whose links reach every section, and stays on
    // screen while the page scrolls.
    let toc = b.js("return [...document.querySelectorAll('#toc a')].map(a => [a.textContent, document.querySelector(a.getAttribute('href')) !== null]);");
    assert_eq!(
        toc,
        json!([
            ["Stages", true],
            ["Stage graph", true],
            ["Timeline", true],
            ["Reports", true],
            ["Nodes", true]
        ])
    );
    let top = b.js("window.scrollTo(0, 2000); return document.getElementById('toc').getBoundingClientRect().top;");
    assert!(top.as_f64().unwrap().abs() < 1.0, "{top}");
    b.js("window.scrollTo(0, 0); return 0;");

    // The timeline: one bar per node the build ran (9 runs, 9 flaky, notes, the report).
    assert_eq!(
        b.js("return document.querySelectorAll('#timeline-svg rect.bar').length;"),
        json!(20)
    );
    let lanes = b.js(
        "return [...document.querySelectorAll('#timeline-svg text.lane')].map(t => t.textContent);",
    );
    assert_eq!(
        lanes,
        json!(["cpu:0", "cpu:1"]),
        "one lane per CPU slot of -j 2"
    );

    // The report's plot renders with a size.
    let plots = b.js("return [...document.querySelectorAll('figure.plot svg')].map(s => { const r = s.getBoundingClientRect(); return r.width * r.height; });");
    assert_eq!(plots.as_array().unwrap().len(), 1, "{plots}");
    assert!(plots[0].as_f64().unwrap() > 10_000.0, "{plots}");

    // Sorting by a click on a column's header, then the other way.
    let tput = |b: &Browser| column(b, "table-0", "throughput_images_per_s");
    assert_eq!(tput(&b).len(), 9);
    b.click("#table-0 th:nth-child(3)");
    let up: Vec<f64> = tput(&b).iter().map(|s| s.parse().unwrap()).collect();
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{up:?}");
    assert_eq!(up[0], 11.0);
    b.click("#table-0 th:nth-child(3)");
    let down: Vec<f64> = tput(&b).iter().map(|s| s.parse().unwrap()).collect();
    assert!(down.windows(2).all(|w| w[0] >= w[1]), "{down:?}");
    assert_eq!(down[0], 643.0);

    // Bookkeeping columns the same in every row are folded into a line (N8).
    let heads = texts(&b, "#report-0 th:not([hidden])");
    assert!(!heads.iter().any(|h| h.starts_with("reps")), "{heads:?}");
    let meta = texts(&b, "#report-0 p.meta");
    assert!(meta.iter().any(|m| m.starts_with("The same in every row: reps 1. Not shown, empty in every row: interval, samples, env_group.")), "{meta:?}");

    // Filtering by a param hides the other rows.
    b.click("select[data-param='model'] option[value='vit2']");
    assert_eq!(column(&b, "table-0", "model"), ["vit2", "vit2", "vit2"]);
    // The plots, drawn from every row, say the filter does not reach them (L9).
    let note = b.js("const n = document.querySelector('#report-0 .plots-unfiltered'); return [n.hidden, n.textContent];");
    assert_eq!(
        note,
        json!([false, "The plots below show every row: the table's filter (model = vit2) applies to the table only."])
    );
    b.click("select[data-param='model'] option[value='']");
    assert_eq!(column(&b, "table-0", "model").len(), 9);
    assert_eq!(
        b.js("return document.querySelector('#report-0 .plots-unfiltered').hidden;"),
        json!(true)
    );

    // A node's details on demand.
    b.click("#node-list td.id");
    let detail = b.js("return document.getElementById('node-detail').textContent;");
    let detail = detail.as_str().unwrap();
    assert!(
        detail.contains("runs[model=vit1,batch=1]") && detail.contains("results.json"),
        "{detail}"
    );
    assert!(
        detail.contains("Key parts") && detail.contains("data.txt"),
        "{detail}"
    );
    screenshot(&b, "built-study.png");
    assert!(b.console().is_empty());
}

#[test]
fn failed_and_stale_nodes_show_as_such() {
    let ws = Ws::new();
    let (code, _) = ws.vitgraph(&["build", "-k", "-p", "fail=1"]);
    assert_eq!(code, 1, "flaky fails at batch 8");
    std::fs::write(ws.path().join("notes.txt"), "b\n").unwrap();
    let (code, err) = ws.vitgraph(&["report", "-p", "fail=1"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.path().join("out/report.html"));
    sound(&b);
    let flaky = b.js("const r = document.querySelector('#stage-table tr[data-stage=flaky]'); return [...r.children].map(c => c.textContent);");
    // stage, pipeline, fresh, stale, failed, running, reasons
    assert_eq!(flaky[4], json!("3"), "{flaky}");
    let notes = b.js("const r = document.querySelector('#stage-table tr[data-stage=notes]'); return [...r.children].map(c => c.textContent);");
    assert_eq!(notes[3], json!("1"), "{notes}");
    assert_eq!(notes[6], json!("input_changed 1"), "{notes}");
    let graph_state = b.js("return document.querySelector('#stage-graph g.stage[data-stage=flaky]').getAttribute('class');");
    assert_eq!(graph_state, json!("stage failed"));
    let stale = b.js("return document.getElementById('stale-list').textContent;");
    let stale = stale.as_str().unwrap();
    assert!(
        stale.contains("failed") && stale.contains("flaky[model=vit1,batch=8]"),
        "{stale}"
    );
    assert!(stale.contains("input_changed: notes.txt"), "{stale}");
    let failed_bars =
        b.js("return document.querySelectorAll('#timeline-svg rect.bar.failed').length;");
    assert_eq!(failed_bars, json!(3));
    // A node of a few ms is still a mark.
    let narrowest = b.js("return Math.min(...[...document.querySelectorAll('#timeline-svg rect.bar')].map(r => r.width.baseVal.value));");
    assert!(narrowest.as_f64().unwrap() >= 3.0, "{narrowest}");
    // Failed and short bars come last in their lane, so none is covered
    // by the next (N12); no stage is coloured red, the failures' colour.
    let lanes = b.js("return document.querySelectorAll('#timeline-bars > g rect.bar').length;");
    assert!(lanes.as_u64().unwrap() >= 20, "{lanes}");
    let covered = b.js("return [...document.querySelectorAll('#timeline-bars > g')].filter(g => { const r = [...g.querySelectorAll('rect.bar')]; const first = r.findIndex(x => x.classList.contains('failed') || x.width.baseVal.value <= 3.01); return first >= 0 && r.slice(first).some(x => !x.classList.contains('failed') && x.width.baseVal.value > 3.01); }).length;");
    assert_eq!(covered, json!(0));
    let reds = b.js("return [...document.querySelectorAll('#timeline-svg rect.bar:not(.failed)')].filter(r => getComputedStyle(r).fill === 'rgb(225, 87, 89)').length;");
    assert_eq!(reds, json!(0));
    // A failed node's details: its attempt, the command it ran, the error.
    b.js("[...document.querySelectorAll('#node-browser td.id')].find(td => td.textContent === 'flaky[model=vit1,batch=8]').click(); return 1;");
    let attempt = b.js("return [document.querySelector('.attempt-line').textContent, document.querySelector('.attempt-command').textContent, document.querySelector('.attempt-error').textContent];");
    let line = attempt[0].as_str().unwrap();
    assert!(
        line.starts_with("failed started 20") && line.contains("exit status 1"),
        "{attempt}"
    );
    assert!(
        attempt[1]
            .as_str()
            .unwrap()
            .contains("(test 1 = 0 || test 8 != 8)"),
        "{attempt}"
    );
    assert!(!attempt[2].as_str().unwrap().is_empty(), "{attempt}");
    screenshot(&b, "failed-and-stale.png");
}

#[test]
fn an_unbuilt_workspace_gets_a_page_that_says_so() {
    let ws = Ws::new();
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let said = b.js("return [!!document.getElementById('nothing-built'), !!document.getElementById('no-build'), document.querySelectorAll('#stage-graph g.stage.never-built').length, document.querySelectorAll('#stage-graph g.stage.stale').length, document.querySelector('#node-list .badge').textContent];");
    // Never built is a state of its own, not stale.
    assert_eq!(said, json!([true, true, 4, 0, "never-built"]));
    screenshot(&b, "unbuilt.png");
}

#[test]
fn the_timeline_shows_the_latest_build_an_earlier_one_or_a_span_of_time() {
    let ws = Ws::new();
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    std::fs::write(ws.path().join("notes.txt"), "b\n").unwrap();
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    let bars = |args: &[&str]| {
        let mut all = vec!["report"];
        all.extend_from_slice(args);
        let (code, err) = ws.vitgraph(&all);
        assert_eq!(code, 0, "{err}");
        let html = std::fs::read_to_string(ws.path().join("out/report.html")).unwrap();
        // The timeline shown (other builds' timelines are in templates).
        let shown = &html[html.find("<svg id=\"timeline-svg\"").unwrap()..];
        shown[..shown.find("</svg>").unwrap()]
            .matches("<rect class=\"bar ")
            .count()
    };
    assert_eq!(bars(&[]), 1, "the latest build ran `notes` alone");
    assert_eq!(bars(&["--build", "1"]), 20);
    assert_eq!(bars(&["--since", "1h"]), 21);
    let (code, err) = ws.vitgraph(&["report", "--build", "3"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("there is no build 3") && err.contains("builds 1 to 2"),
        "{err}"
    );
}

#[test]
fn the_timeline_zooms_into_a_window_and_labels_wide_bars() {
    let ws = Ws::new();
    let (code, err) = ws.vitgraph(&["build", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let widest = "return Math.max(...[...document.querySelectorAll('#timeline-svg rect.bar')].map(r => r.width.baseVal.value));";
    let window = "return document.getElementById('timeline-window').textContent;";
    let number = |v: serde_json::Value| v.as_f64().unwrap();
    let whole = number(b.js(widest));
    assert!(b
        .js(window)
        .as_str()
        .unwrap()
        .starts_with("The whole build"));

    // Three times "Zoom in": every bar eight times as long.
    for _ in 0..3 {
        b.click(".zoom button:nth-of-type(1)");
    }
    let zoomed = number(b.js(widest));
    assert!(
        (zoomed / whole - 8.0).abs() < 0.05,
        "{whole} px -> {zoomed} px"
    );
    assert!(
        b.js(window).as_str().unwrap().contains(" s to "),
        "{}",
        b.js(window)
    );
    // The axis is ticked anew inside the window.
    let ticks = b.js("return document.querySelectorAll('#timeline-ticks text.tick').length;");
    assert!(ticks.as_u64().unwrap() >= 2, "{ticks}");
    b.click(".zoom button:nth-of-type(3)");
    assert!(
        (number(b.js(widest)) - whole).abs() < 0.2,
        "back to the whole build"
    );

    // Dragging across the longest bar zooms to it: it then spans the plot
    // and carries its node's name.
    let label = b.js(
        "const svg = document.getElementById('timeline-svg');
         const bars = [...svg.querySelectorAll('rect.bar')];
         const bar = bars.reduce((a, r) => r.width.baseVal.value > a.width.baseVal.value ? r : a);
         const box = bar.getBoundingClientRect();
         const y = box.top + box.height / 2;
         const fire = (type, x, target) => target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true, button: 0 }));
         fire('mousedown', box.left + 1, svg);
         fire('mousemove', box.right - 1, svg);
         fire('mouseup', box.right - 1, window);
         const name = data_nodes_name(bar);
         function data_nodes_name(r) { return JSON.parse(document.getElementById('data').textContent).nodes[Number(r.dataset.i)][0]; }
         const text = [...r_labels()].map(t => t.textContent);
         function r_labels() { return bar.parentNode.querySelectorAll('text.bar-label'); }
         return { name, text, width: bar.width.baseVal.value, plot: Number(svg.dataset.plotW) };",
    );
    let width = label["width"].as_f64().unwrap();
    let plot = label["plot"].as_f64().unwrap();
    assert!(width > 0.8 * plot, "{label}");
    let name = label["name"].as_str().unwrap();
    let texts: Vec<&str> = label["text"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| *t == name || name.starts_with(t.trim_end_matches('…'))),
        "{label}"
    );
    assert!(b.js(window).as_str().unwrap().contains(" s to "));
    screenshot(&b, "timeline-zoomed");
}

#[test]
fn the_stage_graph_groups_stages_by_file_and_a_box_lists_its_nodes() {
    let ws = Ws::new();
    std::fs::write(
        ws.path().join("pipelines/extra.ron"),
        r#"Pipeline(title: "Extra", stages: { "extra": Stage(task: Command(run: "echo x > ${out}/x.txt", outputs: ["x.txt"])) })"#,
    )
    .unwrap();
    let (code, err) = ws.vitgraph(&["build", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    // One of the two files has a title: the page is the workspace's, with
    // both pipelines named (N5), never the one file's title.
    let head = b.js("return [document.querySelector('header h1').textContent, document.querySelector('header').textContent];");
    let (title, header) = (head[0].as_str().unwrap(), head[1].as_str().unwrap());
    assert!(
        title.ends_with(": 2 pipelines") && title != "Extra",
        "{title}"
    );
    assert!(
        header.contains("Pipelines: pipelines/extra.ron (Extra); pipelines/study.ron.")
            || header.contains("Pipelines: pipelines/study.ron; pipelines/extra.ron (Extra)."),
        "{header}"
    );
    let mut bands = b.js(
        "return [...document.querySelectorAll('#stage-graph g.band text')].map(t => t.textContent);",
    );
    bands.as_array_mut().unwrap().sort_by_key(|v| v.to_string());
    assert_eq!(
        bands,
        json!(["pipelines/extra.ron", "pipelines/study.ron"]),
        "a band per pipeline file"
    );
    // Every box lies inside its file's band.
    let inside = b.js(
        "const bands = [...document.querySelectorAll('#stage-graph g.band')].map(g => [g.querySelector('text').textContent, g.querySelector('rect').getBBox()]);
         const file = Object.fromEntries(data_stages().map(s => [s.name, s.pipeline]));
         function data_stages() { return JSON.parse(document.getElementById('data').textContent).stages; }
         return [...document.querySelectorAll('#stage-graph g.stage')].every(g => {
           const r = g.querySelector('rect').getBBox();
           const [, band] = bands.find(([f]) => f === file[g.dataset.stage]);
           return r.y >= band.y && r.y + r.height <= band.y + band.height;
         });",
    );
    assert_eq!(inside, json!(true));
    // A click on a box lists its stage's nodes; Enter on another does too.
    let listed =
        "return [...document.querySelectorAll('#node-list td.id')].map(t => t.textContent);";
    b.js("document.querySelector('#stage-graph g.stage[data-stage=\"flaky\"]').dispatchEvent(new MouseEvent('click', { bubbles: true }));");
    let flaky = b.js(listed);
    let flaky = flaky.as_array().unwrap();
    assert_eq!(flaky.len(), 9, "{flaky:?}");
    assert!(flaky
        .iter()
        .all(|n| n.as_str().unwrap().starts_with("flaky[")));
    b.js("const g = document.querySelector('#stage-graph g.stage[data-stage=\"extra\"]'); g.focus(); g.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));");
    assert_eq!(b.js(listed), json!(["extra"]));
    assert_eq!(
        b.js("return document.activeElement.dataset.stage;"),
        json!("extra"),
        "the box takes the keyboard's focus"
    );
    screenshot(&b, "stage-graph-bands");
}

/// A two-way sweep whose plot is drawn as small multiples.
const FACETED: &str = r#"Pipeline(stages: {
  "runs": Stage(matrix: {"a": [1, 2], "b": [1, 2, 4]},
                task: Command(run: "echo '{\"t\": ${a}${b}}' > ${out}/results.json", outputs: ["results.json"])),
  "report": Stage(needs: ["runs"],
                  task: Report(title: "Panels", sources: ["runs"], columns: ["t"],
                               plots: [Plot(x: "b", y: "t", facet: "a")])),
})"#;

#[test]
fn a_faceted_plot_is_one_figure_of_panels_on_the_page() {
    let ws = Ws::with(FACETED);
    let (code, err) = ws.vitgraph(&["build"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let figure = b.js(
        "const figs = [...document.querySelectorAll('figure.plot')];
         const svg = figs[0].querySelector('svg');
         const texts = [...svg.querySelectorAll('text')].map(t => t.textContent.trim());
         const r = svg.getBoundingClientRect();
         return { figures: figs.length, svgs: figs[0].querySelectorAll('svg').length,
                  panels: texts.filter(t => t.startsWith('a = ')),
                  stray: figs[0].innerText.trim().length > 200 ? figs[0].innerText.slice(0, 200) : '',
                  area: r.width * r.height };",
    );
    assert_eq!(figure["figures"], json!(1), "{figure}");
    assert_eq!(figure["svgs"], json!(1), "{figure}");
    assert_eq!(figure["panels"], json!(["a = 1", "a = 2"]), "{figure}");
    assert_eq!(
        figure["stray"],
        json!(""),
        "no text outside the figure's drawing: {figure}"
    );
    assert!(figure["area"].as_f64().unwrap() > 100_000.0, "{figure}");
}

/// Two measurements that hold the machine, and three ordinary nodes.
const ALONE: &str = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"i": [1, 2]},
                 task: Command(run: "echo '{\"latency_ms\": {\"median\": ${i}}}' > ${out}/results.json",
                               outputs: ["results.json"], measure: true, resources: (exclusive: true))),
  "side": Stage(matrix: {"j": [1, 2, 3]}, task: Command(run: "echo ${j} > ${out}/x.txt", outputs: ["x.txt"])),
})"#;

#[test]
fn a_measurement_that_held_the_machine_is_shaded_across_the_lanes() {
    let ws = Ws::with(ALONE);
    let (code, err) = ws.vitgraph(&["build", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let shaded = b.js(
        "const svg = document.getElementById('timeline-svg');
         const lanes = svg.querySelectorAll('text.lane').length;
         const bands = [...svg.querySelectorAll('rect.alone')];
         const bars = [...svg.querySelectorAll('rect.bar')].map(r => [r.x.baseVal.value, r.x.baseVal.value + r.width.baseVal.value]);
         return { lanes, bands: bands.length,
                  full: bands.every(r => Math.abs(r.height.baseVal.value - 20 * lanes) < 0.01),
                  key: document.querySelectorAll('#build-info .alone-key').length };",
    );
    assert_eq!(shaded["bands"], json!(2), "{shaded}");
    assert_eq!(shaded["full"], json!(true), "{shaded}");
    assert_eq!(
        shaded["key"],
        json!(1),
        "the legend says what shading means"
    );
    // Zoomed, a band keeps its true length at the new scale, as bars do.
    let widths = "return [...document.querySelectorAll('#timeline-svg rect.alone')].map(r => r.width.baseVal.value);";
    let before = b.js(widths);
    b.click(".zoom button:nth-of-type(1)");
    let after = b.js(widths);
    for (a, z) in before
        .as_array()
        .unwrap()
        .iter()
        .zip(after.as_array().unwrap())
    {
        let (a, z) = (a.as_f64().unwrap(), z.as_f64().unwrap());
        assert!(z >= a - 0.1, "{before} -> {after}");
    }
}

#[test]
fn the_build_picker_switches_the_timeline_to_another_build() {
    let ws = Ws::new();
    assert_eq!(ws.vitgraph(&["build", "-j", "2"]).0, 0);
    std::fs::write(ws.path().join("notes.txt"), "b\n").unwrap();
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let bars = "return document.querySelectorAll('#timeline-svg rect.bar').length;";
    let line = "return document.getElementById('build-line').textContent;";
    let pick = |n: usize| {
        b.js(&format!(
            "const p = document.getElementById('build-picker'); p.value = '{n}'; p.dispatchEvent(new Event('input'));"
        ));
    };
    assert_eq!(b.js(bars), json!(1), "the latest build ran `notes` alone");
    let options =
        b.js("return [...document.querySelectorAll('#build-picker option')].map(o => o.value);");
    assert_eq!(options, json!(["2", "1"]), "latest first");
    // Each entry says where and how long (N18): `build 1 on HOST: DATE, 37 ms, 20 node(s)`.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned();
    let texts = b.js(
        "return [...document.querySelectorAll('#build-picker option')].map(o => o.textContent);",
    );
    let first = texts[1].as_str().unwrap();
    assert!(
        first.starts_with(&format!("build 1 on {host}: 20")),
        "{texts}"
    );
    assert!(
        first.contains(" ms, 20 node(s)") || first.contains(" s, 20 node(s)"),
        "{texts}"
    );
    pick(1);
    assert_eq!(b.js(bars), json!(20));
    let switched = b.js(line);
    assert!(
        switched
            .as_str()
            .unwrap()
            .starts_with(&format!("Build 1 of 2 on {host}, started 20")),
        "{switched}"
    );
    // The switched timeline zooms as the first did.
    let whole = b.js("return Math.max(...[...document.querySelectorAll('#timeline-svg rect.bar')].map(r => r.width.baseVal.value));");
    b.click(".zoom button:nth-of-type(1)");
    let zoomed = b.js("return Math.max(...[...document.querySelectorAll('#timeline-svg rect.bar')].map(r => r.width.baseVal.value));");
    assert!(
        zoomed.as_f64().unwrap() > 1.9 * whole.as_f64().unwrap(),
        "{whole} -> {zoomed}"
    );
    assert_eq!(
        b.js("return document.querySelectorAll('#build-info .zoom').length;"),
        json!(1)
    );
    pick(2);
    assert_eq!(b.js(bars), json!(1));
    assert!(b.js(line).as_str().unwrap().starts_with("Build 2 of 2"));
}

/// Two models measured twice each, reported; and a plot that would draw a
/// line through the hidden `model` (its report fails, naming it).
const REPEATED: &str = r#"Pipeline(stages: {
  "runs": Stage(matrix: {"model": ["a", "b"], "batch": [1, 8]}, repeat: 2,
                task: Command(run: "echo '{\"latency_ms\": {\"median\": ${batch}.${rep}}}' > ${out}/results.json",
                              outputs: ["results.json"], measure: true)),
  "report": Stage(needs: ["runs"],
                  task: Report(title: "Repeated", sources: ["runs"], columns: ["latency_ms.median"])),
  "hidden": Stage(needs: ["runs"],
                  task: Report(title: "Hidden", sources: ["runs"], columns: ["latency_ms.median", "latency_ms.p99"])),
})"#;

#[test]
fn tables_sort_and_details_open_by_keyboard_and_a_report_says_its_method() {
    let ws = Ws::with(REPEATED);
    let (code, err) = ws.vitgraph(&["build", "-k"]);
    assert_ne!(code, 0, "the hidden plot's report fails: {err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    // The report's method sentence, as report.md has it.
    let method = b.js("return document.querySelector('#report-list p.method').textContent;");
    let method = method.as_str().unwrap();
    assert!(
        method.contains("2 to 2 here") && method.contains("t-interval"),
        "{method}"
    );
    // A value and its interval in one cell; the bound columns are hidden.
    let shown = b.js("const t = document.querySelector('#report-list table'); return { heads: [...t.querySelectorAll('th')].filter(h => !h.hidden).map(h => h.textContent.trim()), cell: [...t.querySelectorAll('tbody td')].map(td => td.textContent).find(x => x.includes(' ± ')) || '' };");
    let heads: Vec<&str> = shown["heads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(heads.iter().all(|h| !h.contains("ci95")), "{heads:?}");
    assert!(shown["cell"].as_str().unwrap().ends_with(" %"), "{shown}");
    // Sorting a column by keyboard: focus its header, Enter, Enter again.
    let order = "return [...document.querySelectorAll('#report-list table tbody tr')].filter(r => !r.hidden).map(r => r.children[1].textContent);";
    let press = |css: &str| {
        b.js(&format!(
            "const e = document.querySelector('{css}'); e.focus(); e.dispatchEvent(new KeyboardEvent('keydown', {{ key: 'Enter', bubbles: true }}));"
        ));
    };
    press("#report-list th.sortable:nth-child(2)");
    assert_eq!(b.js(order), json!(["1", "1", "8", "8"]));
    press("#report-list th.sortable:nth-child(2)");
    assert_eq!(b.js(order), json!(["8", "8", "1", "1"]));
    // A node's details by keyboard; the failed report's attempt names the
    // column none of its files has.
    let (code, _) = ws.vitgraph(&["report"]);
    assert_eq!(code, 0);
    b.open(&ws.page());
    let shown = b.js(
        "const td = [...document.querySelectorAll('#node-list td.id')].find(t => t.textContent === 'hidden');
         td.focus();
         td.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
         const d = document.getElementById('node-detail');
         return { title: d.querySelector('h3').textContent, error: (d.querySelector('.attempt-error') || {}).textContent || '' };",
    );
    assert_eq!(shown["title"], json!("hidden"), "{shown}");
    let error = shown["error"].as_str().unwrap();
    assert!(
        error.contains("column `latency_ms.p99` is in none of the joined files"),
        "{shown}"
    );
}

/// Two configurations with a ±2 % target and at most 4 repetitions: the
/// steady one meets it after 3, the noisy one (±20 % between runs) spends
/// its budget.
const PRECISE: &str = r#"Pipeline(
    stages: {
        "bench": Stage(
            matrix: { "impl": ["steady", "noisy"] },
            precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: 4),
            task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                          inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
        "bench_report": Stage(needs: ["bench"],
            task: Report(title: "bench", sources: ["bench"], columns: ["latency_ms.median"], target: Some(0.02))),
    },
)"#;

const BENCH: &str = r#"import json, random, sys
impl, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spread = {"steady": 0.001, "noisy": 0.2}[impl]
value = 5.0 * (1 + spread * random.Random(f"{impl}-{rep}").gauss(0, 1))
json.dump({"latency_ms": {"median": value}}, open(out, "w"))
"#;

#[test]
fn a_spent_precision_budget_is_flagged_on_the_page() {
    let ws = Ws::with(PRECISE);
    std::fs::write(ws.path().join("bench.py"), BENCH).unwrap();
    let (code, err) = ws.vitgraph(&["build", "-j", "1"]);
    assert_eq!(code, 0, "{err}");
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let line = b.js("return document.getElementById('precision-line').textContent;");
    assert_eq!(line, json!("1 of 2 configurations within their target."));
    let flagged = b.js(
        "return [...document.querySelectorAll('#precision-list li')].map(li => li.textContent);",
    );
    let flagged = flagged.as_array().unwrap();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    let text = flagged[0].as_str().unwrap();
    assert!(
        text.starts_with("budget spent bench[impl=noisy]: budget spent at ±")
            && text.ends_with("after 4 runs (max_repeat 4)"),
        "{text}"
    );
    let bench = b.js("const r = document.querySelector('#stage-table tr[data-stage=bench]'); return [...r.children].map(c => c.textContent);");
    // stage, pipeline, fresh, stale, failed, running, not needed, reasons
    assert_eq!(bench[2], json!("7"), "{bench}");
    assert_eq!(bench[6], json!("1"), "{bench}");
    // The report counts its rows over the target before its table.
    let over = b.js("return document.querySelector('#report-list .over-target').textContent;");
    assert!(
        over.as_str()
            .unwrap()
            .starts_with("⚠ 1 of 2 rows have a 95 % interval wider than the report's target"),
        "{over}"
    );
    screenshot(&b, "precision.png");
}

/// Seven noisy configurations (±20 % between runs) spend a budget of 3
/// repetitions; five unbuilt ones of another stage are only counted (N6).
const MANY: &str = r#"Pipeline(
    stages: {
        "bench": Stage(
            matrix: { "impl": ["n1", "n2", "n3", "n4", "n5", "n6", "n7"] },
            precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: 3),
            task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                          inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
        "later": Stage(
            matrix: { "impl": ["n1", "n2", "n3", "n4", "n5"] },
            precision: (metric: "latency_ms.median", ci_rel: 0.02, max_repeat: 3),
            task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                          inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
    },
)"#;

#[test]
fn the_precision_list_is_capped_per_stage_and_counts_what_is_not_built() {
    let ws = Ws::with(MANY);
    std::fs::write(
        ws.path().join("bench.py"),
        BENCH.replace(r#"{"steady": 0.001, "noisy": 0.2}[impl]"#, "0.2"),
    )
    .unwrap();
    let (code, err) = ws.vitgraph(&["build", "bench", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let items = b.js(
        "return [...document.querySelectorAll('#precision-list li')].map(li => li.textContent);",
    );
    let items: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(items.len(), 7, "{items:?}");
    assert!(
        items[..5]
            .iter()
            .all(|t| t.starts_with("budget spent bench[impl=")),
        "{items:?}"
    );
    assert_eq!(
        items[5],
        "… and 2 more configurations of bench outside their target"
    );
    assert_eq!(
        items[6],
        "not built later: 5 configurations with a repetition not built yet"
    );
}

/// Large numbers read without invented digits (L2): a whole number below
/// a million exactly, larger ones and long fractions with an SI prefix.
#[test]
fn table_numbers_never_show_invented_digits() {
    let ws = Ws::with(
        r#"Pipeline(stages: {
  "runs": Stage(repeat: 2, task: Command(
      run: "echo '{\"flops\": 874579968, \"params\": 215850, \"t\": 12345.678, \"r\": 0.123456}' > ${out}/results.json",
      outputs: ["results.json"], measure: true)),
  "rep": Stage(needs: ["runs"], task: Report(title: "n", sources: ["runs"], columns: ["flops", "params", "t", "r"])),
})"#,
    );
    let (code, err) = ws.vitgraph(&["build", "-j", "1"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let cells = b.js("const t = document.querySelector('#report-list table'); const names = [...t.querySelectorAll('th')].map(h => h.textContent.trim()); const tds = [...t.querySelectorAll('tbody tr')][0].children; return Object.fromEntries(names.map((n, i) => [n, [tds[i].childNodes[0].textContent, tds[i].title]]));");
    assert_eq!(cells["flops"][0], json!("874.6M"), "{cells}");
    assert_eq!(cells["params"][0], json!("215850"), "{cells}");
    assert_eq!(cells["t"][0], json!("12.35k"), "{cells}");
    assert_eq!(cells["r"][0], json!("0.1235"), "{cells}");
    assert!(
        cells["flops"][1].as_str().unwrap().starts_with("874579968"),
        "{cells}"
    );
}

/// A report's plots on the page in the order its spec lists them (L4),
/// not by file name.
#[test]
fn plots_keep_the_specs_order() {
    let study = STUDY.replace(
        r#"plots: [Plot(x: "batch", y: "throughput_images_per_s", series: "model", log_x: true)],"#,
        r#"plots: [Plot(x: "batch", y: "throughput_images_per_s", series: "model", log_x: true),
                   Plot(x: "batch", y: "latency_ms.median", series: "model", log_x: true)],"#,
    );
    assert_ne!(study, STUDY);
    let ws = Ws::with(&study);
    let (code, err) = ws.vitgraph(&["build", "report", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.page());
    sound(&b);
    let names = b.js("return [...document.querySelectorAll('#report-list figure.plot')].map(f => f.textContent.includes('latency') ? 'latency' : 'throughput');");
    assert_eq!(names, json!(["throughput", "latency"]));
}

#[test]
fn a_stale_report_says_so_over_its_old_table() {
    let ws = Ws::new();
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let banners = b.js("return document.querySelectorAll('#report-list .stale-banner').length;");
    assert_eq!(banners, json!(0), "a fresh report has no banner");
    let built = b.js("return document.querySelector('#report-list .report-built').textContent;");
    assert!(
        built.as_str().unwrap().contains("report · built 20"),
        "{built}"
    );
    // A report of a few milliseconds says so, not `in 0.0 s` (N18).
    let took = built.as_str().unwrap().rsplit(", in ").next().unwrap();
    assert!(
        took.ends_with(" ms") && took[..took.len() - 3].parse::<u32>().is_ok(),
        "{built}"
    );

    // The title edited, and an input of its runs: the page shows the old
    // table under the title it was built with, and says what it is now (N15).
    let study = STUDY.replace("Throughput by model", "Throughput per model");
    std::fs::write(ws.path().join("pipelines/study.ron"), &study).unwrap();
    std::fs::write(ws.path().join("data.txt"), "2\n").unwrap();
    let page = ws.page();
    b.open(&page);
    sound(&b);
    let title = b.js("return document.querySelector('#report-list h3').textContent;");
    assert_eq!(title, json!("Throughput by model"));
    let banner = b.js("return document.querySelector('#report-list .stale-banner').textContent;");
    let banner = banner.as_str().unwrap();
    assert!(
        banner.starts_with("Stale: the table and plots below are from the run built"),
        "{banner}"
    );
    assert!(banner.contains("spec_changed"), "{banner}");
    assert!(banner.contains("upstream_changed"), "{banner}");
    assert!(
        banner.contains("built under the title “Throughput by model”; the pipeline's title is now “Throughput per model”"),
        "{banner}"
    );
    // The command as code, not between literal backticks (L1).
    assert!(
        banner.contains("vitgraph build report brings it up to date") && !banner.contains('`'),
        "{banner}"
    );
    let code = b.js("return [...document.querySelectorAll('#report-list .stale-banner code')].map(c => c.textContent);");
    assert!(
        code.as_array()
            .unwrap()
            .contains(&json!("vitgraph build report")),
        "{code}"
    );
    screenshot(&b, "stale-report.png");

    // Its plot loses its series: the line would zig-zag through `model`,
    // so no build can bring the report up to date, and the banner says why
    // instead of naming a build.
    let refused = study.replace(r#", series: "model""#, "");
    std::fs::write(ws.path().join("pipelines/study.ron"), refused).unwrap();
    b.open(&ws.page());
    sound(&b);
    let banner = b.js("return document.querySelector('#report-list .stale-banner').textContent;");
    let banner = banner.as_str().unwrap();
    assert!(banner.starts_with("Stale: "), "{banner}");
    assert!(
        banner.contains("Refused: report: the line throughput_images_per_s")
            && banner.contains("they differ in model")
            && banner.contains("(pipelines/study.ron:23:")
            && !banner.contains("vitgraph build report"),
        "{banner}"
    );
    screenshot(&b, "refused-report.png");
}

#[test]
fn an_analysis_of_a_real_trace_lists_its_top_kernels() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/external-traces");
    if !traces.is_dir() {
        eprintln!("skipped: {} is absent", traces.display());
        return;
    }
    let ws = Ws::with(include_str!("../examples/archive/pipelines/archive.ron"));
    let made = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/archive/make-archive.sh"))
        .arg(&traces)
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let shown = b.js(
        "const td = [...document.querySelectorAll('#node-list td.id')].find(t => t.textContent.startsWith('analysis[rq=rq1_model_architecture_impact'));
         td.click();
         const rows = [...document.querySelectorAll('#node-detail table.kernels tr')].slice(1, 2).map(r => [...r.children].map(c => c.textContent));
         return [document.querySelectorAll('#node-detail table.kernels').length, rows[0]];",
    );
    // The two H100s of the recording, ten kernels each; the first is a GEMM.
    assert_eq!(shown[0], json!(2), "{shown}");
    assert!(shown[1][0].as_str().unwrap().contains("gemm"), "{shown}");
    // The measured window as tracks: a lane for the batches and one per
    // stream, a bar per kernel with its name; the window's events beside it
    // for ui.perfetto.dev, where the link points.
    let tracks = b.js(
        "const svg = document.querySelector('#node-detail svg.tracks');
         const link = [...document.querySelectorAll('#node-detail p.perfetto a')].map(a => a.getAttribute('href'));
         return { kernels: svg.querySelectorAll('rect.kernel').length,
                  batches: svg.querySelectorAll('rect.batch').length,
                  lanes: [...svg.querySelectorAll('text.lane')].map(t => t.textContent),
                  first: svg.querySelector('rect.kernel title').textContent,
                  link: link[0], button: document.querySelectorAll('#node-detail p.perfetto button').length };",
    );
    assert!(tracks["kernels"].as_u64().unwrap() > 10, "{tracks}");
    assert_eq!(tracks["lanes"][0], json!("batches"), "{tracks}");
    assert!(
        tracks["lanes"].as_array().unwrap().len() >= 3,
        "the batches and a stream on each of two GPUs: {tracks}"
    );
    assert!(tracks["first"].as_str().unwrap().contains(": "), "{tracks}");
    assert_eq!(tracks["button"], json!(1));
    let link = tracks["link"].as_str().unwrap();
    assert!(link.ends_with("window.perfetto.json"), "{tracks}");
    let file = page.parent().unwrap().join(link);
    let events: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let kernels = events["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .count();
    assert!(
        kernels as u64 >= tracks["kernels"].as_u64().unwrap(),
        "{kernels}"
    );
    // A window of 4 MB does not travel in the page: from this file:// page
    // the button says to download and drop the file, and opens no tab that
    // would stay empty (N11; the quickstart's page test posts a small one).
    let note = b.js(
        "window.opened = 0;
         window.open = () => { window.opened += 1; return null; };
         document.querySelector('#node-detail p.perfetto button').click();
         return new Promise((done) => setTimeout(() => done([window.opened, document.querySelector('#node-detail .perfetto-note').textContent]), 200));",
    );
    assert_eq!(note[0], json!(0), "{note}");
    assert!(
        note[1].as_str().unwrap().contains("download window.perfetto.json (the link on the left), then drop it into ui.perfetto.dev"),
        "{note}"
    );
    screenshot(&b, "top-kernels.png");
}

/// A measuring command whose level per implementation comes from
/// `levels.json`, seeded per configuration and repetition.
const LEVELLED: &str = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"impl": ["fast", "slow"]}, repeat: 3,
                 task: Command(run: "python3 bench.py ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py", "levels.json"], outputs: ["results.json"], measure: true)),
  "summary": Stage(needs: ["bench"],
                   task: Report(title: "Bench", sources: ["bench"], columns: ["latency_ms.median"],
                                compare: Some(Compare(param: "impl", baseline: "slow", metric: "latency_ms.median")))),
})"#;

/// The measuring script of `tests/cli/compare.rs`.
const LEVELLED_BENCH: &str = include_str!("common/levelled_bench.py");

#[test]
fn a_comparison_on_the_page_colours_verdicts_draws_intervals_and_filters() {
    let ws = Ws::with(LEVELLED);
    std::fs::write(ws.path().join("bench.py"), LEVELLED_BENCH).unwrap();
    std::fs::write(
        ws.path().join("levels.json"),
        r#"{"fast": 5.0, "slow": 8.0}"#,
    )
    .unwrap();
    assert_eq!(ws.vitgraph(&["build", "-j", "1"]).0, 0);
    assert_eq!(ws.vitgraph(&["baseline", "save", "main"]).0, 0);
    std::fs::write(
        ws.path().join("levels.json"),
        r#"{"fast": 5.0, "slow": 9.6}"#,
    )
    .unwrap();
    assert_eq!(ws.vitgraph(&["build", "-j", "1"]).0, 0);
    let (code, err) = ws.vitgraph(&["report", "--compare", "baseline:main", "HEAD"]);
    assert_eq!(code, 0, "{err}");
    let Some(b) = Browser::start() else { return };
    b.open(&ws.path().join("out/report.html"));
    sound(&b);
    let sides =
        b.js("return [...document.querySelectorAll('.compare-side')].map(p => p.textContent);");
    assert_eq!(
        sides,
        json!([
            "A: baseline:main — baseline main, 6 runs",
            "B: HEAD — current runs, 6 runs"
        ])
    );
    assert_eq!(
        column(&b, "compare-table", "configuration"),
        ["bench[impl=fast]", "bench[impl=slow]"]
    );
    let badges = b.js("return [...document.querySelectorAll('#compare-table .badge.verdict')].map(s => s.textContent);");
    // `fast` measured byte-identical results in both builds (a seeded script).
    assert_eq!(
        badges,
        json!(["same: the same measurements on both sides", "slower"])
    );
    let colour = b.js("return getComputedStyle(document.querySelector('#compare-table .badge.slower')).backgroundColor;");
    assert_eq!(colour, json!("rgb(198, 40, 40)"));
    // Each row's interval is drawn, its point right of 1 for the slower one.
    let drawn = b.js("return [...document.querySelectorAll('#compare-table svg.ci')].map(s => [s.querySelector('.ci-point').getAttribute('cx') - s.querySelector('.ci-one').getAttribute('x1'), s.querySelector('.ci-bar') !== null]);");
    let drawn = drawn.as_array().unwrap();
    assert_eq!(drawn.len(), 2, "{drawn:?}");
    assert!(
        drawn[1][0].as_f64().unwrap() > 10.0 && drawn[1][1] == json!(true),
        "{drawn:?}"
    );
    // On a log scale: the band [1/1.02, 1.02] is as wide either side of 1.
    let band = b.js("const s = document.querySelector('#compare-table svg.ci'); const r = s.querySelector('.ci-band'); const one = +s.querySelector('.ci-one').getAttribute('x1'); return [one - r.x.baseVal.value, r.x.baseVal.value + r.width.baseVal.value - one];");
    let (left, right) = (band[0].as_f64().unwrap(), band[1].as_f64().unwrap());
    assert!((left - right).abs() < 0.01, "{band}");
    // The verdict filter leaves the slower row alone.
    b.js("const s = document.querySelector('#comparison select[data-param=verdict]'); s.value = 'slower'; s.dispatchEvent(new Event('change')); return 1;");
    assert_eq!(
        column(&b, "compare-table", "configuration"),
        ["bench[impl=slow]"]
    );
    // The findings box: the report's comparison in one sentence.
    let finding =
        b.js("return [...document.querySelectorAll('#findings li')].map(l => l.textContent);");
    let finding = finding.as_array().unwrap();
    assert_eq!(finding.len(), 1, "{finding:?}");
    let text = finding[0].as_str().unwrap();
    assert!(
        // 5.0 against 9.6 ms, within the script's noise; the metric in
        // words and the runs it rests on (N14).
        text.starts_with("median latency at impl = fast is 0.5")
            && text.contains("× its value at impl = slow [")
            && text.ends_with("— faster (3 vs 3 runs)."),
        "{text}"
    );
    // Grouped under the report's title, said once.
    let heads = b.js("return [...document.querySelectorAll('#findings .finding-group h3')].map(h => h.textContent);");
    assert_eq!(heads, json!(["Bench"]));
    let summary = b.js("return document.querySelector('.compare-summary').textContent;");
    assert_eq!(
        summary,
        json!("2 configurations paired, 2 metrics: 0 faster, 1 slower, 1 same, 0 inconclusive, 0 not comparable")
    );
    screenshot(&b, "comparison.png");
}

/// A block measured together (`tests/cli/together.rs`'s script): `b` and
/// `a` share each process's speed factor, `g` does not.
const TOGETHER: &str = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"impl": ["a", "b", "g"]}, together: ["impl"], repeat: 5,
                 task: Command(run: "python3 bench.py together ${impl} ${rep} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "summary": Stage(needs: ["bench"],
                   task: Report(title: "Together", sources: ["bench"], columns: ["latency_ms.median"],
                                compare: Some(Compare(param: "impl", baseline: "a", metric: "latency_ms.median")))),
})"#;

/// A workspace of `study` whose `bench.py` is the together benchmark
/// (`common/together_bench.py`), built.
fn built_together(study: &str) -> Ws {
    let ws = Ws::with(study);
    std::fs::write(
        ws.path().join("bench.py"),
        include_str!("common/together_bench.py"),
    )
    .unwrap();
    let (code, err) = ws.vitgraph(&["build", "-j", "1"]);
    assert_eq!(code, 0, "{err}");
    ws
}

#[test]
fn a_finding_measured_together_says_so_and_whether_the_band_cancelled() {
    let ws = built_together(TOGETHER);
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let findings = texts(&b, "#findings li");
    let findings: Vec<&str> = findings.iter().map(String::as_str).collect();
    assert_eq!(findings.len(), 2, "{findings:?}");
    let (b_, g) = (findings[0], findings[1]);
    assert!(
        b_.starts_with("median latency at impl = b is 1.85")
            && b_.contains("× its value at impl = a [1.8")
            && b_.contains("— slower. Measured together: both in each of 5 processes")
            && !b_.contains("unequally"),
        "{b_}"
    );
    assert!(
        g.starts_with("median latency at impl = g is 0.2")
            && g.contains("The process's speed moved them unequally"),
        "{g}"
    );
    let heading = b.js("return document.querySelector('.compare-heading').textContent;");
    assert_eq!(
        heading,
        json!("Comparison (95 % intervals: paired over the processes that measured both)")
    );
    screenshot(&b, "together-findings.png");
}

/// With `check: true` the report tests each paired comparison against
/// the A/A check of the same processes; the page's finding for the
/// comparison the process's speed moved unequally says so with the F
/// test's figures, and the one it moved alike carries no such sentence.
#[test]
fn a_finding_spread_beyond_its_aa_check_says_so_with_the_f_test() {
    let ws = built_together(&TOGETHER.replace(
        "together: [\"impl\"], repeat: 5",
        "together: [\"impl\"], check: true, repeat: 6",
    ));
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let findings = texts(&b, "#findings li");
    let findings: Vec<&str> = findings.iter().map(String::as_str).collect();
    let g = findings
        .iter()
        .find(|f| f.contains("impl = g"))
        .unwrap_or_else(|| panic!("{findings:?}"));
    assert!(
        g.contains("as much as the A/A check's in the same processes (F test p = ")
            && g.contains("the interval carries it"),
        "{g}"
    );
    // The spread in three significant digits or whole, never `13501.1×`.
    let times = g
        .split(" spread ")
        .nth(1)
        .and_then(|s| s.split('×').next())
        .unwrap_or("");
    assert!(!times.contains('.') || times.len() <= 4, "{g}");
    let b_ = findings
        .iter()
        .find(|f| f.contains("impl = b"))
        .unwrap_or_else(|| panic!("{findings:?}"));
    assert!(!b_.contains("A/A") && !b_.contains("unequally"), "{b_}");
    // The twin is no finding of its own.
    assert!(findings.iter().all(|f| !f.contains("a#2")), "{findings:?}");
    screenshot(&b, "aa-check-finding.png");
}

/// A report row's nodes are links: each opens its node's details, as the
/// node list does (N10).
#[test]
fn a_report_rows_node_ids_open_their_details() {
    let ws = Ws::new();
    let (code, err) = ws.vitgraph(&["build", "report", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    b.click("tr.has-nodes");
    let ids = b.js("return [...document.querySelectorAll('tr.row-nodes a.node-link')].map(a => a.textContent);");
    let ids: Vec<&str> = ids
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].starts_with("runs["), "{ids:?}");
    b.click("tr.row-nodes a.node-link");
    let shown = b.js("return document.querySelector('#node-detail h3').textContent;");
    assert_eq!(shown, json!(ids[0]));
    // By keyboard too: the link takes the focus and Enter opens it.
    let focusable = b.js("return document.querySelector('tr.row-nodes a.node-link').tabIndex;");
    assert_eq!(focusable, json!(0));
    screenshot(&b, "row-node-links.png");
}

/// A page written while a build runs says so, names the running node
/// apart from the stale ones, and lists it under neither "Stale nodes"
/// nor with an empty reason (L11). The build is held open by a file the
/// test creates, not by a sleep.
#[test]
fn a_page_written_during_a_build_names_its_running_node() {
    let ws = Ws::with(
        r#"Pipeline(stages: {
  "wait": Stage(task: Command(run: "while [ ! -f go ]; do sleep 0.05; done; echo ok > ${out}/w.txt", outputs: ["w.txt"])),
  "after": Stage(needs: ["wait"], task: Command(run: "cp ${needs.wait}/w.txt ${out}/a.txt", outputs: ["a.txt"])),
})"#,
    );
    let go = ws.path().join("go");
    let mut build = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
        .arg("-C")
        .arg(ws.path())
        .args(["build", "-j", "1"])
        .env("VITGRAPH_NO_PROGRESS", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until the store says `wait` is running (at most a minute, however loaded the machine).
    let mut running = false;
    for _ in 0..1200 {
        let (_, err) = ws.vitgraph(&["report"]);
        let html = std::fs::read_to_string(ws.path().join("out/report.html")).unwrap_or_default();
        // The page's data lists each node as [id, stage, state, …].
        if err.contains("report.html") && html.contains(r#"["wait",0,"running""#) {
            running = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let page = ws.path().join("out/report.html");
    let checked = || {
        assert!(running, "the build never showed `wait` running");
        let Some(b) = Browser::start() else { return };
        b.open(&page);
        sound(&b);
        let notice = b.js("return document.getElementById('in-progress').textContent;");
        let notice = notice.as_str().unwrap();
        assert!(
            notice.starts_with(
                "Build in progress: 0 of 2 planned nodes done, 1 node running as this page was written (wait)"
            ),
            "{notice}"
        );
        let stale = b
            .js("return [...document.querySelectorAll('#stale-list li')].map(l => l.textContent);");
        let stale: Vec<&str> = stale
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        // Each item reads `STATE ID: reasons`; `after` waits, `wait` runs.
        let ids: Vec<&str> = stale
            .iter()
            .filter_map(|l| l.split(':').next()?.split(' ').nth(1))
            .collect();
        assert_eq!(ids, ["after"], "{stale:?}");
        screenshot(&b, "build-in-progress.png");
    };
    let outcome = std::panic::catch_unwind(checked);
    std::fs::write(&go, "").unwrap();
    let status = build.wait().unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
    assert!(status.success());
}

/// A report made stale by an edit of its comparison keeps the findings of
/// what was built: the metric its numbers are of, not the edited one (N4).
#[test]
fn a_stale_reports_findings_name_what_was_built() {
    let study = STUDY.replace(
        r#"plots: [Plot(x: "batch", y: "throughput_images_per_s", series: "model", log_x: true)],"#,
        r#"compare: Some(Compare(param: "batch", baseline: 1, metric: "throughput_images_per_s")),"#,
    );
    assert_ne!(study, STUDY);
    let ws = Ws::with(&study);
    let (code, err) = ws.vitgraph(&["build", "report", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    let file = ws.path().join("pipelines/study.ron");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            r#"metric: "throughput_images_per_s")"#,
            r#"metric: "latency_ms.median")"#,
        ),
    )
    .unwrap();
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let findings = texts(&b, "#findings li");
    assert!(!findings.is_empty(), "no findings");
    for f in &findings {
        assert!(
            f.contains("throughput at batch = ") && !f.contains("latency"),
            "{f}"
        );
    }
    let badge = texts(&b, "#findings h3 .badge.stale");
    assert_eq!(badge, ["stale"]);
}

/// A failing task's log tail (here, a proxy's truncated HTML) and a
/// description carry `<!--<script>` into the page's data: the page still
/// runs its own script (and only it: the CSP names the script's hash).
#[test]
fn a_comment_opening_in_the_studys_text_does_not_swallow_the_page() {
    let ws = Ws::with(
        r#"Pipeline(title: "Study", description: "see <!--<script> here", stages: {
  "a": Stage(task: Command(run: "echo a > ${out}/a.txt", outputs: ["a.txt"])),
  "t": Stage(task: Command(run: "echo 'proxy said: <!--<script> (truncated)' >&2; exit 1", outputs: ["o.txt"])),
})"#,
    );
    ws.vitgraph(&["build", "-k"]);
    let page = ws.page();
    let html = std::fs::read_to_string(&page).unwrap();
    let data = &html[html.find("id=\"data\">").unwrap()..];
    let data = &data[..data.find("</script>").unwrap()];
    assert!(!data[10..].contains('<'), "a `<` in the data block");
    assert!(
        html.contains("script-src 'sha256-"),
        "the CSP names the script's hash"
    );
    assert!(!html.contains("script-src 'unsafe-inline'"));
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let nodes = b.js("return document.getElementById('node-browser').textContent;");
    assert!(nodes.as_str().unwrap().contains("2 node(s)"), "{nodes}");
    let lead = b.js("return document.querySelector('.lead').textContent;");
    assert_eq!(lead, json!("see <!--<script> here"));
}

/// Runs measured on another host and imported stand for this machine's:
/// the page says where they were measured, in a line under the stages and
/// in each node's details.
#[test]
fn runs_measured_elsewhere_say_where_on_the_page() {
    let study = r#"Pipeline(stages: {
  "bench": Stage(matrix: {"n": [1, 2]}, task: Command(run: "echo '{\"latency_ms\": {\"median\": ${n}}}' > ${out}/results.json", outputs: ["results.json"], measure: true)),
})"#;
    let gpu = Ws::with(study);
    let laptop = Ws::with(study);
    let run = |ws: &Ws, env: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vitgraph"))
            .arg("-C")
            .arg(ws.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("VITGRAPH_NO_PROGRESS", "1")
            .env("VITGRAPH_FAKE_ENV", env)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let gpu_env = r#"{"cpu":"Xeon","gpu":"NVIDIA H100 80GB HBM3","host":"gpu-box"}"#;
    let laptop_env = r#"{"cpu":"M2","gpu":"none","host":"laptop"}"#;
    let bundle = gpu.path().join("study.vgb");
    run(&gpu, gpu_env, &["build"]);
    run(&gpu, gpu_env, &["export", "-o", bundle.to_str().unwrap()]);
    run(&laptop, laptop_env, &["import", bundle.to_str().unwrap()]);
    run(&laptop, laptop_env, &["build"]);
    run(&laptop, laptop_env, &["report"]);
    let Some(b) = Browser::start() else { return };
    b.open(&laptop.path().join("out/report.html"));
    sound(&b);
    let line = b.js("return document.getElementById('elsewhere').textContent;");
    let line = line.as_str().unwrap();
    assert!(
        line.starts_with("Measured elsewhere: 2 runs measured on another machine")
            && line.contains("2 on gpu-box (NVIDIA H100 80GB HBM3), unsigned"),
        "{line}"
    );
    b.js("[...document.querySelectorAll('#node-browser td.id')].find(td => td.textContent === 'bench[n=1]').click(); return 1;");
    let detail = b.js("return document.querySelector('#node-detail .elsewhere').textContent;");
    assert_eq!(
        detail,
        json!("on gpu-box (NVIDIA H100 80GB HBM3), unsigned")
    );
    screenshot(&b, "measured-elsewhere.png");
}

/// A plot edited: the stale banner names the plot and the field that
/// changed, not two cut-off lists that read alike (N13).
#[test]
fn a_plot_edit_is_named_in_the_stale_banner() {
    let ws = Ws::new();
    assert_eq!(ws.vitgraph(&["build"]).0, 0);
    let study = STUDY.replace(
        r#"Plot(x: "batch", y: "throughput_images_per_s""#,
        r#"Plot(x: "batch", y: "latency_ms.median""#,
    );
    assert_ne!(study, STUDY);
    std::fs::write(ws.path().join("pipelines/study.ron"), &study).unwrap();
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let banner = b.js("return document.querySelector('#report-list .stale-banner').textContent;");
    let banner = banner.as_str().unwrap();
    assert!(
        banner.contains(r#"Report.plots[0].y: "throughput_images_per_s" → "latency_ms.median""#),
        "{banner}"
    );
}

/// A `Notebook` node's executed HTML and notebook are linked under the
/// reports, with its state; its id opens its details. Needs a Jupyter
/// kernel (see `tests/cli/notebook.rs`): skipped without one unless
/// `VITGRAPH_REQUIRE_JUPYTER=1`.
#[test]
fn a_notebook_nodes_html_is_linked_under_the_reports() {
    let pydeps = std::env::var("VITGRAPH_PYDEPS").unwrap_or_default();
    let jupyter = Command::new("python3")
        .args(["-c", "import nbclient, ipykernel, nbconvert"])
        .env("PYTHONPATH", &pydeps)
        .output()
        .is_ok_and(|o| o.status.success());
    if !jupyter {
        assert!(
            std::env::var_os("VITGRAPH_REQUIRE_JUPYTER").is_none_or(|v| v != "1"),
            "VITGRAPH_REQUIRE_JUPYTER=1 but python3 has no Jupyter kernel (PYTHONPATH={pydeps:?})"
        );
        eprintln!("skipped: no Jupyter kernel (set VITGRAPH_PYDEPS)");
        return;
    }
    let study = STUDY.replacen(
        "\"report\": Stage(",
        r#""analysis": Stage(needs: ["report"], task: Notebook(path: "nb/look.ipynb", params: {"table": "${needs.report}/table.csv"})),
        "report": Stage("#,
        1,
    );
    let ws = Ws::with(&study);
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "source": "table = ''", "outputs": [], "execution_count": null},
            {"cell_type": "code", "id": "r", "metadata": {}, "source": "print(len(open(table).read().splitlines()) - 1, 'rows')", "outputs": [], "execution_count": null},
        ],
    });
    std::fs::create_dir_all(ws.path().join("nb")).unwrap();
    std::fs::write(ws.path().join("nb/look.ipynb"), notebook.to_string()).unwrap();
    let (code, err) = ws.vitgraph_with(
        &["build", "analysis", "-j", "2"],
        &[("PYTHONPATH", &pydeps)],
    );
    assert_eq!(code, 0, "{err}");
    let page = ws.page();
    let Some(b) = Browser::start() else { return };
    b.open(&page);
    sound(&b);
    let links = texts(&b, "#notebook-list a:not(.node-link)");
    assert_eq!(links, ["look.html", "look.ipynb"]);
    assert_eq!(texts(&b, "#notebook-list .badge"), ["fresh"]);
    // The link opens the executed notebook's HTML, which holds its output.
    let href = b.js("return document.querySelector('#notebook-list a[href$=\"look.html\"]').href;");
    let html = href.as_str().unwrap().trim_start_matches("file://");
    assert!(std::fs::read_to_string(html).unwrap().contains("9 rows"));
    b.click("#notebook-list a.node-link");
    let shown = b.js("return document.querySelector('#node-detail h3').textContent;");
    assert_eq!(shown, json!("analysis"));
    screenshot(&b, "notebook-links.png");
}
