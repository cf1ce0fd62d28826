//! An `OpBench` block measured together: every member's inputs made and
//! warmed up in one process, then their timed repetitions in shuffled
//! rounds of [`BLOCK_REPEATS`] (see [`block::schedule`]), queued on the
//! device back to back, so that whatever sets the process's and the
//! device's speed is shared by all of them and cancels in their ratios.

use serde_json::{json, Map, Value};

use super::measure::{self, annotate, conclude, device_of, kind_of, ready, unsupported, Ready};
use super::spec::{OpBenchSpec, SdpaBackend};
use super::timing;
use super::{ops, Calibration};
use crate::host::env;
use crate::tasks::block::{self, Block};
use crate::tasks::error::TaskError;
use crate::telemetry;

/// Timed repetitions a member runs before the next member's turn.
pub(super) const BLOCK_REPEATS: u32 = 4;

/// Measures the block and returns its `results.json`:
/// `{"members": {"<key>": {…}}, "method": {…}}`, each member's object an
/// `OpBench` node's `results.json` of its own.
pub(super) fn measure(
    spec: &Block<OpBenchSpec>,
    calibration: Option<Calibration>,
    node: &str,
) -> Result<Value, TaskError> {
    let first = &spec.members[0];
    let device = device_of(first)?;
    let _guard = tch::no_grad_guard();
    tch::manual_seed(first.seed as i64);
    let before = env::probe();
    let mut members: Vec<Member> = Vec::with_capacity(spec.members.len());
    for (key, member) in spec.keyed() {
        let ready = ready(member, &member.op, kind_of(member), device)?;
        members.push(Member {
            key,
            spec: member,
            ready,
            failed: None,
        });
    }
    for m in &mut members {
        m.warm_up(m.spec.warmup)?;
    }
    // One untimed round in the block's order: each member warmed up again
    // after the others ran, as it will be at each of its turns.
    for m in &mut members {
        m.warm_up(BLOCK_REPEATS)?;
    }
    timing::sync(device);
    let seed = block::seed_of(node);
    let timed = time(&mut members, device, seed)?;
    ops::force_sdp_backend(SdpaBackend::Auto);
    let after = env::probe();
    let mut out = Map::new();
    for (m, samples) in members.into_iter().zip(timed.samples) {
        let doc = match &m.failed {
            Some(message) => unsupported(m.ready.doc, message),
            None => conclude(
                m.ready.doc,
                &m.ready.workload,
                &samples.ms,
                &samples.spans,
                &timed.recording,
                calibration,
            ),
        };
        out.insert(m.key, annotate(doc, m.spec, &before, &after, Value::Null));
    }
    Ok(json!({
        "members": out,
        "method": {
            "design": "together",
            "block_repeats": BLOCK_REPEATS,
            "seed": seed,
            "order": "every member warmed up first; then rounds in which each member runs a block of timed repetitions, in an order shuffled each round, queued on the device back to back",
        },
    }))
}

struct Member<'a> {
    key: String,
    spec: &'a OpBenchSpec,
    ready: Ready,
    /// Why a forced SDPA backend could not run (the member is then
    /// `unsupported` and left out of the timed rounds).
    failed: Option<String>,
}

impl Member<'_> {
    /// `n` untimed runs; a forced backend that cannot run marks the
    /// member unsupported rather than failing the block.
    fn warm_up(&mut self, n: u32) -> Result<(), TaskError> {
        if self.failed.is_some() {
            return Ok(());
        }
        for i in 0..n as usize {
            match (self.ready.workload.run)(i) {
                Ok(()) => {}
                Err(e) if self.ready.forced => {
                    self.failed = Some(e.to_string());
                    return Ok(());
                }
                Err(e) => return Err(measure::torch_error("warming up the operator")(e)),
            }
        }
        Ok(())
    }
}

/// Each member's timed repetitions and where each ran in the window.
#[derive(Default, Clone)]
struct Samples {
    ms: Vec<f64>,
    spans: Vec<(f64, f64)>,
}

struct Timed {
    samples: Vec<Samples>,
    recording: telemetry::Recording,
}

/// The timed rounds, watched: every supported member's repetitions in the
/// seeded shuffled order, each repetition's span the sum of the times
/// before it (they ran queued back to back from the window's start).
fn time(members: &mut [Member], device: tch::Device, seed: u64) -> Result<Timed, TaskError> {
    let repeats: Vec<u32> = members
        .iter()
        .map(|m| {
            if m.failed.is_some() {
                0
            } else {
                m.spec.repeats
            }
        })
        .collect();
    let order = block::schedule(&repeats, BLOCK_REPEATS, seed);
    let mut probe = crate::tasks::vit::measure::telemetry_probe(device);
    let waited = match &mut probe {
        Ok(p) if device.is_cuda() => telemetry::wait_until_alone(p.as_mut(), telemetry::gpu_wait()),
        _ => None,
    };
    let monitor = telemetry::Monitor::start(probe, std::time::Instant::now());
    let ran = timing::time_schedule(
        device,
        &order,
        |member, i| (members[member].ready.workload.run)(i),
        measure::torch_error("running the operators"),
    )?;
    let recording = monitor.finish(telemetry::probe_source(), waited);
    let mut samples = vec![Samples::default(); members.len()];
    let mut end = 0.0;
    for (member, ms) in ran {
        end += ms;
        samples[member].ms.push(ms);
        samples[member].spans.push((end - ms, end));
    }
    Ok(Timed { samples, recording })
}
