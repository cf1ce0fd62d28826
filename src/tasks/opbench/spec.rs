//! The `OpBench` task's spec ([`OpBenchSpec`]): which operator, over which
//! shape, in which dtype, timed how.

use serde::{Deserialize, Serialize};

use crate::tasks::vit::spec::{Device, Dtype};

/// `OpBench(op: ..., ...)` in a pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpBenchSpec {
    pub op: Op,
    /// "f32", "f16" or "bf16".
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// "cpu", "cuda" or "cuda:N".
    #[serde(default = "default_device")]
    pub device: String,
    /// Untimed runs before timing.
    #[serde(default = "default_warmup")]
    pub warmup: u32,
    /// Timed runs; the result is their median.
    #[serde(default = "default_repeats")]
    pub repeats: u32,
    /// Distinct input sets the runs rotate over, so repeated runs do not read
    /// one buffer out of the cache.
    #[serde(default = "default_rotate")]
    pub rotate: u32,
    #[serde(default)]
    pub numa: Option<u32>,
    #[serde(default)]
    pub seed: u64,
    /// The members of a block measured together (a stage's `together`
    /// axes), each a spec of its own: set when the stage expands, never
    /// written in a pipeline file. This spec is then the first member's.
    /// Left out of the serialized spec when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<Box<crate::tasks::block::Block<OpBenchSpec>>>,
}

/// The operator and its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Op {
    /// LayerNorm over the last dim of `[batch, seq, dim]`.
    LayerNorm {
        batch: u32,
        seq: u32,
        dim: u32,
    },
    Gelu {
        batch: u32,
        seq: u32,
        dim: u32,
    },
    /// x · sigmoid(x).
    Swish {
        batch: u32,
        seq: u32,
        dim: u32,
    },
    /// Mean squared error of two `[batch, seq, dim]` tensors.
    Mse {
        batch: u32,
        seq: u32,
        dim: u32,
    },
    /// Cross-entropy of `[batch·seq, dim]` logits (dim = classes).
    CrossEntropy {
        batch: u32,
        seq: u32,
        dim: u32,
    },
    /// Attention `[batch, heads, seq, head_dim]` with the backend forced.
    /// `pad_to` pads `head_dim` with zeros (107 → 112 → 128); FLOPs and bytes
    /// count the logical `head_dim`, so padding shows as a lower useful rate.
    Sdpa {
        batch: u32,
        heads: u32,
        seq: u32,
        head_dim: u32,
        #[serde(default)]
        backend: SdpaBackend,
        #[serde(default)]
        pad_to: Option<u32>,
    },
    /// `[m, k] @ [k, n]`; `pad_to` pads `k` the same way.
    Gemm {
        m: u32,
        n: u32,
        k: u32,
        #[serde(default)]
        pad_to: Option<u32>,
    },
    /// Heterogeneous batching: sequences of `seqs` lengths padded to the
    /// longest and run as one SDPA batch; useful work counts each sequence's
    /// own length.
    Hetero {
        heads: u32,
        head_dim: u32,
        seqs: Vec<u32>,
    },
    /// Measures the device's copy bandwidth and bf16 matmul rate once per
    /// environment; other `OpBench` nodes that need it report fractions of it.
    Calibrate,
}

/// The SDPA implementation, forced the way `torch.nn.attention.sdpa_kernel` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SdpaBackend {
    #[default]
    Auto,
    Flash,
    MemEfficient,
    Math,
    Cudnn,
}

fn default_dtype() -> String {
    "bf16".to_owned()
}
fn default_device() -> String {
    "cuda".to_owned()
}
fn default_warmup() -> u32 {
    10
}
fn default_repeats() -> u32 {
    100
}
fn default_rotate() -> u32 {
    4
}

impl OpBenchSpec {
    /// Checks the spec, naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        Dtype::parse(&self.dtype).ok_or_else(|| {
            format!(
                "`dtype` {:?} is unknown; use \"f32\", \"f16\" or \"bf16\"",
                self.dtype
            )
        })?;
        Device::parse(&self.device).ok_or_else(|| {
            format!(
                "`device` {:?} is unknown; use \"cpu\", \"cuda\" or \"cuda:N\"",
                self.device
            )
        })?;
        if self.repeats == 0 {
            return Err("`repeats` must be at least 1".to_owned());
        }
        if self.rotate == 0 {
            return Err("`rotate` must be at least 1".to_owned());
        }
        self.op.validate()?;
        match &self.together {
            Some(block) => block.validate(),
            None => Ok(()),
        }
    }
}

impl crate::tasks::block::Block<OpBenchSpec> {
    /// Checks that the members can share a process: one spec per member,
    /// each valid, all on one device and NUMA node, none a calibration.
    pub fn validate(&self) -> Result<(), String> {
        self.check_count()?;
        let first = &self.members[0];
        for (key, member) in self.keyed() {
            if member.together.is_some() {
                return Err(format!("member `{key}` holds a block of its own"));
            }
            member
                .validate()
                .map_err(|e| format!("member `{key}`: {e}"))?;
            if member.device != first.device || member.numa != first.numa {
                return Err(format!(
                    "member `{key}` runs on `device: {:?}`, the block's first member on {:?}: one process measures a block, on one device and NUMA node; `device` and `numa` cannot be measured together",
                    member.device, first.device
                ));
            }
            if member.op == Op::Calibrate {
                return Err(format!(
                    "member `{key}` is `op: Calibrate`, which measures the device's ceilings alone: give the calibration a stage of its own, without `together`"
                ));
            }
        }
        Ok(())
    }
}

impl Op {
    fn validate(&self) -> Result<(), String> {
        let positive = |fields: &[(&str, u32)]| {
            fields
                .iter()
                .find(|(_, v)| *v == 0)
                .map_or(Ok(()), |(name, _)| {
                    Err(format!("`op.{name}` must be at least 1"))
                })
        };
        match self {
            Op::LayerNorm { batch, seq, dim }
            | Op::Gelu { batch, seq, dim }
            | Op::Swish { batch, seq, dim }
            | Op::Mse { batch, seq, dim }
            | Op::CrossEntropy { batch, seq, dim } => {
                positive(&[("batch", *batch), ("seq", *seq), ("dim", *dim)])
            }
            Op::Sdpa {
                batch,
                heads,
                seq,
                head_dim,
                pad_to,
                ..
            } => {
                positive(&[
                    ("batch", *batch),
                    ("heads", *heads),
                    ("seq", *seq),
                    ("head_dim", *head_dim),
                ])?;
                check_pad(*head_dim, *pad_to, "head_dim")
            }
            Op::Gemm { m, n, k, pad_to } => {
                positive(&[("m", *m), ("n", *n), ("k", *k)])?;
                check_pad(*k, *pad_to, "k")
            }
            Op::Hetero {
                heads,
                head_dim,
                seqs,
            } => {
                positive(&[("heads", *heads), ("head_dim", *head_dim)])?;
                if seqs.is_empty() || seqs.contains(&0) {
                    return Err(
                        "`op.seqs` must list at least one sequence length, none of them 0"
                            .to_owned(),
                    );
                }
                Ok(())
            }
            Op::Calibrate => Ok(()),
        }
    }

    /// The operator's name in `results.json`.
    pub fn name(&self) -> &'static str {
        match self {
            Op::LayerNorm { .. } => "LayerNorm",
            Op::Gelu { .. } => "Gelu",
            Op::Swish { .. } => "Swish",
            Op::Mse { .. } => "Mse",
            Op::CrossEntropy { .. } => "CrossEntropy",
            Op::Sdpa { .. } => "Sdpa",
            Op::Gemm { .. } => "Gemm",
            Op::Hetero { .. } => "Hetero",
            Op::Calibrate => "Calibrate",
        }
    }
}

fn check_pad(logical: u32, pad_to: Option<u32>, field: &str) -> Result<(), String> {
    match pad_to {
        Some(p) if p < logical => Err(format!(
            "`op.pad_to` ({p}) is smaller than `op.{field}` ({logical})"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_as_ron_writes_them() {
        let spec: OpBenchSpec =
            ron::from_str("(op: Sdpa(batch: 4, heads: 32, seq: 2048, head_dim: 107, backend: Flash, pad_to: Some(112)))")
                .expect("parses");
        assert_eq!(spec.repeats, 100);
        assert!(spec.validate().is_ok());
        let gemm: OpBenchSpec =
            ron::from_str("(op: Gemm(m: 8192, n: 8192, k: 8192), dtype: \"f16\")").expect("parses");
        assert_eq!(gemm.op.name(), "Gemm");
        let cal: OpBenchSpec = ron::from_str("(op: Calibrate)").expect("parses");
        assert!(cal.validate().is_ok());
    }

    #[test]
    fn bad_specs_name_the_field() {
        let err = |ron_text: &str| {
            let spec: OpBenchSpec = ron::from_str(ron_text).expect("parses");
            spec.validate().expect_err("invalid")
        };
        assert!(err("(op: Gemm(m: 0, n: 1, k: 1))").contains("`op.m`"));
        assert!(err("(op: Gemm(m: 1, n: 1, k: 128, pad_to: Some(112)))").contains("`op.pad_to`"));
        assert!(err("(op: Gelu(batch: 1, seq: 1, dim: 1), dtype: \"f8\")").contains("`dtype`"));
        assert!(err("(op: Hetero(heads: 1, head_dim: 64, seqs: []))").contains("`op.seqs`"));
        assert!(ron::from_str::<OpBenchSpec>("(op: Calibrate, repeat: 3)").is_err());
    }
}
