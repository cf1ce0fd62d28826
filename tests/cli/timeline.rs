//! The page's timeline of an earlier build after its node was built again
//! under the same key (`build --force`): each attempt keeps its own end
//! (N3), and the replaced one is marked.

use super::harness::Ws;

/// `"key":NUMBER` right after `from` in `text`.
fn number_after(text: &str, from: &str, key: &str) -> f64 {
    let at = text.find(from).unwrap_or_else(|| panic!("no {from}"));
    let rest = &text[at..];
    let v = &rest[rest.find(&format!("\"{key}\":")).unwrap() + key.len() + 3..];
    v[..v.find([',', '}']).unwrap()].parse().unwrap()
}

#[test]
fn an_earlier_build_keeps_its_own_durations_after_a_forced_rebuild() {
    let ws = Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: {"a": Stage(task: Command(run: "echo 1 > ${out}/v.txt", outputs: ["v.txt"]))})"#,
    )]);
    for args in [&["build"][..], &["build", "--force"], &["build", "--force"]] {
        let r = ws.run(args);
        assert_eq!(r.code(), 0, "{}", r.stderr());
    }
    let r = ws.run(&["report", "--build", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let html = ws.read("out/report.html");
    // Build 1 as drawn spans no more than build 1 did (its attempts' own
    // ends), not up to the end of build 3's run of the same key.
    let drawn = number_after(&html, "\"build\":{\"number\":1,", "seconds");
    let picker = &html[html.find("\"builds\":[").expect("the picker's builds")..];
    let listed = number_after(picker, "{\"number\":1,", "seconds");
    assert!(
        drawn <= listed + 0.001,
        "drawn {drawn} s, build 1 took {listed} s"
    );
    // Its bar, and build 2's, are marked replaced; build 3's is not.
    let bars: Vec<&str> = html
        .match_indices("class=\"bar ")
        .map(|(i, _)| &html[i..i + 30])
        .collect();
    assert_eq!(
        bars.iter().filter(|b| b.contains("replaced")).count(),
        2,
        "{bars:?}"
    );
    assert_eq!(bars.len(), 3, "{bars:?}");
}
