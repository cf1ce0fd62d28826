//! A `Vit` block measured together: every member's model built and warmed
//! up in one process, then their timed batches in shuffled rounds of
//! [`BLOCK_BATCHES`] (see [`block::schedule`]), so that whatever sets the
//! process's speed is shared by all of them and cancels in their ratios.

use std::time::Instant;

use serde_json::json;

use super::block::{VitBlock, BLOCK_BATCHES};
use super::measure::{context_baseline, device, probe_alone, Runner};
use super::results::{self, Measurement, VitResults};
use super::spec::VitConfig;
use super::streams::InferenceMode;
use crate::tasks::block;
use crate::tasks::error::TaskError;
use crate::tasks::nvtx::Nvtx;
use crate::tasks::TaskContext;
use crate::telemetry::{self, Monitor};

/// Why a member's `warming` flag does not make the block invalid: after
/// every member's warm-up and an untimed round, what still drifts over the
/// timed rounds (a process switching speed band, as a 2-core VM's do every
/// few seconds) reaches every member in its shuffled turns and cancels in
/// their ratios; measuring the block again would not remove it.
const WARMING_NOTE: &str =
    "measured together: a drift every member shares in shuffled rounds, not invalidating";

/// Measures the block and writes `results.json` as
/// `{"members": {"<key>": {…}}, "method": {…}}`, each member's object a
/// `Vit` run's `results.json` of its own.
pub(super) fn run(spec: &VitBlock, ctx: &TaskContext) -> Result<(), TaskError> {
    use crate::host::env;
    let invalid = |message| TaskError::InvalidSpec {
        kind: "Vit",
        message,
    };
    spec.validate().map_err(invalid)?;
    let mut keys = Vec::new();
    let mut configs = Vec::new();
    for (key, member) in spec.keyed() {
        configs.push(member.resolve().map_err(invalid)?);
        keys.push(key);
    }
    let seed = block::seed_of(&ctx.node);
    let before = env::probe();
    let measured = measure(&configs, seed, &mut Nvtx::new(None))?;
    let after = env::probe();
    let members: std::collections::BTreeMap<String, VitResults> = keys
        .iter()
        .zip(&configs)
        .zip(&measured)
        .map(|((key, config), m)| {
            let mut member = VitResults::new(config, before.clone(), after.clone(), m);
            if let Some(v) = &mut member.validity {
                v.tolerate("warming", WARMING_NOTE);
            }
            (key.clone(), member)
        })
        .collect();
    let doc = json!({
        "members": members,
        "method": {
            "design": "together",
            "block_batches": BLOCK_BATCHES,
            "seed": seed,
            "order": "every member warmed up first; then rounds in which each member runs a block of timed batches, in an order shuffled each round",
        },
    });
    results::write_json(&ctx.out.join("results.json"), &doc)
}

/// Every member's measurement, taken in one process: each model built,
/// warmed up (CUDA graph captured, settled) in turn, one untimed round of
/// blocks, then the timed batches in shuffled rounds. A member's window is the time of its own blocks; its
/// peak memory is not its own (the process holds every member), so it is
/// left out.
fn measure(
    configs: &[VitConfig],
    seed: u64,
    nvtx: &mut Nvtx,
) -> Result<Vec<Measurement>, TaskError> {
    let device = device(&configs[0])?;
    let (probe, waited) = probe_alone(device);
    let _guard = tch::no_grad_guard();
    let _inference = InferenceMode::enter();
    let _baseline = context_baseline(device)?;
    let mut runners = Vec::with_capacity(configs.len());
    let mut settled = Vec::with_capacity(configs.len());
    for (i, config) in configs.iter().enumerate() {
        let mut runner = Runner::build(config, device)?;
        settled.push(nvtx.range(&format!("member {i}"), |nvtx| runner.prepare(nvtx))?);
        runners.push(runner);
    }
    // One untimed round in the order of the block: each member warmed up
    // again after the others ran, as it will be at each of its turns.
    for (i, runner) in runners.iter_mut().enumerate() {
        nvtx.range(&format!("member {i}"), |nvtx| {
            runner.run_batches(BLOCK_BATCHES as usize, nvtx, false)
        })?;
    }
    let start = Instant::now();
    let monitor = Monitor::start(probe, start);
    for runner in &mut runners {
        runner.origin = Some(start);
    }
    let batches: Vec<u32> = configs.iter().map(|c| c.batches).collect();
    let mut window_s = vec![0.0; configs.len()];
    for (member, n) in block::schedule(&batches, BLOCK_BATCHES, seed) {
        let t = Instant::now();
        nvtx.range(&format!("member {member}"), |nvtx| {
            runners[member].run_batches(n as usize, nvtx, true)
        })?;
        window_s[member] += t.elapsed().as_secs_f64();
    }
    let recording = monitor.finish(telemetry::probe_source(), waited);
    Ok(runners
        .into_iter()
        .zip(settled)
        .zip(window_s)
        .map(|((r, settled), w)| r.into_measurement(w, recording.clone(), 0, settled, None))
        .collect())
}
