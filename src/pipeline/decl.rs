//! The declarations of a pipeline file, read from its syntax tree: the
//! file's params and its stages. A stage's keys are read through a table
//! ([`STAGE`]): a new key costs one row and one small reader.

use std::collections::HashMap;
use std::path::PathBuf;

use super::de::Param;
use super::expand::Axis;
use super::syntax::{Ident, Kind, Node, Span};
use super::{did_you_mean, value_of, PipelineError, Sources};

const PIPELINE_FIELDS: &[&str] = &["title", "description", "params", "stages"];

/// A pipeline file: where it is, the target naming all its stages, its params.
pub(super) struct FileDecl {
    pub rel: PathBuf,
    pub stem: String,
    pub params: Vec<Param>,
    /// `Pipeline(title: …, description: …)`: what the file's study is.
    pub about: About,
}

/// A pipeline's `title` and `description`, or a stage's `description`.
#[derive(Debug, Clone, Default)]
pub(super) struct About {
    pub title: Option<String>,
    pub description: Option<String>,
}

/// A stage as declared.
pub(super) struct StageDecl {
    pub name: Ident,
    pub file: usize,
    pub axes: Vec<Axis>,
    pub matrix_span: Option<Span>,
    /// `files: "PATTERN"`: one node per matching workspace file.
    pub files: Option<Node>,
    /// `hydra: "MULTIRUN"`: one node per job (`files` walks their overrides).
    pub hydra: Option<Node>,
    pub exclude: Vec<Node>,
    pub include: Vec<Node>,
    pub for_each: Option<Ident>,
    pub needs: Vec<Ident>,
    /// `task: …` (always set once a stage is read).
    pub task: Option<Node>,
    /// `slurm: (…)`: this stage's cluster settings.
    pub slurm: Option<Node>,
    /// `placement: Local | Cluster`.
    pub placement: Option<Node>,
    /// `isolation: Host | Gpu`.
    pub isolation: Option<Node>,
    /// `repeat: N`: each combination measured in N processes.
    pub repeat: Option<Node>,
    /// `precision: (metric: …, ci_rel: …)`: more repetitions while imprecise.
    pub precision: Option<Node>,
    /// `together: ["axis", …]`: these matrix axes are measured in one
    /// process, one node per combination of the other params.
    pub together: Option<Node>,
    /// `check: true`: a together block also measures its first member a
    /// second time (the A/A self-check).
    pub check: Option<Node>,
    /// `description: "…"`: what the stage is, for people.
    pub description: Option<String>,
}

impl StageDecl {
    pub(super) fn upstream(&self) -> impl Iterator<Item = &Ident> {
        self.for_each.iter().chain(self.needs.iter())
    }

    /// The stage's task (read: checked present).
    pub(super) fn task(&self) -> &Node {
        self.task.as_ref().expect("a read stage has a task")
    }
}

/// Reads one key of a stage into its declaration.
type Reader = fn(&Sources, &Ident, &Node, &mut StageDecl) -> Result<(), PipelineError>;

/// Every key a `Stage(…)` takes, with its reader.
const STAGE: &[(&str, Reader)] = &[
    ("matrix", read_matrix),
    ("files", read_source),
    ("hydra", read_source),
    ("exclude", read_filter),
    ("include", read_filter),
    ("for_each", read_for_each),
    ("needs", read_needs),
    ("task", read_task),
    ("description", read_description),
    ("slurm", read_slurm),
    ("placement", read_placement),
    ("isolation", read_isolation),
    ("repeat", read_repeat),
    ("precision", read_precision),
    ("together", read_together),
    ("check", read_check),
];

pub(super) fn read_file(
    sources: &Sources,
    tree: &Node,
    file: usize,
) -> Result<(Vec<Param>, Vec<StageDecl>, About), PipelineError> {
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
    let mut about = About::default();
    let mut saw_stages = false;
    for (field, value) in fields {
        match field.name.as_str() {
            "title" => about.title = Some(text_of(sources, value, "`title`")?),
            "description" => about.description = Some(text_of(sources, value, "`description`")?),
            "params" => params.extend(read_params(sources, value)?),
            "stages" => {
                saw_stages = true;
                stages.extend(read_stages(sources, value, file)?);
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
    Ok((params, stages, about))
}

/// A `title` or `description`: text in quotes.
fn text_of(sources: &Sources, node: &Node, what: &str) -> Result<String, PipelineError> {
    match &node.kind {
        Kind::Str { value, .. } => Ok(value.clone()),
        other => Err(sources
            .error(
                format!("{what} must be text in quotes"),
                node.span,
                format!("found {}", other.describe()),
            )
            .with_help(format!("write {what}: \"…\"").replace('`', ""))),
    }
}

/// `params: { "name": value, … }`.
fn read_params(sources: &Sources, value: &Node) -> Result<Vec<Param>, PipelineError> {
    let Kind::Map(entries) = &value.kind else {
        return Err(sources
            .error(
                "`params` must be a map",
                value.span,
                format!("found {}", value.kind.describe()),
            )
            .with_help("write `params: { \"samples\": 2000 }`"));
    };
    let mut params = Vec::with_capacity(entries.len());
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
    Ok(params)
}

/// `stages: { "name": Stage(…), … }`.
fn read_stages(
    sources: &Sources,
    value: &Node,
    file: usize,
) -> Result<Vec<StageDecl>, PipelineError> {
    let Kind::Map(entries) = &value.kind else {
        return Err(sources.error(
            "`stages` must be a map of stage names to `Stage(…)`",
            value.span,
            format!("found {}", value.kind.describe()),
        ));
    };
    let mut stages = Vec::with_capacity(entries.len());
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
    Ok(stages)
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
        hydra: None,
        exclude: Vec::new(),
        include: Vec::new(),
        for_each: None,
        needs: Vec::new(),
        task: None,
        slurm: None,
        placement: None,
        isolation: None,
        repeat: None,
        precision: None,
        together: None,
        check: None,
        description: None,
    };
    for (field, value) in fields {
        match STAGE.iter().find(|(key, _)| *key == field.name) {
            Some((_, read)) => read(sources, field, value, &mut stage)?,
            None => {
                let keys: Vec<&str> = STAGE.iter().map(|(k, _)| *k).collect();
                return Err(unknown_field(sources, field, &keys, "`Stage`"));
            }
        }
    }
    check_stage(sources, node, &stage)?;
    Ok(stage)
}

/// What a stage's keys must agree on.
fn check_stage(sources: &Sources, node: &Node, stage: &StageDecl) -> Result<(), PipelineError> {
    if stage.task.is_none() {
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
    Ok(())
}

/// `matrix: { "axis": [values], … }`.
fn read_matrix(
    sources: &Sources,
    _field: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
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
        let values = axis_values(sources, &axis, v)?;
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
    Ok(())
}

/// An axis's values: a list of scalars, or `"${list_param}"` (resolved later).
fn axis_values(sources: &Sources, axis: &str, v: &Node) -> Result<Vec<Node>, PipelineError> {
    let values = match &v.kind {
        Kind::List(items) => items.clone(),
        Kind::Str { value: s, .. } if s.starts_with("${") && s.ends_with('}') => vec![v.clone()],
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
            Kind::Bool(_) | Kind::Int(_) | Kind::Float(_) | Kind::Str { .. } | Kind::Unit(_)
        ) {
            return Err(sources.error(
                format!("values of matrix axis `{axis}` must be numbers, strings or bools"),
                item.span,
                format!("found {}", item.kind.describe()),
            ));
        }
    }
    Ok(values)
}

/// `exclude: [ {…} ]` and `include: [ {…} ]`.
fn read_filter(
    sources: &Sources,
    field: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
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
    Ok(())
}

/// `files: "PATTERN"` or `hydra: "MULTIRUN"` (see `hydra_runs`).
fn read_source(
    sources: &Sources,
    key: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
    let slots = (&mut stage.files, &mut stage.hydra);
    super::hydra_runs::read(sources, &key.name, value, &stage.name.name, slots)
}

fn read_for_each(
    sources: &Sources,
    _: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
    stage.for_each = Some(string_of(sources, value, "`for_each`")?);
    Ok(())
}

/// `needs: ["stage", …]`.
fn read_needs(
    sources: &Sources,
    _: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
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
    Ok(())
}

/// `description: "…"`: for people (and the study page); nothing to keep here.
fn read_description(
    sources: &Sources,
    _: &Ident,
    value: &Node,
    stage: &mut StageDecl,
) -> Result<(), PipelineError> {
    stage.description = Some(text_of(sources, value, "`description`")?);
    Ok(())
}

/// Keys whose value is read with the file's params when the stage expands:
/// the node is kept as written.
macro_rules! keep_node {
    ($($(#[$doc:meta])* $name:ident => $field:ident;)*) => {$(
        $(#[$doc])*
        fn $name(
            _: &Sources,
            _: &Ident,
            value: &Node,
            stage: &mut StageDecl,
        ) -> Result<(), PipelineError> {
            stage.$field = Some(value.clone());
            Ok(())
        }
    )*};
}

keep_node! {
    read_task => task;
    read_slurm => slurm;
    read_placement => placement;
    read_isolation => isolation;
    /// `repeat: N` (a number, or `"${param}"`): read with the params when the
    /// stage expands.
    read_repeat => repeat;
    /// `precision: (…)`: read with the params when the stage expands.
    read_precision => precision;
    /// `together: ["axis", …]`: checked against the matrix when the stage
    /// expands (see `together`).
    read_together => together;
    /// `check: true`: checked with `together` when the stage expands.
    read_check => check;
}

pub(super) fn check_duplicates(
    sources: &Sources,
    stages: &[StageDecl],
) -> Result<(), PipelineError> {
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
