//! The synthetic images a `Vit` run feeds its model: seeded uint8 batches
//! at the source resolution, and the preprocessing (resize, normalize,
//! cast) that turns one into the model's input, on the CPU or the GPU.

use tch::{Device, Kind, Tensor};

use super::measure::torch_error;
use super::spec::VitConfig;
use crate::tasks::error::TaskError;

/// Distinct source batches, rotated so that inputs are not one buffer.
const SOURCE_POOL: usize = 4;
const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
const STD: [f64; 3] = [0.229, 0.224, 0.225];

/// `SOURCE_POOL` seeded uint8 batches `[B, 3, S, S]` on the host (pinned when
/// they will be copied to a GPU).
pub(super) fn source_pool(config: &VitConfig, device: Device) -> Result<Vec<Tensor>, TaskError> {
    let s = i64::from(config.source_size);
    let shape = [i64::from(config.batch), 3, s, s];
    (0..SOURCE_POOL)
        .map(|_| {
            let t = Tensor::f_randint(256, shape, (Kind::Uint8, Device::Cpu))?;
            if device.is_cuda() {
                t.f_pin_memory(device)
            } else {
                Ok(t)
            }
        })
        .collect::<Result<_, _>>()
        .map_err(torch_error("making the synthetic images"))
}

/// Resize to the model's resolution, normalize, cast.
pub(super) fn preprocess(
    raw: &Tensor,
    config: &VitConfig,
    kind: Kind,
) -> Result<Tensor, tch::TchError> {
    let device = raw.device();
    let size = i64::from(config.image_size);
    let mean = Tensor::f_from_slice(&MEAN[..])?
        .f_mul_scalar(255.0)?
        .f_reshape([1, 3, 1, 1])?
        .f_to_device_(device, Kind::Float, false, false)?;
    let std = Tensor::f_from_slice(&STD[..])?
        .f_mul_scalar(255.0)?
        .f_reshape([1, 3, 1, 1])?
        .f_to_device_(device, Kind::Float, false, false)?;
    raw.f_to_kind(Kind::Float)?
        .f_upsample_bilinear2d([size, size], false, None::<f64>, None::<f64>)?
        .f_sub(&mean)?
        .f_div(&std)?
        .f_to_kind(kind)
}
