//! Closed-form parameter and FLOP counts of the standard ViT (timm's
//! `VisionTransformer`: conv patch embedding, class token, learned position
//! embeddings, pre-norm blocks with biased qkv, final norm, linear head).
//!
//! FLOPs are 2 × the multiply-accumulates of every matrix product and
//! convolution, attention's QKᵀ and AV included; elementwise work (norms,
//! GELU, softmax, residual adds) is left out.

use super::spec::VitConfig;

/// Learnable parameters.
pub fn params(c: &VitConfig) -> u64 {
    let (d, m, p) = (u64::from(c.dim), u64::from(c.mlp_dim), u64::from(c.patch));
    let patch_embed = 3 * p * p * d + d;
    let cls_token = d;
    let pos_embed = (c.patches() + 1) * d;
    // norm1 (2d), qkv (d·3d + 3d), proj (d·d + d), norm2 (2d), fc1 (d·m + m), fc2 (m·d + d)
    let block = 4 * d * d + 2 * d * m + 9 * d + m;
    let norm = 2 * d;
    let head = d * u64::from(c.num_classes) + u64::from(c.num_classes);
    patch_embed + cls_token + pos_embed + u64::from(c.depth) * block + norm + head
}

/// FLOPs of one image's forward pass.
pub fn flops_per_image(c: &VitConfig) -> u64 {
    let (d, m, p) = (u64::from(c.dim), u64::from(c.mlp_dim), u64::from(c.patch));
    let n = c.patches();
    let t = n + 1;
    let patch_embed = n * 3 * p * p * d;
    // qkv 3td², QKᵀ t²d, AV t²d, proj td², fc1 tdm, fc2 tmd
    let block = 4 * t * d * d + 2 * t * t * d + 2 * t * d * m;
    let head = d * u64::from(c.num_classes);
    2 * (patch_embed + u64::from(c.depth) * block + head)
}

#[cfg(test)]
mod tests {
    use super::super::spec::VitSpec;
    use super::*;

    fn config(model: &str, image_size: u32) -> VitConfig {
        let ron = format!("(model: {model:?}, image_size: {image_size}, device: \"cpu\")");
        let spec: VitSpec = ron::from_str(&ron).expect("spec parses");
        spec.resolve().expect("spec resolves")
    }

    #[test]
    fn vit_small_patch16_224_has_timms_parameter_count() {
        // timm.create_model("vit_small_patch16_224").num_parameters() == 22_050_664
        assert_eq!(params(&config("vit16x12x384", 224)), 22_050_664);
        // vit_base_patch16_224: 86_567_656, vit_large_patch16_224: 304_326_632
        assert_eq!(params(&config("vit16x12x768", 224)), 86_567_656);
        assert_eq!(params(&config("vit16x24x1024", 224)), 304_326_632);
    }

    #[test]
    fn vit_base_flops_match_the_published_17_6_gmacs() {
        // ViT-B/16 at 224 px is published as 17.6 GMACs (attention included).
        let flops = flops_per_image(&config("vit16x12x768", 224)) as f64;
        assert!((flops / 2.0 / 17.6e9 - 1.0).abs() < 0.005, "{flops}");
        // Doubling the resolution quadruples the tokens: more than 4× the FLOPs
        // because attention grows with the square of the tokens.
        let big = flops_per_image(&config("vit16x12x768", 448)) as f64;
        assert!(big / flops > 4.0);
    }
}
