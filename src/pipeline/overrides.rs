//! `-p KEY=VALUE`: a param or matrix axis set on the command line, over
//! what the pipeline files declare.

use super::decl::{FileDecl, StageDecl};
use super::syntax::{self, Kind, Node, Span};
use super::{did_you_mean, value_of, PipelineError, Sources};

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

pub(super) fn apply_overrides(
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
        let node = match super::hydra::sweep(&o.value) {
            Some(Ok(values)) => hydra_node(values, span),
            Some(Err(message)) => {
                return Err(sources
                    .error(format!("`-p {text}`: {message}"), span, "not a sweep vitgraph can build")
                    .with_help("`-p` takes a RON value (`[1, 2, 4]`) or Hydra's override syntax (`1,2,4`, `range(1,5)`, `choice(a,b)`); the book's Pipelines chapter shows both"))
            }
            None => match parsed {
                Some(n) if value_of(&n).is_some() && !matches!(n.kind, Kind::Unit(_)) => n,
                _ => bare_value(&o.value, span),
            },
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
            return Err(unknown_param(sources, decls, stages, o, src));
        }
    }
    resolve_list_axes(sources, decls, stages)
}

/// A `-p KEY=…` whose key no pipeline declares.
fn unknown_param(
    sources: &Sources,
    decls: &[FileDecl],
    stages: &[StageDecl],
    o: &Override,
    src: u32,
) -> PipelineError {
    let text = format!("{}={}", o.key, o.value);
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
    sources
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
        .with_help(help)
}

/// A matrix axis written as `"${list_param}"` takes that param's values.
fn resolve_list_axes(
    sources: &Sources,
    decls: &[FileDecl],
    stages: &mut [StageDecl],
) -> Result<(), PipelineError> {
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

/// A Hydra sweep's values as a list node (one quoted value: a string).
fn hydra_node(values: Vec<super::hydra::Element>, span: Span) -> Node {
    use super::hydra::Element;
    let node = |e: Element| {
        let kind = match e {
            Element::Int(i) => Kind::Int(i),
            Element::Float(x) => Kind::Float(x),
            Element::Bool(b) => Kind::Bool(b),
            Element::Str(value) => Kind::Str {
                value,
                raw_offset: 0,
                escaped: true,
            },
        };
        Node { kind, span }
    };
    if let [one @ Element::Str(_)] = values.as_slice() {
        return node(one.clone());
    }
    Node {
        kind: Kind::List(values.into_iter().map(node).collect()),
        span,
    }
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
