//! Reading upstream nodes' files: `metrics.json` (from `Analyze`) and
//! `results.json` (from `Vit`, or a `rows` table from `OpBench`), each checked
//! just enough that a later lookup cannot misread it.

use std::path::Path;

use serde_json::Value as Json;

use crate::tasks::{TaskError, UpstreamNode};

pub(super) const METRICS_JSON: &str = "metrics.json";
pub(super) const RESULTS_JSON: &str = "results.json";

/// The parsed files of one upstream node.
#[derive(Debug, Clone)]
pub(super) struct NodeFiles {
    pub node: UpstreamNode,
    /// `devices[device]` of `metrics.json`, and the whole document.
    pub metrics: Option<Metrics>,
    /// `results.json` when it describes one run.
    pub results: Option<Json>,
    /// The entries of `results.json`'s `rows`, when it is a table.
    pub rows: Option<Vec<serde_json::Map<String, Json>>>,
}

#[derive(Debug, Clone)]
pub(super) struct Metrics {
    pub device: Json,
    pub document: Json,
    /// The trace recorded no GPU at all (`devices` is empty: a CPU run), so
    /// `device` is an empty object and the device metrics stay empty.
    pub no_gpu: bool,
}

/// Reads whichever of `metrics.json` and `results.json` the node has; at
/// least one must be there.
pub(super) fn read_node(node: &UpstreamNode, device: usize) -> Result<NodeFiles, TaskError> {
    let metrics_path = node.dir.join(METRICS_JSON);
    let results_path = node.dir.join(RESULTS_JSON);
    if !metrics_path.exists() && !results_path.exists() {
        return Err(TaskError::UpstreamFileMissing {
            node: node.id.clone(),
            dir: node.dir.clone(),
            expected: format!("`{METRICS_JSON}` and `{RESULTS_JSON}`"),
        });
    }
    let mut files = NodeFiles {
        node: node.clone(),
        metrics: None,
        results: None,
        rows: None,
    };
    if metrics_path.exists() {
        let doc = read_json(node, &metrics_path)?;
        files.metrics = Some(pick_device(node, &metrics_path, doc, device)?);
    }
    if results_path.exists() {
        let doc = read_json(node, &results_path)?;
        match doc.get("rows") {
            Some(rows) => files.rows = Some(table_rows(node, &results_path, rows)?),
            None if doc.is_object() => files.results = Some(doc),
            None => return Err(shape(node, &results_path, "the document is not an object")),
        }
    }
    Ok(files)
}

/// A node's files as configurations: a block measured together
/// (`together`) gives one per member, whose params add the member's values
/// of the together axes and whose `results.json` is the member's object
/// (with the block's `env` where the member has none; an A/A twin's marked
/// `aa_twin`); any other node gives itself.
pub(super) fn members(files: NodeFiles) -> Vec<Result<NodeFiles, TaskError>> {
    let Some(together) = files.node.together.clone() else {
        return vec![Ok(files)];
    };
    let path = files.node.dir.join(RESULTS_JSON);
    let top = files.results.as_ref();
    let Some(Json::Object(members)) = top.and_then(|r| r.get("members")) else {
        return vec![Err(shape(
            &files.node,
            &path,
            "a block measured together has no `members` object",
        ))];
    };
    together
        .configs()
        .map(|(values, params)| {
            let key = crate::tasks::command::member_key(values);
            let Some(Json::Object(doc)) = members.get(&key) else {
                return Err(shape(
                    &files.node,
                    &path,
                    &format!("member `{key}` is missing or not an object"),
                ));
            };
            let mut doc = doc.clone();
            if let Some(env) = top.and_then(|r| r.get("env")) {
                doc.entry("env").or_insert_with(|| env.clone());
            }
            let mut node = files.node.clone();
            node.params.extend(params);
            node.together = None;
            node.aa_twin = together.is_twin(values);
            Ok(NodeFiles {
                node,
                metrics: None,
                results: Some(Json::Object(doc)),
                rows: None,
            })
        })
        .collect()
}

fn read_json(node: &UpstreamNode, path: &Path) -> Result<Json, TaskError> {
    let text = std::fs::read_to_string(path).map_err(|source| TaskError::UpstreamRead {
        node: node.id.clone(),
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| TaskError::UpstreamJson {
        node: node.id.clone(),
        path: path.to_owned(),
        source,
    })
}

fn pick_device(
    node: &UpstreamNode,
    path: &Path,
    document: Json,
    device: usize,
) -> Result<Metrics, TaskError> {
    let devices = document
        .get("devices")
        .and_then(Json::as_array)
        .ok_or_else(|| shape(node, path, "`devices` is missing or not a list"))?;
    if devices.is_empty() {
        return Ok(Metrics {
            device: Json::Object(Default::default()),
            document,
            no_gpu: true,
        });
    }
    let picked = devices.get(device).cloned().ok_or_else(|| {
        shape(
            node,
            path,
            &format!(
                "`devices` has {} entries, the report reads entry {device} (`device: {device}`)",
                devices.len()
            ),
        )
    })?;
    if !picked.is_object() {
        return Err(shape(
            node,
            path,
            &format!("`devices[{device}]` is not an object"),
        ));
    }
    Ok(Metrics {
        device: picked,
        document,
        no_gpu: false,
    })
}

fn table_rows(
    node: &UpstreamNode,
    path: &Path,
    rows: &Json,
) -> Result<Vec<serde_json::Map<String, Json>>, TaskError> {
    let list = rows
        .as_array()
        .ok_or_else(|| shape(node, path, "`rows` is not a list"))?;
    list.iter()
        .enumerate()
        .map(|(i, row)| {
            row.as_object()
                .cloned()
                .ok_or_else(|| shape(node, path, &format!("`rows[{i}]` is not an object")))
        })
        .collect()
}

fn shape(node: &UpstreamNode, path: &Path, detail: &str) -> TaskError {
    TaskError::UpstreamShape {
        node: node.id.clone(),
        path: path.to_owned(),
        detail: detail.to_owned(),
    }
}

/// Looks a dotted path up in a JSON value: object keys by name, list entries
/// by index (`latency_ms.median_ci95.0`).
pub(crate) fn lookup<'a>(root: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(root, |at, key| match at {
        Json::Object(map) => map.get(key),
        Json::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// Every dotted path to a leaf of `root`, for "did you mean" help.
pub(super) fn leaf_paths(root: &Json, prefix: &str, out: &mut Vec<String>) {
    match root {
        Json::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaf_paths(value, &path, out);
            }
        }
        _ if !prefix.is_empty() => out.push(prefix.to_owned()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookup_walks_objects_and_lists() {
        let doc = json!({"latency_ms": {"median_ci95": [1.5, 2.5]}, "gaps": {"count_ge_1us": 3}});
        assert_eq!(lookup(&doc, "latency_ms.median_ci95.1"), Some(&json!(2.5)));
        assert_eq!(lookup(&doc, "gaps.count_ge_1us"), Some(&json!(3)));
        assert_eq!(lookup(&doc, "gaps.count_ge_2us"), None);
        assert_eq!(lookup(&doc, "latency_ms.median_ci95.x"), None);
    }

    #[test]
    fn leaf_paths_lists_nested_fields_but_not_list_items() {
        let doc = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
        let mut paths = Vec::new();
        leaf_paths(&doc, "", &mut paths);
        assert_eq!(paths, ["a.b", "a.c", "d"]);
    }
}
