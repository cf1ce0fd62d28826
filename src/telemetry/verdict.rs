//! A run's verdict from its telemetry and its batch latencies.
//!
//! Each timed batch is tied to the samples taken while it ran, or, for a
//! batch shorter than the sampling interval, to the last sample before it
//! and the first after it. A batch is *throttled* when one of those
//! samples shows a throttle reason ([`THROTTLE_REASONS`]) or an SM clock
//! below [`CLOCK_FLOOR`] of the window's highest; throttled batches are
//! left out of the run's summary, and counted (unless every batch was:
//! then all stay, and the flag says so). The run's flags:
//!
//! - `throttled`: at least [`THROTTLED_SHARE`] of the batches were;
//! - `intruded`: another compute process was on the GPU during the window,
//!   or other processes' work took at least [`FOREIGN_CORES`] of a core
//!   from the cores the task could run on (beyond what the kernel's tick
//!   counters can resolve over the window: two ticks a core) — from a task
//!   pinned to a core set, always; from an unpinned one, when those cores
//!   left it less than [`IDLE_CORES`] idle on average (the other work then
//!   took cores the task could have had). `VITGRAPH_HOST_LOAD=record`
//!   records the load without judging it (a test suite on a busy machine);
//! - `warming`: with at least [`WARMING_MIN_BATCHES`] batches, the median
//!   of the first tenth (at least 3) is more than [`WARMING_EXCESS`] above
//!   the median of the second half, and a one-sided Mann–Whitney test says
//!   p < [`WARMING_P`]: the warm-up was too short;
//! - `undersampled`: fewer than [`UNDERSAMPLED`] batches are left.
//!
//! The first three make the run *invalid*: measuring it again may give a
//! valid run. `undersampled` is only a flag: only more `samples` help.

use serde::{Deserialize, Serialize};

use super::host::Load;
use super::{reason_names, Recording, Sample, INTERVAL, KEPT_SAMPLES, THROTTLE_REASONS};

/// A batch whose SM clock is below this fraction of the window's highest
/// is throttled.
pub const CLOCK_FLOOR: f64 = 0.90;
/// The share of throttled batches from which a run is `throttled`.
pub const THROTTLED_SHARE: f64 = 0.05;
/// Other processes' work on a task's cores, in cores, from which the run
/// is `intruded` (for an unpinned task, with fewer than [`IDLE_CORES`] idle).
pub const FOREIGN_CORES: f64 = 0.25;
/// An unpinned task's cores idle on average (all of them less their busy
/// time), below which other work on them intrudes.
pub const IDLE_CORES: f64 = 0.5;
pub const WARMING_MIN_BATCHES: usize = 20;
pub const WARMING_EXCESS: f64 = 0.05;
pub const WARMING_P: f64 = 0.01;
/// Fewer batches than this left in the summary make a run `undersampled`.
pub const UNDERSAMPLED: usize = 20;

/// Whether other processes' work on the task's cores intruded, in words
/// (see the module's doc); None when it did not, or when
/// `VITGRAPH_HOST_LOAD=record` asks for the load to be recorded only.
fn host_intruded(load: &Load) -> Option<String> {
    if std::env::var_os("VITGRAPH_HOST_LOAD").is_some_and(|v| v == "record") {
        return None;
    }
    if load.foreign_cores - load.resolution_cores() < FOREIGN_CORES {
        return None;
    }
    let n = load.cores.len();
    if load.pinned {
        return Some(format!(
            "intruded: other work took {:.2} of the task's {n} core(s)",
            load.foreign_cores
        ));
    }
    let idle = n as f64 - load.busy_core_s / load.window_s.max(f64::MIN_POSITIVE);
    (idle < IDLE_CORES).then(|| {
        format!(
            "intruded: other work took {:.2} of the {n} core(s) the task could run on, leaving {:.2} idle",
            load.foreign_cores,
            idle.max(0.0)
        )
    })
}

/// One flag of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    /// `throttled`, `intruded`, `warming` or `undersampled`.
    pub kind: String,
    /// The evidence, in a sentence's words.
    pub detail: String,
    /// Whether the flag makes the run invalid.
    pub invalidates: bool,
}

/// `results.json`'s `validity` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    /// `valid` or `invalid`.
    pub verdict: String,
    pub flags: Vec<Flag>,
    /// Indices (in timed order) of the batches left out of the summary.
    pub excluded_batches: Vec<usize>,
    /// Their latencies, in ms.
    pub excluded_latency_ms: Vec<f64>,
}

impl Validity {
    pub fn is_valid(&self) -> bool {
        self.verdict == "valid"
    }

    /// Keeps the flags of `kind` as evidence but no longer as reasons the
    /// run is invalid, each with `note` added; the verdict follows.
    pub fn tolerate(&mut self, kind: &str, note: &str) {
        for f in self
            .flags
            .iter_mut()
            .filter(|f| f.kind == kind && f.invalidates)
        {
            f.invalidates = false;
            f.detail = format!("{} ({note})", f.detail);
        }
        self.verdict = if self.flags.iter().any(|f| f.invalidates) {
            "invalid"
        } else {
            "valid"
        }
        .to_owned();
    }

    /// `throttled in 18 % of batches; intruded: …`: the invalidating flags.
    pub fn reason(&self) -> String {
        self.flags
            .iter()
            .filter(|f| f.invalidates)
            .map(|f| f.detail.clone())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Minimum, median and maximum of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: impl Iterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Spread {
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
        })
    }
}

/// `results.json`'s `telemetry` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    /// `nvml`, `script`, or why there are no GPU readings (`no GPU`,
    /// `NVML is not available (…)`).
    pub source: String,
    pub interval_ms: f64,
    /// GPU readings taken during the window.
    pub samples: usize,
    pub sm_mhz: Option<Spread>,
    pub mem_mhz: Option<Spread>,
    pub temp_c: Option<Spread>,
    pub power_w: Option<Spread>,
    pub util_pct: Option<Spread>,
    pub mem_used_bytes_max: Option<u64>,
    /// Share of the readings with a throttle reason.
    pub throttle_share: f64,
    /// Every clock-event reason seen, by name.
    pub reasons_seen: Vec<String>,
    /// Compute processes seen on the GPU other than this one.
    pub other_processes: Vec<u32>,
    /// The load on the task's cores.
    pub host: Option<Load>,
    /// The lowest SM clock tied to each timed batch (0: no reading).
    pub batch_sm_mhz: Vec<u32>,
    /// The clock-event reasons tied to each timed batch, OR-ed.
    pub batch_reasons: Vec<u64>,
    /// Other compute processes found on the GPU before the run, and the
    /// wait for them to leave (absent when it was free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_for_gpu: Option<super::Waited>,
    /// What the sampler itself cost: each reading's duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_us: Option<Spread>,
    /// The readings, evenly thinned to at most [`KEPT_SAMPLES`].
    pub series: Vec<Sample>,
}

/// The telemetry and verdict of a window whose batches ran from
/// `spans[i].0` to `spans[i].1` ms with latencies `latency_ms[i]`.
pub fn judge(rec: &Recording, spans: &[(f64, f64)], latency_ms: &[f64]) -> (Telemetry, Validity) {
    let end = spans.last().map_or(0.0, |s| s.1);
    let during: Vec<&Sample> = rec
        .samples
        .iter()
        .filter(|s| s.t_ms >= -INTERVAL.as_secs_f64() * 1e3 && s.t_ms <= end + 50.0)
        .collect();
    let max_sm = during.iter().map(|s| s.reading.sm_mhz).max().unwrap_or(0);
    let ties: Vec<(u32, u64)> = spans.iter().map(|span| tie(&during, *span)).collect();
    let throttled: Vec<usize> = ties
        .iter()
        .enumerate()
        .filter(|(_, (sm, reasons))| {
            reasons & THROTTLE_REASONS != 0
                || (*sm > 0 && f64::from(*sm) < CLOCK_FLOOR * f64::from(max_sm))
        })
        .map(|(i, _)| i)
        .collect();
    // With every batch throttled there is nothing else to summarise: all
    // stay in, and the flag says so.
    let every = !spans.is_empty() && throttled.len() == spans.len();
    let throttled_count = throttled.len();
    let throttled = if every { Vec::new() } else { throttled };
    let others = other_processes(&during, rec.pid);
    let mut flags = Vec::new();
    let n = spans.len();
    if n > 0 && throttled_count as f64 >= THROTTLED_SHARE * n as f64 {
        let reasons = ties.iter().fold(0, |acc, t| acc | t.1) & THROTTLE_REASONS;
        let why = if reasons != 0 {
            reason_names(reasons).join(", ")
        } else {
            format!(
                "SM clock under {:.0} % of {max_sm} MHz",
                CLOCK_FLOOR * 100.0
            )
        };
        let kept = if every {
            "; none left out: every batch was"
        } else {
            ""
        };
        flags.push(flag(
            "throttled",
            format!(
                "throttled in {} of batches ({why}){kept}",
                percent(throttled_count, n)
            ),
            true,
        ));
    }
    if !others.is_empty() {
        let pids: Vec<String> = others.iter().map(u32::to_string).collect();
        flags.push(flag(
            "intruded",
            format!(
                "intruded: another compute process on the GPU (pid {})",
                pids.join(", ")
            ),
            true,
        ));
    }
    if let Some(detail) = rec.host.as_ref().and_then(host_intruded) {
        flags.push(flag("intruded", detail, true));
    }
    let kept: Vec<f64> = latency_ms
        .iter()
        .enumerate()
        .filter(|(i, _)| !throttled.contains(i))
        .map(|(_, v)| *v)
        .collect();
    if let Some(detail) = warming(latency_ms) {
        flags.push(flag("warming", detail, true));
    }
    if kept.len() < UNDERSAMPLED {
        flags.push(flag(
            "undersampled",
            format!(
                "undersampled: {} batches in the summary (fewer than {UNDERSAMPLED})",
                kept.len()
            ),
            false,
        ));
    }
    let telemetry = summarize(rec, &during, ties, others);
    let validity = Validity {
        verdict: if flags.iter().any(|f| f.invalidates) {
            "invalid"
        } else {
            "valid"
        }
        .to_owned(),
        flags,
        excluded_latency_ms: throttled
            .iter()
            .filter_map(|&i| latency_ms.get(i).copied())
            .collect(),
        excluded_batches: throttled,
    };
    (telemetry, validity)
}

/// The lowest SM clock and the OR of the reasons of the samples tied to a
/// batch.
fn tie(samples: &[&Sample], (start, end): (f64, f64)) -> (u32, u64) {
    let inside: Vec<&&Sample> = samples
        .iter()
        .filter(|s| s.t_ms >= start && s.t_ms <= end)
        .collect();
    let around: Vec<&&Sample> = if inside.is_empty() {
        let before = samples.iter().rev().find(|s| s.t_ms < start);
        let after = samples.iter().find(|s| s.t_ms > end);
        before.into_iter().chain(after).collect()
    } else {
        inside
    };
    let sm = around.iter().map(|s| s.reading.sm_mhz).min().unwrap_or(0);
    let reasons = around.iter().fold(0, |acc, s| acc | s.reading.reasons);
    (sm, reasons)
}

/// Compute processes other than `pid`. A process list that does not name
/// `pid` (NVML in a container sees the host's process ids) counts one of
/// its entries as this process.
fn other_processes(samples: &[&Sample], pid: u32) -> Vec<u32> {
    let mut others: Vec<u32> = Vec::new();
    for s in samples {
        let list = &s.reading.processes;
        let foreign: Vec<u32> = if list.contains(&pid) {
            list.iter().copied().filter(|p| *p != pid).collect()
        } else {
            list.iter().copied().skip(1).collect()
        };
        for p in foreign {
            if !others.contains(&p) {
                others.push(p);
            }
        }
    }
    others
}

/// The `warming` test (see the module's documentation).
pub fn warming(latency_ms: &[f64]) -> Option<String> {
    let n = latency_ms.len();
    if n < WARMING_MIN_BATCHES {
        return None;
    }
    let head = &latency_ms[..(n / 10).max(3)];
    let tail = &latency_ms[n / 2..];
    let (h, t) = (median(head), median(tail));
    if h <= (1.0 + WARMING_EXCESS) * t || h.is_nan() {
        return None;
    }
    let p = crate::stats::rank::greater(head, tail);
    (p < WARMING_P).then(|| {
        format!(
            "warming: the first {} batches' median is {:.0} % above the last {}'s (Mann–Whitney p = {p:.1e})",
            head.len(),
            (h / t - 1.0) * 100.0,
            tail.len()
        )
    })
}

/// The median of `v` (the mean of the middle two of an even count; NaN
/// when empty).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn summarize(
    rec: &Recording,
    during: &[&Sample],
    ties: Vec<(u32, u64)>,
    others: Vec<u32>,
) -> Telemetry {
    let spread = |f: fn(&Sample) -> f64| Spread::of(during.iter().map(|s| f(s)));
    let throttling = during
        .iter()
        .filter(|s| s.reading.reasons & THROTTLE_REASONS != 0)
        .count();
    let seen = during.iter().fold(0, |acc, s| acc | s.reading.reasons);
    let step = during.len().div_ceil(KEPT_SAMPLES).max(1);
    Telemetry {
        source: rec.source.clone(),
        interval_ms: INTERVAL.as_secs_f64() * 1e3,
        samples: during.len(),
        sm_mhz: spread(|s| f64::from(s.reading.sm_mhz)),
        mem_mhz: spread(|s| f64::from(s.reading.mem_mhz)),
        temp_c: spread(|s| f64::from(s.reading.temp_c)),
        power_w: spread(|s| s.reading.power_w),
        util_pct: spread(|s| f64::from(s.reading.util_pct)),
        mem_used_bytes_max: during.iter().map(|s| s.reading.mem_used_bytes).max(),
        throttle_share: if during.is_empty() {
            0.0
        } else {
            throttling as f64 / during.len() as f64
        },
        reasons_seen: reason_names(seen).into_iter().map(str::to_owned).collect(),
        other_processes: others,
        host: rec.host.clone(),
        batch_sm_mhz: ties.iter().map(|t| t.0).collect(),
        batch_reasons: ties.iter().map(|t| t.1).collect(),
        read_us: Spread::of(rec.read_us.iter().copied()),
        waited_for_gpu: rec.waited.clone(),
        series: during.iter().step_by(step).map(|s| (*s).clone()).collect(),
    }
}

fn flag(kind: &str, detail: String, invalidates: bool) -> Flag {
    Flag {
        kind: kind.to_owned(),
        detail,
        invalidates,
    }
}

fn percent(part: usize, whole: usize) -> String {
    format!("{:.0} %", 100.0 * part as f64 / whole.max(1) as f64)
}

#[cfg(test)]
mod tests;
