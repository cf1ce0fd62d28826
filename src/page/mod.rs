//! The study as one self-contained HTML page (`vitgraph report`): the
//! stages and their states, the stage graph, the latest build's timeline,
//! every `Report` node's tables and plots, and each node's details on
//! demand. Styles, script, drawings and data are inline, and the page's
//! content security policy forbids every request, so it opens from a mail
//! attachment and never reaches the network.
//!
//! [`Study`] is what the command gathered from the pipelines and the store;
//! this module only draws it.

mod graph;
mod timeline;

use serde::Serialize;

/// What the page shows; gathered by `vitgraph report` (see `cli::page`).
#[derive(Debug, Default, Serialize)]
pub(crate) struct Study {
    pub title: String,
    /// The pipelines' `description`, under the title.
    pub description: Option<String>,
    pub generated: String,
    pub version: String,
    /// Nothing was ever built in the workspace.
    pub nothing_built: bool,
    pub stages: Vec<StageView>,
    /// Stage-level edges: (upstream stage, downstream stage) by index.
    pub edges: Vec<(usize, usize)>,
    /// Compact node rows: id, stage index, state, last duration (ms).
    pub nodes: Vec<NodeRow>,
    /// Per-node details, by index into `nodes`, shown on demand.
    pub details: Vec<NodeDetails>,
    /// Environment records the details refer to by index.
    pub envs: Vec<serde_json::Value>,
    pub build: Option<BuildView>,
    /// The builds the timeline's picker lists, latest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub builds: Vec<BuildRef>,
    /// The timelines of other builds the picker switches to in the page.
    #[serde(skip)]
    pub other_builds: Vec<BuildView>,
    pub reports: Vec<ReportView>,
    /// Text lines of warnings (a `files` pattern that matched nothing).
    pub warnings: Vec<String>,
    /// Each configuration of a stage with a precision target.
    pub precision: Vec<PrecisionView>,
    /// `vitgraph report --compare A B`: the comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<CompareView>,
    /// Runs measured on another machine that stand for this machine's: where
    /// (host, GPU, signer) and how many.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<(String, usize)>,
    /// A build running as the page was written: nodes done, nodes planned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<(usize, usize)>,
}

/// A comparison of two sets of runs as the page draws it: a sortable table
/// (`verdict` and `metric` filter it), each row's ratio interval drawn, the
/// kernel diffs on demand.
#[derive(Debug, Default, Serialize)]
pub(crate) struct CompareView {
    /// `A: baseline:main — baseline main, 27 runs`.
    pub sides: Vec<String>,
    /// The threshold and method, in a sentence.
    pub method: String,
    /// `6 configurations paired, …`, and the one-sided configurations.
    pub summary: Vec<String>,
    pub table: Table,
    /// Per row: B / A, its interval's low and high end (None without one).
    pub intervals: Vec<(Option<f64>, Option<f64>, Option<f64>)>,
    pub threshold: f64,
    pub kernels: Vec<KernelDiffView>,
}

/// One analysed configuration's kernel diff.
#[derive(Debug, Default, Serialize)]
pub(crate) struct KernelDiffView {
    pub config: String,
    /// Kernel time, launch latency, utilization and copies, one line each.
    pub lines: Vec<String>,
    pub table: Table,
}

/// Where one configuration of a stage with a precision target stands.
#[derive(Debug, Default, Serialize)]
pub(crate) struct PrecisionView {
    pub configuration: String,
    /// Its stage: the page lists a few per stage and counts the rest.
    pub stage: String,
    /// `precise`, `budget_spent`, `imprecise`, or `stale`.
    pub state: String,
    /// `budget spent at ±6.1 % after 10 runs (max_repeat 10)`.
    pub detail: String,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct StageView {
    pub name: String,
    pub pipeline: String,
    /// Its nodes' task kind (`Vit`, `Notebook`, …).
    pub kind: String,
    /// The stage's `description`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub fresh: usize,
    /// Stale nodes, never-built ones included.
    pub stale: usize,
    /// Of `stale`, the nodes never built.
    pub never_built: usize,
    pub failed: usize,
    pub running: usize,
    /// Repetitions a precision target did not call for (or has not decided yet).
    pub not_needed: usize,
    /// The stale nodes' reason kinds with counts, most frequent first.
    pub reasons: Vec<(String, usize)>,
}

impl StageView {
    /// The colour class of the stage: the worst state of its nodes.
    pub(crate) fn state(&self) -> &'static str {
        if self.failed > 0 {
            "failed"
        } else if self.running > 0 {
            "running"
        } else if self.stale > 0 && self.stale == self.never_built {
            "never-built"
        } else if self.stale > 0 {
            "stale"
        } else if self.fresh > 0 {
            "fresh"
        } else {
            "empty"
        }
    }
}

/// `[id, stage, state, duration_ms]`.
#[derive(Debug, Serialize)]
pub(crate) struct NodeRow(pub String, pub usize, pub &'static str, pub Option<i64>);

#[derive(Debug, Default, Serialize)]
pub(crate) struct NodeDetails {
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Grouped reasons, for a stale node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The current run: when it started (Unix seconds) and how long it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// The key's parts (long upstream lists shortened to a count).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub key: serde_json::Value,
    /// Index into `Study::envs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<usize>,
    /// Where the run that stands for this node was measured, when it was
    /// measured on another machine (`on \`gpu-box\` (H100), signed by …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elsewhere: Option<String>,
    /// Output files: name, size in bytes, link relative to the page.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<(String, u64, String)>,
    /// The last lines of the task's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// A measuring run's batch latencies, verdict and GPU telemetry, from
    /// its `results.json` (see `cli::page_parts::measurement_view`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure: Option<serde_json::Value>,
    /// An analysis's top kernels per device, from its `metrics.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels: Option<serde_json::Value>,
    /// An analysis's measured window: its first kernels per stream and its
    /// batches, from its `window.tracks.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracks: Option<serde_json::Value>,
    /// An analysis's `window.perfetto.json` when small enough to travel in
    /// the page: posted to ui.perfetto.dev from the page's own data, which
    /// works where the page cannot read its neighbours (`file://`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perfetto: Option<String>,
    /// The last attempt when it failed or was interrupted: status, start,
    /// error, exit status or signal, and a `Command`'s command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<serde_json::Value>,
}

/// A build as the timeline's picker lists it.
#[derive(Debug, Serialize)]
pub(crate) struct BuildRef {
    pub number: usize,
    /// The machine it ran on.
    pub host: String,
    pub started: String,
    pub seconds: f64,
    pub bars: usize,
    /// Whether the page holds its timeline.
    pub embedded: bool,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct BuildView {
    pub number: usize,
    pub of: usize,
    pub host: String,
    pub started: String,
    pub seconds: f64,
    /// Bars drawn (one per attempt of the build).
    pub bars: usize,
    /// With `--since`: the moment the timeline starts from (every build's
    /// attempts since then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip)]
    pub entries: Vec<Bar>,
}

/// One attempt on the timeline.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    /// Its index into `Study::nodes`, when the page lists it.
    pub index: Option<usize>,
    pub stage: usize,
    pub lane: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub status: String,
    /// The node held the whole machine (see `Graph::runs_alone`).
    pub alone: bool,
    /// A later attempt at the same key replaced its run (`--force`).
    pub replaced: bool,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct ReportView {
    pub node: String,
    pub title: String,
    pub table: Option<Table>,
    pub compare: Option<Table>,
    /// What the comparison compares: `[param, baseline value, metric]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_of: Option<[String; 3]>,
    /// Inline SVG documents.
    #[serde(skip)]
    pub plots: Vec<(String, String)>,
    pub env_lines: Vec<String>,
    /// The report's `params` columns (filterable).
    pub params: usize,
    /// When the run shown was built (UTC) and how long it took.
    pub built: String,
    /// The title the shown run was built with, where the pipeline's title
    /// has changed since (the tables and plots are that run's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built_title: Option<String>,
    /// Why the report is stale (grouped reasons); empty when fresh.
    pub stale: Vec<String>,
    /// Its node is being built right now.
    pub running: bool,
    /// Why the pipelines, as they stand, refuse to build it (a plot that
    /// would zig-zag), with the place and the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Table {
    pub names: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// Colours of stages (timeline bars, legend), by stage index.
/// The stages' colours: no red, which marks a failure (N12).
pub(crate) const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#499894", "#76b7b2", "#edc948", "#b07aa1", "#86bcb6",
    "#9c755f", "#bab0ac",
];

/// The page as HTML text.
pub(crate) fn render(study: &Study) -> String {
    let data = serde_json::to_string(study).unwrap_or_else(|_| "{}".into());
    let graph = graph::svg(study);
    let timeline = study
        .build
        .as_ref()
        .map(|b| timeline::svg(b, study))
        .unwrap_or_default();
    let mut plots = String::new();
    for b in &study.other_builds {
        plots.push_str(&format!(
            "<template id=\"timeline-build-{}\">{}</template>",
            b.number,
            timeline::svg(b, study)
        ));
    }
    for (i, r) in study.reports.iter().enumerate() {
        plots.push_str(&format!("<template id=\"plots-{i}\">"));
        for (name, svg) in &r.plots {
            plots.push_str(&format!(
                "<figure class=\"plot\"><figcaption>{}</figcaption>{}</figure>",
                escape(name),
                strip_prolog(svg)
            ));
        }
        plots.push_str("</template>");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src '{script_hash}'; img-src data:; connect-src 'self'\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title}</title><style>{CSS}</style></head><body>\
<header><h1>{title}</h1>{lead}<p class=\"meta\">vitgraph {version} · written {generated} from the store</p></header>\
<nav id=\"toc\"><a href=\"#study\">Stages</a><a href=\"#graph\">Stage graph</a><a href=\"#timeline\">Timeline</a>{compare_link}<a href=\"#reports\">Reports</a><a href=\"#nodes\">Nodes</a></nav>\
<div id=\"findings\"></div>\
<main>\
<section id=\"study\"><h2>Stages</h2><div id=\"stages\"></div></section>\
<section id=\"graph\"><h2>Stage graph</h2>{graph}</section>\
<section id=\"timeline\"><h2>Timeline</h2><div id=\"build-info\"></div>{timeline}</section>\
{compare}\
<section id=\"reports\"><h2>Reports</h2><div id=\"report-list\"></div><div id=\"notebook-list\"></div></section>\
<section id=\"nodes\"><h2>Nodes</h2><div id=\"node-browser\"></div></section>\
</main>{plots}\
<script type=\"application/json\" id=\"data\">{data}</script>\
<script>{JS}</script></body></html>\n",
        title = escape(&study.title),
        lead = study
            .description
            .as_ref()
            .map(|d| format!("<p class=\"lead\">{}</p>", escape(d)))
            .unwrap_or_default(),
        compare_link = if study.compare.is_some() {
            "<a href=\"#comparison\">Comparison</a>"
        } else {
            ""
        },
        compare = if study.compare.is_some() {
            "<section id=\"comparison\"><h2>Comparison</h2><div id=\"compare-box\"></div></section>"
        } else {
            ""
        },
        version = escape(&study.version),
        generated = escape(&study.generated),
        // `<` only ever appears inside the JSON's strings, where `\u003c`
        // reads the same: no `</script>` and no `<!--` can end or bend the
        // data block however the study's text is written.
        data = data.replace('<', "\\u003c"),
        script_hash = script_hash(),
    )
}

/// The CSP source that lets the page's own script run and nothing else:
/// `sha256-` and the base64 of its SHA-256, computed once.
fn script_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(JS.as_bytes());
        format!("sha256-{}", base64(&digest))
    })
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An SVG file's text without its XML declaration and doctype (inline SVG
/// must start at `<svg`).
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// Text for HTML and SVG: `&`, `<`, `>`, `"` escaped.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        for (text, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(text.as_bytes()), want);
        }
        // SHA-256 digests are 32 bytes: 44 characters, one `=`.
        assert_eq!(super::script_hash().len(), "sha256-".len() + 44);
    }
}
