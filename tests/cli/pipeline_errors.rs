//! Malformed pipelines: every one exits 2 with `file:line:column`, the span
//! underlined and a hint, runs nothing, and never panics. The messages are
//! snapshotted so a change to any of them is reviewed.

use crate::harness::flat;
use crate::support::{snapshot, Workspace};

const AREA: &str = "pipeline_errors";

/// Where a case's error must point: the first occurrence of `needle` in `file`.
struct At<'a> {
    file: &'a str,
    needle: &'a str,
}

fn at<'a>(file: &'a str, needle: &'a str) -> At<'a> {
    At { file, needle }
}

/// `pipelines/FILE:LINE:COL` of the first occurrence of the needle, 1-based.
fn location(files: &[(&str, &str)], at: &At<'_>) -> String {
    let (_, text) = files
        .iter()
        .find(|(n, _)| *n == at.file)
        .expect("the file named by `at` is a fixture");
    let offset = text
        .find(at.needle)
        .unwrap_or_else(|| panic!("`{}` does not occur in {}", at.needle, at.file));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("pipelines/{}:{line}:{col}", at.file)
}

/// Runs `vitgraph ARGS` on `files` and checks the rejection; returns stderr.
fn rejected(
    name: &str,
    files: &[(&str, &str)],
    args: &[&str],
    place: Option<&str>,
    hints: &[&str],
) -> String {
    let ws = Workspace::with_pipelines(files);
    let out = ws.run(args);
    let stderr = ws.redact(&out.stderr);
    assert_eq!(
        out.code, 2,
        "{name}: expected exit status 2\nstdout:\n{}\nstderr:\n{stderr}",
        out.stdout
    );
    assert!(!stderr.contains("panicked"), "{name}: panicked\n{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{name}: printed to stdout\n{}",
        out.stdout
    );
    assert!(
        !ws.path().join("out").exists() && !ws.path().join("cache").exists(),
        "{name}: something ran"
    );
    if let Some(place) = place {
        assert!(
            stderr.contains(&format!("[{place}]")),
            "{name}: expected the error at `{place}`\n{stderr}"
        );
    }
    for hint in hints {
        assert!(
            flat(&stderr).contains(&flat(hint)),
            "{name}: expected `{hint}` in\n{stderr}"
        );
    }
    snapshot(AREA, name, &stderr);
    stderr
}

/// A one-file case whose error points at `needle`.
fn one(name: &str, text: &str, needle: &str, hints: &[&str]) {
    let files = [("study.ron", text)];
    let place = location(&files, &at("study.ron", needle));
    rejected(name, &files, &["build"], Some(&place), hints);
}

#[test]
fn syntax_missing_comma() {
    one(
        "syntax_missing_comma",
        r#"Pipeline(
    stages: {
        "a": Stage(
            task: Command(run: "echo hi" outputs: ["x"]),
        ),
    },
)
"#,
        "outputs",
        &["syntax error: expected `,` or `)`, found `o`"],
    );
}

#[test]
fn syntax_unterminated_string() {
    one(
        "syntax_unterminated_string",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "echo hi, outputs: [])),
    },
)
"#,
        r#""echo hi"#,
        &["unterminated string", "add the closing `\"`"],
    );
}

#[test]
fn syntax_unclosed_bracket() {
    one(
        "syntax_unclosed_bracket",
        "Pipeline(\n    stages: {\n        \"a\": Stage(task: Command(run: \"x\")),\n",
        "{",
        &[
            "unexpected end of file: this `{` is never closed",
            "add `}` after its last entry",
        ],
    );
}

#[test]
fn syntax_unknown_escape() {
    one(
        "syntax_unknown_escape",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "printf 'a\qb' > ${out}/x", outputs: ["x"])),
    },
)
"#,
        r"\q",
        &[
            "unknown escape sequence",
            r"for a literal backslash write `\\`",
        ],
    );
}

#[test]
fn unknown_stage_field() {
    one(
        "unknown_stage_field",
        r#"Pipeline(
    stages: {
        "gen": Stage(task: Command(run: "true")),
        "use": Stage(
            for_eahc: "gen",
            task: Command(run: "true"),
        ),
    },
)
"#,
        "for_eahc",
        &[
            "unknown field `for_eahc` in `Stage`",
            "did you mean `for_each`?",
        ],
    );
}

#[test]
fn unknown_command_field() {
    one(
        "unknown_command_field",
        r#"Pipeline(
    stages: {
        "a": Stage(
            task: Command(
                run: "echo 1 > ${out}/v.txt",
                ouputs: ["v.txt"],
            ),
        ),
    },
)
"#,
        "ouputs",
        &["unknown field `ouputs`", "did you mean `outputs`?"],
    );
}

#[test]
fn unknown_pipeline_field() {
    one(
        "unknown_pipeline_field",
        r#"Pipeline(
    parms: { "samples": 10 },
    stages: {
        "a": Stage(task: Command(run: "true")),
    },
)
"#,
        "parms",
        &[
            "unknown field `parms` in `Pipeline`",
            "did you mean `params`?",
        ],
    );
}

#[test]
fn unknown_task_kind() {
    one(
        "unknown_task_kind",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Comand(run: "true")),
    },
)
"#,
        "Comand",
        &["unknown variant `Comand`", "did you mean `Command`?"],
    );
}

#[test]
fn wrong_type_outputs_not_a_list() {
    one(
        "wrong_type_outputs_not_a_list",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "echo 1 > ${out}/v.txt", outputs: "v.txt")),
    },
)
"#,
        r#""v.txt")"#,
        &[
            "expected a list, found the string \"v.txt\"",
            "write a list in brackets",
        ],
    );
}

#[test]
fn wrong_type_gpus() {
    one(
        "wrong_type_gpus",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "nvidia-smi", resources: (gpus: "two"))),
    },
)
"#,
        r#""two""#,
        &[
            "expected a non-negative integer, found the string \"two\"",
            "without quotes",
        ],
    );
}

#[test]
fn wrong_type_list_param_in_a_string_field() {
    one(
        "wrong_type_list_param_in_a_string_field",
        r#"Pipeline(
    params: { "models": ["vit16x12x768", "vit32x6x384"] },
    stages: {
        "a": Stage(task: Command(run: "${models}")),
    },
)
"#,
        r#""${models}""#,
        &["the value comes from param `models`"],
    );
}

#[test]
fn unknown_param_reference() {
    one(
        "unknown_param_reference",
        r#"Pipeline(
    params: { "samples": 2000 },
    stages: {
        "a": Stage(task: Command(run: "bench --n ${sample} > ${out}/r.txt", outputs: ["r.txt"])),
    },
)
"#,
        "${sample}",
        &["unknown `${sample}`", "did you mean `${samples}`?"],
    );
}

#[test]
fn unclosed_substitution() {
    one(
        "unclosed_substitution",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "echo 1 > ${out/v.txt", outputs: ["v.txt"])),
    },
)
"#,
        "${out/",
        &["unclosed `${`", "write `$$` for a literal `$`"],
    );
}

#[test]
fn needs_reference_without_dependency() {
    one(
        "needs_reference_without_dependency",
        r#"Pipeline(
    stages: {
        "gen": Stage(task: Command(run: "echo 1 > ${out}/v.txt", outputs: ["v.txt"])),
        "other": Stage(task: Command(run: "echo 2 > ${out}/v.txt", outputs: ["v.txt"])),
        "sum": Stage(
            needs: ["other"],
            task: Command(run: "cat ${needs.gen}/v.txt > ${out}/s.txt", outputs: ["s.txt"]),
        ),
    },
)
"#,
        "${needs.gen}",
        &[
            "`${needs.gen}` names a stage this stage does not depend on",
            "add `gen` to `needs`",
        ],
    );
}

#[test]
fn missing_task() {
    one(
        "missing_task",
        r#"Pipeline(
    stages: {
        "a": Stage(
            description: "forgot the task",
        ),
    },
)
"#,
        "Stage(",
        &["stage `a` has no `task`", "add `task: Command("],
    );
}

#[test]
fn unknown_stage_in_needs() {
    one(
        "unknown_stage_in_needs",
        r#"Pipeline(
    stages: {
        "gen": Stage(task: Command(run: "true")),
        "sum": Stage(needs: ["gne"], task: Command(run: "true")),
    },
)
"#,
        r#""gne""#,
        &["unknown stage `gne`", "did you mean `gen`?"],
    );
}

#[test]
fn cycle_in_one_file() {
    one(
        "cycle_in_one_file",
        r#"Pipeline(
    stages: {
        "a": Stage(needs: ["b"], task: Command(run: "true")),
        "b": Stage(for_each: "a", task: Command(run: "true")),
    },
)
"#,
        r#""b"]"#,
        &[
            "dependency cycle: `a` → `b` → `a`",
            "remove one of these edges",
        ],
    );
}

#[test]
fn cycle_across_two_files() {
    let files = [
        ("analysis.ron", "Pipeline(\n    stages: {\n        \"analyze\": Stage(needs: [\"runs\"], task: Command(run: \"true\")),\n    },\n)\n"),
        ("runs.ron", "Pipeline(\n    stages: {\n        \"runs\": Stage(\n            needs: [\"analyze\"],\n            task: Command(run: \"true\"),\n        ),\n    },\n)\n"),
    ];
    let first = location(&files, &at("analysis.ron", "\"runs\"]"));
    let second = location(&files, &at("runs.ron", "\"analyze\"]"));
    let stderr = rejected(
        "cycle_across_two_files",
        &files,
        &["build"],
        Some(&first),
        &["dependency cycle: `analyze` → `runs` → `analyze`"],
    );
    assert!(
        stderr.contains(&format!("[{second}]")),
        "the second edge is shown too\n{stderr}"
    );
}

#[test]
fn duplicate_stage_across_files() {
    let files = [
        ("a.ron", "Pipeline(\n    stages: {\n        \"runs\": Stage(task: Command(run: \"true\")),\n    },\n)\n"),
        ("b.ron", "Pipeline(\n    stages: {\n        \"other\": Stage(task: Command(run: \"true\")),\n        \"runs\": Stage(task: Command(run: \"false\")),\n    },\n)\n"),
    ];
    let again = location(&files, &at("b.ron", "\"runs\""));
    let first = location(&files, &at("a.ron", "\"runs\""));
    let stderr = rejected(
        "duplicate_stage_across_files",
        &files,
        &["build"],
        Some(&again),
        &[
            "stage `runs` is defined twice",
            "stage names are global across pipeline files",
        ],
    );
    assert!(
        stderr.contains(&format!("[{first}]")),
        "the first definition is shown too\n{stderr}"
    );
}

const MATRIX_HEAD: &str = r#"Pipeline(
    stages: {
        "runs": Stage(
            matrix: { "res": [224, 512], "batch": [1, 8] },
"#;
const MATRIX_TAIL: &str = r#"            task: Command(run: "echo ${res} ${batch} > ${out}/r.txt", outputs: ["r.txt"]),
        ),
    },
)
"#;

fn matrix_case(name: &str, middle: &str, needle: &str, hints: &[&str]) {
    one(
        name,
        &format!("{MATRIX_HEAD}{middle}{MATRIX_TAIL}"),
        needle,
        hints,
    );
}

#[test]
fn exclude_names_a_non_axis() {
    matrix_case(
        "exclude_names_a_non_axis",
        "            exclude: [ { \"reso\": 512, \"batch\": 8 } ],\n",
        "\"reso\"",
        &[
            "`exclude` names `reso`, which is not a matrix axis",
            "did you mean `res`?",
        ],
    );
}

#[test]
fn exclude_matches_nothing() {
    matrix_case(
        "exclude_matches_nothing",
        "            exclude: [ { \"res\": 1024 } ],\n",
        "{ \"res\": 1024 }",
        &["this `exclude` entry matches no combination of the matrix"],
    );
}

#[test]
fn exclude_removes_everything() {
    matrix_case(
        "exclude_removes_everything",
        "            exclude: [ { \"batch\": 1 }, { \"batch\": 8 } ],\n",
        "{ \"res\"",
        &["the matrix of stage `runs` has no combinations left after `exclude`"],
    );
}

#[test]
fn exclude_entry_not_a_map() {
    matrix_case(
        "exclude_entry_not_a_map",
        "            exclude: [ \"res\" ],\n",
        "\"res\" ]",
        &["each `exclude` entry must be a map"],
    );
}

#[test]
fn include_duplicates_a_node() {
    matrix_case(
        "include_duplicates_a_node",
        "            include: [ { \"res\": 1024, \"batch\": 1 }, { \"res\": 1024, \"batch\": 1 } ],\n",
        "1 } ]",
        &["node `runs[res=1024,batch=1]` is produced twice", "first produced here"],
    );
}

#[test]
fn empty_matrix_axis() {
    one(
        "empty_matrix_axis",
        r#"Pipeline(
    stages: {
        "runs": Stage(
            matrix: { "res": [224, 512], "batch": [] },
            task: Command(run: "echo ${res} ${batch}"),
        ),
    },
)
"#,
        "\"batch\"",
        &[
            "matrix axis `batch` of stage `runs` is empty",
            "give it at least one value",
        ],
    );
}

#[test]
fn matrix_axis_declared_twice() {
    one(
        "matrix_axis_declared_twice",
        r#"Pipeline(
    stages: {
        "runs": Stage(
            matrix: { "res": [224], "res": [512] },
            task: Command(run: "echo ${res}"),
        ),
    },
)
"#,
        "\"res\": [512]",
        &["matrix axis `res` is declared twice"],
    );
}

#[test]
fn output_outside_the_node_directory() {
    one(
        "output_outside_the_node_directory",
        r#"Pipeline(
    stages: {
        "a": Stage(task: Command(run: "echo 1 > ${out}/../v.txt", outputs: ["../v.txt"])),
    },
)
"#,
        "Command(",
        &["output `../v.txt` must be a plain relative path inside `${out}`"],
    );
}

#[test]
fn invalid_stage_name() {
    one(
        "invalid_stage_name",
        r#"Pipeline(
    stages: {
        "my stage": Stage(task: Command(run: "true")),
    },
)
"#,
        "\"my stage\"",
        &["invalid stage name `my stage`", "use letters, digits"],
    );
}

#[test]
fn not_a_pipeline() {
    one(
        "not_a_pipeline",
        "Stage(task: Command(run: \"true\"))\n",
        "Stage(",
        &["a pipeline file must hold one `Pipeline(…)`"],
    );
}

#[test]
fn empty_pipeline_file() {
    let files = [("empty.ron", "")];
    rejected(
        "empty_pipeline_file",
        &files,
        &["build"],
        Some("pipelines/empty.ron:1:1"),
        &[
            "the file is empty",
            "a pipeline file holds one `Pipeline(stages: { … })`",
        ],
    );
}

const SWEEP: &str = r#"Pipeline(
    params: { "samples": 2000, "g": 1 },
    stages: {
        "runs": Stage(
            matrix: { "res": [224, 512] },
            task: Command(
                run: "echo ${res} ${samples} > ${out}/r.txt",
                outputs: ["r.txt"],
                resources: (gpus: "${g}"),
            ),
        ),
    },
)
"#;

#[test]
fn override_of_an_unknown_param() {
    let stderr = rejected(
        "override_of_an_unknown_param",
        &[("sweep.ron", SWEEP)],
        &["build", "-p", "sample=500"],
        Some("-p sample=500:1:1"),
        &[
            "`-p sample=500` sets no param: no pipeline declares `sample`",
            "did you mean `-p samples=…`?",
        ],
    );
    assert!(stderr.contains("unknown param"), "{stderr}");
}

#[test]
fn override_with_a_value_of_the_wrong_type() {
    let files = [("sweep.ron", SWEEP)];
    let field = location(&files, &at("sweep.ron", "\"${g}\""));
    let stderr = rejected(
        "override_with_a_value_of_the_wrong_type",
        &files,
        &["status", "-p", "g=lots"],
        Some(&field),
        &[
            "expected a non-negative integer",
            "the value comes from param `g`, set at -p g=lots:1:3",
        ],
    );
    assert!(
        stderr.contains("[-p g=lots:1:3]"),
        "the `-p` argument is shown too\n{stderr}"
    );
}

/// `-p` takes Hydra's override syntax beside RON's: `a,b,c`, `range(…)`
/// with its exclusive stop, `choice(…)`, a quoted value with a comma.
#[test]
fn overrides_in_hydras_syntax_sweep_as_the_ron_form_does() {
    let ws = Workspace::with_pipelines(&[("sweep.ron", SWEEP)]);
    let ls = |p: &str| {
        let out = ws.run(&["ls", "runs", "-p", p]);
        assert_eq!(out.code, 0, "{p}: {}", out.stderr);
        out.stdout.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let ron = ls("res=[1, 2, 4, 8]");
    assert_eq!(ron.len(), 4, "{ron:?}");
    assert_eq!(ls("res=1,2,4,8"), ron);
    assert_eq!(ls("res=choice(1,2,4,8)"), ron);
    assert_eq!(ls("res=sort(8,4,2,1)"), ron);
    let range = ls("res=range(1,9)");
    assert_eq!(range.len(), 8, "the stop is exclusive: {range:?}");
    assert_eq!(range[0], "runs[res=1]");
    assert_eq!(range[7], "runs[res=8]");
    // A quoted value is one value, its comma kept.
    assert_eq!(ls("res='224,512'"), ["runs[res=224,512]"]);
}

#[test]
fn a_hydra_sweep_vitgraph_cannot_build_is_named_with_the_fix() {
    let stderr = rejected(
        "a_hydra_sweep_vitgraph_cannot_build",
        &[("sweep.ron", SWEEP)],
        &["build", "-p", "res=range(9,1)"],
        Some("-p res=range(9,1):1:5"),
        &[
            "`-p res=range(9,1)`: `range(9,1)` has no values: its stop is exclusive, as in Hydra and Python",
            "Hydra's override syntax",
        ],
    );
    assert!(
        stderr.contains("not a sweep vitgraph can build"),
        "{stderr}"
    );
    rejected(
        "an_interval_sweep",
        &[("sweep.ron", SWEEP)],
        &["build", "-p", "res=interval(0,1)"],
        None,
        &["continuous interval"],
    );
}

#[test]
fn unknown_target() {
    let ws = Workspace::with_pipelines(&[("sweep.ron", SWEEP)]);
    let out = ws.run(&["build", "rnus"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown target `rnus`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean `runs`?"),
        "{}",
        out.stderr
    );
    assert!(!ws.path().join("out").exists(), "nothing runs");
    snapshot(AREA, "unknown_target", &ws.redact(&out.stderr));
    let out = ws.run(&["build", "nope"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`vitgraph ls` lists every stage and node"),
        "{}",
        out.stderr
    );
}

#[test]
fn malformed_override_argument() {
    let ws = Workspace::with_pipelines(&[("sweep.ron", SWEEP)]);
    let out = ws.run(&["build", "-p", "samples"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        flat(&out.stderr).contains("`-p samples` is not KEY=VALUE"),
        "{}",
        out.stderr
    );
    snapshot(AREA, "malformed_override_argument", &ws.redact(&out.stderr));
}

#[test]
fn deeply_nested_file_is_an_error_not_a_crash() {
    let text = format!(
        "Pipeline(params: {{ \"x\": {}{} }}, stages: {{}})\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let files = [("deep.ron", text.as_str())];
    let ws = Workspace::with_pipelines(&files);
    let out = ws.run(&["ls"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("values are nested more than 128 levels deep"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("[pipelines/deep.ron, line 1 of 200039 bytes"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.len() < 2_000,
        "the long line is shown in part: {}",
        out.stderr
    );
}

#[test]
fn for_each_axis_shadows_an_inherited_param() {
    one(
        "for_each_axis_shadows_an_inherited_param",
        r#"Pipeline(
    stages: {
        "runs": Stage(matrix: { "size": [1, 2] }, task: Command(run: "echo ${size}")),
        "analysis": Stage(
            for_each: "runs",
            matrix: { "size": [9] },
            task: Command(run: "echo ${size}"),
        ),
    },
)
"#,
        "9]",
        &[
            "stage `analysis` sets `size`, which its nodes inherit from `runs`",
            "give this axis another name",
        ],
    );
}

/// A one-file case over a workspace that also holds `data` files (paths
/// relative to the workspace root) for a `files:` pattern to match.
fn over_files(name: &str, text: &str, needle: &str, data: &[&str], hints: &[&str]) {
    let data: Vec<String> = data.iter().map(|p| format!("../{p}")).collect();
    let mut files = vec![("study.ron", text)];
    files.extend(data.iter().map(|p| (p.as_str(), "trace")));
    let place = location(&files, &at("study.ron", needle));
    rejected(name, &files, &["build"], Some(&place), hints);
}

#[test]
fn files_two_files_give_one_node() {
    over_files(
        "files_two_files_give_one_node",
        r#"Pipeline(stages: {
    "t": Stage(files: "archive/*/{model}.json", task: Export(input: "${file}")),
})
"#,
        r#""archive/*"#,
        &["archive/r1/vit.json", "archive/r2/vit.json"],
        &[
            "files `archive/r1/vit.json` and `archive/r2/vit.json` both give node `t[model=vit]`",
            "capture the part of the path that differs",
        ],
    );
}

#[test]
fn files_a_capture_reads_two_values() {
    over_files(
        "files_a_capture_reads_two_values",
        r#"Pipeline(stages: {
    "t": Stage(files: "archive/{rq}/{rq}_{model}.json", task: Export(input: "${file}")),
})
"#,
        "{rq}/",
        &["archive/rq1/rq2_vit.json"],
        &[
            "capture `rq` reads `rq1` and `rq2` in `archive/rq1/rq2_vit.json`",
            "the places a capture appears must agree",
        ],
    );
}

#[test]
fn files_a_capture_without_a_name() {
    over_files(
        "files_a_capture_without_a_name",
        r#"Pipeline(stages: {
    "t": Stage(files: "archive/{}.json", task: Export(input: "${file}")),
})
"#,
        "{}",
        &["archive/x.json"],
        &["a capture without a name in `files`", "name it: `{model}`"],
    );
}

#[test]
fn files_a_capture_shadows_a_param() {
    over_files(
        "files_a_capture_shadows_a_param",
        r#"Pipeline(
    params: { "model": "vit16x12x768" },
    stages: {
        "t": Stage(files: "archive/{model}.json", task: Export(input: "${file}")),
    },
)
"#,
        "{model}",
        &["archive/x.json"],
        &[
            "capture `model` shadows the pipeline param `model`",
            "rename the capture",
        ],
    );
}

#[test]
fn files_with_a_matrix() {
    over_files(
        "files_with_a_matrix",
        r#"Pipeline(stages: {
    "t": Stage(files: "archive/{model}.json", matrix: { "k": [1, 2] }, task: Export(input: "${file}")),
})
"#,
        r#"{ "k""#,
        &["archive/x.json"],
        &[
            "stage `t` has both `files` and `matrix`",
            "put the `matrix` on a stage that reads it with `for_each: \"t\"`",
        ],
    );
}

#[test]
fn files_an_absolute_pattern() {
    over_files(
        "files_an_absolute_pattern",
        r#"Pipeline(stages: {
    "t": Stage(files: "/data/archive/*.json", task: Export(input: "${file}")),
})
"#,
        "/data",
        &["archive/x.json"],
        &[
            "`files` must be relative to the workspace",
            "ln -s /data/archive archive",
        ],
    );
}

#[test]
fn isolation_on_a_task_without_a_gpu() {
    one(
        "isolation_on_a_task_without_a_gpu",
        r#"Pipeline(
    stages: {
        "a": Stage(isolation: Gpu, task: Command(run: "echo hi", outputs: ["x"])),
    },
)
"#,
        "Gpu",
        &[
            "`isolation: Gpu` places a measurement on a GPU",
            "`resources: (gpus: 1, exclusive: true)`",
        ],
    );
}

/// `isolation: Host` (the default) means something wherever a measurement
/// runs alone, on the CPU too; on a task that shares the machine it is an
/// error.
#[test]
fn isolation_host_is_accepted_where_a_measurement_runs_alone() {
    let ws = crate::harness::Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "v": Stage(isolation: Host, task: Vit(model: "vit32x6x384", batch: 1, device: "cpu")) })"#,
    )]);
    let r = ws.run(&["status"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let ws = crate::harness::Ws::new(&[(
        "p.ron",
        r#"Pipeline(stages: { "c": Stage(isolation: Host, task: Command(run: "true", outputs: [])) })"#,
    )]);
    let r = ws.run(&["status"]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr()
            .contains("`isolation: Host` holds the machine for a measurement that runs alone"),
        "{}",
        r.stderr()
    );
}

#[test]
fn a_pipeline_title_that_is_not_text() {
    one(
        "a_pipeline_title_that_is_not_text",
        r#"Pipeline(
    title: 42,
    stages: {
        "a": Stage(task: Command(run: "echo hi", outputs: ["x"])),
    },
)
"#,
        "42",
        &["`title` must be text in quotes", "title: \"…\""],
    );
}

#[test]
fn a_plot_line_through_a_param_it_does_not_show() {
    // The report joins dtype × n; its second plot draws n and splits by
    // nothing: its line would zig-zag between f16 and f32. Found as the
    // pipelines load and refused at the plot, before the sweep runs.
    one(
        "report_plot_hidden_param",
        r#"Pipeline(
    stages: {
        "runs": Stage(
            matrix: { "dtype": ["f16", "f32"], "n": [64, 128] },
            task: Command(run: "echo '{}' > ${out}/results.json", outputs: ["results.json"]),
        ),
        "report": Stage(
            needs: ["runs"],
            task: Report(title: "t", sources: ["runs"], columns: ["t"],
                         plots: [Plot(x: "n", y: "t", series: "dtype"), Plot(x: "n", y: "t", log_x: true)]),
        ),
    },
)
"#,
        r#"Plot(x: "n", y: "t", log_x"#,
        &[
            "`report`: the line `t` of the plot of `t` against `n` has two rows at n = 64: they differ in `dtype`",
            "add dtype to the plot's `series` (one line per value), draw one panel per value with `facet: \"dtype\"`",
        ],
    );
}

#[test]
fn a_refused_report_leaves_the_rest_of_the_workspace_usable() {
    // A `-p` override meant for one study can make another study's plot
    // ambiguous: only commands that select the refused report fail.
    let text = r#"Pipeline(
    params: { "dtype": ["f16"], "n": [64] },
    stages: {
        "runs": Stage(
            matrix: { "dtype": "${dtype}", "n": "${n}" },
            task: Command(run: "echo '{}' > ${out}/results.json", outputs: ["results.json"]),
        ),
        "report": Stage(
            needs: ["runs"],
            task: Report(title: "t", sources: ["runs"], columns: ["t"], plots: [Plot(x: "n", y: "t")]),
        ),
        "other": Stage(task: Command(run: "echo hi > ${out}/x", outputs: ["x"])),
    },
)
"#;
    let ws = Workspace::with_pipelines(&[("study.ron", text)]);
    // As written, one dtype: nothing to refuse.
    let out = ws.run(&["status", "report"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let over = ["-p", "dtype=[\"f16\",\"f32\"]"];
    let refused = |args: &[&str]| {
        let mut all = over.to_vec();
        all.extend_from_slice(args);
        let out = ws.run(&all);
        assert_eq!(out.code, 2, "{args:?}: {}\n{}", out.stdout, out.stderr);
        let err = flat(&out.stderr);
        assert!(
            err.contains("`report`: the line `t` of the plot of `t` against `n` has two rows at n = 64: they differ in `dtype`")
                && err.contains("study.ron:10:")
                && err.contains("this plot"),
            "{args:?}: {err}"
        );
    };
    // Twice each: the second command reads the graph from its cache.
    for _ in 0..2 {
        refused(&["status", "report"]);
        refused(&["build"]);
        refused(&["build", "-n", "report"]);
    }
    assert!(!ws.path().join("out/runs").exists(), "nothing ran");
    // The study page is written, and says why the report is not built.
    let mut page = over.to_vec();
    page.push("report");
    let out = ws.run(&page);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let html = std::fs::read_to_string(ws.path().join("out/report.html")).unwrap();
    assert!(
        html.contains("(pipelines/study.ron:10:")
            && html.contains("they differ in `dtype`")
            && html.contains("not built until fixed"),
        "the page names the refusal"
    );
    let mut other = over.to_vec();
    other.extend_from_slice(&["build", "other"]);
    let out = ws.run(&other);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(ws.path().join("out/other/x").exists());
}

#[test]
fn a_plot_of_a_column_the_report_does_not_list() {
    // `columns` is given and lacks the plotted metric: the table cannot
    // have it, whatever the runs write.
    one(
        "report_plot_unknown_column",
        r#"Pipeline(
    stages: {
        "runs": Stage(
            matrix: { "n": [64, 128] },
            task: Command(run: "echo '{}' > ${out}/results.json", outputs: ["results.json"]),
        ),
        "report": Stage(
            needs: ["runs"],
            task: Report(title: "t", sources: ["runs"], columns: ["latency_ms.median"],
                         plots: [Plot(x: "n", y: "latency_ms.p99")]),
        ),
    },
)
"#,
        r#"Plot(x: "n", y: "latency_ms.p99")"#,
        &[
            "`report`: `plot.y` names `latency_ms.p99`, which is not a column of the report table",
            "the table's columns are `n`, `latency_ms.median`; a metric must also be listed in `columns`",
        ],
    );
}

/// `repeat` and `precision.max_repeat` are bounded (1,000 repetitions a
/// configuration): a larger one is a load error, never an allocation abort.
#[test]
fn too_many_repetitions_are_a_load_error() {
    for (stage, field) in [
        (
            r#"repeat: "${n}""#,
            "`repeat` is 4294967295: too large (at most 1000)",
        ),
        (
            r#"repeat: 3, precision: (metric: "t", ci_rel: 0.05, max_repeat: "${n}")"#,
            "`precision.max_repeat` is 4294967295: too large (at most 1000)",
        ),
    ] {
        let text = format!(
            r#"Pipeline(params: {{"n": 4294967295}}, stages: {{ "c": Stage({stage},
                task: Command(run: "echo {{}} > ${{out}}/results.json", outputs: ["results.json"], measure: true)) }})"#
        );
        let ws = crate::harness::Ws::new(&[("p.ron", &text)]);
        let r = ws.run(&["status"]);
        assert_eq!(r.code(), 2, "{}", r.stderr());
        assert!(r.stderr().contains(field), "{}", r.stderr());
    }
}

#[test]
fn combinations_that_print_to_one_id_are_not_called_identical() {
    one(
        "combinations_that_print_to_one_id",
        r#"Pipeline(
    stages: {
        "c": Stage(include: [{"a": "x,b=y", "b": "z"}, {"a": "x", "b": "y,b=z"}], task: Command(run: "true")),
    },
)
"#,
        r#""y,b=z"}]"#,
        &[
            "node `c[a=x,b=y,b=z]` is produced twice",
            "the value `y,b=z` holds `,` or `=`, which a node id puts between params",
        ],
    );
}
