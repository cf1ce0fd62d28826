//! The operators of `OpBench` as workloads: rotating input sets on the device,
//! a closure that runs the operator once, and the useful FLOPs and the fewest
//! bytes it must move (each input read once, each output written once).

use tch::{Device, Kind, Reduction, TchError, Tensor};

use super::spec::{Op, SdpaBackend};

/// One operator, ready to time.
pub struct Workload {
    /// Useful FLOPs of one run (0 for elementwise and normalisation ops).
    pub flops: f64,
    /// Bytes one run must move at least.
    pub bytes: f64,
    pub run: Box<dyn FnMut(usize) -> Result<(), TchError>>,
}

extern "C" {
    fn vitgraph_set_sdp_backends(flash: i32, mem_efficient: i32, math: i32, cudnn: i32);
}

/// Enables exactly the SDPA backend asked for (all of them for `Auto`).
pub fn force_sdp_backend(backend: SdpaBackend) {
    let on = |b: SdpaBackend| i32::from(backend == SdpaBackend::Auto || backend == b);
    // SAFETY: sets four process-wide flags in libtorch's global context.
    unsafe {
        vitgraph_set_sdp_backends(
            on(SdpaBackend::Flash),
            on(SdpaBackend::MemEfficient),
            on(SdpaBackend::Math),
            on(SdpaBackend::Cudnn),
        )
    };
}

/// The backend `Auto` would pick for these inputs (libtorch's `SDPBackend`).
pub fn auto_choice(q: &Tensor, k: &Tensor, v: &Tensor) -> Option<&'static str> {
    let no_mask: Option<&Tensor> = None;
    let choice =
        Tensor::f_internal_fused_sdp_choice(q, k, v, no_mask, 0.0, false, None::<f64>, false)
            .ok()?;
    Some(match choice {
        0 => "math",
        1 => "flash",
        2 => "mem_efficient",
        3 => "cudnn",
        _ => "other",
    })
}

fn randn(shape: &[i64], kind: Kind, device: Device) -> Result<Tensor, TchError> {
    Tensor::f_randn(shape, (kind, device))
}

fn rotating(n: usize, shape: &[i64], kind: Kind, device: Device) -> Result<Vec<Tensor>, TchError> {
    (0..n).map(|_| randn(shape, kind, device)).collect()
}

/// Random `[.., logical]` padded with zeros to `[.., physical]` in the last dim.
fn padded(shape: &[i64], physical: i64, kind: Kind, device: Device) -> Result<Tensor, TchError> {
    let logical = shape[shape.len() - 1];
    randn(shape, kind, device)?.f_constant_pad_nd([0, physical - logical])
}

/// Builds the workload of `op`; `rotate` input sets.
pub fn workload(op: &Op, kind: Kind, device: Device, rotate: usize) -> Result<Workload, TchError> {
    let elt = kind.elt_size_in_bytes() as f64;
    match *op {
        Op::LayerNorm { batch, seq, dim }
        | Op::Gelu { batch, seq, dim }
        | Op::Swish { batch, seq, dim } => {
            let shape = [i64::from(batch), i64::from(seq), i64::from(dim)];
            let xs = rotating(rotate, &shape, kind, device)?;
            let n = shape.iter().product::<i64>() as f64;
            let d = i64::from(dim);
            let weight = Tensor::f_ones([d], (kind, device))?;
            let bias = Tensor::f_zeros([d], (kind, device))?;
            let which = op.name();
            let run: Box<dyn FnMut(usize) -> Result<(), TchError>> = match which {
                "LayerNorm" => Box::new(move |i| {
                    xs[i % xs.len()]
                        .f_layer_norm([d], Some(&weight), Some(&bias), 1e-5, true)
                        .map(drop)
                }),
                "Gelu" => Box::new(move |i| xs[i % xs.len()].f_gelu("none").map(drop)),
                _ => Box::new(move |i| xs[i % xs.len()].f_silu().map(drop)),
            };
            Ok(Workload {
                flops: 0.0,
                bytes: 2.0 * n * elt,
                run,
            })
        }
        Op::Mse { batch, seq, dim } => {
            let shape = [i64::from(batch), i64::from(seq), i64::from(dim)];
            let xs = rotating(rotate, &shape, kind, device)?;
            let ys = rotating(rotate, &shape, kind, device)?;
            let n = shape.iter().product::<i64>() as f64;
            let run = Box::new(move |i: usize| {
                xs[i % xs.len()]
                    .f_mse_loss(&ys[i % ys.len()], Reduction::Mean)
                    .map(drop)
            });
            Ok(Workload {
                flops: 0.0,
                bytes: 2.0 * n * elt,
                run,
            })
        }
        Op::CrossEntropy { batch, seq, dim } => {
            let rows = i64::from(batch) * i64::from(seq);
            let logits = rotating(rotate, &[rows, i64::from(dim)], kind, device)?;
            let targets = (0..rotate)
                .map(|_| Tensor::f_randint(i64::from(dim), [rows], (Kind::Int64, device)))
                .collect::<Result<Vec<_>, _>>()?;
            let no_weight: Option<&Tensor> = None;
            let run = Box::new(move |i: usize| {
                logits[i % logits.len()]
                    .f_cross_entropy_loss(
                        &targets[i % targets.len()],
                        no_weight,
                        Reduction::Mean,
                        -100,
                        0.0,
                    )
                    .map(drop)
            });
            Ok(Workload {
                flops: 0.0,
                bytes: rows as f64 * (f64::from(dim) * elt + 8.0),
                run,
            })
        }
        Op::Sdpa {
            batch,
            heads,
            seq,
            head_dim,
            backend,
            pad_to,
        } => {
            let physical = i64::from(pad_to.unwrap_or(head_dim));
            let shape = [
                i64::from(batch),
                i64::from(heads),
                i64::from(seq),
                i64::from(head_dim),
            ];
            let inputs = (0..rotate)
                .map(|_| {
                    Ok([
                        padded(&shape, physical, kind, device)?,
                        padded(&shape, physical, kind, device)?,
                        padded(&shape, physical, kind, device)?,
                    ])
                })
                .collect::<Result<Vec<_>, TchError>>()?;
            let scale = 1.0 / f64::from(head_dim).sqrt();
            let tokens = f64::from(batch) * f64::from(heads) * f64::from(seq);
            // Set at each run, not once: a block measured together runs
            // members with other backends between this one's runs.
            let run = Box::new(move |i: usize| {
                force_sdp_backend(backend);
                let [q, k, v] = &inputs[i % inputs.len()];
                let no_mask: Option<&Tensor> = None;
                Tensor::f_scaled_dot_product_attention(q, k, v, no_mask, 0.0, false, scale, false)
                    .map(drop)
            });
            Ok(Workload {
                flops: 4.0 * tokens * f64::from(seq) * f64::from(head_dim),
                bytes: 4.0 * tokens * f64::from(head_dim) * elt,
                run,
            })
        }
        Op::Gemm { m, n, k, pad_to } => {
            let physical = i64::from(pad_to.unwrap_or(k));
            let (mi, ni, ki) = (i64::from(m), i64::from(n), i64::from(k));
            let inputs = (0..rotate)
                .map(|_| {
                    let a = padded(&[mi, ki], physical, kind, device)?;
                    let b = padded(&[ni, ki], physical, kind, device)?.f_transpose(0, 1)?;
                    Ok([a, b])
                })
                .collect::<Result<Vec<_>, TchError>>()?;
            let run = Box::new(move |i: usize| {
                let [a, b] = &inputs[i % inputs.len()];
                a.f_matmul(b).map(drop)
            });
            let (m, n, k) = (f64::from(m), f64::from(n), f64::from(k));
            Ok(Workload {
                flops: 2.0 * m * n * k,
                bytes: (m * k + k * n + m * n) * elt,
                run,
            })
        }
        Op::Hetero {
            heads,
            head_dim,
            ref seqs,
        } => hetero(heads, head_dim, seqs, kind, device, rotate),
        Op::Calibrate => Err(TchError::Kind(
            "Calibrate is measured by `calibrate`, not as a workload".into(),
        )),
    }
}

/// Sequences of different lengths padded to the longest, as one batch.
fn hetero(
    heads: u32,
    head_dim: u32,
    seqs: &[u32],
    kind: Kind,
    device: Device,
    rotate: usize,
) -> Result<Workload, TchError> {
    let longest = seqs.iter().copied().max().unwrap_or(1);
    let shape = [
        seqs.len() as i64,
        i64::from(heads),
        i64::from(longest),
        i64::from(head_dim),
    ];
    let inputs = (0..rotate)
        .map(|_| {
            Ok([
                randn(&shape, kind, device)?,
                randn(&shape, kind, device)?,
                randn(&shape, kind, device)?,
            ])
        })
        .collect::<Result<Vec<_>, TchError>>()?;
    let (h, d, elt) = (
        f64::from(heads),
        f64::from(head_dim),
        kind.elt_size_in_bytes() as f64,
    );
    let flops = seqs
        .iter()
        .map(|&s| 4.0 * h * f64::from(s) * f64::from(s) * d)
        .sum();
    let bytes = seqs.iter().map(|&s| 4.0 * h * f64::from(s) * d * elt).sum();
    let run = Box::new(move |i: usize| {
        force_sdp_backend(SdpaBackend::Auto);
        let [q, k, v] = &inputs[i % inputs.len()];
        let no_mask: Option<&Tensor> = None;
        Tensor::f_scaled_dot_product_attention(q, k, v, no_mask, 0.0, false, None::<f64>, false)
            .map(drop)
    });
    Ok(Workload { flops, bytes, run })
}
