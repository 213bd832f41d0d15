//! MUL_MAT dispatch: which kernel runs a matrix product, by type, shape and
//! device architecture. Pure Rust, no runtime: tested everywhere.
//!
//! The rules follow ggml's `ggml_sycl_mul_mat`:
//! - dequantize-mat-vec ([`MulMatPath::Dmmv`]) serves a single f32 column
//!   (`N == 1`) when the weight type has a DMMV kernel and `K` is a multiple
//!   of 32 (64 for f16, which reads two values per step);
//! - mat-vec-q ([`MulMatPath::Mmvq`], activations quantized to q8_1 and
//!   integer dot products) serves quantized weights for `N <= 8`;
//! - DMMV is tried first; but where the *reorder* optimisation applies (an
//!   Intel GPU, a single column, not disabled) and the type has a reordered
//!   MMVQ kernel, MMVQ on weights reordered to struct-of-arrays
//!   ([`MulMatPath::MmvqReordered`]) takes precedence over DMMV, **except on
//!   the Arc A770 (`intel_gpu_acm_g10`) with Q4_0**, where DMMV is faster;
//! - everything else runs the tiled GEMM ([`MulMatPath::Gemm`]).
//!
//! Environment toggles ([`Toggles::from_env`]), named after ggml's:
//! `BACKPLANE_SYCL_PRIORITIZE_DMMV=1` keeps DMMV ahead of the reorder;
//! `BACKPLANE_SYCL_DISABLE_OPT=1` turns the reorder optimisation off;
//! `BACKPLANE_SYCL_ENABLE_REORDER=1` treats every device as reorder-capable
//! (to exercise the reordered kernels on a CPU device).

use backplane_abi::DType;

use crate::arch::Architecture;

/// The k-dimension granularity of DMMV (ggml's `GGML_SYCL_DMMV_X`).
pub const DMMV_X: i64 = 32;
/// Largest `N` the MMVQ kernels take (ggml's `MMVQ_MAX_BATCH_SIZE`).
pub const MMVQ_MAX_BATCH: i64 = 8;

/// A MUL_MAT kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MulMatPath {
    /// Dequantize each weight row and dot it with the f32 column.
    Dmmv,
    /// Quantize the columns to q8_1 and take integer dot products.
    Mmvq,
    /// MMVQ over weights reordered to struct-of-arrays (quants, then scales).
    MmvqReordered,
    /// Tiled matrix product, any `N`, any strides.
    Gemm,
}

impl MulMatPath {
    /// Every path.
    pub const ALL: [MulMatPath; 4] = [
        MulMatPath::Dmmv,
        MulMatPath::Mmvq,
        MulMatPath::MmvqReordered,
        MulMatPath::Gemm,
    ];

    /// Short name, as in logs and perf reports.
    pub const fn name(self) -> &'static str {
        match self {
            MulMatPath::Dmmv => "dmmv",
            MulMatPath::Mmvq => "mmvq",
            MulMatPath::MmvqReordered => "mmvq-reorder",
            MulMatPath::Gemm => "gemm",
        }
    }
}

/// Weight types with a DMMV kernel in `kernels/mul_mat.cpp`.
pub fn has_dmmv(t: DType) -> bool {
    matches!(t, DType::F16 | DType::Q4_0 | DType::Q8_0 | DType::Q4_K)
}

/// Weight types with an MMVQ kernel.
pub fn has_mmvq(t: DType) -> bool {
    matches!(t, DType::Q4_0 | DType::Q8_0 | DType::Q4_K)
}

/// Weight types with a reordered MMVQ kernel (ggml also reorders Q4_K, Q5_K
/// and Q6_K; those fall back to the unreordered rules here).
pub fn has_mmvq_reordered(t: DType) -> bool {
    matches!(t, DType::Q4_0 | DType::Q8_0)
}

/// Weight types the tiled GEMM reads.
pub fn has_gemm(t: DType) -> bool {
    matches!(
        t,
        DType::F32 | DType::F16 | DType::Q4_0 | DType::Q8_0 | DType::Q4_K
    )
}

/// Toggles that force MUL_MAT paths (options of [`crate::options`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Toggles {
    /// `prioritize_dmmv`: the reorder never suppresses DMMV.
    pub prioritize_dmmv: bool,
    /// `disable_opt`: no reorder optimisation at all.
    pub disable_opt: bool,
    /// `enable_reorder`: the reorder applies on any device.
    pub force_reorder: bool,
}

/// What the policy needs to know of a MUL_MAT node: `dst[M, N] = src0[K, M]^T
/// src1[K, N]`, batched over dims 2 and 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulMatShape {
    /// Weight type.
    pub src0: DType,
    /// Activation type.
    pub src1: DType,
    /// `K` (src0 ne0).
    pub k: i64,
    /// `M` (src0 ne1).
    pub m: i64,
    /// `N` (src1 ne1).
    pub n: i64,
    /// src1 batch dims (ne2, ne3).
    pub batch: [i64; 2],
    /// src0 rows are dense (`nb0` = type size), as every mat-vec kernel needs.
    pub src0_dense_rows: bool,
}

impl MulMatShape {
    /// A dense single-batch product, for tests and tools.
    pub fn dense(src0: DType, k: i64, m: i64, n: i64) -> MulMatShape {
        MulMatShape {
            src0,
            src1: DType::F32,
            k,
            m,
            n,
            batch: [1, 1],
            src0_dense_rows: true,
        }
    }
}

/// Chooses the kernel for a product on a device of architecture `arch`, or
/// says why none fits.
pub fn choose(
    arch: &Architecture,
    toggles: Toggles,
    s: &MulMatShape,
) -> Result<MulMatPath, String> {
    if !has_gemm(s.src0) {
        return Err(format!(
            "no SYCL MUL_MAT kernel for weights of type {}",
            s.src0.name()
        ));
    }
    if !matches!(s.src1, DType::F32 | DType::F16) {
        return Err(format!(
            "no SYCL MUL_MAT kernel for activations of type {}",
            s.src1.name()
        ));
    }
    let column_f32 = s.src1 == DType::F32 && s.src0_dense_rows;
    let dmmv_x = if s.src0 == DType::F16 {
        2 * DMMV_X
    } else {
        DMMV_X
    };
    let mut use_dmmv = column_f32 && has_dmmv(s.src0) && s.k % dmmv_x == 0 && s.n == 1;
    let use_mmvq = column_f32 && has_mmvq(s.src0) && s.n <= MMVQ_MAX_BATCH;
    let reorder = reorder_applies(arch, toggles, s) && has_mmvq_reordered(s.src0);
    // MMVQ on reordered weights takes precedence over DMMV, except on the
    // Arc A770 with Q4_0, where DMMV is the faster kernel.
    if !toggles.prioritize_dmmv && reorder && !(arch.is_acm_g10() && s.src0 == DType::Q4_0) {
        use_dmmv = use_dmmv && !use_mmvq;
    }
    Ok(if use_dmmv {
        MulMatPath::Dmmv
    } else if use_mmvq && reorder {
        MulMatPath::MmvqReordered
    } else if use_mmvq {
        MulMatPath::Mmvq
    } else {
        MulMatPath::Gemm
    })
}

/// ggml's `should_reorder_tensor`: the optimisation is on, the device is one
/// it pays off on (an Intel GPU), and the product is a single column.
pub fn reorder_applies(arch: &Architecture, toggles: Toggles, s: &MulMatShape) -> bool {
    reorder_offered(arch, toggles) && s.n == 1 && s.batch == [1, 1]
}

/// Whether a device offers weights in the reordered layout
/// ([`crate::reorder`]): the optimisation is on and the device is one it
/// pays off on (an Intel GPU), or `enable_reorder` asks for it anywhere.
/// Reordered weights are then read by [`MulMatPath::MmvqReordered`] for
/// single columns without a reorder per product.
pub fn reorder_offered(arch: &Architecture, toggles: Toggles) -> bool {
    !toggles.disable_opt && (arch.family.is_intel_gpu() || toggles.force_reorder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{ARCHITECTURES, Family};
    use MulMatPath::*;

    /// A representative architecture per family, plus the A770.
    fn devices() -> Vec<Architecture> {
        let mut v = vec![Architecture::from_name("intel_cpu_spr")];
        for fam in [
            Family::IGpuNonXe,
            Family::IGpuXe,
            Family::DGpuClient,
            Family::DGpuCloud,
        ] {
            let name = ARCHITECTURES
                .iter()
                .find(|(n, f)| *f == fam && *n != crate::arch::ACM_G10)
                .unwrap()
                .0;
            v.push(Architecture::from_name(name));
        }
        v.push(Architecture::from_name("intel_gpu_acm_g10"));
        v
    }

    /// The expected single-column (N = 1, K = 4096) path per device and type;
    /// `None` = no kernel. Rows: cpu, igpu-non-xe, igpu-xe, dgpu-client,
    /// dgpu-cloud, acm_g10.
    fn expected_mat_vec(t: DType) -> [Option<MulMatPath>; 6] {
        match t {
            DType::F32 => [Some(Gemm); 6],
            DType::F16 => [Some(Dmmv); 6],
            DType::Q4_0 => [
                Some(Dmmv),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(Dmmv), // the A770 rule
            ],
            DType::Q8_0 => [
                Some(Dmmv),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(MmvqReordered),
                Some(MmvqReordered),
            ],
            DType::Q4_K => [Some(Dmmv); 6],
            _ => [None; 6],
        }
    }

    #[test]
    fn mat_vec_decisions_per_family_and_type() {
        let devs = devices();
        for &t in DType::ALL.iter() {
            let want = expected_mat_vec(t);
            for (dev, want) in devs.iter().zip(want) {
                let got = choose(dev, Toggles::default(), &MulMatShape::dense(t, 4096, 64, 1)).ok();
                assert_eq!(got, want, "type {} on {}", t.name(), dev);
            }
        }
    }

    #[test]
    fn small_batches_use_mmvq_without_reorder_and_large_ones_gemm() {
        for dev in devices() {
            for &t in DType::ALL.iter().filter(|t| has_gemm(**t)) {
                for n in [2, 8] {
                    let want = if has_mmvq(t) { Mmvq } else { Gemm };
                    assert_eq!(
                        choose(
                            &dev,
                            Toggles::default(),
                            &MulMatShape::dense(t, 4096, 64, n)
                        ),
                        Ok(want)
                    );
                }
                assert_eq!(
                    choose(
                        &dev,
                        Toggles::default(),
                        &MulMatShape::dense(t, 4096, 64, 9)
                    ),
                    Ok(Gemm)
                );
            }
        }
    }

    #[test]
    fn a770_keeps_dmmv_for_q4_0_only() {
        let a770 = Architecture::from_name("intel_gpu_acm_g10");
        let b580 = Architecture::from_name("intel_gpu_bmg_g21");
        let q4 = MulMatShape::dense(DType::Q4_0, 4096, 4096, 1);
        let q8 = MulMatShape::dense(DType::Q8_0, 4096, 4096, 1);
        assert_eq!(choose(&a770, Toggles::default(), &q4), Ok(Dmmv));
        assert_eq!(choose(&b580, Toggles::default(), &q4), Ok(MmvqReordered));
        assert_eq!(choose(&a770, Toggles::default(), &q8), Ok(MmvqReordered));
        // The alias name is the same device.
        assert_eq!(
            choose(
                &Architecture::from_name("intel_gpu_dg2_g10"),
                Toggles::default(),
                &q4
            ),
            Ok(Dmmv)
        );
    }

    #[test]
    fn toggles_force_dmmv_or_disable_reorder() {
        let b580 = Architecture::from_name("intel_gpu_bmg_g21");
        let q4 = MulMatShape::dense(DType::Q4_0, 4096, 4096, 1);
        let prio = Toggles {
            prioritize_dmmv: true,
            ..Toggles::default()
        };
        let off = Toggles {
            disable_opt: true,
            ..Toggles::default()
        };
        assert_eq!(choose(&b580, prio, &q4), Ok(Dmmv));
        assert_eq!(choose(&b580, off, &q4), Ok(Dmmv));
        assert!(!reorder_applies(&b580, off, &q4));
        // DMMV impossible (K not a multiple of 32 is impossible for q4_0, so
        // use N = 2): MMVQ without reorder.
        assert_eq!(
            choose(&b580, off, &MulMatShape::dense(DType::Q4_0, 4096, 64, 2)),
            Ok(Mmvq)
        );
        let cpu = Architecture::from_name("intel_cpu_spr");
        let forced = Toggles {
            force_reorder: true,
            ..Toggles::default()
        };
        assert_eq!(choose(&cpu, forced, &q4), Ok(MmvqReordered));
        assert_eq!(choose(&cpu, Toggles::default(), &q4), Ok(Dmmv));
    }

    #[test]
    fn reorder_needs_a_single_unbatched_column() {
        let b580 = Architecture::from_name("intel_gpu_bmg_g21");
        let mut s = MulMatShape::dense(DType::Q4_0, 4096, 64, 1);
        s.batch = [2, 1];
        assert!(!reorder_applies(&b580, Toggles::default(), &s));
        // Batched single column: DMMV (first in line) since the reorder is off.
        assert_eq!(choose(&b580, Toggles::default(), &s), Ok(Dmmv));
    }

    #[test]
    fn f16_dmmv_needs_k_multiple_of_64_and_dense_rows() {
        let cpu = Architecture::from_name("x86_64");
        assert_eq!(
            choose(
                &cpu,
                Toggles::default(),
                &MulMatShape::dense(DType::F16, 96, 8, 1)
            ),
            Ok(Gemm)
        );
        assert_eq!(
            choose(
                &cpu,
                Toggles::default(),
                &MulMatShape::dense(DType::F16, 128, 8, 1)
            ),
            Ok(Dmmv)
        );
        let mut permuted = MulMatShape::dense(DType::F16, 128, 8, 1);
        permuted.src0_dense_rows = false;
        assert_eq!(choose(&cpu, Toggles::default(), &permuted), Ok(Gemm));
    }

    #[test]
    fn unsupported_types_say_which() {
        let cpu = Architecture::from_name("x86_64");
        let e = choose(
            &cpu,
            Toggles::default(),
            &MulMatShape::dense(DType::Q5_1, 64, 8, 1),
        )
        .unwrap_err();
        assert!(e.contains("q5_1"), "{e}");
        let mut s = MulMatShape::dense(DType::F32, 64, 8, 1);
        s.src1 = DType::Q8_0;
        assert!(
            choose(&cpu, Toggles::default(), &s)
                .unwrap_err()
                .contains("activations")
        );
    }
}
