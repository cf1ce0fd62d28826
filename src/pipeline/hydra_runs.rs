//! Stages over Hydra multiruns: `hydra: "multirun/2025-07-14/16-30-54"`
//! makes one node per job folder of the multirun (`N/` with
//! `.hydra/overrides.yaml`), whose params are the job's overrides typed as
//! Hydra types them (`experiment.test.batch_size=8` is the param
//! `batch_size`, the integer 8; `rename` names it otherwise), and `${job}`
//! its folder. The folder walk is a `files:` stage's over
//! `DIR/{job}/.hydra/overrides.yaml`: each job's overrides file is the
//! node's input, and a job that comes or goes changes the stage.

use std::path::Path;

use super::de::Param;
use super::expand::Combo;
use super::files::FileNodes;
use super::hydra::Element;
use super::syntax::{Kind, Node, Span};
use super::{PipelineError, Sources};

/// Where a job's overrides are, under its folder.
const OVERRIDES: &str = ".hydra/overrides.yaml";

/// A `hydra:` field: the multirun folder and the param names it renames.
pub(super) struct HydraSpec {
    pub dir: String,
    /// (override key or its last segment, param name).
    pub rename: Vec<(String, String)>,
}

/// Reads `hydra: "DIR"` or `hydra: (multirun: "DIR", rename: {"KEY": "param"})`.
pub(super) fn spec(sources: &Sources, node: &Node) -> Result<HydraSpec, PipelineError> {
    let bad = |span: Span, what: &str| {
        sources
            .error(format!("`hydra` {what}"), span, "here")
            .with_help("write `hydra: \"multirun/2025-07-14/16-30-54\"` (a multirun folder), or `hydra: (multirun: \"…\", rename: {\"batch_size\": \"batch\"})`")
    };
    let string = |n: &Node| match &n.kind {
        Kind::Str { value, .. } => Ok(value.clone()),
        _ => Err(bad(n.span, "names a folder with a string")),
    };
    match &node.kind {
        Kind::Str { value, .. } => Ok(HydraSpec {
            dir: value.trim_end_matches('/').to_owned(),
            rename: Vec::new(),
        }),
        Kind::Struct { fields, .. } => {
            let mut dir = None;
            let mut rename = Vec::new();
            for (key, value) in fields {
                match key.name.as_str() {
                    "multirun" => dir = Some(string(value)?.trim_end_matches('/').to_owned()),
                    "rename" => {
                        let Kind::Map(entries) = &value.kind else {
                            return Err(bad(
                                value.span,
                                "`rename` is a map from override key to param name",
                            ));
                        };
                        for (k, v) in entries {
                            rename.push((string(k)?, string(v)?));
                        }
                    }
                    other => {
                        return Err(bad(
                            key.span,
                            &format!("takes `multirun` and `rename`, not `{other}`"),
                        ))
                    }
                }
            }
            let dir = dir.ok_or_else(|| bad(node.span, "has no `multirun` folder"))?;
            Ok(HydraSpec { dir, rename })
        }
        _ => Err(bad(node.span, "is a multirun folder")),
    }
}

/// Reads a stage's `files:` or `hydra:` (`key`) into its slots: a
/// multirun is walked as the `files` of its jobs' overrides.
pub(super) fn read(
    sources: &Sources,
    key: &str,
    value: &Node,
    stage: &str,
    (files, hydra): (&mut Option<Node>, &mut Option<Node>),
) -> Result<(), PipelineError> {
    if let Some(other) = hydra.as_ref().or(files.as_ref()) {
        return Err(sources
            .error(
                format!("stage `{stage}` has both `files` and `hydra`"),
                value.span,
                "here",
            )
            .with_label(other.span, "and here")
            .with_help("a stage reads files or a Hydra multirun, not both: make two stages"));
    }
    if key == "hydra" {
        *files = Some(pattern(sources, value)?);
        *hydra = Some(value.clone());
    } else {
        *files = Some(value.clone());
    }
    Ok(())
}

/// A `files:` or `hydra:` stage's nodes: the files the walk found, or the
/// jobs of the multirun (whose `exclude` names their overrides).
pub(super) fn walk(
    root: &Path,
    sources: &Sources,
    (stage, hydra, exclude): (&str, Option<&Node>, &[Node]),
    pattern: &Node,
    names: &[&str],
) -> Result<FileNodes, PipelineError> {
    let Some(hydra) = hydra else {
        return super::files::expand(root, sources, stage, pattern, exclude, names);
    };
    let mut found = super::files::expand(root, sources, stage, pattern, &[], names)?;
    found.combos = jobs(root, sources, hydra, exclude, found.combos)?;
    Ok(found)
}

/// The `files:` pattern a `hydra:` stage walks.
pub(super) fn pattern(sources: &Sources, node: &Node) -> Result<Node, PipelineError> {
    let spec = spec(sources, node)?;
    Ok(Node {
        kind: Kind::Str {
            value: format!("{}/{{job}}/{OVERRIDES}", spec.dir),
            raw_offset: 0,
            escaped: true,
        },
        span: node.span,
    })
}

/// `${job}`: the folder of the job a node was made for.
pub(super) fn job_param(overrides_file: &str, span: Span) -> Param {
    let dir = job_dir(overrides_file);
    Param {
        name: "job".to_owned(),
        node: Node {
            kind: Kind::Str {
                value: dir.to_owned(),
                raw_offset: 0,
                escaped: true,
            },
            span,
        },
    }
}

/// A job's folder, from the path of its overrides file.
fn job_dir(overrides_file: &str) -> &str {
    overrides_file
        .strip_suffix(OVERRIDES)
        .unwrap_or(overrides_file)
        .trim_end_matches('/')
}

/// Each job's combination: its overrides as params, in place of the
/// walk's `job` capture.
pub(super) fn jobs(
    root: &Path,
    sources: &Sources,
    node: &Node,
    exclude: &[Node],
    found: Vec<(Combo, String)>,
) -> Result<Vec<(Combo, String)>, PipelineError> {
    let spec = spec(sources, node)?;
    // In job order (`10/` after `9/`), as Hydra ran them.
    let mut found = found;
    found.sort_by_key(|(_, rel)| {
        let n = job_dir(rel)
            .rsplit('/')
            .next()
            .and_then(|n| n.parse::<u64>().ok());
        (n.is_none(), n, rel.clone())
    });
    let mut out = Vec::with_capacity(found.len());
    for (_, rel) in found {
        let fail = |message: String, help: &str| {
            sources
                .error(message, node.span, "this multirun")
                .with_help(help.to_owned())
        };
        let text = std::fs::read_to_string(root.join(&rel)).map_err(|e| {
            fail(
                format!("cannot read `{rel}`: {e}"),
                "make the file readable",
            )
        })?;
        let overrides = overrides(&text).map_err(|e| {
            fail(
                format!("`{rel}`: {e}"),
                "the file is not as Hydra writes it (a YAML list of `key=value` strings): restore it from the run",
            )
        })?;
        let mut combo = Combo::new();
        for (key, value) in overrides {
            let name = param_name(&key, &spec.rename);
            if let Some(first) = combo.iter().find(|p: &&Param| p.name == name) {
                return Err(fail(
                    format!("`{rel}`: two overrides give the param `{name}` (`{key}` and one before it, `{}`)", first.name),
                    &format!("name one otherwise: `hydra: (multirun: \"{}\", rename: {{\"{key}\": \"…\"}})`", spec.dir),
                ));
            }
            combo.push(Param {
                name,
                node: Node {
                    kind: typed(&value),
                    span: node.span,
                },
            });
        }
        out.push((combo, rel));
    }
    let mut names: Vec<String> = Vec::new();
    for p in out.iter().flat_map(|(combo, _)| combo) {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    super::expand::exclude_files(sources, &names, exclude, &mut out)?;
    Ok(out)
}

/// A param's name for an override key: its `rename` (by the whole key,
/// then by its last segment), else the key's last dotted segment.
fn param_name(key: &str, rename: &[(String, String)]) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    rename
        .iter()
        .find(|(k, _)| k == key)
        .or_else(|| rename.iter().find(|(k, _)| k == last))
        .map_or_else(|| last.to_owned(), |(_, name)| name.clone())
}

/// A value typed as Hydra types it; one Hydra reads as a list, a map or
/// `null` stays the text it was written as.
fn typed(value: &str) -> Kind {
    match super::hydra::element(value) {
        Ok(Element::Int(i)) => Kind::Int(i),
        Ok(Element::Float(x)) => Kind::Float(x),
        Ok(Element::Bool(b)) => Kind::Bool(b),
        Ok(Element::Str(s)) => Kind::Str {
            value: s,
            raw_offset: 0,
            escaped: true,
        },
        Err(_) => Kind::Str {
            value: value.to_owned(),
            raw_offset: 0,
            escaped: true,
        },
    }
}

/// The (key, value) pairs of an `overrides.yaml`: a YAML list of strings,
/// plain or quoted, as Hydra writes it. `+key` and `++key` add a key (its
/// name without the signs); `~key` deletes one and sets nothing.
pub(super) fn overrides(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_end();
        if t.is_empty() || t.trim_start().starts_with('#') || t == "[]" {
            continue;
        }
        let Some(item) = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix('-').filter(|r| r.is_empty()))
        else {
            return Err(format!("line {} is not a list item: `{t}`", i + 1));
        };
        let item = unquote(item.trim()).map_err(|e| format!("line {}: {e}", i + 1))?;
        let item = item.trim_start_matches('+');
        if item.starts_with('~') {
            continue;
        }
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("line {}: `{item}` is not `key=value`", i + 1));
        };
        out.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

/// A YAML scalar: `'…'` (a doubled `''` is one quote), `"…"` (JSON's
/// escapes), or plain.
fn unquote(s: &str) -> Result<String, String> {
    if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        return Ok(s[1..s.len() - 1].replace("''", "'"));
    }
    if s.starts_with('"') {
        return serde_json::from_str::<String>(s)
            .map_err(|e| format!("`{s}` is not a quoted string: {e}"));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_read_as_hydra_writes_them() {
        let text = "- experiment.test.batch_size=8\n- 'model=vit16x6x384'\n- \"+lr=0.5\"\n- ~seed\n- name='it''s'\n";
        let got = overrides(text).unwrap();
        assert_eq!(
            got,
            [
                ("experiment.test.batch_size".to_owned(), "8".to_owned()),
                ("model".to_owned(), "vit16x6x384".to_owned()),
                ("lr".to_owned(), "0.5".to_owned()),
                ("name".to_owned(), "'it''s'".to_owned()),
            ]
        );
        assert!(overrides("[]\n").unwrap().is_empty());
        assert!(overrides("batch=8\n")
            .unwrap_err()
            .contains("line 1 is not a list item"));
        assert!(matches!(typed("8"), Kind::Int(8)));
        assert!(matches!(typed("0.5"), Kind::Float(x) if x == 0.5));
        assert!(matches!(typed("True"), Kind::Bool(true)));
        assert!(matches!(typed("[1,2]"), Kind::Str { value, .. } if value == "[1,2]"));
        assert_eq!(param_name("experiment.test.batch_size", &[]), "batch_size");
        let rename = [("batch_size".to_owned(), "batch".to_owned())];
        assert_eq!(param_name("experiment.test.batch_size", &rename), "batch");
    }
}
