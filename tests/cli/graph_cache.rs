//! The graph cache (`cache/graph.bin`): a command on unchanged pipelines
//! reads the expanded graph back instead of expanding it, and every change
//! the graph depends on makes it expand again — with the same answer as
//! without a cache. One test per kind of change.

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use super::harness::{Run, Ws, BIN, CHAIN};

const CACHE: &str = "cache/graph.bin";

/// `vitgraph ls TARGET` through `exe` with timings on: the node ids, and
/// whether the graph came from the cache.
fn ls_with(exe: &Path, ws: &Ws, args: &[&str]) -> (Vec<String>, bool) {
    let out = Command::new(exe)
        .arg("-C")
        .arg(ws.path())
        .arg("ls")
        .args(args)
        .env("NO_COLOR", "1")
        .env("VITGRAPH_RACY_WINDOW_MS", super::harness::RACY_WINDOW_MS)
        .env("VITGRAPH_TIMINGS", "1")
        .output()
        .expect("run vitgraph");
    let r = Run(out);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let err = r.stderr();
    let hit = err.contains("timing: graph cache hit");
    assert!(hit || err.contains("timing: graph cache miss"), "{err}");
    let ids = r
        .stdout()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    (ids, hit)
}

fn ls(ws: &Ws, args: &[&str]) -> (Vec<String>, bool) {
    ls_with(Path::new(BIN), ws, args)
}

/// A built chain: `cache/` exists, so commands write the graph cache (the
/// first `build` loaded the pipelines before it made `cache/`).
fn built() -> Ws {
    let ws = Ws::new(&[("chain.ron", CHAIN)]);
    ws.write("data.txt", "a\n");
    assert_eq!(ws.run(&["build"]).code(), 0);
    assert!(!ws.path().join(CACHE).exists());
    let (_, hit) = ls(&ws, &["gen"]);
    assert!(!hit);
    assert!(
        ws.path().join(CACHE).is_file(),
        "written once cache/ exists"
    );
    ws
}

/// Asserts the next `ls gen` hits the cache and lists `ids`.
fn hits(ws: &Ws, args: &[&str], ids: &[&str]) {
    let (got, hit) = ls(ws, args);
    assert!(hit, "unchanged pipelines are read from the cache");
    assert_eq!(got, ids);
}

/// Asserts the next `ls ARGS` expands the pipelines again (`why`) and lists `ids`.
fn misses(ws: &Ws, args: &[&str], ids: &[&str], why: &str) {
    let (got, hit) = ls(ws, args);
    assert!(!hit, "{why}");
    assert_eq!(got, ids, "{why}");
}

#[test]
fn unchanged_pipelines_are_read_from_the_cache_with_the_same_answer() {
    let ws = built();
    hits(
        &ws,
        &["gen", "double"],
        &["gen[i=1]", "gen[i=2]", "double[i=1]", "double[i=2]"],
    );
    // status and a no-op build from the cached graph agree with a full load.
    let cached = ws.status(&[]);
    std::fs::remove_file(ws.path().join(CACHE)).unwrap();
    let expanded = ws.status(&[]);
    assert_eq!(cached, expanded);
    assert_eq!(expanded["summary"]["fresh"], 4);
    // A damaged cache file is a miss, never an error.
    std::fs::write(ws.path().join(CACHE), b"VGGRAPH1 and then nothing useful").unwrap();
    misses(
        &ws,
        &["gen"],
        &["gen[i=1]", "gen[i=2]"],
        "a damaged cache file is a miss",
    );
    hits(&ws, &["gen"], &["gen[i=1]", "gen[i=2]"]);
}

#[test]
fn a_pipeline_edit_misses_the_cache() {
    let ws = built();
    hits(&ws, &["gen"], &["gen[i=1]", "gen[i=2]"]);
    ws.write("pipelines/chain.ron", &CHAIN.replace("[1, 2]", "[1, 2, 3]"));
    misses(
        &ws,
        &["gen"],
        &["gen[i=1]", "gen[i=2]", "gen[i=3]"],
        "an edited pipeline file expands again",
    );
    hits(&ws, &["gen"], &["gen[i=1]", "gen[i=2]", "gen[i=3]"]);
    // The same size, one byte different.
    ws.write("pipelines/chain.ron", &CHAIN.replace("[1, 2]", "[1, 4]"));
    misses(
        &ws,
        &["gen"],
        &["gen[i=1]", "gen[i=4]"],
        "a same-size edit expands again",
    );
}

#[test]
fn an_override_misses_the_cache() {
    let ws = built();
    hits(&ws, &["gen"], &["gen[i=1]", "gen[i=2]"]);
    misses(
        &ws,
        &["-p", "i=[7]", "gen"],
        &["gen[i=7]"],
        "a -p expands again",
    );
    hits(&ws, &["-p", "i=[7]", "gen"], &["gen[i=7]"]);
    misses(
        &ws,
        &["-p", "i=[8]", "gen"],
        &["gen[i=8]"],
        "another value of the same -p",
    );
    misses(&ws, &["gen"], &["gen[i=1]", "gen[i=2]"], "no -p after one");
}

#[test]
fn a_new_pipeline_file_misses_the_cache() {
    let ws = built();
    hits(
        &ws,
        &["chain"],
        &["gen[i=1]", "gen[i=2]", "double[i=1]", "double[i=2]"],
    );
    ws.write(
        "pipelines/sub/more.ron",
        r#"Pipeline(stages: { "extra": Stage(task: Command(run: "true")) })"#,
    );
    misses(
        &ws,
        &["extra"],
        &["extra"],
        "a new file under pipelines/ expands again",
    );
    hits(&ws, &["extra"], &["extra"]);
    std::fs::remove_file(ws.path().join("pipelines/sub/more.ron")).unwrap();
    let (ids, hit) = ls(&ws, &[]);
    assert!(!hit, "a removed pipeline file expands again");
    assert!(!ids.contains(&"extra".to_string()), "{ids:?}");
}

#[test]
fn a_new_vitgraph_binary_misses_the_cache() {
    let ws = built();
    hits(&ws, &["gen"], &["gen[i=1]", "gen[i=2]"]);
    let bin = tempfile::tempdir().unwrap();
    let copy = bin.path().join("vitgraph");
    std::fs::copy(BIN, &copy).unwrap();
    let (ids, hit) = ls_with(&copy, &ws, &["gen"]);
    assert!(!hit, "another executable expands again");
    assert_eq!(ids, ["gen[i=1]", "gen[i=2]"]);
    let (_, hit) = ls_with(&copy, &ws, &["gen"]);
    assert!(hit);
    // Replaced in place by the same bytes with the same mtime: still a miss.
    let mtime = std::fs::metadata(&copy).unwrap().modified().unwrap();
    std::fs::remove_file(&copy).unwrap();
    std::fs::copy(BIN, &copy).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (_, hit) = ls_with(&copy, &ws, &["gen"]);
    assert!(!hit, "a replaced executable expands again");
    let (_, hit) = ls(&ws, &["gen"]);
    assert!(!hit, "and back to the first one");
}

const EXCLUDING: &str = r#"Pipeline(stages: {
    "grid": Stage(
        matrix: { "a": [1, 2], "b": ["x", "y"] },
        exclude: [{ "a": 2, "b": "y" }],
        include: [{ "a": 3, "b": "z" }],
        task: Command(run: "true"),
    ),
})"#;

#[test]
fn a_changed_include_or_exclude_misses_the_cache() {
    let ws = Ws::new(&[("grid.ron", EXCLUDING)]);
    assert_eq!(ws.run(&["build"]).code(), 0);
    let all = [
        "grid[a=1,b=x]",
        "grid[a=1,b=y]",
        "grid[a=2,b=x]",
        "grid[a=3,b=z]",
    ];
    assert_eq!(ls(&ws, &["grid"]), (all.map(String::from).to_vec(), false));
    hits(&ws, &["grid"], &all);
    ws.write(
        "pipelines/grid.ron",
        &EXCLUDING.replace(r#""a": 2, "b": "y""#, r#""a": 1, "b": "y""#),
    );
    misses(
        &ws,
        &["grid"],
        &[
            "grid[a=1,b=x]",
            "grid[a=2,b=x]",
            "grid[a=2,b=y]",
            "grid[a=3,b=z]",
        ],
        "a changed exclude expands again",
    );
    ws.write(
        "pipelines/grid.ron",
        &EXCLUDING.replace(r#""a": 3, "b": "z""#, r#""a": 4, "b": "z""#),
    );
    misses(
        &ws,
        &["grid"],
        &[
            "grid[a=1,b=x]",
            "grid[a=1,b=y]",
            "grid[a=2,b=x]",
            "grid[a=4,b=z]",
        ],
        "a changed include expands again",
    );
}

const FILES: &str = r#"Pipeline(stages: {
    "conv": Stage(files: "traces/{run}/{name}.txt", exclude: [{ "name": "skip" }], task: Command(run: "true")),
})"#;

/// Dates every folder and file under `traces/` an hour back.
fn settle(ws: &Ws) {
    let past = SystemTime::now() - super::harness::SETTLE_BACK;
    for e in walkdir::WalkDir::new(ws.path().join("traces"))
        .contents_first(true)
        .into_iter()
        .flatten()
    {
        std::fs::File::open(e.path())
            .and_then(|f| f.set_modified(past))
            .unwrap();
    }
}

#[test]
fn files_coming_and_going_under_a_files_stage_miss_the_cache() {
    let ws = Ws::new(&[("files.ron", FILES)]);
    ws.write("traces/r1/a.txt", "1");
    ws.write("traces/r1/skip.txt", "1");
    std::fs::create_dir_all(ws.path().join("cache")).unwrap();
    // Folders written just now cannot vouch for their content: no cache yet.
    misses(
        &ws,
        &["conv"],
        &["conv[run=r1,name=a]"],
        "nothing cached yet",
    );
    assert!(
        !ws.path().join(CACHE).exists(),
        "unsettled listings are not cached"
    );
    settle(&ws);
    let (_, hit) = ls(&ws, &["conv"]);
    assert!(!hit);
    hits(&ws, &["conv"], &["conv[run=r1,name=a]"]);
    // A file in a listed folder.
    ws.write("traces/r1/b.txt", "2");
    misses(
        &ws,
        &["conv"],
        &["conv[run=r1,name=a]", "conv[run=r1,name=b]"],
        "a new file expands again",
    );
    // A new folder under a listed one.
    settle(&ws);
    let _ = ls(&ws, &["conv"]);
    hits(
        &ws,
        &["conv"],
        &["conv[run=r1,name=a]", "conv[run=r1,name=b]"],
    );
    ws.write("traces/r2/c.txt", "3");
    let (ids, hit) = ls(&ws, &["conv"]);
    assert!(!hit, "a new folder expands again");
    assert_eq!(ids.len(), 3, "{ids:?}");
    // A file removed.
    settle(&ws);
    let _ = ls(&ws, &["conv"]);
    assert!(ls(&ws, &["conv"]).1);
    std::fs::remove_file(ws.path().join("traces/r1/a.txt")).unwrap();
    misses(
        &ws,
        &["conv"],
        &["conv[run=r1,name=b]", "conv[run=r2,name=c]"],
        "a removed file expands again",
    );
    // The files' contents are inputs, not part of the graph: an edit keeps the cache.
    settle(&ws);
    let _ = ls(&ws, &["conv"]);
    std::fs::write(ws.path().join("traces/r1/b.txt"), "changed").unwrap();
    assert!(ls(&ws, &["conv"]).1);
}
