//! `vitgraph compare A B [TARGETS]` and `vitgraph baseline save|list|rm`.

use clap::{Args, Subcommand};

use super::{usage, Failure};
use crate::compare::{self, gate::Condition, measure::Metric, select::Side};
use crate::exit;
use crate::store::Store;
use crate::workspace::Workspace;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The runs to compare against: HEAD, build:N (build:-1 the latest), baseline:NAME,
    /// env:KEY=VALUE, date:YYYY-MM-DD, or workspace:DIR[#one of those].
    pub a: String,
    /// The runs compared: the same forms as A.
    pub b: String,
    /// Stages, configurations, node ids or globs ('rq1_*'); none means every measured run.
    pub targets: Vec<String>,
    /// A metric to compare: a dotted path into results.json, optionally `:higher`/`:lower`
    /// (default: throughput, median and p99 latency, or an operator's median time and TFLOP/s).
    #[arg(long = "metric", value_name = "PATH")]
    pub metrics: Vec<String>,
    /// The equivalence margin: a ratio within ±CHANGE is `same`, an interval that holds 1
    /// and reaches beyond it `inconclusive`, a change of at least CHANGE that the interval
    /// shows `faster` or `slower`. `2%` or `0.02`.
    #[arg(long, default_value = "2%", value_name = "CHANGE")]
    pub threshold: String,
    /// Exit with status 3 when a pair's change of METRIC is significant and beyond the
    /// change: `"throughput_images_per_s < -5%"`, `"latency_ms.p99 > +5%"`. Repeatable.
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// Let a `--fail-if` gate pass where its metric cannot be compared (missing on a side,
    /// not a number, no interval): without it such a pair fails the gate.
    #[arg(long)]
    pub allow_missing: bool,
    /// Also diff the kernels of each pair of analysed configurations (their `metrics.json`):
    /// added, removed and changed kernels, launch latency, GPU utilization, copies.
    #[arg(long)]
    pub kernels: bool,
    /// Only the rows that changed or cannot be compared.
    #[arg(long)]
    pub changed: bool,
    /// Print the comparison as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the comparison as CSV, one line per configuration and metric.
    #[arg(long)]
    pub csv: bool,
}

#[derive(Subcommand, Debug)]
pub enum BaselineCommand {
    /// Save the current runs of TARGETS (all when none) as baseline NAME, replacing one of that name.
    Save {
        name: String,
        /// Stages, configurations, node ids or globs; none means every node with a run.
        targets: Vec<String>,
    },
    /// List the saved baselines.
    List,
    /// Forget a baseline (`vitgraph gc` may then remove what only it kept).
    Rm { name: String },
}

/// Both sides parsed and compared; a side that names nothing is a usage error.
fn run(
    ws: &Workspace,
    a: &str,
    b: &str,
    options: &compare::Options<'_>,
) -> Result<compare::Comparison, Failure> {
    let side =
        |text: &str| Side::parse(text).map_err(|m| usage(m, "see `vitgraph compare --help`"));
    let (a, b) = (side(a)?, side(b)?);
    compare::compare(&ws.root, &a, &b, options).map_err(|e| match e {
        compare::CompareError::Side(m) => Failure::Report(
            miette::miette!(
                help = "`vitgraph compare --help` lists the forms of a side",
                "{m}"
            ),
            exit::USAGE,
        ),
        // As `status` does: the store, not the command line, is at fault.
        compare::CompareError::Store(m) => Failure::Report(
            miette::miette!(
                help = "the store (`cache/`) could not be read: `vitgraph verify` checks its objects and says what to repair; a state database that is not one must be restored from a copy or removed (its runs are then forgotten)",
                "{m}"
            ),
            exit::NODE_FAILED,
        ),
    })
}

pub(super) fn compare(ws: &Workspace, args: CompareArgs) -> Result<i32, Failure> {
    let metrics = args
        .metrics
        .iter()
        .map(|m| Metric::parse(m).map_err(|e| usage(e, "see `vitgraph compare --help`")))
        .collect::<Result<Vec<_>, _>>()?;
    let threshold = compare::parse_threshold(&args.threshold)
        .map_err(|m| usage(m, "write a relative change such as `--threshold 2%`"))?;
    let conditions = args
        .fail_if
        .iter()
        .map(|c| Condition::parse(c).map_err(|m| usage(m, "see the book's \"Comparing runs\"")))
        .collect::<Result<Vec<_>, _>>()?;
    // A gated metric is compared even when `--metric` names others.
    let mut metrics = metrics;
    if !metrics.is_empty() {
        for c in &conditions {
            if !metrics.iter().any(|m| m.path == c.metric) {
                metrics.push(Metric::parse(&c.metric).map_err(|e| usage(e, ""))?);
            }
        }
    }
    let options = compare::Options {
        targets: &args.targets,
        metrics: &metrics,
        threshold,
        kernels: args.kernels,
    };
    let comparison = run(ws, &args.a, &args.b, &options)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&comparison).unwrap_or_default()
        );
    } else if args.csv {
        print!("{}", compare::output::csv(&comparison));
    } else {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        // A closed pipe (`| head`) ends the output, not the command.
        let _ = compare::output::write_text(&mut out, &comparison, args.changed)
            .and_then(|()| std::io::Write::flush(&mut out));
    }
    gate(&comparison, &conditions, args.allow_missing)
}

/// Exit status 3 when a `--fail-if` condition trips, with the pairs that
/// trip it, or when a gated metric cannot be compared in a pair (or in
/// any): a gate passes on evidence, never on its absence, unless
/// `allow_missing`.
fn gate(
    comparison: &compare::Comparison,
    conditions: &[Condition],
    allow_missing: bool,
) -> Result<i32, Failure> {
    let mut tripped = Vec::new();
    let mut missing = Vec::new();
    for c in conditions {
        let rows = &comparison.pairing.rows;
        if !rows.iter().any(|r| *r.metric == *c.metric) {
            missing.push(format!(
                "no pair has `{}`: `{}` checks nothing",
                c.metric, c.text
            ));
        }
        for row in rows.iter().filter(|r| *r.metric == *c.metric) {
            let judged = row.verdict != crate::compare::pair::Verdict::NotComparable;
            if !judged || row.ratio_low.is_none() || row.ratio_high.is_none() {
                missing.push(format!(
                    "{}: {} not comparable ({}): `{}` cannot be judged",
                    row.config,
                    row.metric,
                    row.why.as_deref().unwrap_or("no interval"),
                    c.text
                ));
            }
        }
        for row in rows.iter().filter(|r| c.trips(r)) {
            let change = row.ratio.map_or(0.0, |r| (r - 1.0) * 100.0);
            tripped.push(format!(
                "{}: {} {change:+.1} % [{:.3}, {:.3}] trips `{}`",
                row.config,
                row.metric,
                row.ratio_low.unwrap_or(f64::NAN),
                row.ratio_high.unwrap_or(f64::NAN),
                c.text
            ));
        }
    }
    for m in &missing {
        eprintln!("{}: {m}", if allow_missing { "warning" } else { "missing" });
    }
    let blocked = !missing.is_empty() && !allow_missing;
    if tripped.is_empty() && !blocked {
        if !conditions.is_empty() {
            eprintln!("gate passed: no --fail-if condition tripped");
        }
        return Ok(exit::SUCCESS);
    }
    if !tripped.is_empty() {
        eprintln!(
            "gate failed: {} pair(s) tripped a --fail-if condition:",
            tripped.len()
        );
        for t in &tripped {
            eprintln!("  {t}");
        }
    }
    if blocked {
        eprintln!(
            "gate failed: {} gated comparison(s) had no evidence (above); a benchmark that broke or renamed its metric must not pass the gate — fix it, or pass --allow-missing to let such pairs pass",
            missing.len()
        );
    }
    Ok(exit::REGRESSION)
}

pub(super) fn baseline(ws: &Workspace, command: BaselineCommand) -> Result<i32, Failure> {
    let store = match command {
        BaselineCommand::List => match Store::open_existing(&ws.root)? {
            Some(store) => store,
            None => {
                println!("no baselines (nothing recorded yet)");
                return Ok(exit::SUCCESS);
            }
        },
        _ => Store::open(&ws.root)?,
    };
    match command {
        BaselineCommand::Save { name, targets } => {
            if name.is_empty() || name.contains(['#', ':', '/']) {
                return Err(usage(
                    format!("`{name}` cannot name a baseline"),
                    "use letters, digits, `-`, `_` or `.` (`main`, `torch-2.10`)",
                ));
            }
            let current = store
                .reader()
                .current_runs(crate::store::Holding::MeasurementsAndAnalyses)?;
            let wanted = compare::Targets::new(&targets).map_err(|m| usage(m, ""))?;
            let ids: Vec<&str> = current
                .iter()
                .filter(|r| wanted.keep(r))
                .map(|r| r.node_id.as_str())
                .collect();
            if ids.is_empty() {
                return Err(usage(
                    "no node with a recorded run matches the targets",
                    "build them first, or check the names with `vitgraph ls`",
                ));
            }
            let saved = store.journal().save_baseline(&name, &ids)?;
            println!("saved baseline `{name}`: {saved} runs (compare with `vitgraph compare baseline:{name} HEAD`)");
        }
        BaselineCommand::List => {
            let all = store.reader().baselines()?;
            if all.is_empty() {
                println!("no baselines (`vitgraph baseline save NAME` saves the current runs)");
            }
            for b in all {
                println!(
                    "{:<20} {:>6} runs  saved {}",
                    b.name,
                    b.runs,
                    crate::clock::utc(b.saved_at_ms)
                );
            }
        }
        BaselineCommand::Rm { name } => {
            if !store.journal().remove_baseline(&name)? {
                return Err(usage(
                    format!("no baseline `{name}`"),
                    "`vitgraph baseline list` lists them",
                ));
            }
            println!("removed baseline `{name}`");
        }
    }
    Ok(exit::SUCCESS)
}

/// `vitgraph report --compare A B`: the comparison as the page draws it
/// (kernel diffs included, the default threshold).
pub(super) fn page_view(
    ws: &Workspace,
    targets: &[String],
    a: &str,
    b: &str,
) -> Result<crate::page::CompareView, Failure> {
    use crate::compare::output;
    use crate::page::{CompareView, KernelDiffView, Table};
    let options = compare::Options {
        targets,
        metrics: &[],
        threshold: 0.02,
        kernels: true,
    };
    let c = run(ws, a, b, &options)?;
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.3}"));
    // The ratio and its interval in one cell, as `report.md` writes a
    // value with its interval (the bounds stay apart in `compare --csv`).
    let ratio = |r: &crate::compare::pair::Row| match (r.ratio, r.ratio_low, r.ratio_high) {
        (Some(x), Some(lo), Some(hi)) => format!("{x:.3} [{lo:.3}, {hi:.3}]"),
        (x, _, _) => num(x),
    };
    let names = [
        "verdict",
        "metric",
        "configuration",
        "A",
        "B",
        "B / A [95 % interval]",
        "p",
        "differs",
    ];
    let rows = c
        .pairing
        .rows
        .iter()
        .map(|r| {
            vec![
                output::verdict(r),
                r.metric.to_string(),
                r.config.to_string(),
                output::side(r.a.as_ref()),
                output::side(r.b.as_ref()),
                ratio(r),
                num(r.p),
                output::differs(r),
            ]
        })
        .collect();
    let kernels = c
        .kernels
        .iter()
        .map(|k| {
            let lines = compare::kernels::summary_lines(&k.diff);
            let rows = k
                .diff
                .changes
                .iter()
                .take(20)
                .map(|ch| {
                    vec![
                        ch.status.to_owned(),
                        ch.name.to_string(),
                        format!("{:.3}", ch.a_total_ns / 1e6),
                        format!("{:.3}", ch.b_total_ns / 1e6),
                        format!("{:.0} → {:.0}", ch.a_instances, ch.b_instances),
                        format!("{:.0}", ch.share_of_change * 100.0),
                    ]
                })
                .collect();
            KernelDiffView {
                config: k.config.clone(),
                lines,
                table: Table {
                    names: ["change", "kernel", "A ms", "B ms", "count A → B", "share %"]
                        .map(String::from)
                        .to_vec(),
                    rows,
                },
            }
        })
        .collect();
    Ok(CompareView {
        sides: [("A", &c.a), ("B", &c.b)]
            .iter()
            .map(|(n, s)| format!("{n}: {} — {}, {} runs", s.name, s.description, s.runs))
            .collect(),
        method: format!(
            "B / A with its 95 % interval: Welch's over runs on the log scale (within-run from the batches where a side has one run); \
             within ±{m} % is `same`, an interval holding 1 and reaching beyond ±{m} % `inconclusive`; p: Mann–Whitney over runs (3 or more a side).",
            m = c.threshold * 100.0
        ),
        summary: output::summary(&c)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        intervals: c
            .pairing
            .rows
            .iter()
            .map(|r| (r.ratio, r.ratio_low, r.ratio_high))
            .collect(),
        threshold: c.threshold,
        table: Table {
            names: names.map(String::from).to_vec(),
            rows,
        },
        kernels,
    })
}
