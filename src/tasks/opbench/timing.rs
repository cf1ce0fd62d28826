//! Timing of one operator: warm-up, then each repetition bracketed by CUDA
//! events on the stream libtorch launches on (the legacy default stream), or
//! by the host clock on the CPU; inputs rotate between repetitions.

use std::time::Instant;

use cudarc::driver::{result::event, sys};
use tch::Device;

use crate::tasks::cuda::{driver_error, Events};
use crate::tasks::error::TaskError;

/// Runs `f(i)` `warmup` times untimed, then `repeats` times timed; returns
/// each timed repetition's duration in ms. `timed` is called between the
/// two, with the device idle.
pub fn time_runs<E>(
    device: Device,
    warmup: u32,
    repeats: u32,
    mut f: impl FnMut(usize) -> Result<(), E>,
    to_error: impl Fn(E) -> TaskError,
    timed: impl FnOnce(),
) -> Result<Vec<f64>, TaskError> {
    for i in 0..warmup as usize {
        f(i).map_err(&to_error)?;
    }
    sync(device);
    timed();
    let order = [(0, repeats)];
    Ok(time_schedule(device, &order, |_, i| f(i), to_error)?
        .into_iter()
        .map(|(_, ms)| ms)
        .collect())
}

/// Times the repetitions of several members in `order` — entries of
/// (member, repetitions), as [`crate::tasks::block::schedule`] gives them
/// — calling `f(member, i)` with each member's own count `i`; returns each
/// repetition's (member, ms) in the order run. On a GPU the repetitions
/// are bracketed by back-to-back CUDA events and synchronized once, at the
/// end, so the device runs them queued as a single member's would be.
pub fn time_schedule<E>(
    device: Device,
    order: &[(usize, u32)],
    mut f: impl FnMut(usize, usize) -> Result<(), E>,
    to_error: impl Fn(E) -> TaskError,
) -> Result<Vec<(usize, f64)>, TaskError> {
    let members = order.iter().map(|(m, _)| m + 1).max().unwrap_or(0);
    let mut count = vec![0usize; members];
    let mut sequence = Vec::with_capacity(order.iter().map(|(_, n)| *n as usize).sum());
    for &(member, n) in order {
        for _ in 0..n {
            sequence.push((member, count[member]));
            count[member] += 1;
        }
    }
    let ms = match device {
        Device::Cuda(_) => time_cuda(&sequence, &mut f, &to_error)?,
        _ => sequence
            .iter()
            .map(|&(member, i)| {
                let start = Instant::now();
                f(member, i).map_err(&to_error)?;
                Ok(start.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<Vec<f64>, TaskError>>()?,
    };
    Ok(sequence.iter().map(|(m, _)| *m).zip(ms).collect())
}

fn time_cuda<E>(
    sequence: &[(usize, usize)],
    f: &mut impl FnMut(usize, usize) -> Result<(), E>,
    to_error: &impl Fn(E) -> TaskError,
) -> Result<Vec<f64>, TaskError> {
    let events = Events::new(sequence.len() + 1)?;
    let stream: sys::CUstream = std::ptr::null_mut();
    for (e, &(member, i)) in events.0.iter().zip(sequence) {
        // SAFETY: valid events on the current context; null is the legacy
        // default stream, the one libtorch launches on.
        unsafe { event::record(*e, stream) }.map_err(driver_error("recording a CUDA event"))?;
        f(member, i).map_err(to_error)?;
    }
    let last = events.0[sequence.len()];
    unsafe { event::record(last, stream) }.map_err(driver_error("recording a CUDA event"))?;
    unsafe { event::synchronize(last) }.map_err(driver_error("waiting for a CUDA event"))?;
    events
        .0
        .windows(2)
        .map(|pair| {
            // SAFETY: both events were recorded and have completed.
            unsafe { event::elapsed(pair[0], pair[1]) }
                .map(f64::from)
                .map_err(driver_error("reading a CUDA event"))
        })
        .collect()
}

pub fn sync(device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
}

/// The median of timed repetitions (and their spread), in ms.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Times {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub mean: f64,
    pub repeats: usize,
}

impl Times {
    pub fn from_ms(samples: &[f64]) -> Times {
        if samples.is_empty() {
            return Times {
                median: 0.0,
                p10: 0.0,
                p90: 0.0,
                min: 0.0,
                mean: 0.0,
                repeats: 0,
            };
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |p| crate::stats::latency::percentile(&sorted, p);
        Times {
            median: at(50.0),
            p10: at(10.0),
            p90: at(90.0),
            min: sorted.first().copied().unwrap_or(0.0),
            mean: sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
            repeats: sorted.len(),
        }
    }
}
