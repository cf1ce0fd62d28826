//! Expanding stages into nodes: each stage's combinations (its matrix, or
//! the files it matches), each node's id, params and task, the edges to the
//! nodes it needs, and the checks that no two nodes share an id.

use std::collections::HashMap;
use std::path::Path;

use super::de::{self, overlay, Param, Scope};
use super::decl::{FileDecl, StageDecl};
use super::expand;
use super::repeat::{self, DEFAULT_PRECISE_REPEAT};
use super::syntax::{Kind, Node, Span};
use super::together;
use super::{value_of, PipelineError, Sources};
use crate::graph::{Graph, Need, NodeIdx, REP_PARAM};

use crate::tasks::TaskSpec;

/// From this many nodes in a stage, their expansion runs in parallel.
const PARALLEL_EXPANSION: usize = 256;

/// One combination of a stage to expand: the upstream node it pairs with
/// (`for_each`), its matrix values, and the file it matched (`files:`).
type Pair<'p> = (Option<NodeIdx>, &'p Vec<Param>, Option<&'p String>);

/// What one combination expands to: id, id params (as declared and as
/// values), every param's value, and its task.
type Expanded = (
    String,
    Vec<Param>,
    Vec<(String, crate::value::Value)>,
    Vec<(String, crate::value::Value)>,
    Result<TaskSpec, PipelineError>,
);

/// Expands the stages (in dependency `order`) into the graph's nodes.
pub(super) fn expand_nodes(
    root: &Path,
    sources: &Sources,
    decls: &[FileDecl],
    stages: &[StageDecl],
    order: &[usize],
) -> Result<Graph, PipelineError> {
    let mut ex = Expander {
        root,
        sources,
        nodes: Vec::new(),
        node_id_params: Vec::new(),
        stage_nodes: HashMap::new(),
        stages: Vec::with_capacity(stages.len()),
        listings: Vec::new(),
        warnings: Vec::new(),
    };
    for &si in order {
        ex.stage(&stages[si], &decls[stages[si].file])?;
    }
    let mut graph = Graph::new(ex.nodes, ex.stages);
    graph.listings = ex.listings;
    graph.warnings = ex.warnings;
    graph.refusals = super::plots::refusals(sources, stages, &graph);
    Ok(graph)
}

/// The graph as it grows, stage by stage.
struct Expander<'a> {
    root: &'a Path,
    sources: &'a Sources,
    nodes: Vec<crate::graph::Node>,
    /// Each node's id params as declared (for its `for_each` dependents).
    node_id_params: Vec<Vec<Param>>,
    stage_nodes: HashMap<String, Vec<NodeIdx>>,
    stages: Vec<crate::graph::Stage>,
    listings: Vec<crate::graph::Listing>,
    warnings: Vec<String>,
}

impl Expander<'_> {
    /// Adds the nodes of stage `s` (its upstream stages are in already).
    fn stage(&mut self, s: &StageDecl, file: &FileDecl) -> Result<(), PipelineError> {
        let (combos, files_of) = self.combos(s, file)?;
        // `together`: the combinations that differ only in its axes are one node.
        let (combos, files_of) = together::group(self.sources, s, combos, files_of)?;
        let needs_names: Vec<String> = s.upstream().map(|u| u.name.clone()).collect();
        let scope = Scope {
            params: &file.params,
            needs: &needs_names,
        };
        let repeat = repeat::repeat_of(self.sources, s, &scope)?;
        let precision = repeat::precision_of(self.sources, s, &scope, repeat.map(|(n, _)| n))?;
        // With `precision`, nodes for every repetition it may take.
        let total = match (&precision, &repeat) {
            (Some((p, node)), _) => Some((p.max_repeat, *node)),
            (None, Some((n, node))) => Some((*n, *node)),
            (None, None) => None,
        };
        let (combos, files_of) = match &total {
            Some((n, node)) => {
                let inherited = s.for_each.as_ref().and_then(|u| {
                    let first = *self.stage_nodes[u.name.as_str()].first()?;
                    Some(self.node_id_params[first].as_slice())
                });
                repeat::repetitions(
                    self.sources,
                    s,
                    combos,
                    files_of,
                    (*n, node.span),
                    inherited,
                )?
            }
            None => (combos, files_of),
        };
        let repeated = total.is_some_and(|(n, _)| n > 1);
        let upstream: Vec<Option<NodeIdx>> = match &s.for_each {
            Some(u) => self.stage_nodes[u.name.as_str()]
                .iter()
                .map(|&i| Some(i))
                .collect(),
            None => vec![None],
        };
        let pairs: Vec<Pair<'_>> = upstream
            .iter()
            .flat_map(|up| {
                combos
                    .iter()
                    .zip(&files_of)
                    .map(move |(combo, f)| (*up, combo, f.as_ref()))
            })
            .collect();
        let expanded = self.expand(s, file, &needs_names, &pairs)?;
        let mine = self.number(s, &pairs, expanded, repeated)?;
        self.inherit_target(&mine);
        if let (Some((_, node)), Some(&first)) = (&total, mine.first()) {
            repeat::check_measures(self.sources, &self.nodes[first].task, node.span)?;
        }
        self.stage_nodes.insert(s.name.name.clone(), mine.clone());
        let (slurm, placement) = cluster_of(self.sources, s, &scope)?;
        let task = mine.first().map(|&first| &self.nodes[first].task);
        let isolation = isolation_of(self.sources, s, &scope, task)?;
        let precision = together::baseline_of(self.sources, s, precision, &self.nodes, &mine)?;
        self.stages.push(crate::graph::Stage {
            name: s.name.name.clone(),
            file: file.rel.clone(),
            pipeline: file.stem.clone(),
            nodes: mine,
            slurm,
            placement,
            isolation,
            about: about_of(s, file),
            repeat: match (&precision, repeat) {
                (Some(_), None) => DEFAULT_PRECISE_REPEAT,
                (_, r) => r.map_or(1, |(n, _)| n),
            },
            precision: precision.map(|(p, _)| p),
        });
        Ok(())
    }

    /// A `Report` without `target` over a stage with a precision target
    /// flags rows wider than that target (the tightest, over several).
    fn inherit_target(&mut self, mine: &[NodeIdx]) {
        for &i in mine {
            let TaskSpec::Report(r) = &self.nodes[i].task else {
                return;
            };
            if r.target.is_some() {
                continue;
            }
            let target = self
                .stages
                .iter()
                .filter(|st| r.sources.contains(&st.name))
                .filter_map(|st| st.precision.as_ref().map(|p| p.ci_rel))
                .reduce(f64::min);
            if let TaskSpec::Report(r) = &mut self.nodes[i].task {
                r.target = target;
            }
        }
    }

    /// The stage's combinations: from the files it matches (each with its
    /// file), or from its matrix.
    #[allow(clippy::type_complexity)]
    fn combos(
        &mut self,
        s: &StageDecl,
        file: &FileDecl,
    ) -> Result<(Vec<expand::Combo>, Vec<Option<String>>), PipelineError> {
        Ok(match &s.files {
            Some(pattern) => {
                let names: Vec<&str> = file.params.iter().map(|p| p.name.as_str()).collect();
                let stage = (s.name.name.as_str(), s.hydra.as_ref(), &s.exclude[..]);
                let found =
                    super::hydra_runs::walk(self.root, self.sources, stage, pattern, &names)?;
                self.listings.extend(found.listings);
                self.warnings.extend(found.warning);
                let combos = found.combos;
                combos.into_iter().map(|(c, f)| (c, Some(f))).unzip()
            }
            None => {
                let combos = expand::expand(
                    self.sources,
                    &s.name.name,
                    &s.axes,
                    &s.exclude,
                    &s.include,
                    s.matrix_span,
                )?;
                let none = vec![None; combos.len()];
                (combos, none)
            }
        })
    }

    /// Each combination's id, params and task: independent of the others,
    /// so worked out in parallel for a large stage.
    fn expand(
        &self,
        s: &StageDecl,
        file: &FileDecl,
        needs_names: &[String],
        pairs: &[Pair<'_>],
    ) -> Result<Vec<Expanded>, PipelineError> {
        let span = s.task().span;
        let task_has_vars =
            reads_params(&self.sources.text(span.src)[span.start as usize..span.end as usize]);
        // A task that names no param reads the same for every node: once. (Its
        // error is the one a serial pass would meet first: at the first
        // node, which cannot be a duplicate.)
        let shared_task: Option<TaskSpec> = if !task_has_vars && !pairs.is_empty() {
            let scope = Scope {
                params: &file.params,
                needs: needs_names,
            };
            Some(task_of(self.sources, s, &scope)?)
        } else {
            None
        };
        let one = |pair: &Pair<'_>| self.one(s, file, needs_names, shared_task.as_ref(), pair);
        Ok(if pairs.len() >= PARALLEL_EXPANSION {
            use rayon::prelude::*;
            pairs.par_iter().map(one).collect()
        } else {
            pairs.iter().map(one).collect()
        })
    }

    /// One combination's expansion (see [`Expanded`]).
    fn one(
        &self,
        s: &StageDecl,
        file: &FileDecl,
        needs_names: &[String],
        shared_task: Option<&TaskSpec>,
        &(up, combo, matched): &Pair<'_>,
    ) -> Expanded {
        let mut id_params: Vec<Param> = up
            .map(|u| self.node_id_params[u].clone())
            .unwrap_or_default();
        // A together axis holds its block's values: not in the id, and
        // `${axis}` reads them joined by `,`.
        let (block, own): (Vec<&Param>, Vec<&Param>) = combo
            .iter()
            .partition(|p| together::is_block_param(s, &p.name));
        for p in own {
            overlay(&mut id_params, p.clone());
        }
        let mut params = file.params.clone();
        for p in &id_params {
            overlay(&mut params, p.clone());
        }
        for p in block.iter().filter(|p| together::is_axis(s, &p.name)) {
            overlay(&mut params, together::joined(p));
        }
        if let (Some(rel), Some(pattern)) = (matched, &s.files) {
            overlay(&mut params, file_param(rel, pattern.span));
            if s.hydra.is_some() {
                overlay(&mut params, super::hydra_runs::job_param(rel, pattern.span));
            }
        }
        // `repeat: 1`: one repetition, not named in the id; `${rep}` is 1.
        if let Some(node) = &s.repeat {
            if !id_params.iter().any(|p| p.name == REP_PARAM) {
                overlay(
                    &mut params,
                    Param {
                        name: REP_PARAM.to_owned(),
                        node: Node {
                            kind: Kind::Int(1),
                            span: node.span,
                        },
                    },
                );
            }
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
        let read = |params: &[Param]| {
            let scope = Scope {
                params,
                needs: needs_names,
            };
            task_of(self.sources, s, &scope)
        };
        let task = together::task_for(self.sources, s, shared_task, &params, &block, read);
        let values: Vec<(String, crate::value::Value)> = params
            .iter()
            .filter_map(|p| value_of(&p.node).map(|v| (p.name.clone(), v)))
            .collect();
        (id, id_params, id_values, values, task)
    }

    /// Checks the expanded nodes in order (so the first error is the one a
    /// serial pass finds: two with one id, or a bad task) and adds them;
    /// their indices.
    fn number(
        &mut self,
        s: &StageDecl,
        pairs: &[Pair<'_>],
        expanded: Vec<Expanded>,
        repeated: bool,
    ) -> Result<Vec<NodeIdx>, PipelineError> {
        let needs_all = self.needs_of(s);
        let mut mine = Vec::with_capacity(pairs.len());
        let mut seen_ids: HashMap<String, (Span, Option<&String>)> = HashMap::new();
        for ((up, combo, matched), (id, id_params, id_values, values, task)) in
            pairs.iter().zip(expanded)
        {
            let at = combo.last().map(|p| p.node.span).unwrap_or(s.name.span);
            if let Some((prev, prev_file)) = seen_ids.insert(id.clone(), (at, *matched)) {
                if let (Some(a), Some(b), Some(pattern)) = (prev_file, matched, &s.files) {
                    return Err(self
                        .sources
                        .error(
                            format!("files `{a}` and `{b}` both give node `{id}`"),
                            pattern.span,
                            "the captures do not tell them apart",
                        )
                        .with_help("capture the part of the path that differs (e.g. `{run}/…` for the folder), or `exclude` one of them"));
                }
                let inherited = up.map(|u| self.node_id_params[u].as_slice());
                return Err(duplicate_node(
                    self.sources,
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
            // A repetition's number: its own, or that of the repetition
            // it follows (`for_each`).
            let rep = if repeated {
                match id_values.last() {
                    Some((k, crate::value::Value::Int(r))) if k == REP_PARAM => {
                        u32::try_from(*r).ok()
                    }
                    _ => None,
                }
            } else {
                up.and_then(|u| self.nodes[u].rep)
            };
            mine.push(self.nodes.len());
            self.nodes.push(crate::graph::Node {
                id,
                stage: s.name.name.clone(),
                id_params: id_values,
                params: values,
                task,
                needs,
                file: matched.cloned(),
                rep,
            });
            self.node_id_params.push(id_params);
        }
        Ok(mine)
    }

    /// The `needs:` edges of a stage's nodes: every node of each stage
    /// named, by id.
    fn needs_of(&self, s: &StageDecl) -> Vec<Need> {
        s.needs
            .iter()
            .map(|n| {
                let mut ids = self.stage_nodes[n.name.as_str()].clone();
                ids.sort_by(|a, b| self.nodes[*a].id.cmp(&self.nodes[*b].id));
                Need {
                    stage: n.name.clone(),
                    nodes: ids,
                }
            })
            .collect()
    }
}

/// `${file}`: the path a `files:` stage's node was made for.
fn file_param(rel: &str, span: Span) -> Param {
    Param {
        name: "file".into(),
        node: Node {
            kind: Kind::Str {
                value: rel.to_string(),
                raw_offset: 0,
                escaped: true,
            },
            span,
        },
    }
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

/// A stage's task read with `scope`, and checked.
fn task_of(sources: &Sources, s: &StageDecl, scope: &Scope<'_>) -> Result<TaskSpec, PipelineError> {
    let t: TaskSpec = de::from_node(s.task(), scope).map_err(|e| sources.de_error(e))?;
    t.validate().map_err(|msg| {
        sources
            .error(msg.message, s.task().span, "in this task")
            .with_help(msg.help)
    })?;
    Ok(t)
}

/// What a stage and its file say about themselves.
fn about_of(s: &StageDecl, file: &FileDecl) -> crate::graph::About {
    crate::graph::About {
        description: s.description.clone(),
        pipeline_title: file.about.title.clone(),
        pipeline_description: file.about.description.clone(),
    }
}

/// A stage's `isolation:`, read with the pipeline's params and checked
/// against its task.
fn isolation_of(
    sources: &Sources,
    s: &StageDecl,
    scope: &Scope<'_>,
    task: Option<&crate::tasks::TaskSpec>,
) -> Result<Option<crate::config::Isolation>, PipelineError> {
    let Some(node) = &s.isolation else {
        return Ok(None);
    };
    let isolation = de::from_node(node, scope).map_err(|e| sources.de_error(e))?;
    if let Some(task) = task {
        repeat::check_isolated(sources, task, isolation, node.span)?;
    }
    Ok(Some(isolation))
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
    // A value holding `,` or `=` can make two different combinations
    // print the same id.
    let ambiguous = combo.iter().find_map(|c| {
        let text = value_of(&c.node)?.display();
        text.contains([',', '=']).then_some(text)
    });
    let help = match ambiguous {
        Some(v) => format!("the value `{v}` holds `,` or `=`, which a node id puts between params, so two different combinations may read as one id: use values without them"),
        None => "two matrix combinations (or include entries) are identical: remove one".to_owned(),
    };
    sources
        .error(
            format!("node `{id}` is produced twice"),
            at,
            "duplicate combination",
        )
        .with_label(prev, "first produced here")
        .with_help(help)
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
