//! The ViT itself, in libtorch: timm's `VisionTransformer` layer for layer
//! (conv patch embedding, class token, learned position embeddings, pre-norm
//! blocks of LayerNorm → multi-head self-attention through SDPA → LayerNorm →
//! MLP with GELU, final norm, linear head on the class token), with seeded
//! random weights. Every op goes through tch's fallible `f_` calls, so a
//! libtorch error (out of memory, a missing backend) is a value, not a panic.

use tch::{Device, Kind, TchError, Tensor};

use super::spec::VitConfig;

/// A linear layer's weight `[out, in]` and bias `[out]`.
struct Linear {
    weight: Tensor,
    bias: Tensor,
}

struct Norm {
    weight: Tensor,
    bias: Tensor,
}

struct Block {
    norm1: Norm,
    qkv: Linear,
    proj: Linear,
    norm2: Norm,
    fc1: Linear,
    fc2: Linear,
}

/// A ViT ready for inference on one device in one dtype.
pub struct Vit {
    patch_weight: Tensor,
    patch_bias: Tensor,
    cls_token: Tensor,
    pos_embed: Tensor,
    blocks: Vec<Block>,
    norm: Norm,
    head: Linear,
    patch: i64,
    heads: i64,
    dim: i64,
}

const LN_EPS: f64 = 1e-6;

/// Weights drawn like timm's init: N(0, 0.02²) for matrices and embeddings,
/// zeros for biases, ones for norm scales.
struct Init {
    kind: Kind,
    device: Device,
}

impl Init {
    fn normal(&self, shape: &[i64]) -> Result<Tensor, TchError> {
        Tensor::f_randn(shape, (Kind::Float, Device::Cpu))?
            .f_mul_scalar(0.02)?
            .f_to_device_(self.device, self.kind, false, false)
    }
    fn constant(&self, shape: &[i64], value: f64) -> Result<Tensor, TchError> {
        Tensor::f_full(shape, value, (self.kind, self.device))
    }
    fn linear(&self, inputs: i64, outputs: i64) -> Result<Linear, TchError> {
        Ok(Linear {
            weight: self.normal(&[outputs, inputs])?,
            bias: self.constant(&[outputs], 0.0)?,
        })
    }
    fn norm(&self, dim: i64) -> Result<Norm, TchError> {
        Ok(Norm {
            weight: self.constant(&[dim], 1.0)?,
            bias: self.constant(&[dim], 0.0)?,
        })
    }
}

impl Vit {
    /// Builds the model with weights drawn from `config.seed` (on the CPU, so
    /// the weights are the same whatever the device).
    pub fn new(config: &VitConfig, kind: Kind, device: Device) -> Result<Vit, TchError> {
        tch::manual_seed(config.seed as i64);
        let init = Init { kind, device };
        let (d, m, p) = (
            i64::from(config.dim),
            i64::from(config.mlp_dim),
            i64::from(config.patch),
        );
        let tokens = config.patches() as i64 + 1;
        let mut blocks = Vec::with_capacity(config.depth as usize);
        for _ in 0..config.depth {
            blocks.push(Block {
                norm1: init.norm(d)?,
                qkv: init.linear(d, 3 * d)?,
                proj: init.linear(d, d)?,
                norm2: init.norm(d)?,
                fc1: init.linear(d, m)?,
                fc2: init.linear(m, d)?,
            });
        }
        Ok(Vit {
            patch_weight: init.normal(&[d, 3, p, p])?,
            patch_bias: init.constant(&[d], 0.0)?,
            cls_token: init.normal(&[1, 1, d])?,
            pos_embed: init.normal(&[1, tokens, d])?,
            blocks,
            norm: init.norm(d)?,
            head: init.linear(d, i64::from(config.num_classes))?,
            patch: p,
            heads: i64::from(config.heads),
            dim: d,
        })
    }

    /// Every parameter tensor, for counting.
    fn tensors(&self) -> Vec<&Tensor> {
        let mut all = vec![
            &self.patch_weight,
            &self.patch_bias,
            &self.cls_token,
            &self.pos_embed,
        ];
        for b in &self.blocks {
            for t in [
                &b.norm1.weight,
                &b.norm1.bias,
                &b.qkv.weight,
                &b.qkv.bias,
                &b.proj.weight,
            ]
            .into_iter()
            .chain([
                &b.proj.bias,
                &b.norm2.weight,
                &b.norm2.bias,
                &b.fc1.weight,
                &b.fc1.bias,
            ])
            .chain([&b.fc2.weight, &b.fc2.bias])
            {
                all.push(t);
            }
        }
        all.extend([
            &self.norm.weight,
            &self.norm.bias,
            &self.head.weight,
            &self.head.bias,
        ]);
        all
    }

    /// The number of learnable parameters, counted off the tensors.
    pub fn param_count(&self) -> u64 {
        self.tensors().iter().map(|t| t.numel() as u64).sum()
    }

    /// FLOPs of one image, counted off the weight shapes (2 × MACs of the
    /// convolution, each linear layer over its rows, and QKᵀ and AV).
    pub fn flops_per_image(&self) -> u64 {
        let size = |t: &Tensor| t.size().iter().map(|&s| s as u64).product::<u64>();
        let tokens = self.pos_embed.size()[1] as u64;
        let patches = tokens - 1;
        let mut macs = patches * size(&self.patch_weight);
        for b in &self.blocks {
            let linear: u64 = [&b.qkv, &b.proj, &b.fc1, &b.fc2]
                .iter()
                .map(|l| size(&l.weight))
                .sum();
            macs += tokens * linear + 2 * tokens * tokens * self.dim as u64;
        }
        macs += size(&self.head.weight);
        2 * macs
    }

    /// Logits `[B, classes]` of a preprocessed batch `[B, 3, H, W]`.
    pub fn forward(&self, images: &Tensor) -> Result<Tensor, TchError> {
        let x = images.f_conv2d(
            &self.patch_weight,
            Some(&self.patch_bias),
            [self.patch, self.patch],
            [0, 0],
            [1, 1],
            1,
        )?;
        let x = x.f_flatten(2, -1)?.f_transpose(1, 2)?; // [B, N, D]
        let batch = x.size()[0];
        let cls = self.cls_token.f_expand([batch, 1, self.dim], false)?;
        let mut x = Tensor::f_cat(&[cls, x], 1)?.f_add(&self.pos_embed)?;
        for block in &self.blocks {
            x = self.block(block, &x)?;
        }
        let x = layer_norm(&x, &self.norm, self.dim)?;
        x.f_select(1, 0)?
            .f_linear(&self.head.weight, Some(&self.head.bias))
    }

    fn block(&self, b: &Block, x: &Tensor) -> Result<Tensor, TchError> {
        let size = x.size();
        let (batch, tokens) = (size[0], size[1]);
        let head_dim = self.dim / self.heads;
        let h = layer_norm(x, &b.norm1, self.dim)?;
        let qkv = h
            .f_linear(&b.qkv.weight, Some(&b.qkv.bias))?
            .f_reshape([batch, tokens, 3, self.heads, head_dim])?
            .f_permute([2, 0, 3, 1, 4])?;
        let (q, k, v) = (
            qkv.f_select(0, 0)?,
            qkv.f_select(0, 1)?,
            qkv.f_select(0, 2)?,
        );
        let no_mask: Option<&Tensor> = None;
        let attn = Tensor::f_scaled_dot_product_attention(
            &q,
            &k,
            &v,
            no_mask,
            0.0,
            false,
            None::<f64>,
            false,
        )?
        .f_transpose(1, 2)?
        .f_reshape([batch, tokens, self.dim])?;
        let x = x.f_add(&attn.f_linear(&b.proj.weight, Some(&b.proj.bias))?)?;
        let h = layer_norm(&x, &b.norm2, self.dim)?
            .f_linear(&b.fc1.weight, Some(&b.fc1.bias))?
            .f_gelu("none")?
            .f_linear(&b.fc2.weight, Some(&b.fc2.bias))?;
        x.f_add(&h)
    }
}

fn layer_norm(x: &Tensor, norm: &Norm, dim: i64) -> Result<Tensor, TchError> {
    x.f_layer_norm([dim], Some(&norm.weight), Some(&norm.bias), LN_EPS, true)
}
