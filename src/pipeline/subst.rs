//! Substituting params into a string of a pipeline file: `${p}` becomes the
//! param's value (or, when it is the whole string, the value with its type);
//! `${out}` and `${needs.S}` are left for run time, checked; `$$` is a `$`.

use super::de_error::DeError;
use super::syntax::{Kind, Node, Span};

/// Where a param's value came from: its spanned value in a pipeline file or a `-p` argument.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub node: Node,
}

/// What `${…}` may refer to inside one stage's task.
pub struct Scope<'a> {
    pub params: &'a [Param],
    /// Stages named by `for_each` or `needs`, usable as `${needs.S}`.
    pub needs: &'a [String],
}

/// The result of substituting one string.
pub(super) enum Subst<'a> {
    /// The string was exactly `${p}`: it takes the param's (typed) value.
    Whole(&'a Param),
    Text(String),
}

/// Substitutes params in `text` (the value of a string literal at `span`).
pub(super) fn substitute<'a>(
    text: &str,
    node: &Node,
    scope: &Scope<'a>,
) -> Result<Subst<'a>, DeError> {
    let (raw_offset, escaped) = match &node.kind {
        Kind::Str {
            raw_offset,
            escaped,
            ..
        } => (*raw_offset as usize, *escaped),
        _ => (0, true),
    };
    // The span of a piece of the string, when it can be located exactly.
    let piece = |start: usize, len: usize| {
        if escaped {
            node.span
        } else {
            node.span.sub(raw_offset + start, len)
        }
    };
    if let Some(name) = text.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        if let Some(p) = scope.params.iter().find(|p| p.name == name) {
            return Ok(Subst::Whole(p));
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push_str("$$");
            rest = r;
            offset += i + 2;
            continue;
        }
        if !after.starts_with('{') {
            out.push('$');
            rest = after;
            offset += i + 1;
            continue;
        }
        let Some(close) = after.find('}') else {
            return Err(DeError::new(
                "unclosed `${`",
                piece(offset + i, rest.len() - i),
                Some("close it with `}`, or write `$$` for a literal `$`".into()),
            ));
        };
        let name = &after[1..close];
        let whole = &rest[i..i + 2 + close];
        let here = piece(offset + i, whole.len());
        if name == "out" {
            out.push_str(whole);
        } else if let Some(stage) = name.strip_prefix("needs.") {
            if !scope.needs.iter().any(|s| s == stage) {
                return Err(not_a_dependency(scope, stage, whole, here));
            }
            out.push_str(whole);
        } else if let Some(p) = scope.params.iter().find(|p| p.name == name) {
            out.push_str(&node_text(&p.node).replace('$', "$$"));
        } else {
            return Err(unknown(scope, name, whole, here));
        }
        rest = &after[close + 1..];
        offset += i + 2 + close;
    }
    out.push_str(rest);
    Ok(Subst::Text(out))
}

/// How a param's value reads when substituted into a string.
pub fn node_text(node: &Node) -> String {
    match super::value_of(node) {
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// `${needs.S}` for a stage `S` this stage does not depend on.
fn not_a_dependency(scope: &Scope<'_>, stage: &str, whole: &str, here: Span) -> DeError {
    let help = if scope.needs.is_empty() {
        format!("this stage reads no other stage: add `needs: [\"{stage}\"]` or `for_each: \"{stage}\"`")
    } else {
        format!(
            "this stage reads {}; add `{stage}` to `needs` to read it",
            scope
                .needs
                .iter()
                .map(|s| format!("`${{needs.{s}}}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    DeError::new(
        format!("`{whole}` names a stage this stage does not depend on"),
        here,
        Some(help),
    )
}

/// `${name}` that names nothing known here.
fn unknown(scope: &Scope<'_>, name: &str, whole: &str, here: Span) -> DeError {
    let candidates = scope
        .params
        .iter()
        .map(|p| p.name.clone())
        .chain(std::iter::once("out".to_string()))
        .chain(scope.needs.iter().map(|s| format!("needs.{s}")))
        .collect::<Vec<_>>();
    let help = match super::did_you_mean(name, candidates.iter().map(String::as_str)) {
        Some(s) => format!("did you mean `${{{s}}}`? (write `$$` for a literal `$`)"),
        None if candidates.is_empty() => {
            "no params are defined here; define it under `params` or in a `matrix`".into()
        }
        None => format!(
            "known here: {}; write `$$` for a literal `$`",
            candidates
                .iter()
                .map(|c| format!("`${{{c}}}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    DeError::new(format!("unknown `{whole}`"), here, Some(help))
}
