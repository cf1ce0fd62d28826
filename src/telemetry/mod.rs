//! What the GPU and the host did while a task timed its batches, and what
//! that says about the timing: the `telemetry` and `validity` sections of a
//! measuring task's `results.json`.
//!
//! A [`Monitor`] runs beside the timed window: a thread reads a [`GpuProbe`]
//! (NVML, [`nvml::Nvml`], loaded at run time; a [`Scripted`] one in tests
//! and under `VITGRAPH_TELEMETRY_SCRIPT`) every [`INTERVAL`], and the load
//! of the task's cores is read from `/proc` at the window's two ends
//! ([`host`]). [`verdict::judge`] ties each batch to the samples around it,
//! excludes the batches taken while the GPU was throttled, and gives the
//! run its verdict.

pub mod host;
pub mod nvml;
mod script;
pub mod verdict;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use script::Scripted;

/// How often the GPU is sampled.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// The most samples `results.json` keeps of a window (evenly thinned;
/// the summary is over all of them).
pub const KEPT_SAMPLES: usize = 200;

/// Clock-event reasons (NVML's `nvmlClocksEventReason*` bits) that mean the
/// GPU was held below the clock it would otherwise run at: software power
/// cap, hardware slowdown, software and hardware thermal slowdown, power
/// brake. Idle, application-clock and display settings and sync boost are
/// not throttling.
pub const THROTTLE_REASONS: u64 = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

/// The names of the clock-event reason bits, for people.
pub fn reason_names(bits: u64) -> Vec<&'static str> {
    const NAMES: [(u64, &str); 9] = [
        (0x1, "gpu_idle"),
        (0x2, "applications_clocks_setting"),
        (0x4, "sw_power_cap"),
        (0x8, "hw_slowdown"),
        (0x10, "sync_boost"),
        (0x20, "sw_thermal_slowdown"),
        (0x40, "hw_thermal_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
        (0x100, "display_clock_setting"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// One reading of the GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reading {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    pub temp_c: u32,
    pub power_w: f64,
    /// Clock-event (throttle) reasons, NVML's bit mask.
    pub reasons: u64,
    pub util_pct: u32,
    pub mem_used_bytes: u64,
    /// Process ids of the compute processes on the card.
    pub processes: Vec<u32>,
}

/// A reading and when it was taken, in ms since the timed window began
/// (negative before it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t_ms: f64,
    #[serde(flatten)]
    pub reading: Reading,
}

/// Something that reads a GPU's state.
pub trait GpuProbe: Send {
    fn read(&mut self) -> Result<Reading, String>;
}

/// What a monitored window recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// Where the GPU readings came from (`nvml`, `script`), or why there
    /// are none.
    pub source: String,
    pub samples: Vec<Sample>,
    /// The load on the task's cores over the window.
    pub host: Option<host::Load>,
    /// This process's id, as the GPU's process list names it.
    pub pid: u32,
    /// How long each GPU reading took, in µs: the sampler's own cost.
    pub read_us: Vec<f64>,
    /// The wait for the GPU to be free before the run, if it was not.
    pub waited: Option<Waited>,
}

/// A GPU found busy with other compute processes before a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Waited {
    /// The other processes found at first.
    pub processes: Vec<u32>,
    /// How long the run waited for them, in seconds.
    pub seconds: f64,
    /// Whether they were gone when it stopped waiting.
    pub alone: bool,
}

/// How long a run waits for other compute processes to leave its GPU
/// before it starts anyway (`VITGRAPH_GPU_WAIT_S`, default 60 s).
pub fn gpu_wait() -> Duration {
    std::env::var("VITGRAPH_GPU_WAIT_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(60), Duration::from_secs_f64)
}

/// Compute processes on the GPU `probe` reads other than this one. Before
/// the run has a CUDA context (when this is asked) the list cannot hold it
/// under another pid namespace's id, so every other entry counts.
fn others_on(probe: &mut dyn GpuProbe, pid: u32) -> Vec<u32> {
    match probe.read() {
        Ok(r) => r.processes.into_iter().filter(|p| *p != pid).collect(),
        Err(_) => Vec::new(),
    }
}

/// Waits, up to `max`, for other compute processes to leave the GPU,
/// saying so on stderr (the node's log); None when it was free.
pub fn wait_until_alone(probe: &mut dyn GpuProbe, max: Duration) -> Option<Waited> {
    let pid = std::process::id();
    let first = others_on(probe, pid);
    if first.is_empty() {
        return None;
    }
    eprintln!(
        "the GPU is busy with other compute processes (pid {first:?}); waiting up to {:.0} s for them to leave",
        max.as_secs_f64()
    );
    let start = Instant::now();
    let mut alone = false;
    while start.elapsed() < max {
        std::thread::sleep(Duration::from_millis(100).min(max));
        if others_on(probe, pid).is_empty() {
            alone = true;
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if alone {
        eprintln!("the GPU is free after {seconds:.1} s");
    } else {
        eprintln!("the GPU is still busy after {seconds:.1} s; measuring anyway (the run will say `intruded` if they stay)");
    }
    Some(Waited {
        processes: first,
        seconds,
        alone,
    })
}

/// The sampler thread of one timed window.
pub struct Monitor {
    origin: Instant,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Vec<Sample>, Vec<f64>)>>,
    source: String,
    host: Option<host::Counters>,
}

impl Monitor {
    /// Starts sampling `probe` (none: no GPU readings, `source` says why)
    /// and takes the host counters; `origin` is the window's t = 0.
    pub fn start(probe: Result<Box<dyn GpuProbe>, String>, origin: Instant) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let (thread, source) = match probe {
            Ok(probe) => {
                let stop = Arc::clone(&stop);
                let paused = Arc::clone(&paused);
                let thread = std::thread::Builder::new()
                    .name("vitgraph-telemetry".into())
                    .spawn(move || sample_until(probe, origin, &stop, &paused))
                    .ok();
                let source = if thread.is_some() {
                    "sampled"
                } else {
                    "no sampler thread"
                };
                (thread, source.to_owned())
            }
            Err(why) => (None, why),
        };
        Monitor {
            origin,
            stop,
            paused,
            thread,
            source,
            host: host::Counters::read(),
        }
    }

    /// Pauses or resumes the readings (for measuring what they cost, see
    /// [`ab_block`]).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// Stops the sampler and returns what it recorded; `waited`: the wait
    /// for the GPU before the run.
    pub fn finish(mut self, source: &str, waited: Option<Waited>) -> Recording {
        let end = host::Counters::read();
        let window_s = self.origin.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        let (samples, read_us) = match self.thread.take() {
            Some(thread) => {
                thread.thread().unpark();
                thread.join().unwrap_or_default()
            }
            None => Default::default(),
        };
        let source = if self.source == "sampled" {
            source.to_owned()
        } else {
            self.source.clone()
        };
        Recording {
            source,
            samples,
            host: match (&self.host, &end) {
                (Some(start), Some(end)) => Some(host::Load::between(start, end, window_s)),
                _ => None,
            },
            pid: std::process::id(),
            read_us,
            waited,
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn sample_until(
    mut probe: Box<dyn GpuProbe>,
    origin: Instant,
    stop: &AtomicBool,
    paused: &AtomicBool,
) -> (Vec<Sample>, Vec<f64>) {
    let mut samples = Vec::new();
    let mut read_us = Vec::new();
    let mut next = Instant::now();
    let mut failures = 0;
    // A reading first: a window stopped at once still has one.
    loop {
        if !paused.load(Ordering::Relaxed) {
            let at = Instant::now();
            let t_ms = signed_ms(origin, at);
            let reading = probe.read();
            read_us.push(at.elapsed().as_secs_f64() * 1e6);
            match reading {
                Ok(reading) => samples.push(Sample { t_ms, reading }),
                Err(_) => {
                    failures += 1;
                    if failures > 10 {
                        break;
                    }
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        next += INTERVAL;
        let now = Instant::now();
        if next > now {
            std::thread::park_timeout(next - now);
        } else {
            next = now;
        }
    }
    (samples, read_us)
}

/// `at − origin` in ms, negative when `at` is earlier.
pub fn signed_ms(origin: Instant, at: Instant) -> f64 {
    match at.checked_duration_since(origin) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(origin.duration_since(at).as_secs_f64() * 1e3),
    }
}

/// `VITGRAPH_TELEMETRY_AB=N`: the sampler reads during the first block of
/// N timed batches, pauses during the next, and so on, so that one run
/// times batches with and without it (a diagnostic: what the sampler costs,
/// free of the spread between runs).
pub fn ab_block() -> Option<usize> {
    std::env::var("VITGRAPH_TELEMETRY_AB")
        .ok()?
        .parse()
        .ok()
        .filter(|&n| n > 0)
}

/// The GPU probe for a run on the GPU with PCI bus id `pci` (or index
/// `index` where the bus id is unknown): the scripted one when
/// `VITGRAPH_TELEMETRY_SCRIPT` names a script, else NVML.
pub fn gpu_probe(pci: Option<&str>, index: u32) -> Result<Box<dyn GpuProbe>, String> {
    if let Some(script) = Scripted::from_env()? {
        return Ok(Box::new(script));
    }
    Ok(Box::new(nvml::Nvml::open(pci, index)?))
}

/// The probe for a run without a GPU: the scripted one when a script is
/// set (so a CPU run can stand in for a GPU one in tests), else none.
pub fn cpu_probe() -> Result<Box<dyn GpuProbe>, String> {
    match Scripted::from_env()? {
        Some(script) => Ok(Box::new(script)),
        None => Err("no GPU".to_owned()),
    }
}

/// The name of the probe `gpu_probe`/`cpu_probe` chose, for `source`.
pub fn probe_source() -> &'static str {
    if std::env::var_os(script::ENV).is_some() {
        "script"
    } else {
        "nvml"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_gpu_is_waited_for_until_the_other_process_leaves() {
        // Another process (4242) for the first 300 ms, then the run alone.
        let mut probe = Scripted::parse(
            r#"[{"after_ms": 0, "processes": [0, 4242]}, {"after_ms": 300, "processes": [0]}]"#,
        )
        .expect("parses");
        let waited = wait_until_alone(&mut probe, Duration::from_secs(600)).expect("busy at first");
        assert_eq!(waited.processes, [4242]);
        assert!(waited.alone && waited.seconds > 0.0, "{waited:?}");
    }

    #[test]
    fn before_the_run_has_a_context_any_listed_process_is_another() {
        // One process listed, not this one: another, even if it were this
        // process under another pid namespace's id (it has no context yet).
        let mut busy = Scripted::parse(r#"[{"processes": [31337]}]"#).expect("parses");
        let waited = wait_until_alone(&mut busy, Duration::ZERO).expect("busy");
        assert_eq!(waited.processes, [31337]);
    }

    #[test]
    fn the_wait_is_bounded_and_a_free_gpu_is_not_waited_for() {
        let mut busy = Scripted::parse(r#"[{"processes": [0, 4242]}]"#).expect("parses");
        let waited = wait_until_alone(&mut busy, Duration::ZERO).expect("busy");
        assert!(!waited.alone);
        let mut free = Scripted::parse(r#"[{"processes": [0]}]"#).expect("parses");
        assert_eq!(wait_until_alone(&mut free, Duration::from_secs(600)), None);
    }

    #[test]
    fn a_monitor_records_the_scripted_readings_of_its_window() {
        let probe = Scripted::parse(r#"[{"sm_mhz": 1980, "processes": [0]}]"#).expect("parses");
        let monitor = Monitor::start(Ok(Box::new(probe)), Instant::now());
        // Stopped at once, it has still read once.
        let rec = monitor.finish("script", None);
        assert_eq!(rec.source, "script");
        assert_eq!(rec.pid, std::process::id());
        assert!(!rec.samples.is_empty());
        assert!(rec.samples.iter().all(|s| s.reading.sm_mhz == 1980));
        assert_eq!(rec.read_us.len(), rec.samples.len());
        let off = Monitor::start(Err("off".into()), Instant::now()).finish("nvml", None);
        assert_eq!((off.source.as_str(), off.samples.len()), ("off", 0));
    }
}
