//! Loader tests on small in-memory workspaces.

use super::*;
use crate::tasks::TaskSpec;

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join("pipelines").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn load_ok(files: &[(&str, &str)], overrides: &[&str]) -> crate::graph::Graph {
    let ws = workspace(files);
    let o: Vec<Override> = overrides
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    match load(ws.path(), &o) {
        Ok(g) => g,
        Err(e) => panic!("{e:?}"),
    }
}

fn load_err(files: &[(&str, &str)], overrides: &[&str]) -> PipelineError {
    let ws = workspace(files);
    let o: Vec<Override> = overrides
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    load(ws.path(), &o).expect_err("expected a pipeline error")
}

const DESIGN_EXAMPLE: &str = r#"
Pipeline(
    params: { "samples": 2000 },
    stages: {
        "gen": Stage(
            matrix: { "i": [0, 1, 2] },
            task: Command(
                run: "echo ${i} ${samples} > ${out}/v.txt",
                inputs: [],
                outputs: ["v.txt"],
            ),
        ),
        "double": Stage(
            for_each: "gen",
            task: Command(run: "echo $(( $(cat ${needs.gen}/v.txt) * 2 )) > ${out}/v.txt", outputs: ["v.txt"]),
        ),
        "total": Stage(
            needs: ["double"],
            task: Command(run: "cat $(for d in ${needs.double}; do echo $d/v.txt; done) | paste -sd+ | bc > ${out}/sum.txt",
                          outputs: ["sum.txt"]),
        ),
    },
)
"#;

fn run_of(g: &crate::graph::Graph, id: &str) -> String {
    match &g.nodes[g.find(id).unwrap()].task {
        TaskSpec::Command(c) => c.run.clone(),
        #[allow(unreachable_patterns)]
        _ => panic!("not a command"),
    }
}

#[test]
fn design_example_expands() {
    let g = load_ok(&[("ex.ron", DESIGN_EXAMPLE)], &[]);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "gen[i=0]",
            "gen[i=1]",
            "gen[i=2]",
            "double[i=0]",
            "double[i=1]",
            "double[i=2]",
            "total"
        ]
    );
    assert_eq!(run_of(&g, "gen[i=1]"), "echo 1 2000 > ${out}/v.txt");
    assert_eq!(g.nodes[g.find("double[i=2]").unwrap()].deps(), vec![2]);
    assert_eq!(g.nodes[g.find("total").unwrap()].deps(), vec![3, 4, 5]);
    assert_eq!(
        g.stages
            .iter()
            .map(|s| s.pipeline.as_str())
            .collect::<Vec<_>>(),
        ["ex", "ex", "ex"]
    );
}

#[test]
fn overrides_keep_types_and_replace_axes() {
    let g = load_ok(&[("ex.ron", DESIGN_EXAMPLE)], &["samples=500", "i=[7,8]"]);
    assert_eq!(run_of(&g, "gen[i=8]"), "echo 8 500 > ${out}/v.txt");
    assert_eq!(g.stage("gen").unwrap().nodes.len(), 2);
    let e = load_err(&[("ex.ron", DESIGN_EXAMPLE)], &["sample=1"]);
    assert!(e.message.contains("sets no param"), "{}", e.message);
    assert_eq!(e.help.as_deref(), Some("did you mean `-p samples=…`?"));
}

#[test]
fn whole_string_param_takes_typed_value() {
    let text = r#"Pipeline(params: {"g": 2}, stages: {"a": Stage(task: Command(run: "x", resources: (gpus: "${g}")))})"#;
    let g = load_ok(&[("a.ron", text)], &[]);
    assert_eq!(g.nodes[0].task.resources().gpus, 2);
    let e = load_err(&[("a.ron", text)], &["g=lots"]);
    assert_eq!(
        e.message,
        "expected a non-negative integer, found the string \"lots\""
    );
    assert!(
        e.help.as_deref().unwrap().contains("param `g`"),
        "{:?}",
        e.help
    );
}

#[test]
fn dollar_escapes_and_shell_syntax_are_kept() {
    let text =
        r#"Pipeline(stages: {"a": Stage(task: Command(run: "echo $$HOME $(date) $x ${out}"))})"#;
    let g = load_ok(&[("a.ron", text)], &[]);
    assert_eq!(run_of(&g, "a"), "echo $$HOME $(date) $x ${out}");
}

#[test]
fn include_and_exclude_follow_github_semantics() {
    let text = r#"Pipeline(stages: {"s": Stage(
        matrix: {"a": [1, 2], "b": ["x", "y"]},
        exclude: [{"a": 2, "b": "y"}],
        include: [{"a": 1, "extra": true}, {"a": 3, "b": "z"}],
        task: Command(run: "${a}${b}"))})"#;
    let g = load_ok(&[("s.ron", text)], &[]);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "s[a=1,b=x,extra=true]",
            "s[a=1,b=y,extra=true]",
            "s[a=2,b=x]",
            "s[a=3,b=z]"
        ]
    );
}

#[test]
fn errors_carry_spans_and_hints() {
    let text = r#"Pipeline(stages: {"a": Stage(for_eahc: "b", task: Command(run: "x"))})"#;
    let e = load_err(&[("a.ron", text)], &[]);
    assert_eq!(e.message, "unknown field `for_eahc` in `Stage`");
    assert_eq!(e.help.as_deref(), Some("did you mean `for_each`?"));
    let span = e.primary_span().unwrap();
    let at = text.find("for_eahc").unwrap() as u32;
    assert_eq!((span.start, span.end), (at, at + 8));

    let text = r#"Pipeline(stages: {"a": Stage(task: Command(run: "echo ${nope}"))})"#;
    let e = load_err(&[("a.ron", text)], &[]);
    assert_eq!(e.message, "unknown `${nope}`");
    let span = e.primary_span().unwrap();
    let at = text.find("${nope}").unwrap() as u32;
    assert_eq!((span.start, span.end), (at, at + 7));

    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(task: Command(rn: "x"))})"#,
        )],
        &[],
    );
    assert_eq!(e.help.as_deref(), Some("did you mean `run`?"));
}

#[test]
fn cycles_and_duplicates_name_every_place() {
    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(needs: ["b"], task: Command(run: "x")), "b": Stage(for_each: "a", task: Command(run: "x"))})"#,
        )],
        &[],
    );
    assert!(
        e.message.starts_with("dependency cycle: `a` → `b` → `a`"),
        "{}",
        e.message
    );
    assert_eq!(e.related.len(), 1);
    let e = load_err(
        &[
            (
                "a.ron",
                r#"Pipeline(stages: {"x": Stage(task: Command(run: "1"))})"#,
            ),
            (
                "b.ron",
                r#"Pipeline(stages: {"x": Stage(task: Command(run: "2"))})"#,
            ),
        ],
        &[],
    );
    assert_eq!(e.message, "stage `x` is defined twice");
    assert_eq!(e.related.len(), 1);
}

#[test]
fn axis_override_may_leave_an_exclude_unmatched() {
    let text = r#"Pipeline(stages: {"s": Stage(
        matrix: {"a": [1, 2], "b": ["x", "y"]},
        exclude: [{"a": 2, "b": "y"}],
        task: Command(run: "${a}${b}"))})"#;
    let g = load_ok(&[("s.ron", text)], &["a=[1]"]);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["s[a=1,b=x]", "s[a=1,b=y]"]);
    // An override that leaves nothing is still an error, and says which `-p` did it.
    let e = load_err(&[("s.ron", text)], &["a=2", "b=y"]);
    assert!(e.message.contains("no combinations left"), "{}", e.message);
    assert!(
        e.help.as_deref().unwrap_or_default().contains("-p a=…"),
        "{:?}",
        e.help
    );
    // Without an override, an exclude that matches nothing is a typo.
    let typo = text.replace(r#"{"a": 2, "b": "y"}"#, r#"{"a": 3, "b": "y"}"#);
    let e = load_err(&[("s.ron", &typo)], &[]);
    assert!(
        e.message.contains("matches no combination"),
        "{}",
        e.message
    );
}

#[test]
fn type_errors_use_the_words_of_a_pipeline_file() {
    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(task: Command(run: "x", outputs: "v.txt"))})"#,
        )],
        &[],
    );
    assert_eq!(e.message, "expected a list, found the string \"v.txt\"");
    assert!(
        e.help
            .as_deref()
            .unwrap_or_default()
            .starts_with("write a list in brackets"),
        "{:?}",
        e.help
    );
    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(task: Command(run: "x", resources: (gpus: -1)))})"#,
        )],
        &[],
    );
    assert_eq!(
        e.message,
        "invalid value the integer `-1`: expected a non-negative integer"
    );
    // A number too large for its field says so (F-T4-5's message).
    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(task: Command(run: "x", resources: (gpus: 100000000000)))})"#,
        )],
        &[],
    );
    assert_eq!(
        e.message,
        "the integer `100000000000` is too large: the largest here is 4294967295"
    );
    let e = load_err(
        &[(
            "a.ron",
            r#"Pipeline(stages: {"a": Stage(task: Command(run: "x", resources: (exclusive: "yes")))})"#,
        )],
        &[],
    );
    assert_eq!(e.message, "expected a bool, found the string \"yes\"");
    assert_eq!(
        e.help.as_deref(),
        Some("write `true` or `false`, without quotes")
    );
    let text =
        r#"Pipeline(params: {"m": ["a", "b"]}, stages: {"a": Stage(task: Command(run: "${m}"))})"#;
    let e = load_err(&[("a.ron", text)], &[]);
    assert_eq!(e.message, "expected a string, found a list");
    let help = e.help.unwrap_or_default();
    assert_eq!(
        help,
        "the value comes from param `m`, set at pipelines/a.ron:1:24"
    );
}

#[test]
fn include_without_a_matrix_makes_one_node_per_entry() {
    let text = r#"Pipeline(stages: {"s": Stage(
        include: [{"site": "production", "dc": "a"}, {"site": "staging", "dc": "b"}],
        task: Command(run: "echo ${site} ${dc}"))})"#;
    let g = load_ok(&[("s.ron", text)], &[]);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["s[site=production,dc=a]", "s[site=staging,dc=b]"]);
    assert_eq!(run_of(&g, "s[site=staging,dc=b]"), "echo staging b");
    // With a matrix, a later entry still overwrites what an earlier one added.
    let text = r#"Pipeline(stages: {"t": Stage(matrix: {"os": ["linux"]},
        include: [{"os": "linux", "v": 1}, {"os": "linux", "v": 2}], task: Command(run: "echo ${v}"))})"#;
    let g = load_ok(&[("t.ron", text)], &[]);
    assert_eq!(
        g.nodes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        ["t[os=linux,v=2]"]
    );
    // `exclude` still needs a matrix, even beside an `include`.
    let text = r#"Pipeline(stages: {"u": Stage(include: [{"a": 1}], exclude: [{"a": 1}], task: Command(run: "x"))})"#;
    let e = load_err(&[("u.ron", text)], &[]);
    assert_eq!(e.message, "`exclude` without a `matrix`");
}

#[test]
fn an_axis_that_shadows_an_inherited_param_is_named() {
    let text = r#"Pipeline(stages: {
        "runs": Stage(matrix: {"size": [1, 2]}, task: Command(run: "echo ${size}")),
        "an": Stage(for_each: "runs", matrix: {"size": [9]}, task: Command(run: "echo ${size}")),
    })"#;
    let e = load_err(&[("a.ron", text)], &[]);
    assert_eq!(
        e.message,
        "node `an[size=9]` is produced twice: stage `an` sets `size`, which its nodes inherit from `runs`"
    );
    let span = e.primary_span().unwrap();
    let at = text.find("[9]").unwrap() as u32 + 1;
    assert_eq!((span.start, span.end), (at, at + 1));
}

mod files {
    use super::*;
    use crate::value::Value;

    /// A workspace with `pipeline` and the files `paths` (each holding its own name).
    fn archive(pipeline: &str, paths: &[&str]) -> tempfile::TempDir {
        let ws = workspace(&[("archive.ron", pipeline)]);
        for p in paths {
            let path = ws.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, p).unwrap();
        }
        ws
    }

    const ARCHIVE: &str = r#"
Pipeline(
    params: { "top": 3 },
    stages: {
        "conv": Stage(
            files: "archive/{rq}/**/gpu{gpu}_numa{numa}_{model}.sqlite",
            exclude: [ { "model": "vit8x6x384" } ],
            task: Command(run: "cp ${file} ${out}/t.sqlite # ${rq} ${top}", outputs: ["t.sqlite"]),
        ),
        "ana": Stage(
            for_each: "conv",
            task: Command(run: "echo ${model} > ${out}/a.txt", outputs: ["a.txt"]),
        ),
    },
)
"#;

    #[test]
    fn every_matching_file_is_a_node_with_its_captures_as_params() {
        let ws = archive(
            ARCHIVE,
            &[
                "archive/rq1/2025-07-14/16-30-54/gpu0_numa0_vit16x12x1024.sqlite",
                "archive/rq1/gpu1_numa0_vit32x6x384.sqlite",
                "archive/rq2/x/gpu0_numa1_vit16x12x768_512px.sqlite",
                "archive/rq2/x/gpu0_numa1_vit8x6x384.sqlite",
                "archive/rq2/x/notes.txt",
                "archive/rq2/.hidden/gpu0_numa0_a.sqlite",
            ],
        );
        let g = load(ws.path(), &[]).unwrap();
        let conv: Vec<&crate::graph::Node> = g.nodes.iter().filter(|n| n.stage == "conv").collect();
        let ids: Vec<&str> = conv.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "conv[rq=rq1,gpu=0,numa=0,model=vit16x12x1024]",
                "conv[rq=rq1,gpu=1,numa=0,model=vit32x6x384]",
                "conv[rq=rq2,gpu=0,numa=1,model=vit16x12x768_512px]",
            ]
        );
        let n = conv[2];
        assert_eq!(
            n.id_params[1],
            ("gpu".to_string(), Value::Int(0)),
            "numbers stay numbers"
        );
        assert_eq!(
            n.file.as_deref(),
            Some("archive/rq2/x/gpu0_numa1_vit16x12x768_512px.sqlite")
        );
        assert!(
            n.inputs().contains(&n.file.clone().unwrap()),
            "the file is an input"
        );
        let TaskSpec::Command(c) = &n.task else {
            panic!()
        };
        assert_eq!(
            c.run,
            "cp archive/rq2/x/gpu0_numa1_vit16x12x768_512px.sqlite ${out}/t.sqlite # rq2 3"
        );
        // Downstream, for_each inherits the captures.
        let ana = g
            .find("ana[rq=rq2,gpu=0,numa=1,model=vit16x12x768_512px]")
            .unwrap();
        let TaskSpec::Command(c) = &g.nodes[ana].task else {
            panic!()
        };
        assert_eq!(c.run, "echo vit16x12x768_512px > ${out}/a.txt");
        assert!(g.nodes[ana].file.is_none());
        // Every folder the walk read is listed for the snapshot.
        let dirs: Vec<&str> = g.listings.iter().map(|l| l.rel.as_str()).collect();
        assert!(
            dirs.contains(&"archive/rq1/2025-07-14/16-30-54"),
            "{dirs:?}"
        );
        assert!(!dirs.iter().any(|d| d.contains(".hidden")), "{dirs:?}");
        assert!(g.warnings.is_empty());
    }

    #[test]
    fn without_captures_the_path_names_the_node() {
        let ws = archive(
            r#"Pipeline(stages: { "t": Stage(files: "traces/*.json", task: Command(run: "cat ${file}", outputs: [])) })"#,
            &["traces/b.json", "traces/a.json"],
        );
        let g = load(ws.path(), &[]).unwrap();
        let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["t[file=traces/a.json]", "t[file=traces/b.json]"]);
        assert_eq!(
            g.nodes[0].out_rel(),
            std::path::Path::new("out/t/file=traces%2Fa.json")
        );
    }

    #[test]
    fn links_are_followed_but_never_round_a_loop() {
        let ws = archive(
            r#"Pipeline(stages: { "t": Stage(files: "a/**/{name}.json", task: Command(run: "cat ${file}", outputs: [])) })"#,
            &["a/x.json", "elsewhere/y.json"],
        );
        std::os::unix::fs::symlink(ws.path().join("a"), ws.path().join("a/loop")).unwrap();
        std::os::unix::fs::symlink(ws.path().join("elsewhere"), ws.path().join("a/linked"))
            .unwrap();
        let g = load(ws.path(), &[]).unwrap();
        let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            ["t[name=y]", "t[name=x]"],
            "by path: a/linked/y.json first"
        );
    }

    #[test]
    fn a_pattern_that_matches_nothing_warns_with_the_nearest_folder() {
        let ws = archive(ARCHIVE, &["archive/rq9/readme.txt"]);
        let g = load(ws.path(), &[]).unwrap();
        assert!(g.nodes.is_empty());
        assert_eq!(g.warnings.len(), 1);
        let w = &g.warnings[0];
        assert!(
            w.starts_with("pipelines/archive.ron:6:20: stage `conv`"),
            "{w}"
        );
        assert!(
            w.contains("matches no file") && w.contains("`archive`"),
            "{w}"
        );
    }

    #[test]
    fn load_errors_name_the_place_and_the_fix() {
        let stage = |fields: &str| {
            format!(
                r#"Pipeline(params: {{ "model": "x" }}, stages: {{ "t": Stage({fields}, task: Command(run: "cat ${{file}}", outputs: [])) }})"#
            )
        };
        let cases: &[(&str, &[&str], &str)] = &[
            (
                r#"files: "a/*/{name}.json""#,
                &["a/r1/x.json", "a/r2/x.json"],
                "files `a/r1/x.json` and `a/r2/x.json` both give node `t[name=x]`",
            ),
            (
                r#"files: "a/{rq}/{rq}_t.json""#,
                &["a/r1/r2_t.json"],
                "capture `rq` reads `r1` and `r2` in `a/r1/r2_t.json`",
            ),
            (
                r#"files: "a/{model}.json""#,
                &["a/x.json"],
                "shadows the pipeline param `model`",
            ),
            (
                r#"files: "a/{name}.json", exclude: [{"nme": "x"}]"#,
                &["a/x.json"],
                "`exclude` names `nme`, which is not a capture",
            ),
            (
                r#"files: "a/{name}.json", matrix: {"k": [1]}"#,
                &["a/x.json"],
                "has both `files` and `matrix`",
            ),
            (
                r#"files: ["a/*.json"]"#,
                &["a/x.json"],
                "`files` must be a path pattern",
            ),
        ];
        for (fields, paths, says) in cases {
            let ws = archive(&stage(fields), paths);
            let e = load(ws.path(), &[]).expect_err(fields);
            assert!(e.message.contains(says), "{fields}: {}", e.message);
            assert!(e.help.is_some(), "{fields}: no help");
        }
    }
}

#[test]
fn repeat_numbers_repetitions_of_measuring_stages_only() {
    let ok = r#"Pipeline(params: {"n": 2}, stages: {
        "b": Stage(matrix: {"x": [1, 2]}, repeat: "${n}",
                   task: Command(run: "echo ${x} ${rep} > ${out}/results.json", measure: true, outputs: ["results.json"])),
    })"#;
    let g = load_ok(&[("p.ron", ok)], &[]);
    let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "b[x=1,rep=1]",
            "b[x=1,rep=2]",
            "b[x=2,rep=1]",
            "b[x=2,rep=2]"
        ]
    );
    assert_eq!(run_of(&g, "b[x=2,rep=2]"), "echo 2 2 > ${out}/results.json");
    assert_eq!(
        g.nodes[3].out_rel(),
        std::path::PathBuf::from("out/b/x=2,rep=2")
    );
    let one = load_ok(&[("p.ron", ok)], &["n=1"]);
    assert_eq!(one.nodes[0].id, "b[x=1]");

    let cases: &[(&str, &str, &str)] = &[
        (
            r#"Pipeline(stages: {"b": Stage(repeat: 3, task: Command(run: "true", outputs: ["v.txt"]))})"#,
            "a `Command` task measures nothing",
            "measure: true",
        ),
        (
            r#"Pipeline(stages: {"b": Stage(repeat: 0, task: Command(run: "true", measure: true, outputs: ["results.json"]))})"#,
            "`repeat` must be at least 1",
            "leave `repeat` out",
        ),
        (
            r#"Pipeline(stages: {"b": Stage(repeat: "many", task: Command(run: "true", measure: true, outputs: ["results.json"]))})"#,
            "repeat",
            "",
        ),
        (
            r#"Pipeline(stages: {"b": Stage(matrix: {"rep": [1]}, repeat: 2, task: Command(run: "true", measure: true, outputs: ["results.json"]))})"#,
            "already have a param `rep`",
            "rename this param",
        ),
        (
            r#"Pipeline(stages: {"b": Stage(task: Command(run: "true", measure: true, outputs: ["v.txt"]))})"#,
            "writes `results.json`, but its `outputs` do not list it",
            "to `outputs`: it holds the measurement",
        ),
    ];
    for (text, message, help) in cases {
        let e = load_err(&[("p.ron", text)], &[]);
        let shown = format!("{e:?}");
        assert!(e.to_string().contains(message), "{message}: {shown}");
        assert!(shown.contains(help), "{help}: {shown}");
        assert!(shown.contains("p.ron"), "{shown}");
    }
}

#[test]
fn what_follows_a_repeated_stage_inherits_rep_and_cannot_repeat_again() {
    let text = r#"Pipeline(stages: {
        "b": Stage(matrix: {"x": [1]}, repeat: 2, task: Command(run: "m", measure: true, outputs: ["results.json"])),
        "t": Stage(for_each: "b", task: Command(run: "t", outputs: ["t.txt"])),
        "again": Stage(for_each: "b", repeat: 2, task: Command(run: "m", measure: true, outputs: ["results.json"])),
    })"#;
    let e = load_err(&[("p.ron", text)], &[]);
    assert!(
        e.to_string().contains("already have a param `rep`"),
        "{e:?}"
    );
    let ok = text.replace(
        r#""again": Stage(for_each: "b", repeat: 2,"#,
        r#""again": Stage(for_each: "b","#,
    );
    let g = load_ok(&[("p.ron", &ok)], &[]);
    assert!(g.find("t[x=1,rep=2]").is_some());
    assert_eq!(g.nodes[g.find("t[x=1,rep=2]").unwrap()].rep, Some(2));
}
