use std::path::Path;

use super::*;

#[test]
fn names_lose_templates_parameters_and_void() {
    assert_eq!(
        normalize("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, std::array<char*, 3>>(int, float*)"),
        "at::native::vectorized_elementwise_kernel"
    );
    assert_eq!(
        normalize("void at::native::vectorized_elementwise_kernel<8, at::native::AddFunctor<c10::Half>, std::array<char*, 3>>(int, c10::Half*)"),
        "at::native::vectorized_elementwise_kernel"
    );
    assert_eq!(
        normalize("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"),
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
    );
    assert_eq!(normalize("kernel(lambda<(int)1>)"), "kernel");
    assert_eq!(normalize("  plain  "), "plain");
    // Mangled, as CUPTI records them (names from an H200 trace of the
    // quickstart): demangled, then the same rules.
    assert_eq!(
        normalize("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"),
        "at::native::vectorized_elementwise_kernel"
    );
    assert_eq!(
        normalize("_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_"),
        "at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
    );
    assert_eq!(
        normalize("_ZN7cutlass7Kernel2I41cutlass_80_simt_sgemm_64x64_8x5_tn_align1EEvNT_6ParamsE"),
        "cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"
    );
    assert_eq!(
        normalize("_Z18sgemm_largek_lds64ILb1ELb0ELi5ELi5ELi4ELi4ELi4ELi34EEvPfPKfS2_iiiiiiS2_S2_ffiiPiS3_"),
        "sgemm_largek_lds64"
    );
    // Not a valid mangling: kept as it is.
    assert_eq!(normalize("_Zbroken"), "_Zbroken");
}

fn profile(analyses: usize, kernels: &[(&str, f64, f64)]) -> Profile {
    let mut p = Profile {
        analyses,
        ..Profile::default()
    };
    for (name, instances, total_ns) in kernels {
        p.kernels.insert(
            normalize(name).into(),
            KernelTotals {
                instances: *instances,
                total_ns: *total_ns,
                example: (*name).into(),
            },
        );
        p.kernel_count += instances;
        p.kernel_time_ns += total_ns;
    }
    p
}

#[test]
fn a_known_change_is_found_and_ranked_by_its_share() {
    let a = profile(
        1,
        &[
            ("gemm<128>", 10.0, 10e6),
            ("relu", 10.0, 1e6),
            ("softmax_naive", 5.0, 2e6),
        ],
    );
    let b = profile(
        1,
        &[
            ("gemm<64>", 10.0, 8e6),
            ("relu", 10.0, 1e6),
            ("flash_attention", 5.0, 0.5e6),
        ],
    );
    let d = diff(a, b);
    let seen: Vec<(&str, &str, f64)> = d
        .changes
        .iter()
        .map(|c| (&*c.name, c.status, c.delta_ns))
        .collect();
    assert_eq!(
        seen,
        [
            ("gemm", "changed", -2e6),
            ("softmax_naive", "removed", -2e6),
            ("flash_attention", "added", 0.5e6),
        ]
    );
    let shares: Vec<f64> = d.changes.iter().map(|c| c.share_of_change).collect();
    assert_eq!(shares, [-2.0 / 4.5, -2.0 / 4.5, 0.5 / 4.5]);
    let text = text(&d, 10);
    assert!(text.contains("13.000 ms → 9.500 ms (-26.9 %)"), "{text}");
    assert!(text.contains("removed"), "{text}");
}

fn external(rel: &str) -> Option<crate::analysis::Metrics> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/external-traces")
        .join(rel);
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return None;
    }
    let trace = crate::trace::Trace::load(&path).expect("a real trace loads");
    Some(crate::analysis::compute(
        &trace,
        &crate::analysis::Options::default(),
    ))
}

#[test]
fn two_real_traces_diff_and_a_trace_against_itself_does_not() {
    let (Some(h100), Some(small)) = (
        external("nsys-ai/h100_2gpu_1s.sqlite"),
        external("test-cuda/report1.sqlite"),
    ) else {
        return;
    };
    let same = diff(Profile::of(&[&h100]), Profile::of(&[&h100]));
    assert!(same.changes.is_empty());
    let d = diff(Profile::of(&[&small]), Profile::of(&[&h100]));
    assert!(d.changes.iter().any(|c| c.status == "added"));
    assert!(d.changes.iter().any(|c| c.status == "removed"));
    let sum: f64 = d.changes.iter().map(|c| c.delta_ns).sum();
    let total = d.b.kernel_time_ns - d.a.kernel_time_ns;
    assert!(
        (sum - total).abs() <= 1e-6 * total.abs().max(1.0),
        "{sum} vs {total}"
    );
    // Largest first.
    assert!(d
        .changes
        .windows(2)
        .all(|w| w[0].delta_ns.abs() >= w[1].delta_ns.abs()));
    // Two analyses of one trace average to that trace.
    let twice = Profile::of(&[&h100, &h100]);
    assert_eq!(twice.kernel_time_ns, Profile::of(&[&h100]).kernel_time_ns);
    assert_eq!(twice.analyses, 2);
}
