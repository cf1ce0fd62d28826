//! Axis titles and tick labels for plots. A title is a column's name in
//! words, with its unit (the book's Reports chapter lists them); a column
//! not in the table keeps its name, with a unit read from its suffix where
//! it has one.

/// Named columns: the study's headline metrics and params.
const NAMED: &[(&str, &str)] = &[
    ("throughput_images_per_s", "throughput (images/s)"),
    ("latency_ms.median", "median latency per batch (ms)"),
    ("latency_ms.mean", "mean latency per batch (ms)"),
    ("latency_ms.p99", "p99 latency per batch (ms)"),
    ("latency_ms.p90", "p90 latency per batch (ms)"),
    ("stages_ms.forward", "forward pass per batch (ms)"),
    ("stages_ms.preprocess", "preprocessing per batch (ms)"),
    ("stages_ms.h2d", "host-to-device copy per batch (ms)"),
    ("time_ms.median", "median time (ms)"),
    ("time_ms.mean", "mean time (ms)"),
    ("gpu_utilization", "GPU busy, measured window (fraction)"),
    ("gpu_utilization_all", "GPU busy, whole trace (fraction)"),
    ("kernel_time_ratio", "kernel time / span"),
    ("kernel_count", "kernels"),
    ("flops_per_image", "FLOPs per image"),
    ("params", "parameters"),
    ("peak_memory_bytes", "peak GPU memory (bytes)"),
    ("gbps", "bandwidth (GB/s)"),
    ("tflops", "TFLOP/s"),
    ("fraction_of_copy_bandwidth", "fraction of copy bandwidth"),
    ("fraction_of_matmul_rate", "fraction of matmul rate"),
    (
        "memcpy.HtoD.bandwidth_gbps",
        "host-to-device bandwidth (GB/s)",
    ),
    ("launch_latency_ns.median", "median launch latency (ns)"),
    ("batch", "batch size"),
    ("dim", "hidden dim"),
    ("res", "resolution (px)"),
    ("image_size", "image size (px)"),
];

/// Units read from a column's last name part (`x_ms.median`, `y_bytes`).
const SUFFIXES: &[(&str, &str)] = &[
    ("_ms", "ms"),
    ("_ns", "ns"),
    ("_s", "s"),
    ("_per_s", "/s"),
    ("_bytes", "bytes"),
    ("_gbps", "GB/s"),
];

/// The axis title of `column`.
pub(super) fn axis_label(column: &str) -> String {
    if let Some((_, label)) = NAMED.iter().find(|(name, _)| *name == column) {
        return (*label).to_owned();
    }
    // `a_ms.median` → the unit of `a_ms`; `b_bytes` → of itself.
    let base = column.split('.').next().unwrap_or(column);
    SUFFIXES
        .iter()
        .filter(|(suffix, _)| base.ends_with(suffix))
        .max_by_key(|(suffix, _)| suffix.len())
        .map_or_else(
            || column.to_owned(),
            |(_, unit)| format!("{column} ({unit})"),
        )
}

/// A column's name in words, without its unit: `throughput`, `hidden dim`.
fn words(column: &str) -> String {
    let label = axis_label(column);
    match label.rfind(" (") {
        Some(at) if label.ends_with(')') => label[..at].to_owned(),
        _ => label,
    }
}

/// A plot's heading in words when its spec gives no `title` (N17):
/// `throughput against hidden dim, one line per patch and depth`.
pub(super) fn heading(y: &str, x: &str, series: &[String]) -> String {
    let mut h = format!("{} against {}", words(y), words(x));
    if !series.is_empty() {
        let names: Vec<String> = series.iter().map(|s| words(s)).collect();
        let joined = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        h.push_str(&format!(", one line per {joined}"));
    }
    h
}

/// A tick's label: the value (on a log axis, `10^value`) with four
/// significant digits and no trailing zeros (`1`, `64`, `0.25`), 10,000
/// and more with an SI prefix (`12k`, `2.5M`).
pub(super) fn tick(value: f64, log: bool) -> String {
    let v = if log { 10f64.powf(value) } else { value };
    let v = if (v - v.round()).abs() < 1e-9 * v.abs().max(1.0) {
        v.round()
    } else {
        v
    };
    // Large values with an SI prefix: 12k, 2.5M, 500M, 1G.
    if v.abs() >= 1e4 {
        const PREFIXES: [&str; 5] = ["k", "M", "G", "T", "P"];
        let step = ((v.abs().log10().floor() as usize) / 3).clamp(1, PREFIXES.len());
        let mantissa = v / 10f64.powi(3 * step as i32);
        // Three significant digits: 243M, 87.5M, 2.5M (never 242.814M).
        let decimals = (2 - mantissa.abs().log10().floor() as i32).clamp(0, 2) as usize;
        let m = format!("{mantissa:.decimals$}");
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.')
        } else {
            &m
        };
        return format!("{m}{}", PREFIXES[step - 1]);
    }
    let text = super::cell::format_sig(v);
    if text.contains('.') && !text.contains('e') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heading_says_what_is_plotted_in_words() {
        assert_eq!(
            heading("throughput_images_per_s", "batch", &["model".to_owned()]),
            "throughput against batch size, one line per model"
        );
        assert_eq!(
            heading(
                "gpu_utilization",
                "dim",
                &["patch".to_owned(), "depth".to_owned()]
            ),
            "GPU busy, measured window against hidden dim, one line per patch and depth"
        );
        assert_eq!(
            heading("latency_ms.median", "res", &[]),
            "median latency per batch against resolution"
        );
    }

    #[test]
    fn named_columns_read_as_words_and_others_keep_their_name_with_a_unit() {
        assert_eq!(
            axis_label("latency_ms.median"),
            "median latency per batch (ms)"
        );
        assert_eq!(
            axis_label("throughput_images_per_s"),
            "throughput (images/s)"
        );
        assert_eq!(axis_label("compile_s"), "compile_s (s)");
        assert_eq!(axis_label("queue_wait_ms.p50"), "queue_wait_ms.p50 (ms)");
        assert_eq!(axis_label("items_per_s"), "items_per_s (/s)");
        assert_eq!(axis_label("head_dim"), "head_dim");
    }
}
