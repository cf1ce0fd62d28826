//! Why a pair changed: the kernel-level diff of two traced sides.
//!
//! Each side is one or more analyses (`metrics.json`, every device), summed
//! and divided by the number of analyses, so a side of three repetitions
//! weighs like a side of one. Kernels match by a **normalized name**:
//! template arguments (`<…>`), the parameter list (`(…)`) and a leading
//! `void` are dropped, so `vectorized_elementwise_kernel<4, AddFunctor<float>>`
//! and `…<8, AddFunctor<c10::Half>>` are one kernel. The rows come sorted by
//! how much of the difference in kernel time they carry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::analysis::Metrics;

/// One side's kernels and device figures, per analysis.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Profile {
    pub analyses: usize,
    /// By normalized name.
    pub kernels: BTreeMap<Arc<str>, KernelTotals>,
    pub kernel_count: f64,
    pub kernel_time_ns: f64,
    /// Median launch latency (the mean of the analyses' medians), ns.
    pub launch_latency_ns: Option<f64>,
    /// The window's GPU utilization (the mean over devices and analyses).
    pub gpu_utilization: Option<f64>,
    /// Per copy direction: count, bytes and time.
    pub memcpy: BTreeMap<String, CopyTotals>,
    /// Running sums while analyses are added.
    #[serde(skip)]
    sums: Sums,
}

#[derive(Debug, Clone, Default)]
struct Sums {
    latency: f64,
    latency_n: u32,
    util: f64,
    util_n: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct KernelTotals {
    pub instances: f64,
    pub total_ns: f64,
    /// One of the full names it stands for.
    pub example: Arc<str>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct CopyTotals {
    pub count: f64,
    pub bytes: f64,
    pub time_ns: f64,
}

/// Kernel names as profiles hold them: each distinct full name once, with
/// its normalized form. The configurations of a study run the same
/// kernels: at 100,000 configurations, a name per kernel per profile was
/// most of `compare --kernels`' memory, and normalizing it anew most of
/// its time.
#[derive(Default)]
pub(crate) struct Names(HashMap<String, (Arc<str>, Arc<str>)>);

impl Names {
    /// (normalized, full) for the full name `raw`.
    fn of(&mut self, raw: &str) -> (Arc<str>, Arc<str>) {
        if let Some(known) = self.0.get(raw) {
            return known.clone();
        }
        let names: (Arc<str>, Arc<str>) = (Arc::from(normalize(raw)), Arc::from(raw));
        self.0.insert(raw.to_owned(), names.clone());
        names
    }
}

impl Profile {
    /// The per-analysis mean over `analyses`.
    pub(crate) fn of(analyses: &[&Metrics]) -> Profile {
        let mut p = Profile::default();
        let mut names = Names::default();
        for m in analyses {
            p.add(m, &mut names);
        }
        p.finish()
    }

    /// Adds one analysis's devices to the sums.
    pub(crate) fn add(&mut self, m: &Metrics, names: &mut Names) {
        self.analyses += 1;
        for d in &m.devices {
            self.kernel_count += d.kernel_count as f64;
            self.kernel_time_ns += d.kernel_time_sum_ns as f64;
            if d.launch_latency_ns.count > 0 {
                self.sums.latency += d.launch_latency_ns.median;
                self.sums.latency_n += 1;
            }
            self.sums.util += d.gpu_utilization;
            self.sums.util_n += 1;
            for k in &d.kernels {
                let (name, full) = names.of(&k.name);
                let entry = self.kernels.entry(name).or_default();
                entry.instances += k.instances as f64;
                entry.total_ns += k.total_ns as f64;
                if entry.example.is_empty() {
                    entry.example = full;
                }
            }
            for (dir, c) in &d.memcpy {
                let entry = self.memcpy.entry(dir.clone()).or_default();
                entry.count += c.count as f64;
                entry.bytes += c.bytes as f64;
                entry.time_ns += c.time_ns as f64;
            }
        }
    }

    /// Adds another profile's sums (of other analyses) to these.
    pub(crate) fn merge(&mut self, other: Profile) {
        self.analyses += other.analyses;
        self.kernel_count += other.kernel_count;
        self.kernel_time_ns += other.kernel_time_ns;
        self.sums.latency += other.sums.latency;
        self.sums.latency_n += other.sums.latency_n;
        self.sums.util += other.sums.util;
        self.sums.util_n += other.sums.util_n;
        for (name, k) in other.kernels {
            let entry = self.kernels.entry(name).or_default();
            entry.instances += k.instances;
            entry.total_ns += k.total_ns;
            if entry.example.is_empty() {
                entry.example = k.example;
            }
        }
        for (dir, c) in other.memcpy {
            let entry = self.memcpy.entry(dir).or_default();
            entry.count += c.count;
            entry.bytes += c.bytes;
            entry.time_ns += c.time_ns;
        }
    }

    /// The sums divided by the number of analyses.
    pub(crate) fn finish(mut self) -> Profile {
        let n = self.analyses.max(1) as f64;
        self.kernel_count /= n;
        self.kernel_time_ns /= n;
        for k in self.kernels.values_mut() {
            k.instances /= n;
            k.total_ns /= n;
        }
        for c in self.memcpy.values_mut() {
            c.count /= n;
            c.bytes /= n;
            c.time_ns /= n;
        }
        let s = &self.sums;
        self.launch_latency_ns = (s.latency_n > 0).then(|| s.latency / f64::from(s.latency_n));
        self.gpu_utilization = (s.util_n > 0).then(|| s.util / f64::from(s.util_n));
        self
    }
}

/// `void ns::kernel<4, F<float>>(int, float*)` → `ns::kernel`. A mangled
/// name (`_ZN2at6native…`, as CUPTI records them) is demangled first. A
/// template argument that names a kernel configuration (an identifier with
/// `_` and a digit: cutlass's `Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>`)
/// is kept, since the wrapper alone names nothing.
pub(crate) fn normalize(name: &str) -> String {
    let demangled = name
        .starts_with("_Z")
        .then(|| {
            let options = cpp_demangle::DemangleOptions::new()
                .no_params()
                .no_return_type();
            cpp_demangle::Symbol::new(name.as_bytes())
                .ok()?
                .demangle(&options)
                .ok()
        })
        .flatten();
    // `(anonymous namespace)` is part of the name, not its parameter list.
    const ANON: &str = "(anonymous namespace)";
    let name = demangled.as_deref().unwrap_or(name).replace(ANON, "\u{1}");
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    let mut argument = String::new();
    for c in name.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth == 1 {
                    argument.clear();
                }
            }
            '>' if depth > 0 => {
                depth -= 1;
                if depth == 0 && names_a_configuration(&argument) {
                    out.push('<');
                    out.push_str(argument.trim());
                    out.push('>');
                }
            }
            // The parameter list ends the name (a lambda's `(` inside a
            // template argument is skipped with the argument).
            '(' if depth == 0 => break,
            _ if depth == 0 => out.push(c),
            // Inside a template argument list (a `<` never closed leaves
            // the rest out, which still matches its twin).
            _ => {
                if depth == 1 {
                    argument.push(c);
                }
            }
        }
    }
    let trimmed = out.trim();
    trimmed
        .strip_prefix("void ")
        .unwrap_or(trimmed)
        .trim()
        .replace('\u{1}', ANON)
}

/// A lone template argument like `cutlass_80_simt_sgemm_64x64_8x5_tn_align1`.
fn names_a_configuration(argument: &str) -> bool {
    let a = argument.trim();
    !a.contains(',')
        && a.contains('_')
        && a.bytes().any(|b| b.is_ascii_digit())
        && a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// One kernel's change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KernelChange {
    pub name: Arc<str>,
    pub example: Arc<str>,
    /// `added`, `removed` or `changed`.
    pub status: &'static str,
    pub a_instances: f64,
    pub b_instances: f64,
    pub a_total_ns: f64,
    pub b_total_ns: f64,
    /// B − A, ns per analysis.
    pub delta_ns: f64,
    /// This kernel's signed share of all kernels' changes: B − A over the
    /// sum of every kernel's |B − A| (the shares' magnitudes add to 1, also
    /// when changes cancel out).
    pub share_of_change: f64,
}

/// The diff of two profiles.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KernelDiff {
    pub a: Profile,
    pub b: Profile,
    /// Every kernel that differs, largest |delta| first.
    pub changes: Vec<KernelChange>,
}

pub(crate) fn diff(a: Profile, b: Profile) -> KernelDiff {
    let names: std::collections::BTreeSet<&Arc<str>> =
        a.kernels.keys().chain(b.kernels.keys()).collect();
    let empty = KernelTotals::default();
    let mut changes: Vec<KernelChange> = names
        .into_iter()
        .filter_map(|name| {
            let (ka, kb) = (a.kernels.get(name), b.kernels.get(name));
            let status = match (ka, kb) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                _ => "changed",
            };
            let (ka, kb) = (ka.unwrap_or(&empty), kb.unwrap_or(&empty));
            let delta_ns = kb.total_ns - ka.total_ns;
            if status == "changed" && delta_ns == 0.0 && ka.instances == kb.instances {
                return None;
            }
            Some(KernelChange {
                name: name.clone(),
                example: if kb.example.is_empty() {
                    ka.example.clone()
                } else {
                    kb.example.clone()
                },
                status,
                a_instances: ka.instances,
                b_instances: kb.instances,
                a_total_ns: ka.total_ns,
                b_total_ns: kb.total_ns,
                delta_ns,
                share_of_change: 0.0,
            })
        })
        .collect();
    changes.sort_by(|x, y| {
        y.delta_ns
            .abs()
            .total_cmp(&x.delta_ns.abs())
            .then(x.name.cmp(&y.name))
    });
    let moved: f64 = changes.iter().map(|c| c.delta_ns.abs()).sum();
    if moved > 0.0 {
        for c in &mut changes {
            c.share_of_change = c.delta_ns / moved;
        }
    }
    KernelDiff { a, b, changes }
}

/// The side figures, a line each: kernel time and count, launch latency
/// and utilization, each copy direction that changed.
pub(crate) fn summary_lines(d: &KernelDiff) -> Vec<String> {
    let ms = |ns: f64| format!("{:.3} ms", ns / 1e6);
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("—".to_owned(), f);
    let mut lines = vec![
        format!(
            "kernel time   {} → {} ({:+.1} %), kernels {:.0} → {:.0} (per analysis; {} and {} analyses)",
            ms(d.a.kernel_time_ns),
            ms(d.b.kernel_time_ns),
            pct(d.a.kernel_time_ns, d.b.kernel_time_ns),
            d.a.kernel_count,
            d.b.kernel_count,
            d.a.analyses,
            d.b.analyses
        ),
        format!(
            "launch latency (median) {} → {}, GPU utilization {} → {}",
            opt(d.a.launch_latency_ns, &|v| format!("{:.1} µs", v / 1e3)),
            opt(d.b.launch_latency_ns, &|v| format!("{:.1} µs", v / 1e3)),
            opt(d.a.gpu_utilization, &|v| format!("{:.1} %", v * 100.0)),
            opt(d.b.gpu_utilization, &|v| format!("{:.1} %", v * 100.0)),
        ),
    ];
    let dirs: std::collections::BTreeSet<&String> =
        d.a.memcpy.keys().chain(d.b.memcpy.keys()).collect();
    for dir in dirs {
        let (ca, cb) = (
            d.a.memcpy.get(dir).cloned().unwrap_or_default(),
            d.b.memcpy.get(dir).cloned().unwrap_or_default(),
        );
        if ca != cb {
            lines.push(format!(
                "memcpy {dir}: {:.0} → {:.0} copies, {:.1} → {:.1} MB, {} → {}",
                ca.count,
                cb.count,
                ca.bytes / 1e6,
                cb.bytes / 1e6,
                ms(ca.time_ns),
                ms(cb.time_ns)
            ));
        }
    }
    lines
}

/// The diff as text: the side figures, then the `top` largest changes.
pub(crate) fn text(d: &KernelDiff, top: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for line in summary_lines(d) {
        let _ = writeln!(s, "  {line}");
    }
    if d.changes.is_empty() {
        let _ = writeln!(s, "  no kernel differs");
        return s;
    }
    let _ = writeln!(
        s,
        "  {:<9} {:>12} {:>12} {:>16} {:>7}  kernel",
        "", "A ms", "B ms", "count A → B", "share"
    );
    for c in d.changes.iter().take(top) {
        let _ = writeln!(
            s,
            "  {:<9} {:>12.3} {:>12.3} {:>16} {:>6.0}%  {}",
            c.status,
            c.a_total_ns / 1e6,
            c.b_total_ns / 1e6,
            format!("{:.0} → {:.0}", c.a_instances, c.b_instances),
            c.share_of_change * 100.0,
            c.name
        );
    }
    if d.changes.len() > top {
        let _ = writeln!(s, "  … {} more kernels differ", d.changes.len() - top);
    }
    s
}

fn pct(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        0.0
    } else {
        (b / a - 1.0) * 100.0
    }
}

#[cfg(test)]
mod tests;
