//! Bad input never panics: each case gives an error naming the file and what
//! is wrong, or (for a merely empty trace) empty metrics.

use std::path::Path;

use vitgraph::analysis::{compute, write_outputs, Options};
use vitgraph::trace::{kineto, Kernel, Trace, TraceError, TraceWriter};

fn assert_names_file(err: &TraceError, path: &Path) {
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

#[test]
fn text_file_named_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.sqlite");
    std::fs::write(
        &path,
        "this is not a database, just some text\n".repeat(100),
    )
    .unwrap();
    let err = Trace::load(&path).unwrap_err();
    assert!(matches!(err, TraceError::NotSqlite { .. }), "{err:?}");
    assert_names_file(&err, &path);
}

#[test]
fn missing_file() {
    let path = Path::new("/nonexistent/trace.sqlite");
    let err = Trace::load(path).unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }), "{err:?}");
    assert_names_file(&err, path);
}

#[test]
fn sqlite_without_cupti_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('hi');")
        .unwrap();
    drop(conn);
    let err = Trace::load(&path).unwrap_err();
    assert!(matches!(err, TraceError::NoCuptiTables { .. }), "{err:?}");
    assert_names_file(&err, &path);
}

#[test]
fn kernel_table_missing_a_required_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER);")
        .unwrap();
    drop(conn);
    let err = Trace::load(&path).unwrap_err();
    assert!(err.to_string().contains("deviceId"), "{err}");
}

#[test]
fn truncated_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.sqlite");
    let mut w = TraceWriter::create(&full).unwrap();
    for i in 0..20_000 {
        w.push_kernel(&Kernel {
            start: i * 10,
            end: i * 10 + 5,
            name: format!("kernel_{}", i % 50),
            ..Kernel::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&full).unwrap();
    for cut in [100, 4096 * 3, bytes.len() / 2] {
        let path = dir.path().join(format!("cut{cut}.sqlite"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = Trace::load(&path).expect_err("a truncated file must not load");
        assert_names_file(&err, &path);
    }
}

#[test]
fn empty_trace_gives_empty_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.sqlite");
    TraceWriter::create(&path).unwrap().finish().unwrap();
    let m = compute(&Trace::load(&path).unwrap(), &Options::default());
    assert!(m.devices.is_empty());
    assert!(!m.window.found);
    assert!(m.batches.is_none());
    write_outputs(&m, dir.path()).unwrap();
    let json = std::fs::read_to_string(dir.path().join("metrics.json")).unwrap();
    assert!(json.contains("\"devices\": []"), "{json}");
}

#[test]
fn unfinished_writer_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let mut w = TraceWriter::create(&path).unwrap();
    w.push_kernel(&Kernel::default()).unwrap();
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn import_text(name: &str, text: &str) -> (std::path::PathBuf, TraceError, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let out = dir.path().join("out.sqlite");
    let err = kineto::import(&path, &out).unwrap_err();
    assert!(!out.exists(), "no output after a failed import");
    (path, err, dir)
}

#[test]
fn json_that_is_not_a_kineto_trace() {
    for text in [
        "",
        "\"hello\"",
        "{\"foo\": [1, 2]}",
        "{}",
        "{\"traceEvents\": 3}",
    ] {
        let (path, err, _dir) = import_text("t.json", text);
        assert!(
            matches!(err, TraceError::NotKineto { .. }),
            "{text}: {err:?}"
        );
        assert_names_file(&err, &path);
    }
}

#[test]
fn truncated_and_malformed_json() {
    for text in [
        "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\"",
        "{\"traceEvents\": [1, 2]}",
        "{\"traceEvents\": [{\"ph\": \"X\"} {}]}",
    ] {
        let (path, err, _dir) = import_text("t.json", text);
        assert!(matches!(err, TraceError::Json { .. }), "{text}: {err:?}");
        assert_names_file(&err, &path);
    }
}

#[test]
fn kineto_events_missing_fields_name_the_field() {
    let cases = [
        (
            r#"{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"device":0,"correlation":1}}"#,
            "args.stream",
        ),
        (
            r#"{"ph":"X","cat":"kernel","name":"k","dur":2,"args":{"device":0,"stream":7,"correlation":1}}"#,
            "ts",
        ),
        (
            r#"{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)","ts":1,"dur":2,"args":{"device":0,"stream":7,"correlation":1}}"#,
            "args.bytes",
        ),
    ];
    for (event, field) in cases {
        let text = format!("{{\"traceEvents\": [{event}]}}");
        let (path, err, _dir) = import_text("t.json", &text);
        match &err {
            TraceError::MissingField {
                field: f, index, ..
            } => {
                assert_eq!((*f, *index), (field, 0));
            }
            other => panic!("{event}: expected a missing-field error, got {other:?}"),
        }
        assert_names_file(&err, &path);
    }
}

#[test]
fn gzip_that_is_not_gzip() {
    // Starts like gzip, then is not: the decoder's error names the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json.gz");
    std::fs::write(&path, b"\x1f\x8b\x08\x00garbage that inflates to nothing").unwrap();
    let out = dir.path().join("out.sqlite");
    let err = kineto::import(&path, &out).unwrap_err();
    assert!(!out.exists(), "no output after a failed import");
    assert!(matches!(err, TraceError::Io { .. }), "{err:?}");
    assert_names_file(&err, &path);
    // Named `.gz` but plain JSON: read as what it is.
    std::fs::write(&path, "{\"traceEvents\": []}").unwrap();
    assert!(kineto::import(&path, &out).is_ok());
}

#[test]
fn failed_finish_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    // The destination is a non-empty folder: the final rename must fail.
    let dest = dir.path().join("t.sqlite");
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("keep"), "x").unwrap();
    let mut w = TraceWriter::create(&dest).unwrap();
    w.push_kernel(&Kernel::default()).unwrap();
    let err = w.finish().unwrap_err();
    assert_names_file(&err, &dest);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["t.sqlite"]);
}
