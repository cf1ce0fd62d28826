//! `together: ["axis", …]`: matrix axes measured in one process. A stage's
//! combinations that differ only in the together axes become one node (one
//! *block*), whose task sees each together axis as the block's values
//! joined by `,` and whose `results.json` holds one object per member.
//!
//! The block's members are kept on the task ([`crate::tasks::Together`]),
//! so they are part of the node's key: adding or removing a value measures
//! the block again.

use std::collections::HashMap;

use super::de::Param;
use super::decl::StageDecl;
use super::expand::Combo;
use super::syntax::{Kind, Node, Span};
use super::{value_of, PipelineError, Sources};
use crate::tasks::{TaskSpec, Together, REP_PARAM};

/// How `together` is written.
const HELP: &str =
    "write `together: [\"model\"]`: matrix axes whose values one process measures side by side";

/// The together axes a stage names, checked against its declaration:
/// each a distinct axis of its matrix (not `rep`); None without `together`.
fn axes_of(sources: &Sources, s: &StageDecl) -> Result<Option<(Vec<String>, Span)>, PipelineError> {
    let Some(node) = &s.together else {
        return Ok(None);
    };
    let Kind::List(items) = &node.kind else {
        return Err(sources
            .error(
                "`together` must be a list of matrix axes",
                node.span,
                format!("found {}", node.kind.describe()),
            )
            .with_help(HELP));
    };
    if items.is_empty() {
        return Err(sources
            .error("`together` names no axis", node.span, "empty list")
            .with_help(HELP));
    }
    if let Some(files) = &s.files {
        return Err(sources
            .error(
                format!("stage `{}` has both `files` and `together`", s.name.name),
                node.span,
                "`together` here",
            )
            .with_label(files.span, "`files` here")
            .with_help("`together` groups matrix axes; a `files` stage has none"));
    }
    let mut axes: Vec<String> = Vec::new();
    for item in items {
        axes.push(axis_of(sources, s, item, &axes)?);
    }
    // Keep the matrix's order, whatever the order of the list.
    axes.sort_by_key(|a| s.axes.iter().position(|x| &x.name == a));
    Ok(Some((axes, node.span)))
}

/// One entry of `together`: an axis of the matrix, not `rep`, not named
/// before (`seen`).
fn axis_of(
    sources: &Sources,
    s: &StageDecl,
    item: &Node,
    seen: &[String],
) -> Result<String, PipelineError> {
    let Kind::Str { value, .. } = &item.kind else {
        return Err(sources
            .error(
                "each entry of `together` must be an axis name in quotes",
                item.span,
                format!("found {}", item.kind.describe()),
            )
            .with_help(HELP));
    };
    let known: Vec<&str> = s.axes.iter().map(|a| a.name.as_str()).collect();
    if value == REP_PARAM {
        return Err(sources
            .error(
                format!("`{REP_PARAM}` cannot be measured together"),
                item.span,
                "a repetition is a process of its own",
            )
            .with_help(
                "`together` names matrix axes; each repetition measures the whole block again",
            ));
    }
    if !known.contains(&value.as_str()) {
        return Err(sources
            .error(
                format!("`together` names `{value}`, which is not an axis of the matrix"),
                item.span,
                "no such axis",
            )
            .with_help(format!(
                "the matrix's axes are {}",
                if known.is_empty() {
                    "none: add a `matrix`".to_owned()
                } else {
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
    }
    if seen.contains(value) {
        return Err(sources
            .error(
                format!("`together` names `{value}` twice"),
                item.span,
                "again here",
            )
            .with_help("name each axis once"));
    }
    Ok(value.clone())
}

/// `check: true` (the A/A self-check): a boolean, on a stage measured
/// together.
fn check_of(sources: &Sources, s: &StageDecl) -> Result<bool, PipelineError> {
    let Some(node) = &s.check else {
        return Ok(false);
    };
    let Kind::Bool(check) = node.kind else {
        return Err(sources
            .error(
                "`check` must be `true` or `false`",
                node.span,
                format!("found {}", node.kind.describe()),
            )
            .with_help("write `check: true` to measure each block's first member twice"));
    };
    if check && s.together.is_none() {
        return Err(sources
            .error(
                format!("stage `{}` has `check` but no `together`", s.name.name),
                node.span,
                "the A/A check here",
            )
            .with_help("`check: true` measures a together block's first member a second time, beside itself: give the stage `together: [\"axis\"]`"));
    }
    Ok(check)
}

/// The A/A twin of a block's first member: `NAME#2` after the first
/// together axis's values (`a,b` → `a,b,a#2`).
fn add_twin(block: &mut [Param], axis: &str) {
    let Some(p) = block.iter_mut().find(|p| p.name == axis) else {
        return;
    };
    let Kind::List(items) = &mut p.node.kind else {
        return;
    };
    let Some(first) = items.first().and_then(value_of) else {
        return;
    };
    let span = items[0].span;
    items.push(Node {
        kind: Kind::Str {
            value: twin_of(&first.display()),
            raw_offset: 0,
            escaped: true,
        },
        span,
    });
}

/// The A/A twin's value of a first value `v`: `v#2`.
pub(crate) fn twin_of(v: &str) -> String {
    format!("{v}#2")
}

/// A stage's combinations (and the files they matched) as its nodes'
/// combinations: grouped into blocks when the stage has `together`, as
/// they are otherwise.
#[allow(clippy::type_complexity)]
pub(super) fn group(
    sources: &Sources,
    s: &StageDecl,
    combos: Vec<Combo>,
    files_of: Vec<Option<String>>,
) -> Result<(Vec<Combo>, Vec<Option<String>>), PipelineError> {
    let check = check_of(sources, s)?;
    Ok(match axes_of(sources, s)? {
        Some((axes, span)) => {
            let mut blocks = blocks(sources, s, &axes, span, combos)?;
            if check {
                for block in &mut blocks {
                    add_twin(block, &axes[0]);
                }
            }
            let none = vec![None; blocks.len()];
            (blocks, none)
        }
        None => (combos, files_of),
    })
}

/// The stage's combinations grouped into blocks: one combination per set of
/// values of the other axes (in first-seen order), in which each together
/// axis holds the list of its values (distinct, in matrix order). With
/// several together axes a block must hold every combination of their
/// values, since its command measures their product.
fn blocks(
    sources: &Sources,
    s: &StageDecl,
    axes: &[String],
    span: Span,
    combos: Vec<Combo>,
) -> Result<Vec<Combo>, PipelineError> {
    let carried = if native(s) {
        carried_names(s, axes, &combos)
    } else {
        Vec::new()
    };
    let mut out: Vec<(Combo, Vec<Vec<Node>>, usize)> = Vec::new();
    let mut carries: Vec<Vec<(Node, Node)>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for combo in combos {
        let (rest, mine): (Vec<Param>, Vec<Param>) =
            combo.into_iter().partition(|p| !axes.contains(&p.name));
        let (own, rest): (Vec<Param>, Vec<Param>) =
            rest.into_iter().partition(|p| carried.contains(&p.name));
        let key = rest
            .iter()
            .map(|p| format!("{}={:?}", p.name, value_of(&p.node)))
            .collect::<Vec<_>>()
            .join("\u{0}");
        let slot = *index.entry(key).or_insert_with(|| {
            out.push((rest, vec![Vec::new(); axes.len()], 0));
            carries.push(Vec::new());
            out.len() - 1
        });
        if !own.is_empty() {
            carries[slot].push(carry_entry(axes, &mine, own));
        }
        let (_, values, count) = &mut out[slot];
        *count += 1;
        for (axis, list) in axes.iter().zip(values.iter_mut()) {
            let Some(p) = mine.iter().find(|p| &p.name == axis) else {
                continue;
            };
            if !list.iter().any(|v| value_of(v) == value_of(&p.node)) {
                list.push(p.node.clone());
            }
        }
    }
    let mut blocks = Vec::with_capacity(out.len());
    for ((mut rest, values, count), carry) in out.into_iter().zip(carries) {
        let product: usize = values.iter().map(Vec::len).product();
        if axes.len() > 1 && product != count {
            return Err(sources
                .error(
                    format!(
                        "stage `{}`: a block of its together axes holds {count} of the {product} combinations of their values",
                        s.name.name
                    ),
                    span,
                    "measured together here",
                )
                .with_help("with several `together` axes a block measures every combination of their values: drop the `exclude` or `include` entries that remove some, or measure one axis together"));
        }
        for (axis, list) in axes.iter().zip(values) {
            let at = list.first().map_or(span, |n| n.span);
            rest.push(Param {
                name: axis.clone(),
                node: Node {
                    kind: Kind::List(list),
                    span: at,
                },
            });
        }
        rest.extend(carry_param(carry, span));
        blocks.push(rest);
    }
    Ok(blocks)
}

/// Whether `name` is a param of a block rather than of its node: a together
/// axis, or the params its members carry.
pub(super) fn is_block_param(s: &StageDecl, name: &str) -> bool {
    name == carried::CARRIED || is_axis(s, name)
}

/// A block's together params as its task reads them: each axis's values
/// joined by `,` (`${model}` is `a,b`).
pub(super) fn joined(p: &Param) -> Param {
    let Kind::List(items) = &p.node.kind else {
        return p.clone();
    };
    let text = items
        .iter()
        .filter_map(value_of)
        .map(|v| v.display())
        .collect::<Vec<_>>()
        .join(",");
    Param {
        name: p.name.clone(),
        node: Node {
            kind: Kind::Str {
                value: text,
                raw_offset: 0,
                escaped: true,
            },
            span: p.node.span,
        },
    }
}

/// The block's members: every combination of the together axes' values,
/// the first axis varying slowest.
pub(super) fn members(axes: &[String], params: &[Param]) -> Together {
    let lists: Vec<Vec<crate::value::Value>> = axes
        .iter()
        .map(
            |a| match params.iter().find(|p| &p.name == a).map(|p| &p.node.kind) {
                Some(Kind::List(items)) => items.iter().filter_map(value_of).collect(),
                _ => Vec::new(),
            },
        )
        .collect();
    let mut members: Vec<Vec<crate::value::Value>> = vec![Vec::new()];
    for list in &lists {
        members = members
            .into_iter()
            .flat_map(|m| {
                list.iter().map(move |v| {
                    let mut next = m.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect();
    }
    Together {
        axes: axes.to_vec(),
        members,
        check: false,
        carried: Vec::new(),
    }
}

/// Whether `name` is one of the stage's together axes.
pub(super) fn is_axis(s: &StageDecl, name: &str) -> bool {
    let Some(Node {
        kind: Kind::List(items),
        ..
    }) = &s.together
    else {
        return false;
    };
    items
        .iter()
        .any(|i| matches!(&i.kind, Kind::Str { value, .. } if value == name))
}

/// A combination's task: read with `params` (or the stage's shared task)
/// and with a block's members (`block`) on it; a `Vit` block reads each
/// member's spec with the member's values.
pub(super) fn task_for(
    sources: &Sources,
    s: &StageDecl,
    shared_task: Option<&TaskSpec>,
    params: &[Param],
    block: &[&Param],
    read: impl Fn(&[Param]) -> Result<TaskSpec, PipelineError>,
) -> Result<TaskSpec, PipelineError> {
    if native(s) && !block.is_empty() {
        return native_block(sources, s, block, |member| {
            let mut params = params.to_vec();
            for p in member {
                super::de::overlay(&mut params, p.clone());
            }
            read(&params)
        });
    }
    let mut task = match shared_task {
        Some(t) => t.clone(),
        None => read(params)?,
    };
    attach(sources, s, &mut task, block)?;
    Ok(task)
}

/// Whether the stage's task measures a block itself (`Vit`, `OpBench`):
/// each member's spec is then read with the member's own values (see
/// [`native_block`]), rather than with the block's values joined.
fn native(s: &StageDecl) -> bool {
    let named = match &s.task().kind {
        Kind::Tuple { name, .. } | Kind::Struct { name, .. } => name.as_ref(),
        _ => None,
    };
    s.together.is_some() && named.is_some_and(|n| n.name == "Vit" || n.name == "OpBench")
}

/// A `Vit` or `OpBench` block's task: each member's spec read by `read`
/// with that member's values of the together axes (`block`), the A/A
/// twin's with the first member's, and the block kept on the first
/// member's spec.
fn native_block(
    sources: &Sources,
    s: &StageDecl,
    block: &[&Param],
    read: impl Fn(&[Param]) -> Result<TaskSpec, PipelineError>,
) -> Result<TaskSpec, PipelineError> {
    let carry = block.iter().find(|p| p.name == CARRIED).copied();
    let params: Vec<Param> = block
        .iter()
        .filter(|p| p.name != CARRIED)
        .map(|p| (*p).clone())
        .collect();
    let axes: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
    let mut together = members(&axes, &params);
    together.check = matches!(s.check.as_ref().map(|n| &n.kind), Some(Kind::Bool(true)));
    let mut specs = Vec::with_capacity(together.members.len());
    for mut values in member_params(&params, together.check) {
        // The A/A twin is read with the first member's values, so it finds
        // the first member's carried params under that key.
        let key = node_key(&values.iter().map(|p| &p.node).collect::<Vec<_>>());
        let own = carried_of(carry, &key);
        if carry.is_some() {
            together.carried.push(
                own.iter()
                    .filter_map(|p| Some((p.name.clone(), value_of(&p.node)?)))
                    .collect(),
            );
        }
        values.extend(own);
        specs.push(read(&values)?);
    }
    let task = match specs.first() {
        Some(TaskSpec::Vit(_)) => {
            let members = specs.into_iter().filter_map(|t| match t {
                TaskSpec::Vit(v) => Some(v),
                _ => None,
            });
            TaskSpec::Vit(with_block(members.collect(), together, |f, b| {
                f.together = Some(b)
            }))
        }
        Some(TaskSpec::OpBench(_)) => {
            let members = specs.into_iter().filter_map(|t| match t {
                TaskSpec::OpBench(o) => Some(o),
                _ => None,
            });
            TaskSpec::OpBench(with_block(members.collect(), together, |f, b| {
                f.together = Some(b)
            }))
        }
        other => unreachable!(
            "a native block's task reads as a `Vit` or `OpBench`, not {:?}",
            other.map(TaskSpec::kind)
        ),
    };
    task.validate().map_err(|e| {
        sources
            .error(
                e.message,
                s.together.as_ref().map_or(s.task().span, |n| n.span),
                "measured together here",
            )
            .with_help(e.help)
    })?;
    Ok(task)
}

/// The first member's spec holding the block (`set` puts it in place).
fn with_block<S: Clone>(
    members: Vec<S>,
    together: Together,
    set: impl FnOnce(&mut S, Box<crate::tasks::block::Block<S>>),
) -> S {
    let mut first = members[0].clone();
    set(
        &mut first,
        Box::new(crate::tasks::block::Block {
            block: together,
            members,
        }),
    );
    first
}

/// Each member's values of the together axes as params, in the order of
/// [`members`] (the first axis varying slowest); with `twin`, the first
/// axis's last value is the A/A twin, read as the first value.
fn member_params(block: &[Param], twin: bool) -> Vec<Vec<Param>> {
    let mut out: Vec<Vec<Param>> = vec![Vec::new()];
    for (i, p) in block.iter().enumerate() {
        let Kind::List(items) = &p.node.kind else {
            continue;
        };
        let last = items.len().saturating_sub(1);
        out = out
            .into_iter()
            .flat_map(|m| {
                items.iter().enumerate().map(move |(j, item)| {
                    let node = if twin && i == 0 && j == last {
                        &items[0]
                    } else {
                        item
                    };
                    let mut next = m.clone();
                    next.push(Param {
                        name: p.name.clone(),
                        node: node.clone(),
                    });
                    next
                })
            })
            .collect();
    }
    out
}

/// Sets a block's members (its together params, `block`) on its task,
/// which must measure through the together contract (a `Command` with
/// `measure: true`). A node of a stage without `together` keeps none.
fn attach(
    sources: &Sources,
    s: &StageDecl,
    task: &mut TaskSpec,
    block: &[&Param],
) -> Result<(), PipelineError> {
    let Some(node) = s.together.as_ref().filter(|_| !block.is_empty()) else {
        if task.together().is_some() {
            {
                return Err(sources
                    .error(
                        format!(
                            "`together` is a key of the stage, not of its `{}`",
                            task.kind()
                        ),
                        s.task().span,
                        "in this task",
                    )
                    .with_help("write `together: [\"axis\"]` beside `matrix`"));
            }
        }
        return Ok(());
    };
    let span = node.span;
    let axes: Vec<String> = block.iter().map(|p| p.name.clone()).collect();
    let params: Vec<Param> = block.iter().map(|p| (*p).clone()).collect();
    match task {
        TaskSpec::Command(c) if c.measure => {
            let mut together = members(&axes, &params);
            together.check = matches!(s.check.as_ref().map(|n| &n.kind), Some(Kind::Bool(true)));
            c.together = Some(together);
            Ok(())
        }
        TaskSpec::Command(_) => Err(sources
            .error(
                "`together` measures several configurations in one process, and this `Command` measures nothing",
                span,
                "measured together here",
            )
            .with_help("add `measure: true` to the `Command` and write `results.json` as `{\"members\": {\"<value>\": {…}}}` (the book's Repetitions chapter)")),
        other => Err(sources
            .error(
                format!(
                    "`together` is measured by a `Vit` or `OpBench` task or a `Command` with `measure: true`; a `{}` task measures one configuration per process",
                    other.kind()
                ),
                span,
                "measured together here",
            )
            .with_help("drop `together`, or measure the block with a `Vit` or `OpBench` task or a measuring `Command`")),
    }
}

mod baseline;
mod carried;

pub(super) use baseline::baseline_of;
use carried::{carried_names, carried_of, carry_entry, carry_param, node_key, CARRIED};

#[cfg(test)]
mod tests;
