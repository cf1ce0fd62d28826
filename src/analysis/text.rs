//! `analysis.txt`: a short human summary, laid out like the `nsys stats`
//! tables so numbers can be compared at a glance.

use std::fmt::Write;

use super::metrics::{DeviceMetrics, MemorySummary, Metrics};

/// Kernel rows shown per device (all of them are in `metrics.json`).
const TOP_KERNELS: usize = 20;

pub fn render(m: &Metrics) -> String {
    let mut s = String::new();
    let w = &m.window;
    let _ = writeln!(s, "trace: {}", m.source.file);
    match (w.found, w.start_ns, w.duration_ns) {
        (true, Some(start), Some(d)) => {
            let _ = writeln!(
                s,
                "window: NVTX `{}` ({} range(s)), start {start} ns, {} ",
                w.name,
                w.ranges,
                ms(d)
            );
        }
        _ => {
            let _ = writeln!(s, "window: whole trace (no NVTX range `{}`)", w.name);
        }
    }
    if m.devices.is_empty() {
        let _ = writeln!(s, "\nno GPU activity in the window");
    }
    for d in &m.devices {
        device(&mut s, d);
    }
    if let Some(b) = &m.batches {
        let _ = writeln!(
            s,
            "\nbatches (`{}*`): {}  mean {}  median {}  p90 {}  p99 {}  min {}  max {}  std {}",
            b.prefix,
            b.count,
            ms(b.mean_ns as i64),
            ms(b.median_ns as i64),
            ms(b.p90_ns),
            ms(b.p99_ns),
            ms(b.min_ns),
            ms(b.max_ns),
            ms(b.stddev_ns as i64)
        );
    }
    s
}

fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn device(s: &mut String, d: &DeviceMetrics) {
    let _ = writeln!(s, "\n== device {} ==", d.device);
    let _ = writeln!(
        s,
        "kernels {}  kernel time {}  span {}  busy {}  idle {}",
        d.kernel_count,
        ms(d.kernel_time_sum_ns),
        ms(d.span_ns),
        ms(d.busy_ns),
        ms(d.idle_time_ns)
    );
    let _ = writeln!(
        s,
        "gpu_utilization {:.1}%  (with memcpy/memset {:.1}%)  kernel_time_ratio {:.3}",
        100.0 * d.gpu_utilization,
        100.0 * d.gpu_utilization_all,
        d.kernel_time_ratio
    );
    let g = &d.gaps;
    let _ = writeln!(
        s,
        "gaps >=1us {}  >=10us {}  >=100us {}  largest {:?} ns",
        g.count_ge_1us, g.count_ge_10us, g.count_ge_100us, g.largest_ns
    );
    let l = &d.launch_latency_ns;
    let _ = writeln!(
        s,
        "launch latency median {:.0} ns  p99 {} ns  ({} kernels matched)",
        l.median, l.p99, l.count
    );
    for (dir, t) in &d.memcpy {
        let _ = writeln!(
            s,
            "memcpy {dir}: {} copies, {} bytes, {}, {:.2} GB/s",
            t.count,
            t.bytes,
            ms(t.time_ns),
            t.bandwidth_gbps
        );
    }
    let _ = writeln!(
        s,
        "\n {:>7} {:>15} {:>9} {:>12} {:>12} {:>10} {:>10} {:>12}  Name",
        "Time(%)",
        "Total (ns)",
        "Instances",
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)"
    );
    for k in d.kernels.iter().take(TOP_KERNELS) {
        let _ = writeln!(
            s,
            " {:>7.1} {:>15} {:>9} {:>12.1} {:>12.1} {:>10} {:>10} {:>12.1}  {}",
            k.time_pct,
            k.total_ns,
            k.instances,
            k.avg_ns,
            k.med_ns,
            k.min_ns,
            k.max_ns,
            k.stddev_ns,
            k.name
        );
    }
    if d.kernels.len() > TOP_KERNELS {
        let _ = writeln!(
            s,
            " … {} more in metrics.json",
            d.kernels.len() - TOP_KERNELS
        );
    }
    memory(s, "memory time (ns)", &d.memory_time, true);
    memory(s, "memory size (bytes)", &d.memory_size, false);
}

fn memory(s: &mut String, title: &str, rows: &[MemorySummary], with_pct: bool) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n {title}");
    for r in rows {
        let pct = if with_pct {
            format!("{:>7.1}", r.time_pct)
        } else {
            " ".repeat(7)
        };
        let _ = writeln!(
            s,
            " {pct} {:>15} {:>9} {:>14.1} {:>14.1} {:>12} {:>12} {:>14.1}  {}",
            r.total, r.count, r.avg, r.med, r.min, r.max, r.stddev, r.operation
        );
    }
}
