//! A comparison as a text table, CSV, or JSON (`serde` of [`Comparison`]).

use std::fmt::Write as _;

use super::pair::{Row, SideValue, Verdict};
use super::Comparison;

/// The text table: a header naming both sides, a row per configuration and
/// metric, the differing facets under each configuration, and a summary.
/// `changed_only`: leave out the rows judged `same`.
#[cfg(test)]
pub(crate) fn text(c: &Comparison, changed_only: bool) -> String {
    let mut out = Vec::new();
    let _ = write_text(&mut out, c, changed_only);
    String::from_utf8(out).unwrap_or_default()
}

/// The text table, written to `out` as it goes.
pub(crate) fn write_text(
    out: &mut impl std::io::Write,
    c: &Comparison,
    changed_only: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "A  {}: {}, {} runs",
        c.a.name, c.a.description, c.a.runs
    )?;
    writeln!(
        out,
        "B  {}: {}, {} runs",
        c.b.name, c.b.description, c.b.runs
    )?;
    writeln!(
        out,
        "B / A with its 95 % interval; within ±{} is `same`, an interval holding 1 and reaching beyond ±{} `inconclusive` (--threshold)\n",
        percent(c.threshold),
        percent(c.threshold)
    )?;
    let header = [
        "configuration",
        "metric",
        "A",
        "B",
        "B / A",
        "95 % interval",
        "p",
        "verdict",
    ];
    let visible = || {
        c.pairing
            .rows
            .iter()
            .filter(move |r| !(changed_only && r.verdict == Verdict::Same))
    };
    // Two passes: the column widths, then the lines, written as they are
    // made (a comparison of 100,000 configurations is 300,000 lines).
    let mut widths = header.map(str::len);
    let mut last: Option<&Row> = None;
    let mut any = false;
    for row in visible() {
        let first = last.is_none_or(|l| l.config != row.config);
        for (w, cell) in widths.iter_mut().zip(cells(row, first)) {
            *w = (*w).max(cell.chars().count());
        }
        last = Some(row);
        any = true;
    }
    let render = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            s.push_str(cell);
            if i + 1 < cells.len() {
                let pad = w.saturating_sub(cell.chars().count());
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_owned()
    };
    if any {
        writeln!(out, "{}", render(&header.map(String::from)))?;
    }
    let mut last: Option<&Row> = None;
    for row in visible() {
        let first = last.is_none_or(|l| l.config != row.config);
        if first {
            if let Some(d) = last.and_then(differs_line) {
                writeln!(out, "  {d}")?;
            }
        }
        writeln!(out, "{}", render(&cells(row, first)))?;
        last = Some(row);
    }
    if let Some(d) = last.and_then(differs_line) {
        writeln!(out, "  {d}")?;
    }
    write!(out, "{}", summary(c))?;
    if !c.kernels.is_empty() {
        writeln!(
            out,
            "\nkernels: {} analysed configuration{} paired (B − A per analysis; the largest changes first)",
            c.kernels.len(),
            if c.kernels.len() == 1 { "" } else { "s" }
        )?;
        for k in &c.kernels {
            writeln!(out, "{}", k.config)?;
            if k.diff.a.kernel_count == 0.0 && k.diff.b.kernel_count == 0.0 {
                writeln!(out, "  no GPU kernels on either side (a CPU run)")?;
            } else {
                write!(out, "{}", super::kernels::text(&k.diff, 10))?;
            }
        }
    }
    Ok(())
}

/// A row's cells; the configuration only on its first row.
fn cells(row: &Row, first: bool) -> [String; 8] {
    [
        if first {
            row.config.to_string()
        } else {
            String::new()
        },
        row.metric.to_string(),
        side(row.a.as_ref()),
        side(row.b.as_ref()),
        row.ratio.map_or("—".into(), |r| format!("{r:.3}")),
        interval(row),
        row.p.map_or("—".into(), |p| format!("{p:.3}")),
        verdict(row),
    ]
}

fn percent(fraction: f64) -> String {
    format!("{} %", trim(fraction * 100.0))
}

fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn number(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A side's value as the table shows it: `56.24 ±1.9% n=5`.
pub(crate) fn side(v: Option<&SideValue>) -> String {
    let Some(v) = v else { return "—".into() };
    let half = if v.value != 0.0 && v.high.is_finite() && v.low.is_finite() {
        format!(" ±{:.1}%", (v.high - v.low) / 2.0 / v.value.abs() * 100.0)
    } else {
        String::new()
    };
    let within = if v.basis == "within-run" { "*" } else { "" };
    let invalid = if v.invalid_runs > 0 {
        format!(" ({} invalid)", v.invalid_runs)
    } else {
        String::new()
    };
    format!("{}{half} n={}{within}{invalid}", number(v.value), v.runs)
}

fn interval(row: &Row) -> String {
    match (row.ratio_low, row.ratio_high) {
        (Some(lo), Some(hi)) => {
            let within = if row.ratio_basis == Some("within-run") {
                "*"
            } else {
                ""
            };
            format!("[{lo:.3}, {hi:.3}]{within}")
        }
        _ => "—".into(),
    }
}

/// `slower`, or `not comparable: B has no number at `x` (…)`.
pub(crate) fn verdict(row: &Row) -> String {
    match (&row.why, row.verdict) {
        (Some(why), v) => format!("{}: {why}", v.as_str()),
        (None, v) => v.as_str().to_owned(),
    }
}

/// The facets that differ for a row's configuration (every row of a
/// configuration carries the same list).
fn differs_line(row: &Row) -> Option<String> {
    (!row.differs.is_empty()).then(|| format!("differs: {}", differs(row)))
}

/// `libtorch 2.10.0 → 2.11.0; spec.samples 48 → 60`.
pub(crate) fn differs(row: &Row) -> String {
    let parts: Vec<String> = row
        .differs
        .iter()
        .map(|d| format!("{} {} → {}", d.facet, d.a, d.b))
        .collect();
    parts.join("; ")
}

/// The closing lines: the verdict counts, the one-sided configurations.
pub(crate) fn summary(c: &Comparison) -> String {
    let rows = &c.pairing.rows;
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let configs = {
        let mut seen: Vec<&str> = rows.iter().map(|r| &*r.config).collect();
        seen.dedup();
        seen.len()
    };
    let mut s = format!(
        "\n{configs} configuration{} paired, {} metric{}: {} faster, {} slower, {} same, {} inconclusive, {} not comparable\n",
        if configs == 1 { "" } else { "s" },
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        count(Verdict::Faster),
        count(Verdict::Slower),
        count(Verdict::Same),
        count(Verdict::Inconclusive),
        count(Verdict::NotComparable),
    );
    for (name, only) in [("A", &c.pairing.only_a), ("B", &c.pairing.only_b)] {
        if !only.is_empty() {
            let shown: Vec<&str> = only.iter().take(5).map(String::as_str).collect();
            let more = if only.len() > 5 {
                format!(", … ({} more)", only.len() - 5)
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "only in {name}: {} configuration{}: {}{more}",
                only.len(),
                if only.len() == 1 { "" } else { "s" },
                shown.join(", ")
            );
        }
    }
    if rows.iter().any(|r| {
        r.ratio_basis == Some("within-run") || r.a.as_ref().is_some_and(|a| a.basis == "within-run")
    }) {
        s.push_str(
            "* within-run: one run on a side, so the interval is its batches' only and says \
             nothing of how far another process lands; measure with `repeat: 3` or more\n",
        );
    }
    s
}

/// One CSV line per configuration and metric.
pub(crate) fn csv(c: &Comparison) -> String {
    let mut out = String::from(
        "configuration,stage,metric,better,a,a_low,a_high,a_runs,b,b_low,b_high,b_runs,\
         ratio,ratio_low,ratio_high,ratio_basis,p,verdict,why,differs\n",
    );
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    for r in &c.pairing.rows {
        let side = |s: Option<&SideValue>| {
            s.map_or(",,,".to_owned(), |s| {
                format!("{},{},{},{}", s.value, s.low, s.high, s.runs)
            })
        };
        let differs: Vec<String> = r
            .differs
            .iter()
            .map(|d| format!("{}: {} -> {}", d.facet, d.a, d.b))
            .collect();
        let better = match r.better {
            super::measure::Better::Higher => "higher",
            super::measure::Better::Lower => "lower",
        };
        let _ = writeln!(
            out,
            "{},{},{},{better},{},{},{},{},{},{},{},{},{},{}",
            quote(&r.config),
            quote(&r.stage),
            quote(&r.metric),
            side(r.a.as_ref()),
            side(r.b.as_ref()),
            num(r.ratio),
            num(r.ratio_low),
            num(r.ratio_high),
            r.ratio_basis.unwrap_or(""),
            num(r.p),
            r.verdict.as_str(),
            quote(r.why.as_deref().unwrap_or("")),
            quote(&differs.join("; ")),
        );
    }
    out
}

/// A text field of the CSV: inert to spreadsheets ([`crate::tabular::inert`]),
/// quoted when it holds a comma, a quote or a line break.
fn quote(s: &str) -> String {
    let s = crate::tabular::inert(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}
