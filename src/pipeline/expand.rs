//! Matrix expansion: the product of the axes, minus `exclude`, plus `include`
//! (GitHub Actions semantics: an include entry extends every combination whose
//! original axis values it matches, or else becomes a combination of its own).

use super::de::Param;
use super::syntax::{Kind, Node};
use super::{value_of, PipelineError, Sources};

/// One axis of a stage's matrix.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub name: String,
    pub key: Node,
    pub values: Vec<Node>,
    /// Replaced by `-p`: an `exclude` entry naming it may then match nothing.
    pub overridden: bool,
}

/// One combination: (param name, value) in id order.
pub(super) type Combo = Vec<Param>;

pub(super) fn expand(
    sources: &Sources,
    stage: &str,
    axes: &[Axis],
    exclude: &[Node],
    include: &[Node],
    matrix_span: Option<super::syntax::Span>,
) -> Result<Vec<Combo>, PipelineError> {
    let mut combos = product(sources, stage, axes)?;
    let axis_names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
    for entry in exclude {
        apply_exclude(sources, axes, &axis_names, entry, &mut combos)?;
    }
    if combos.is_empty() && !axes.is_empty() {
        let span = matrix_span.unwrap_or(axes[0].key.span);
        return Err(sources
            .error(format!("the matrix of stage `{stage}` has no combinations left after `exclude`"), span, "empty matrix")
            .with_help(match axes.iter().find(|a| a.overridden) {
                Some(a) => format!("the values `-p {}=…` gives are all excluded: pass other values, or remove an exclude entry", a.name),
                None => "remove an exclude entry or add values to an axis".into(),
            }));
    }
    // Without a matrix there is no combination to extend: each include entry
    // is a combination of its own (GitHub Actions does the same).
    if axes.is_empty() && !include.is_empty() {
        combos.clear();
    }
    let original = combos.len();
    for entry in include {
        apply_include(sources, &axis_names, entry, &mut combos, original)?;
    }
    Ok(combos)
}

/// Every combination of the axes' values, in declaration order.
fn product(sources: &Sources, stage: &str, axes: &[Axis]) -> Result<Vec<Combo>, PipelineError> {
    let mut combos: Vec<Combo> = vec![Vec::new()];
    for axis in axes {
        if axis.values.is_empty() {
            return Err(sources
                .error(
                    format!("matrix axis `{}` of stage `{stage}` is empty", axis.name),
                    axis.key.span,
                    "this axis has no values",
                )
                .with_help("give it at least one value, or remove the axis"));
        }
        let mut next = Vec::with_capacity(combos.len() * axis.values.len());
        for combo in &combos {
            for v in &axis.values {
                let mut c = combo.clone();
                c.push(Param {
                    name: axis.name.clone(),
                    node: v.clone(),
                });
                next.push(c);
            }
        }
        combos = next;
    }
    Ok(combos)
}

/// Drops the combinations one `exclude` entry matches; an entry that names
/// no axis, or matches nothing (unless `-p` narrowed its axis), is an error.
fn apply_exclude(
    sources: &Sources,
    axes: &[Axis],
    axis_names: &[&str],
    entry: &Node,
    combos: &mut Vec<Combo>,
) -> Result<(), PipelineError> {
    let pairs = entry_pairs(sources, entry, "exclude")?;
    for (k, _) in &pairs {
        if !axis_names.contains(&k.name.as_str()) {
            let help = match super::did_you_mean(&k.name, axis_names.iter().copied()) {
                Some(s) => {
                    format!("did you mean `{s}`? an exclude entry may only name matrix axes")
                }
                None => format!(
                    "the axes are: {}",
                    axis_names
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(sources
                .error(
                    format!("`exclude` names `{}`, which is not a matrix axis", k.name),
                    k.node.span,
                    "not an axis",
                )
                .with_help(help));
        }
    }
    let before = combos.len();
    combos.retain(|c| !pairs.iter().all(|(k, v)| matches(c, &k.name, v)));
    // `-p res=[224]` may leave nothing for `{"res": 512}` to exclude; that is not a typo.
    let overridden = pairs
        .iter()
        .any(|(k, _)| axes.iter().any(|a| a.name == k.name && a.overridden));
    if combos.len() == before && !overridden {
        return Err(sources
            .error(
                "this `exclude` entry matches no combination of the matrix",
                entry.span,
                "matches nothing",
            )
            .with_help(
                "check the values against the matrix axes; an unmatched exclude is usually a typo",
            ));
    }
    Ok(())
}

/// Extends the combinations (of the first `original`) one `include` entry
/// matches with its other keys, or adds it as a combination of its own.
fn apply_include(
    sources: &Sources,
    axis_names: &[&str],
    entry: &Node,
    combos: &mut Vec<Combo>,
    original: usize,
) -> Result<(), PipelineError> {
    let pairs = entry_pairs(sources, entry, "include")?;
    let mut matched = false;
    for combo in combos.iter_mut().take(original) {
        let fits = pairs
            .iter()
            .filter(|(k, _)| axis_names.contains(&k.name.as_str()))
            .all(|(k, v)| matches(combo, &k.name, v));
        if fits {
            matched = true;
            for (k, v) in &pairs {
                if !axis_names.contains(&k.name.as_str()) {
                    set(combo, &k.name, v);
                }
            }
        }
    }
    if !matched {
        let mut combo = Combo::new();
        for (k, v) in &pairs {
            set(&mut combo, &k.name, v);
        }
        combos.push(combo);
    }
    Ok(())
}

/// `exclude` on a `files:` stage: drops the files whose captures match an
/// entry. An entry that matches no file is fine (the archive may not have it).
pub(super) fn exclude_files(
    sources: &Sources,
    captures: &[&str],
    exclude: &[Node],
    combos: &mut Vec<(Combo, String)>,
) -> Result<(), PipelineError> {
    for entry in exclude {
        let pairs = entry_pairs(sources, entry, "exclude")?;
        for (k, _) in &pairs {
            if !captures.contains(&k.name.as_str()) {
                let help = match super::did_you_mean(&k.name, captures.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? an exclude entry of a `files` stage names its captures"),
                    None if captures.is_empty() => "the pattern has no captures: add `{name}` to it, or remove `exclude`".into(),
                    None => format!(
                        "the captures are: {}",
                        captures.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
                    ),
                };
                return Err(sources
                    .error(
                        format!(
                            "`exclude` names `{}`, which is not a capture of `files`",
                            k.name
                        ),
                        k.node.span,
                        "not a capture",
                    )
                    .with_help(help));
            }
        }
        combos.retain(|(c, _)| !pairs.iter().all(|(k, v)| matches(c, &k.name, v)));
    }
    Ok(())
}

struct Key {
    name: String,
    node: Node,
}

fn entry_pairs(
    sources: &Sources,
    entry: &Node,
    what: &str,
) -> Result<Vec<(Key, Node)>, PipelineError> {
    let Kind::Map(entries) = &entry.kind else {
        return Err(sources
            .error(
                format!("each `{what}` entry must be a map"),
                entry.span,
                format!("found {}", entry.kind.describe()),
            )
            .with_help("write it as `{\"axis\": value, …}`".to_string()));
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        let name = match &k.kind {
            Kind::Str { value, .. } => value.clone(),
            Kind::Unit(i) => i.name.clone(),
            other => {
                return Err(sources.error(
                    format!("a `{what}` key must be a string"),
                    k.span,
                    format!("found {}", other.describe()),
                ))
            }
        };
        if value_of(v).is_none() {
            return Err(sources.error(
                format!("a `{what}` value must be a scalar or a list"),
                v.span,
                format!("found {}", v.kind.describe()),
            ));
        }
        out.push((
            Key {
                name,
                node: k.clone(),
            },
            v.clone(),
        ));
    }
    Ok(out)
}

fn matches(combo: &Combo, name: &str, v: &Node) -> bool {
    combo
        .iter()
        .any(|p| p.name == name && value_of(&p.node) == value_of(v))
}

fn set(combo: &mut Combo, name: &str, v: &Node) {
    match combo.iter_mut().find(|p| p.name == name) {
        Some(p) => p.node = v.clone(),
        None => combo.push(Param {
            name: name.to_string(),
            node: v.clone(),
        }),
    }
}
