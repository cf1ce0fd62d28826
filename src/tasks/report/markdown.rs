//! `report.md`: a header stating where and on how much data the numbers were
//! measured, the table, the comparison and links to the plots.

use std::fmt::Write;

use serde_json::Value as Json;

use super::cell::Cell;
use super::compare::Comparison;
use super::spec::ReportSpec;
use super::table::{EnvGroup, Table, CI_HIGH, CI_LOW, NODES};
use crate::stats::estimate::Estimate;

/// The facets named in the header, in this order, with their labels.
const FACETS: [(&str, &str); 6] = [
    ("gpu", "GPU"),
    ("driver_major", "driver"),
    ("cuda", "CUDA"),
    ("libtorch", "libtorch"),
    ("cpu", "CPU"),
    ("numa", "NUMA"),
];

/// What a metric a report answers with measures, in words: the GPU's own
/// time, or an end-to-end number the host paces (CPU-bound where the CPU
/// preprocesses), so a reader knows whether it carries over between hosts.
fn what_it_measures(metric: &str) -> &'static str {
    let root = metric.split('.').next().unwrap_or(metric);
    match root {
        "forward_device_ms" => "the forward pass timed on the GPU by CUDA events, the GPU's time per forward; with a CUDA graph it carries over between processes and hosts with this GPU",
        "latency_ms" => "the end-to-end batch latency (preprocessing, copies and the forward pass) timed by the host; CPU-bound where the CPU preprocesses, so it moves with the host's speed between processes",
        "throughput_images_per_s" => "end-to-end images per second over the timed window, paced by the host like the latency; CPU-bound where the CPU preprocesses",
        "stages_ms" => "one stage of each batch timed by the host after a device synchronization",
        "time_ms" => "the operator timed on the device by CUDA events (by the host clock on a CPU)",
        "gpu_utilization" | "gpu_utilization_all" | "kernel_time_ratio" | "kernel_count" | "launch_latency_ns" => "from the CUPTI trace of the analysed window",
        _ => "as the runs' `results.json` give it",
    }
}

pub(super) fn render(spec: &ReportSpec, table: &Table, comparison: Option<&Comparison>) -> String {
    let mut md = format!("# {}\n\n", super::cell::markdown_text(&spec.title));
    if let Some(metric) = &spec.answer {
        let _ = writeln!(
            md,
            "**Answered by** `{metric}`: {}.\n",
            what_it_measures(metric)
        );
    }
    over_target(&mut md, spec, table);
    if let Some(place) = measured_on(table) {
        let _ = writeln!(md, "Measured on {place}.\n");
    }
    environment(&mut md, table);
    sample_sizes(&mut md, spec, table);
    md.push_str("## Table\n\n");
    intervals_note(&mut md, spec, table);
    // Node ids and the interval bounds are in `table.csv`; here the bounds
    // read as `± x %` beside their value, and ids would only crowd the table.
    let shown: Vec<usize> = (0..table.names.len())
        .filter(|&i| {
            let name = &table.names[i];
            name != NODES
                && !(i >= table.param_count + table.value_count
                    && (name.ends_with(CI_LOW) || name.ends_with(CI_HIGH)))
        })
        .collect();
    let names: Vec<String> = shown.iter().map(|&i| table.names[i].clone()).collect();
    let cells: Vec<Vec<Cell>> = table
        .rows
        .iter()
        .map(|r| {
            shown
                .iter()
                .map(|&i| match r.intervals[i] {
                    Some(e) => with_interval(&r.cells[i], e, spec.target),
                    None => r.cells[i].clone(),
                })
                .collect()
        })
        .collect();
    let rows: Vec<&[Cell]> = cells.iter().map(Vec::as_slice).collect();
    grid(&mut md, &names, &rows);
    if let (Some(c), Some(cmp)) = (comparison, &spec.compare) {
        let _ = writeln!(
            md,
            "\n## Comparison: `{}` against `{}` = `{}`\n",
            cmp.metric, cmp.param, cmp.baseline
        );
        let _ = writeln!(
            md,
            "`ratio` is the row's `{}` divided by the baseline row's, within rows equal in every \
             other param. Where both rows were measured together (`together`: the same \
             processes measured both), the ratio is the geometric mean of the per-process \
             ratios and its 95% interval the t-interval over the processes on the log scale \
             (`interval` = `paired`). Where both rows fold two or more repetitions measured \
             apart, its 95% interval is Welch's over the repetitions (log scale); otherwise it \
             rests on the standard errors of its batches' statistic (log scale), which see one \
             run's noise only (`interval` = `within-run`). `verdict`: `faster` or `slower` where \
             the interval excludes 1 and the change is at least {margin}; `same` where the \
             interval lies within ±{margin} (or excludes 1 with a smaller change); \
             `inconclusive` where it holds 1 and reaches beyond ±{margin}. Rows of different \
             environments are not paired.\n",
            cmp.metric,
            margin = format_args!("{} %", cmp.margin * 100.0)
        );
        if c.rows.is_empty() {
            // A one-valued comparison, e.g. NUMA on a host with one NUMA node:
            // say so rather than print an empty table.
            let _ = writeln!(
                md,
                "Every row has `{}` = `{}`: there is no other value to compare it with.",
                cmp.param, cmp.baseline
            );
        } else {
            let rows: Vec<&[Cell]> = c.rows.iter().map(Vec::as_slice).collect();
            grid(&mut md, &c.names, &rows);
        }
    }
    if !spec.plots.is_empty() {
        md.push_str("\n## Plots\n\n");
        for plot in &spec.plots {
            let stem = plot.stem();
            let alt = plot.heading();
            let _ = writeln!(md, "![{alt}](plots/{stem}.svg)\n");
            if let Some(caption) = &plot.caption {
                let _ = writeln!(md, "*{caption}*\n");
            }
        }
    }
    md
}

/// What the numbers and their `±` mean, when the table has intervals.
/// Under the title: how many rows have an interval wider than the
/// report's target, so that a reader sees it before the numbers.
fn over_target(md: &mut String, spec: &ReportSpec, table: &Table) {
    let Some(target) = spec.target else {
        return;
    };
    let wide = table
        .rows
        .iter()
        .filter(|r| {
            r.intervals
                .iter()
                .flatten()
                .any(|e| e.half_width_rel() > target)
        })
        .count();
    if wide > 0 {
        let _ = writeln!(
            md,
            "**⚠ {wide} of {} rows have a 95% interval wider than the target of ±{} %** (marked ⚠ in the table): measure them again, or together with what they are compared with.\n",
            table.rows.len(),
            super::cell::format_sig(100.0 * target)
                .trim_end_matches('0')
                .trim_end_matches('.')
        );
    }
}

fn intervals_note(md: &mut String, spec: &ReportSpec, table: &Table) {
    let repeated = table.rows.iter().filter(|r| r.reps > 1).count();
    let any = table
        .rows
        .iter()
        .any(|r| r.intervals.iter().any(Option::is_some));
    if !any {
        return;
    }
    if repeated > 0 {
        md.push_str(
            "Each row is one configuration; `reps` is how many separate runs it folds. A number \
             of a row with two or more is the mean over its repetitions, `±` the half-width of \
             the 95% t-interval over them, relative to the value (`interval` = `repetitions`). ",
        );
    }
    md.push_str(
        "A row of one run shows the 95% interval of its own batches (`interval` = \
         `within-run`): it says nothing of where the next run lands.",
    );
    if let Some(target) = spec.target {
        let _ = write!(
            md,
            " ⚠ marks an interval wider than the target of ±{} % (column `wide`).",
            super::cell::format_sig(100.0 * target)
                .trim_end_matches('0')
                .trim_end_matches('.')
        );
    }
    md.push_str("\n\n");
}

/// A value with its interval as `v ± x %` (and ⚠ when wider than `target`).
fn with_interval(cell: &Cell, e: Estimate, target: Option<f64>) -> Cell {
    let half = 100.0 * e.half_width_rel();
    // A value every repetition agrees on (a parameter count, FLOPs).
    if half == 0.0 {
        return cell.clone();
    }
    let digits = if half < 10.0 { 1 } else { 0 };
    let flag = if target.is_some_and(|t| e.half_width_rel() > t) {
        " ⚠"
    } else {
        ""
    };
    Cell::Str(format!("{} ± {half:.digits$} %{flag}", cell.markdown()))
}

fn environment(md: &mut String, table: &Table) {
    md.push_str("## Environment\n\n");
    let unknown = table.rows.iter().filter(|r| r.env_group.is_none()).count();
    if table.env_groups.len() > 1 {
        let _ = writeln!(
            md,
            "> **Warning:** the rows were measured in {} different environments (column \
             `env_group`). Numbers from different environments are not comparable; \
             comparisons only pair rows of one environment.\n",
            table.env_groups.len()
        );
    }
    for group in &table.env_groups {
        let _ = writeln!(md, "- {}", describe(group));
    }
    if unknown > 0 {
        let _ = writeln!(
            md,
            "- {unknown} row(s) with no environment fingerprint (no `results.json` with `env`)"
        );
    }
    if table.rows_without_gpu > 0 {
        let _ = writeln!(
            md,
            "- {} row(s) come from traces that recorded no GPU (runs on the CPU): their GPU \
             metrics are empty",
            table.rows_without_gpu
        );
    }
    md.push('\n');
}

/// Where every row was measured, in words, when they were measured in one
/// environment (`gpu-box: GPU NVIDIA H100 80GB HBM3`); None for rows of
/// several environments (their plots' legends and the Environment section
/// name each) or of none recorded. A report and its plots say it, so a
/// plot that travels alone says where its numbers come from.
pub(super) fn measured_on(table: &Table) -> Option<String> {
    let [group] = table.env_groups.as_slice() else {
        return None;
    };
    let facet = |key: &str| {
        group
            .facets
            .get(key)
            .and_then(Json::as_str)
            .filter(|v| !v.is_empty() && *v != "none")
    };
    let device = match (facet("gpu"), facet("cpu")) {
        (Some(gpu), _) => format!("GPU {gpu}"),
        (None, Some(cpu)) => format!("CPU {cpu}"),
        (None, None) => "the device not recorded".to_owned(),
    };
    Some(match group.hosts.as_slice() {
        [] => device,
        hosts => format!("{}: {device}", hosts.join(", ")),
    })
}

fn describe(group: &EnvGroup) -> String {
    let mut parts: Vec<String> = FACETS
        .iter()
        .filter_map(|(key, label)| {
            let value = group.facets.get(key)?;
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            Some(format!("{label} {text}"))
        })
        .collect();
    if let Json::Object(map) = &group.facets {
        for (key, value) in map
            .iter()
            .filter(|(k, _)| !FACETS.iter().any(|(f, _)| f == k))
        {
            parts.push(format!("{key} {value}"));
        }
    }
    let hosts = if group.hosts.is_empty() {
        "host not recorded".to_owned()
    } else {
        format!("host {}", group.hosts.join(", "))
    };
    format!(
        "`{}` ({} row(s)): {hosts}; {}",
        group.label,
        group.rows,
        parts.join(", ")
    )
}

fn sample_sizes(md: &mut String, spec: &ReportSpec, table: &Table) {
    md.push_str("## Sample sizes\n\n");
    let sources: Vec<String> = spec.sources.iter().map(|s| format!("`{s}`")).collect();
    let _ = writeln!(
        md,
        "- {} row(s) joined from {} node(s) of {}",
        table.rows.len(),
        table.node_count,
        sources.join(", ")
    );
    let samples: Vec<usize> = table
        .rows
        .iter()
        .filter_map(|r| r.samples.as_ref().map(Vec::len))
        .collect();
    if let (Some(lo), Some(hi)) = (samples.iter().min(), samples.iter().max()) {
        let _ = writeln!(
            md,
            "- per-batch latency samples per row: {} (in {} row(s))",
            span(*lo as i64, *hi as i64),
            samples.len()
        );
    }
    let images: Vec<i64> = table.rows.iter().filter_map(|r| r.images).collect();
    if let (Some(lo), Some(hi)) = (images.iter().min(), images.iter().max()) {
        let _ = writeln!(md, "- measured images per row: {}", span(*lo, *hi));
    }
    md.push('\n');
}

fn span(lo: i64, hi: i64) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

/// A GitHub-flavoured markdown table.
fn grid(md: &mut String, names: &[String], rows: &[&[Cell]]) {
    let header: Vec<String> = names
        .iter()
        .map(|n| super::cell::markdown_text(n))
        .collect();
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(names.len()));
    for row in rows {
        let cells: Vec<String> = row.iter().map(Cell::markdown).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
}
