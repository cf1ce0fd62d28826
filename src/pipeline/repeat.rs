//! A stage's repetitions: `repeat: N` and `precision: (…)` read and
//! checked, and each combination multiplied into its repetitions (the
//! param `rep`, 1 to N).

use super::de::{self, Param, Scope};
use super::decl::StageDecl;
use super::expand;
use super::syntax::{Kind, Node, Span};
use super::{PipelineError, Sources};
use crate::graph::{Precision, REP_PARAM};
use crate::tasks::TaskSpec;

/// The repetitions every configuration of a stage with `precision` but
/// no `repeat` gets before the target is judged.
pub(super) const DEFAULT_PRECISE_REPEAT: u32 = 3;

/// The stage's `precision`, read with the file's params and checked
/// (against `repeat`, its fewest repetitions).
pub(super) fn precision_of<'s>(
    sources: &Sources,
    s: &'s StageDecl,
    scope: &Scope<'_>,
    repeat: Option<u32>,
) -> Result<Option<(Precision, &'s Node)>, PipelineError> {
    let Some(node) = &s.precision else {
        return Ok(None);
    };
    let p: Precision = de::from_node(node, scope).map_err(|e| sources.de_error(e))?;
    let least = repeat.unwrap_or(DEFAULT_PRECISE_REPEAT);
    let problem = if p.metric.trim().is_empty() {
        Some((
            "`precision.metric` is empty".to_owned(),
            "name a number of each repetition's `results.json` by its dotted path, e.g. `metric: \"latency_ms.median\"`".to_owned(),
        ))
    } else if !(p.ci_rel > 0.0 && p.ci_rel < 1.0) {
        Some((
            format!("`precision.ci_rel` is {}, not a fraction between 0 and 1", p.ci_rel),
            "write the half-width the 95 % interval may have relative to the value: `ci_rel: 0.02` for ±2 %".to_owned(),
        ))
    } else if least < 2 {
        Some((
            "a precision target needs at least 2 repetitions before it can judge".to_owned(),
            "set `repeat` to 2 or more (or leave it out for 3): one run shows no spread between runs".to_owned(),
        ))
    } else if p.max_repeat < least {
        Some((
            format!(
                "`precision.max_repeat` is {}, fewer than the {least} repetitions every configuration gets",
                p.max_repeat
            ),
            format!("raise `max_repeat` to {least} or more, or lower `repeat`"),
        ))
    } else if p.max_repeat > MAX_REPETITIONS {
        return Err(too_many(
            sources,
            "precision.max_repeat",
            u64::from(p.max_repeat),
            node.span,
        ));
    } else if p.max_seconds.is_some_and(|t| t.is_nan() || t <= 0.0) {
        Some((
            "`precision.max_seconds` must be a positive number of seconds".to_owned(),
            "write `max_seconds: 600` for ten minutes of runs per configuration, or leave it out for no time budget".to_owned(),
        ))
    } else {
        None
    };
    match problem {
        Some((message, help)) => Err(sources
            .error(message, node.span, "in this precision target")
            .with_help(help)),
        None => Ok(Some((p, node))),
    }
}

/// The stage's `repeat`, read with the file's params; None without it.
pub(super) fn repeat_of<'s>(
    sources: &Sources,
    s: &'s StageDecl,
    scope: &Scope<'_>,
) -> Result<Option<(u32, &'s Node)>, PipelineError> {
    let Some(node) = &s.repeat else {
        return Ok(None);
    };
    let n: u64 = de::from_node(node, scope).map_err(|e| {
        let mut err = sources.de_error(e);
        err.message = format!("`repeat` of stage `{}`: {}", s.name.name, err.message);
        err
    })?;
    match n {
        0 => Err(sources
            .error(
                "`repeat` must be at least 1",
                node.span,
                "no repetition would measure nothing",
            )
            .with_help("write `repeat: 3` for three processes per configuration, or leave `repeat` out for one")),
        n if n > u64::from(MAX_REPETITIONS) => Err(too_many(sources, "repeat", n, node.span)),
        n => Ok(Some((n as u32, node))),
    }
}

/// The most repetitions a configuration may have (`repeat`,
/// `precision.max_repeat`): each is a node, and a study that needs more
/// processes than this for one configuration needs another design (measure
/// the compared configurations together).
pub(super) const MAX_REPETITIONS: u32 = 1000;

fn too_many(sources: &Sources, field: &str, n: u64, span: Span) -> PipelineError {
    sources
        .error(
            format!("`{field}` is {n}: too large (at most {MAX_REPETITIONS})"),
            span,
            "each repetition is a node of its own",
        )
        .with_help(format!(
            "at most {MAX_REPETITIONS} repetitions a configuration; for a comparison that needs many, measure its configurations together (`together`), which cancels the spread between processes"
        ))
}

/// Every combination `n` times, with the param `rep` (1 to `n`) last:
/// the nodes of one configuration's repetitions. At `n` = 1 the
/// combinations stay as they are (the node ids as without `repeat`),
/// and `${rep}` reads 1.
pub(super) fn repetitions(
    sources: &Sources,
    s: &StageDecl,
    combos: Vec<expand::Combo>,
    files_of: Vec<Option<String>>,
    (n, span): (u32, Span),
    inherited: Option<&[Param]>,
) -> Result<(Vec<expand::Combo>, Vec<Option<String>>), PipelineError> {
    let clash = combos
        .iter()
        .flatten()
        .map(|p| (p.name.as_str(), p.node.span))
        .chain(s.for_each.iter().flat_map(|u| {
            inherited
                .unwrap_or_default()
                .iter()
                .map(move |p| (p.name.as_str(), u.span))
        }))
        .find(|(name, _)| *name == REP_PARAM);
    if let Some((_, at)) = clash {
        return Err(sources
            .error(
                format!(
                    "stage `{}` repeats its nodes, but they already have a param `{REP_PARAM}`",
                    s.name.name
                ),
                at,
                format!("`{REP_PARAM}` comes from here"),
            )
            .with_label(span, "`repeat` numbers repetitions with `rep`")
            .with_help(format!(
                "`{REP_PARAM}` names the repetition of a repeated stage: rename this param, or repeat the upstream stage alone"
            )));
    }
    if n == 1 {
        return Ok((combos, files_of));
    }
    let mut out = Vec::with_capacity(combos.len() * n as usize);
    let mut files = Vec::with_capacity(out.capacity());
    for (combo, file) in combos.into_iter().zip(files_of) {
        for k in 1..=n {
            let mut c = combo.clone();
            c.push(Param {
                name: REP_PARAM.to_owned(),
                node: Node {
                    kind: Kind::Int(i64::from(k)),
                    span,
                },
            });
            out.push(c);
            files.push(file.clone());
        }
    }
    Ok((out, files))
}

/// `repeat` repeats a measurement: refused on a task that measures nothing.
pub(super) fn check_measures(
    sources: &Sources,
    task: &TaskSpec,
    span: Span,
) -> Result<(), PipelineError> {
    if task.measures() {
        return Ok(());
    }
    let help = match task {
        TaskSpec::Command(_) => "a `Command` that measures says so with `measure: true` (and writes `results.json`, see the book's Repetitions chapter)",
        _ => "only `Vit`, `OpBench` and a `Command` with `measure: true` take `repeat`; repeat the stage that measures, and this one follows it with `for_each`",
    };
    Err(sources
        .error(
            format!(
                "`repeat` repeats a measurement, and a `{}` task measures nothing",
                task.kind()
            ),
            span,
            "repeated here",
        )
        .with_help(help))
}

/// `isolation: Gpu` places a measurement that holds a GPU; `Host` (the
/// default) holds the machine for a measurement that runs alone (a `Vit`
/// or `OpBench`, on a GPU or the CPU; a `Command` with `exclusive: true`).
/// On any other task either would say nothing.
pub(super) fn check_isolated(
    sources: &Sources,
    task: &TaskSpec,
    isolation: crate::config::Isolation,
    span: Span,
) -> Result<(), PipelineError> {
    let res = task.resources();
    if res.exclusive && (res.gpus > 0 || isolation == crate::config::Isolation::Host) {
        return Ok(());
    }
    let message = match isolation {
        crate::config::Isolation::Gpu => format!(
            "`isolation: Gpu` places a measurement on a GPU, and this `{}` task takes no GPU to measure on",
            task.kind()
        ),
        crate::config::Isolation::Host => format!(
            "`isolation: Host` holds the machine for a measurement that runs alone, and this `{}` task does not",
            task.kind()
        ),
    };
    Err(sources
        .error(message, span, "isolation set here")
        .with_help("remove `isolation`, or measure: `device: \"cuda\"` (or `\"cpu\"`) for `Vit` and `OpBench`, `resources: (gpus: 1, exclusive: true)` (or `exclusive: true` alone) for a `Command`"))
}
