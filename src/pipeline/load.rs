//! From pipeline files to the expanded graph: structure checks, `-p`
//! overrides, stage ordering (cycles, unknown and duplicate stages), node
//! expansion and per-node task deserialization.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::de::{self, Param, Scope};
use super::expand::{self, Axis};
use super::syntax::{self, Ident, Kind, Node, Span};
use super::{did_you_mean, value_of, PipelineError, Sources};
use crate::graph::{Graph, Need, NodeIdx};
use crate::tasks::TaskSpec;

const PIPELINE_FIELDS: &[&str] = &["params", "stages"];
const STAGE_FIELDS: &[&str] = &[
    "matrix",
    "files",
    "exclude",
    "include",
    "for_each",
    "needs",
    "task",
    "description",
    "slurm",
    "placement",
];

/// A `-p KEY=VALUE` from the command line.
#[derive(Debug, Clone)]
pub struct Override {
    pub key: String,
    pub value: String,
}

impl Override {
    /// Parses `KEY=VALUE`.
    pub fn parse(arg: &str) -> Result<Override, String> {
        match arg.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok(Override {
                key: k.trim().to_string(),
                value: v.to_string(),
            }),
            _ => Err(format!(
                "`-p {arg}` is not KEY=VALUE (for example `-p samples=500`)"
            )),
        }
    }
}

struct FileDecl {
    rel: PathBuf,
    stem: String,
    params: Vec<Param>,
}

struct StageDecl {
    name: Ident,
    file: usize,
    axes: Vec<Axis>,
    matrix_span: Option<Span>,
    /// `files: "PATTERN"`: one node per matching workspace file.
    files: Option<Node>,
    exclude: Vec<Node>,
    include: Vec<Node>,
    for_each: Option<Ident>,
    needs: Vec<Ident>,
    task: Node,
    /// `slurm: (…)`: this stage's cluster settings.
    slurm: Option<Node>,
    /// `placement: Local | Cluster`.
    placement: Option<Node>,
}

impl StageDecl {
    fn upstream(&self) -> impl Iterator<Item = &Ident> {
        self.for_each.iter().chain(self.needs.iter())
    }
}

/// Loads every `pipelines/**/*.ron` under `root`, applies `-p` overrides and
/// expands the graph. Any problem is a [`PipelineError`] (exit status 2).
pub fn load(root: &Path, overrides: &[Override]) -> Result<Graph, PipelineError> {
    let mut sources = Sources::default();
    let files = pipeline_files(root)?;
    if files.is_empty() {
        return Err(PipelineError::plain(format!(
            "no pipeline files in `{}`",
            root.join("pipelines").display()
        ))
        .with_help(
            "add a `pipelines/NAME.ron` file, or run `vitgraph init` to create an example",
        ));
    }
    let mut decls = Vec::new();
    let mut stages: Vec<StageDecl> = Vec::new();
    for rel in files {
        let path = root.join(&rel);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PipelineError::plain(format!("cannot read `{}`: {e}", path.display())))?;
        let src = sources.add(rel.display().to_string(), text);
        let tree = syntax::parse(src, sources.text(src)).map_err(|e| {
            let err = sources.error(format!("syntax error: {}", e.message), e.span, "here");
            match e.help {
                Some(h) => err.with_help(h),
                None => err,
            }
        })?;
        let file_idx = decls.len();
        let (params, file_stages) = read_file(&sources, &tree, file_idx)?;
        let stem = rel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        decls.push(FileDecl { rel, stem, params });
        stages.extend(file_stages);
    }
    check_duplicates(&sources, &stages)?;
    apply_overrides(&mut sources, &mut decls, &mut stages, overrides)?;
    let order = stage_order(&sources, &stages)?;
    expand_nodes(root, &sources, &decls, &stages, &order)
}

/// The pipeline files of the workspace at `root`, relative to it, in the
/// order they are loaded (`pipelines/**/*.ron`, sorted by name).
pub fn pipeline_files(root: &Path) -> Result<Vec<PathBuf>, PipelineError> {
    let dir = root.join("pipelines");
    let mut files = Vec::new();
    // Symbolic links are followed (a pipeline shared between workspaces is
    // often linked in); a dangling one or a loop is an error naming it.
    for entry in walkdir::WalkDir::new(&dir)
        .follow_links(true)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(&dir).display().to_string();
            PipelineError::plain(format!("cannot read `{at}`: {e}"))
                .with_help("fix or remove the entry under `pipelines/` (links are followed)")
        })?;
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|x| x == "ron") {
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap_or(entry.path())
                .to_path_buf();
            files.push(rel);
        }
    }
    Ok(files)
}

fn key_name(sources: &Sources, key: &Node, what: &str) -> Result<String, PipelineError> {
    match &key.kind {
        Kind::Str { value, .. } => Ok(value.clone()),
        Kind::Unit(i) => Ok(i.name.clone()),
        other => Err(sources.error(
            format!("{what} must be a string"),
            key.span,
            format!("found {}", other.describe()),
        )),
    }
}

fn unknown_field(sources: &Sources, field: &Ident, known: &[&str], what: &str) -> PipelineError {
    let help = match did_you_mean(&field.name, known.iter().copied()) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "the fields of {what} are: {}",
            known
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    sources
        .error(
            format!("unknown field `{}` in {what}", field.name),
            field.span,
            "unknown field",
        )
        .with_help(help)
}

fn read_file(
    sources: &Sources,
    tree: &Node,
    file: usize,
) -> Result<(Vec<Param>, Vec<StageDecl>), PipelineError> {
    let fields = match &tree.kind {
        Kind::Struct { name, fields } if name.as_ref().is_none_or(|n| n.name == "Pipeline") => {
            fields
        }
        other => {
            return Err(sources
                .error(
                    "a pipeline file must hold one `Pipeline(…)`",
                    tree.span,
                    format!("found {}", other.describe()),
                )
                .with_help("write `Pipeline(params: { … }, stages: { \"name\": Stage(…), … })`"))
        }
    };
    let mut params = Vec::new();
    let mut stages = Vec::new();
    let mut saw_stages = false;
    for (field, value) in fields {
        match field.name.as_str() {
            "params" => {
                let Kind::Map(entries) = &value.kind else {
                    return Err(sources
                        .error(
                            "`params` must be a map",
                            value.span,
                            format!("found {}", value.kind.describe()),
                        )
                        .with_help("write `params: { \"samples\": 2000 }`"));
                };
                for (k, v) in entries {
                    let name = key_name(sources, k, "a param name")?;
                    if value_of(v).is_none() {
                        return Err(sources.error(
                            format!("param `{name}` must be a number, string, bool or list"),
                            v.span,
                            format!("found {}", v.kind.describe()),
                        ));
                    }
                    params.push(Param {
                        name,
                        node: v.clone(),
                    });
                }
            }
            "stages" => {
                saw_stages = true;
                let Kind::Map(entries) = &value.kind else {
                    return Err(sources.error(
                        "`stages` must be a map of stage names to `Stage(…)`",
                        value.span,
                        format!("found {}", value.kind.describe()),
                    ));
                };
                for (k, v) in entries {
                    let name = key_name(sources, k, "a stage name")?;
                    if let Some(help) = bad_stage_name(&name) {
                        return Err(sources
                            .error(
                                format!("invalid stage name `{name}`"),
                                k.span,
                                "invalid name",
                            )
                            .with_help(help));
                    }
                    stages.push(read_stage(sources, Ident { name, span: k.span }, v, file)?);
                }
            }
            _ => return Err(unknown_field(sources, field, PIPELINE_FIELDS, "`Pipeline`")),
        }
    }
    if !saw_stages {
        return Err(sources
            .error(
                "missing field `stages`",
                tree.span,
                "this pipeline has no stages",
            )
            .with_help("add `stages: { \"name\": Stage(task: Command(run: \"…\")) }`"));
    }
    Ok((params, stages))
}

fn string_of(sources: &Sources, node: &Node, what: &str) -> Result<Ident, PipelineError> {
    match &node.kind {
        Kind::Str { value, .. } => Ok(Ident {
            name: value.clone(),
            span: node.span,
        }),
        other => Err(sources.error(
            format!("{what} must be a stage name in quotes"),
            node.span,
            format!("found {}", other.describe()),
        )),
    }
}

/// Why `name` cannot name a stage (it names folders under `out/` and
/// `cache/logs/`), or None.
fn bad_stage_name(name: &str) -> Option<String> {
    let charset = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if name.is_empty() || !name.chars().all(charset) {
        Some("use letters, digits, `_`, `-` and `.` only".into())
    } else if name.chars().all(|c| c == '.') {
        Some("a stage name needs a letter, digit, `_` or `-`: `.` and `..` name folders".into())
    } else if name.len() > crate::graph::MAX_DIR_NAME {
        Some(format!(
            "a stage name is a folder name: use at most {} bytes (this one has {})",
            crate::graph::MAX_DIR_NAME,
            name.len()
        ))
    } else {
        None
    }
}

fn read_stage(
    sources: &Sources,
    name: Ident,
    node: &Node,
    file: usize,
) -> Result<StageDecl, PipelineError> {
    let fields = match &node.kind {
        Kind::Struct { name: n, fields } if n.as_ref().is_none_or(|n| n.name == "Stage") => fields,
        other => {
            return Err(sources
                .error(
                    format!("stage `{}` must be a `Stage(…)`", name.name),
                    node.span,
                    format!("found {}", other.describe()),
                )
                .with_help("write `\"name\": Stage(task: Command(run: \"…\", outputs: [\"…\"]))`"))
        }
    };
    let mut stage = StageDecl {
        name,
        file,
        axes: Vec::new(),
        matrix_span: None,
        files: None,
        exclude: Vec::new(),
        include: Vec::new(),
        for_each: None,
        needs: Vec::new(),
        task: Node {
            kind: Kind::Tuple {
                name: None,
                items: vec![],
            },
            span: node.span,
        },
        slurm: None,
        placement: None,
    };
    let mut saw_task = false;
    for (field, value) in fields {
        match field.name.as_str() {
            "matrix" => {
                let Kind::Map(entries) = &value.kind else {
                    return Err(sources
                        .error(
                            "`matrix` must be a map of axis names to lists",
                            value.span,
                            format!("found {}", value.kind.describe()),
                        )
                        .with_help("write `matrix: { \"res\": [224, 512] }`"));
                };
                if entries.is_empty() {
                    return Err(sources
                        .error("`matrix` has no axes", value.span, "empty matrix")
                        .with_help("add an axis, or remove `matrix`"));
                }
                stage.matrix_span = Some(value.span);
                for (k, v) in entries {
                    let axis = key_name(sources, k, "a matrix axis name")?;
                    let values = match &v.kind {
                        Kind::List(items) => items.clone(),
                        // `"${models}"`: the axis takes a list param's values (resolved later).
                        Kind::Str { value: s, .. } if s.starts_with("${") && s.ends_with('}') => {
                            vec![v.clone()]
                        }
                        other => {
                            return Err(sources
                                .error(
                                    format!("matrix axis `{axis}` must be a list of values"),
                                    v.span,
                                    format!("found {}", other.describe()),
                                )
                                .with_help(format!("write `\"{axis}\": [a, b, c]`")))
                        }
                    };
                    for item in &values {
                        if !matches!(
                            item.kind,
                            Kind::Bool(_)
                                | Kind::Int(_)
                                | Kind::Float(_)
                                | Kind::Str { .. }
                                | Kind::Unit(_)
                        ) {
                            return Err(sources.error(format!("values of matrix axis `{axis}` must be numbers, strings or bools"), item.span, format!("found {}", item.kind.describe())));
                        }
                    }
                    if stage.axes.iter().any(|a| a.name == axis) {
                        return Err(sources.error(
                            format!("matrix axis `{axis}` is declared twice"),
                            k.span,
                            "second declaration",
                        ));
                    }
                    stage.axes.push(Axis {
                        name: axis,
                        key: k.clone(),
                        values,
                        overridden: false,
                    });
                }
            }
            "exclude" | "include" => {
                let Kind::List(items) = &value.kind else {
                    return Err(sources
                        .error(
                            format!("`{}` must be a list of maps", field.name),
                            value.span,
                            format!("found {}", value.kind.describe()),
                        )
                        .with_help(format!("write `{}: [ {{\"axis\": value}} ]`", field.name)));
                };
                if field.name == "exclude" {
                    stage.exclude = items.clone();
                } else {
                    stage.include = items.clone();
                }
            }
            "files" => stage.files = Some(value.clone()),
            "for_each" => stage.for_each = Some(string_of(sources, value, "`for_each`")?),
            "needs" => {
                let Kind::List(items) = &value.kind else {
                    return Err(sources
                        .error(
                            "`needs` must be a list of stage names",
                            value.span,
                            format!("found {}", value.kind.describe()),
                        )
                        .with_help("write `needs: [\"stage_a\", \"stage_b\"]`"));
                };
                for item in items {
                    stage
                        .needs
                        .push(string_of(sources, item, "each entry of `needs`")?);
                }
            }
            "task" => {
                saw_task = true;
                stage.task = value.clone();
            }
            "description" => {}
            "slurm" => stage.slurm = Some(value.clone()),
            "placement" => stage.placement = Some(value.clone()),
            _ => return Err(unknown_field(sources, field, STAGE_FIELDS, "`Stage`")),
        }
    }
    if !saw_task {
        return Err(sources
            .error(
                format!("stage `{}` has no `task`", stage.name.name),
                node.span,
                "missing `task`",
            )
            .with_help("add `task: Command(run: \"…\", outputs: [\"…\"])`"));
    }
    if let Some(files) = &stage.files {
        let other = [
            ("matrix", stage.matrix_span),
            ("include", stage.include.first().map(|n| n.span)),
            ("for_each", stage.for_each.as_ref().map(|f| f.span)),
        ];
        if let Some((what, Some(span))) = other.into_iter().find(|(_, s)| s.is_some()) {
            return Err(sources
                .error(
                    format!("stage `{}` has both `files` and `{what}`", stage.name.name),
                    span,
                    format!("`{what}` here"),
                )
                .with_label(files.span, "`files` here")
                .with_help(format!(
                    "a `files` stage makes one node per file; put the `{what}` on a stage that reads it with `for_each: \"{}\"`",
                    stage.name.name
                )));
        }
    }
    if !stage.exclude.is_empty() && stage.axes.is_empty() && stage.files.is_none() {
        return Err(sources
            .error(
                "`exclude` without a `matrix`",
                stage.exclude[0].span,
                "nothing to exclude from",
            )
            .with_help("add a `matrix` or `files`, or remove `exclude`"));
    }
    Ok(stage)
}

fn check_duplicates(sources: &Sources, stages: &[StageDecl]) -> Result<(), PipelineError> {
    let mut seen: HashMap<&str, &StageDecl> = HashMap::new();
    for s in stages {
        if let Some(first) = seen.get(s.name.name.as_str()) {
            let second = sources
                .error(
                    format!("stage `{}` is defined twice", s.name.name),
                    s.name.span,
                    "defined again here",
                )
                .with_help("stage names are global across pipeline files: rename one of them");
            let first_err = sources.error(
                format!("first definition of `{}`", s.name.name),
                first.name.span,
                "first defined here",
            );
            return Err(second.with_related(first_err));
        }
        seen.insert(&s.name.name, s);
    }
    Ok(())
}

fn apply_overrides(
    sources: &mut Sources,
    decls: &mut [FileDecl],
    stages: &mut [StageDecl],
    overrides: &[Override],
) -> Result<(), PipelineError> {
    for o in overrides {
        let text = format!("{}={}", o.key, o.value);
        let src = sources.add(format!("-p {text}"), text.clone());
        let value_start = o.key.len() + 1;
        let parsed = syntax::parse(src, &sources.text(src)[value_start..])
            .ok()
            .map(|mut n| {
                shift(&mut n, value_start as u32);
                n
            });
        let span = Span {
            src,
            start: value_start as u32,
            end: sources.text(src).len() as u32,
        };
        let node = match parsed {
            Some(n) if value_of(&n).is_some() && !matches!(n.kind, Kind::Unit(_)) => n,
            _ => bare_value(&o.value, span),
        };
        let mut hit = false;
        for d in decls.iter_mut() {
            for p in d.params.iter_mut().filter(|p| p.name == o.key) {
                p.node = node.clone();
                hit = true;
            }
        }
        for s in stages.iter_mut() {
            for a in s.axes.iter_mut().filter(|a| a.name == o.key) {
                a.overridden = true;
                a.values = match &node.kind {
                    Kind::List(items) => items.clone(),
                    _ => vec![node.clone()],
                };
                hit = true;
            }
        }
        if !hit {
            let names: Vec<&str> = decls
                .iter()
                .flat_map(|d| d.params.iter().map(|p| p.name.as_str()))
                .chain(
                    stages
                        .iter()
                        .flat_map(|s| s.axes.iter().map(|a| a.name.as_str())),
                )
                .collect();
            let help = match did_you_mean(&o.key, names.iter().copied()) {
                Some(s) => format!("did you mean `-p {s}=…`?"),
                None => "`-p` sets a param declared under `params` or a matrix axis; `vitgraph ls` shows each node's params".into(),
            };
            return Err(sources
                .error(
                    format!(
                        "`-p {}` sets no param: no pipeline declares `{}`",
                        text, o.key
                    ),
                    Span {
                        src,
                        start: 0,
                        end: o.key.len() as u32,
                    },
                    "unknown param",
                )
                .with_help(help));
        }
    }
    // A matrix axis written as `"${list_param}"` takes that param's values.
    for s in stages.iter_mut() {
        let params = &decls[s.file].params;
        for a in s.axes.iter_mut() {
            if let [Node {
                kind: Kind::Str { value, .. },
                span,
            }] = a.values.as_slice()
            {
                if let Some(name) = value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
                    let Some(p) = params.iter().find(|p| p.name == name) else {
                        return Err(sources
                            .error(format!("unknown `${{{name}}}`"), *span, "no such param")
                            .with_help("declare it under `params` as a list"));
                    };
                    a.values = match &p.node.kind {
                        Kind::List(items) => items.clone(),
                        _ => vec![p.node.clone()],
                    };
                }
            }
        }
    }
    Ok(())
}

/// A `-p` value that is not RON: a bracketed list of bare words
/// (`[vit32x6x384,async:2]`) becomes a list whose items are numbers or
/// booleans where they read as such and strings otherwise; anything else is
/// one string.
fn bare_value(text: &str, span: Span) -> Node {
    let scalar = |item: &str| {
        let item = item.trim();
        let kind = if let Ok(i) = item.parse::<i64>() {
            Kind::Int(i)
        } else if let Ok(x) = item.parse::<f64>() {
            Kind::Float(x)
        } else if let Ok(b) = item.parse::<bool>() {
            Kind::Bool(b)
        } else {
            let unquoted = item
                .strip_prefix('"')
                .and_then(|i| i.strip_suffix('"'))
                .unwrap_or(item);
            Kind::Str {
                value: unquoted.to_owned(),
                raw_offset: 0,
                escaped: true,
            }
        };
        Node { kind, span }
    };
    match text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
    {
        Some(inner) if inner.trim().is_empty() => Node {
            kind: Kind::List(Vec::new()),
            span,
        },
        Some(inner) => Node {
            kind: Kind::List(inner.split(',').map(scalar).collect()),
            span,
        },
        None => Node {
            kind: Kind::Str {
                value: text.to_owned(),
                raw_offset: 0,
                escaped: true,
            },
            span,
        },
    }
}

fn shift(node: &mut Node, by: u32) {
    node.span.start += by;
    node.span.end += by;
    if let Kind::List(items) = &mut node.kind {
        items.iter_mut().for_each(|n| shift(n, by));
    }
}

/// Stages in dependency order; unknown references and cycles are errors.
fn stage_order(sources: &Sources, stages: &[StageDecl]) -> Result<Vec<usize>, PipelineError> {
    let index: HashMap<&str, usize> = stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.name.as_str(), i))
        .collect();
    let mut deps: Vec<Vec<(usize, Span)>> = Vec::with_capacity(stages.len());
    for s in stages {
        let mut d = Vec::new();
        for up in s.upstream() {
            match index.get(up.name.as_str()) {
                Some(&i) => d.push((i, up.span)),
                None => {
                    let help =
                        match did_you_mean(&up.name, stages.iter().map(|s| s.name.name.as_str())) {
                            Some(x) => format!("did you mean `{x}`?"),
                            None => {
                                "stage names are the keys of `stages` in any pipeline file".into()
                            }
                        };
                    return Err(sources
                        .error(
                            format!("unknown stage `{}`", up.name),
                            up.span,
                            "no stage has this name",
                        )
                        .with_help(help));
                }
            }
        }
        deps.push(d);
    }
    // Kahn's algorithm, keeping declaration order among ready stages.
    let mut remaining: Vec<usize> = deps.iter().map(|d| d.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); stages.len()];
    for (i, d) in deps.iter().enumerate() {
        for &(j, _) in d {
            dependents[j].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..stages.len()).filter(|&i| remaining[i] == 0).collect();
    let mut order = Vec::with_capacity(stages.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &k in &dependents[i] {
            remaining[k] -= 1;
            if remaining[k] == 0 {
                ready.insert(k);
            }
        }
    }
    if order.len() == stages.len() {
        return Ok(order);
    }
    Err(cycle_error(sources, stages, &deps, &remaining))
}

fn cycle_error(
    sources: &Sources,
    stages: &[StageDecl],
    deps: &[Vec<(usize, Span)>],
    remaining: &[usize],
) -> PipelineError {
    // Walk from a stage left in the cycle until a stage repeats.
    let start = (0..stages.len()).find(|&i| remaining[i] > 0).unwrap_or(0);
    let mut path = vec![start];
    let mut cur = start;
    while let Some(&(next, _)) = deps[cur].iter().find(|(j, _)| remaining[*j] > 0) {
        if let Some(pos) = path.iter().position(|&p| p == next) {
            path.drain(..pos);
            break;
        }
        path.push(next);
        cur = next;
    }
    let names: Vec<&str> = path.iter().map(|&i| stages[i].name.name.as_str()).collect();
    let chain = names
        .iter()
        .chain(names.first())
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" → ");
    let mut errors = Vec::new();
    for (k, &i) in path.iter().enumerate() {
        let next = path[(k + 1) % path.len()];
        let span = deps[i]
            .iter()
            .find(|(j, _)| *j == next)
            .map(|(_, s)| *s)
            .unwrap_or(stages[i].name.span);
        errors.push(sources.error(
            format!(
                "`{}` depends on `{}`",
                stages[i].name.name, stages[next].name.name
            ),
            span,
            format!(
                "`{}` needs `{}`",
                stages[i].name.name, stages[next].name.name
            ),
        ));
    }
    let mut first = errors.remove(0);
    first.message = format!("dependency cycle: {chain}");
    first = first.with_help(
        "a stage cannot depend on itself, directly or through others: remove one of these edges",
    );
    // Labels in the same file go on the main error; other files become related errors.
    for e in errors {
        first = first.with_related(e);
    }
    first
}

fn expand_nodes(
    root: &Path,
    sources: &Sources,
    decls: &[FileDecl],
    stages: &[StageDecl],
    order: &[usize],
) -> Result<Graph, PipelineError> {
    let mut nodes: Vec<crate::graph::Node> = Vec::new();
    let mut node_id_params: Vec<Vec<Param>> = Vec::new();
    let mut stage_nodes: HashMap<&str, Vec<NodeIdx>> = HashMap::new();
    let mut graph_stages = Vec::with_capacity(stages.len());
    let mut listings = Vec::new();
    let mut warnings = Vec::new();
    for &si in order {
        let s = &stages[si];
        let file = &decls[s.file];
        // A `files:` stage's combinations come from the workspace, each with its file.
        let (combos, files_of): (Vec<expand::Combo>, Vec<Option<String>>) = match &s.files {
            Some(pattern) => {
                let names: Vec<&str> = file.params.iter().map(|p| p.name.as_str()).collect();
                let found =
                    super::files::expand(root, sources, &s.name.name, pattern, &s.exclude, &names)?;
                listings.extend(found.listings);
                warnings.extend(found.warning);
                found.combos.into_iter().map(|(c, f)| (c, Some(f))).unzip()
            }
            None => {
                let combos = expand::expand(
                    sources,
                    &s.name.name,
                    &s.axes,
                    &s.exclude,
                    &s.include,
                    s.matrix_span,
                )?;
                let none = vec![None; combos.len()];
                (combos, none)
            }
        };
        let needs_names: Vec<String> = s.upstream().map(|u| u.name.clone()).collect();
        let mut needs_all: Vec<Need> = Vec::new();
        for n in &s.needs {
            let mut ids = stage_nodes[n.name.as_str()].clone();
            ids.sort_by(|a, b| nodes[*a].id.cmp(&nodes[*b].id));
            needs_all.push(Need {
                stage: n.name.clone(),
                nodes: ids,
            });
        }
        let upstream: Vec<Option<NodeIdx>> = match &s.for_each {
            Some(u) => stage_nodes[u.name.as_str()]
                .iter()
                .map(|&i| Some(i))
                .collect(),
            None => vec![None],
        };
        let task_has_vars = reads_params(
            &sources.text(s.task.span.src)[s.task.span.start as usize..s.task.span.end as usize],
        );
        // Each combination's id, parameters and task are independent of the
        // others: work them out in parallel, then check and number them in
        // order (so the first error is the same as a serial pass would find).
        let pairs: Vec<(Option<NodeIdx>, &Vec<Param>, Option<&String>)> = upstream
            .iter()
            .flat_map(|up| {
                combos
                    .iter()
                    .zip(&files_of)
                    .map(move |(combo, f)| (*up, combo, f.as_ref()))
            })
            .collect();
        // A task that names no param reads the same for every node: once. (Its
        // error is the one a serial pass would meet first: at the first
        // node, which cannot be a duplicate.)
        let shared_task: Option<TaskSpec> = if !task_has_vars && !pairs.is_empty() {
            let scope = Scope {
                params: &file.params,
                needs: &needs_names,
            };
            Some(task_of(sources, s, &scope)?)
        } else {
            None
        };
        let expand_one =
            |&(up, combo, matched): &(Option<NodeIdx>, &Vec<Param>, Option<&String>)| {
                let mut id_params: Vec<Param> =
                    up.map(|u| node_id_params[u].clone()).unwrap_or_default();
                for p in combo {
                    overlay(&mut id_params, p.clone());
                }
                let mut params = file.params.clone();
                for p in &id_params {
                    overlay(&mut params, p.clone());
                }
                if let (Some(rel), Some(pattern)) = (matched, &s.files) {
                    overlay(
                        &mut params,
                        Param {
                            name: "file".into(),
                            node: Node {
                                kind: Kind::Str {
                                    value: rel.clone(),
                                    raw_offset: 0,
                                    escaped: true,
                                },
                                span: pattern.span,
                            },
                        },
                    );
                }
                let id_values: Vec<(String, crate::value::Value)> = id_params
                    .iter()
                    .map(|p| {
                        (
                            p.name.clone(),
                            value_of(&p.node).unwrap_or(crate::value::Value::Str(String::new())),
                        )
                    })
                    .collect();
                let id = node_id(&s.name.name, &id_values);
                let task = match &shared_task {
                    Some(t) => Ok(t.clone()),
                    None => {
                        let scope = Scope {
                            params: &params,
                            needs: &needs_names,
                        };
                        task_of(sources, s, &scope)
                    }
                };
                let values: Vec<(String, crate::value::Value)> = params
                    .iter()
                    .filter_map(|p| value_of(&p.node).map(|v| (p.name.clone(), v)))
                    .collect();
                (id, id_params, id_values, values, task)
            };
        let expanded: Vec<_> = if pairs.len() >= PARALLEL_EXPANSION {
            use rayon::prelude::*;
            pairs.par_iter().map(expand_one).collect()
        } else {
            pairs.iter().map(expand_one).collect()
        };
        let mut mine = Vec::with_capacity(pairs.len());
        let mut seen_ids: HashMap<String, (Span, Option<&String>)> = HashMap::new();
        for ((up, combo, matched), (id, id_params, id_values, values, task)) in
            pairs.iter().zip(expanded)
        {
            let at = combo.last().map(|p| p.node.span).unwrap_or(s.name.span);
            if let Some((prev, prev_file)) = seen_ids.insert(id.clone(), (at, *matched)) {
                if let (Some(a), Some(b), Some(pattern)) = (prev_file, matched, &s.files) {
                    return Err(sources
                        .error(
                            format!("files `{a}` and `{b}` both give node `{id}`"),
                            pattern.span,
                            "the captures do not tell them apart",
                        )
                        .with_help("capture the part of the path that differs (e.g. `{run}/…` for the folder), or `exclude` one of them"));
                }
                let inherited = up.map(|u| node_id_params[u].as_slice());
                return Err(duplicate_node(
                    sources,
                    s,
                    &id,
                    (at, prev),
                    inherited,
                    combo,
                ));
            }
            let task = task?;
            let mut needs = needs_all.clone();
            if let (Some(u), Some(fe)) = (up, &s.for_each) {
                needs.insert(
                    0,
                    Need {
                        stage: fe.name.clone(),
                        nodes: vec![*u],
                    },
                );
            }
            mine.push(nodes.len());
            nodes.push(crate::graph::Node {
                id,
                stage: s.name.name.clone(),
                id_params: id_values,
                params: values,
                task,
                needs,
                file: matched.cloned(),
            });
            node_id_params.push(id_params);
        }
        stage_nodes.insert(&s.name.name, mine.clone());
        let scope = Scope {
            params: &file.params,
            needs: &needs_names,
        };
        let (slurm, placement) = cluster_of(sources, s, &scope)?;
        graph_stages.push(crate::graph::Stage {
            name: s.name.name.clone(),
            file: file.rel.clone(),
            pipeline: file.stem.clone(),
            nodes: mine,
            slurm,
            placement,
        });
    }
    let mut graph = Graph::new(nodes, graph_stages);
    graph.listings = listings;
    graph.warnings = warnings;
    Ok(graph)
}

/// Whether a task's source text may name a param: a `${name}` other than
/// the run-time `${out}` and `${needs.S}` (`$$` is a literal `$`). A task
/// that names none reads the same for every node of its stage. Escapes
/// (`\u{24}` is a `$`) are not decoded here, so text with any counts as
/// naming one.
fn reads_params(text: &str) -> bool {
    if text.contains("\\u") {
        return true;
    }
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            rest = r;
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            rest = after;
            continue;
        };
        let Some(close) = body.find('}') else {
            return true;
        };
        let name = &body[..close];
        if name != "out" && !name.starts_with("needs.") {
            return true;
        }
        rest = &body[close + 1..];
    }
    false
}

/// From this many nodes in a stage, their expansion runs in parallel.
const PARALLEL_EXPANSION: usize = 256;

/// A stage's task read with `scope`, and checked.
fn task_of(sources: &Sources, s: &StageDecl, scope: &Scope<'_>) -> Result<TaskSpec, PipelineError> {
    let t: TaskSpec = de::from_node(&s.task, scope).map_err(|e| sources.de_error(e))?;
    t.validate().map_err(|msg| {
        sources
            .error(msg.message, s.task.span, "in this task")
            .with_help(msg.help)
    })?;
    Ok(t)
}

/// A stage's `slurm: (…)` and `placement:`, read with the pipeline's params.
fn cluster_of(
    sources: &Sources,
    s: &StageDecl,
    scope: &Scope<'_>,
) -> Result<(crate::config::Slurm, Option<crate::config::Placement>), PipelineError> {
    let slurm = match &s.slurm {
        Some(node) => {
            let slurm = de::from_node(node, scope).map_err(|e| sources.de_error(e))?;
            super::settings::check_slurm(sources, &slurm, node)?;
            slurm
        }
        None => Default::default(),
    };
    let placement = match &s.placement {
        Some(node) => Some(de::from_node(node, scope).map_err(|e| sources.de_error(e))?),
        None => None,
    };
    Ok((slurm, placement))
}

/// Two combinations of one stage with the same id: say why.
fn duplicate_node(
    sources: &Sources,
    s: &StageDecl,
    id: &str,
    (at, prev): (Span, Span),
    inherited: Option<&[Param]>,
    combo: &[Param],
) -> PipelineError {
    // A matrix axis or include key named like a param inherited through
    // `for_each` replaces it, so every upstream node yields the same id.
    let shadowed = inherited
        .into_iter()
        .flatten()
        .find_map(|p| combo.iter().find(|c| c.name == p.name));
    if let (Some(c), Some(fe)) = (shadowed, &s.for_each) {
        return sources
            .error(
                format!(
                    "node `{id}` is produced twice: stage `{}` sets `{}`, which its nodes inherit from `{}`",
                    s.name.name, c.name, fe.name
                ),
                c.node.span,
                format!("replaces the inherited `{}`", c.name),
            )
            .with_help(format!(
                "give this axis another name: each node of `{}` already carries its own `{}`",
                fe.name, c.name
            ));
    }
    sources
        .error(
            format!("node `{id}` is produced twice"),
            at,
            "duplicate combination",
        )
        .with_label(prev, "first produced here")
        .with_help("two matrix combinations (or include entries) are identical: remove one")
}

fn overlay(params: &mut Vec<Param>, p: Param) {
    match params.iter_mut().find(|q| q.name == p.name) {
        Some(q) => *q = p,
        None => params.push(p),
    }
}

/// `stage` or `stage[k1=v1,k2=v2]`.
pub fn node_id(stage: &str, params: &[(String, crate::value::Value)]) -> String {
    if params.is_empty() {
        return stage.to_string();
    }
    let inner = params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    format!("{stage}[{inner}]")
}

#[cfg(test)]
mod tests {
    use super::reads_params;

    #[test]
    fn only_param_references_make_a_task_per_node() {
        for text in [
            r#"Command(run: "cat ${needs.exp}/run.txt > ${out}/t.txt")"#,
            r#"Command(run: "echo $$HOME $1 > ${out}/x")"#,
            r#"Command(run: "ls out/ana | wc -l")"#,
        ] {
            assert!(!reads_params(text), "{text}");
        }
        for text in [
            r#"Command(run: "cat inputs/${i}.txt > ${out}/run.txt")"#,
            r#"Command(run: "echo ${needs.exp} ${res}")"#,
            r#"Command(run: "echo ${unclosed")"#,
            r#"Command(run: "echo \u{24}{i}")"#,
            r#"Command(run: "echo $${i} ${i}")"#,
        ] {
            assert!(reads_params(text), "{text}");
        }
    }
}
