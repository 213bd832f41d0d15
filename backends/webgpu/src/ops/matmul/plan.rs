//! How a MUL_MAT runs, decided from the device facts and the descriptors
//! alone (no GPU objects), so `supports` and `encode` agree and tests can
//! check the choices: the kernel path, how the weights are read and
//! whether the activations are converted first.

use backplane_abi::{DType, TensorDesc};

use crate::facts::Facts;
use crate::options::Tuning;

/// Weight types with a kernel.
pub const WEIGHT_TYPES: &[DType] = &DType::WEIGHT_TYPES;

/// Activation (src1) types.
pub const ACTIVATION_TYPES: &[DType] = &[DType::F32, DType::F16];

/// Columns up to which the mat-vec kernel is used.
pub const MATVEC_MAX_N: u64 = 8;

/// Rows of dst per mat-vec workgroup (2 measured best on an H200 for every
/// weight type at n = 1; 4 and more leave too few workgroups).
pub const MATVEC_ROWS: u32 = 2;

/// Smallest mat-vec workgroup [`matvec_wg`] picks for short rows (one
/// subgroup on the GPUs measured).
pub const MATVEC_MIN_WG: u32 = 32;

/// Smallest output tile of the tiled kernel (square; 64 or 128).
pub const TILED_TILE: u64 = 64;

/// Workgroups of 128 x 128 tiles from which the tiled kernel uses them
/// (below, 64 x 64 tiles keep more of a large GPU busy).
pub const TILED_BIG_MIN_GROUPS: u64 = 256;

/// Invocations of the tiled kernel.
pub const TILED_WG: u32 = 256;

/// Output tile of the cooperative-matrix kernel (square).
pub const COOPMAT_TILE: u64 = 128;

/// Subgroups of a cooperative-matrix workgroup.
pub const COOPMAT_SUBGROUPS: u32 = 16;

/// Workgroup memory of the cooperative-matrix kernel: two 128 x 72 half tiles.
pub const COOPMAT_SHARED_BYTES: u32 = 2 * 128 * 72 * 2;

/// K step of the cooperative-matrix kernel (`BK`): a split of K is a
/// multiple of it.
pub const COOPMAT_BK: u64 = 64;

/// Workgroups the cooperative-matrix kernel aims for before it splits K,
/// on a device that does not report its multiprocessors (see
/// [`coopmat_groups_target`]).
pub const COOPMAT_GROUPS_TARGET: u64 = 128;

/// Workgroups the cooperative-matrix kernel aims for before it splits K:
/// one per multiprocessor where the device reports them, else
/// [`COOPMAT_GROUPS_TARGET`]. On an H200 (132 multiprocessors) one
/// workgroup takes a multiprocessor, and a 4096 x N x 14336 product took
/// 327-331 us for N = 128, 256 and 512 alike (32, 64 and 128 workgroups),
/// 642-650 us for N = 1024.
pub fn coopmat_groups_target(facts: &Facts) -> u64 {
    facts.compute_units.map_or(COOPMAT_GROUPS_TARGET, u64::from)
}

/// Least K per split of the cooperative-matrix kernel.
pub const COOPMAT_SPLIT_MIN_K: u64 = 1024;

/// Most splits of K.
pub const COOPMAT_MAX_SPLITS: u64 = 8;

/// How the cooperative-matrix kernel splits K for `tiles` output tiles
/// (all batches): `(splits, k_chunk)`, k_chunk a multiple of
/// [`COOPMAT_BK`]. Too few tiles to fill `target` workgroups
/// ([`coopmat_groups_target`]) are split so they do, keeping at least
/// [`COOPMAT_SPLIT_MIN_K`] per split; each split then writes partial sums
/// that `mul_mat_split_sum` adds into dst. `forced` (the `matmul_splitk`
/// option) forces that many.
pub fn coopmat_split(forced: Option<u32>, tiles: u64, k: u64, target: u64) -> (u64, u64) {
    let splits = match forced {
        Some(n) => u64::from(n).clamp(1, COOPMAT_MAX_SPLITS),
        None => (target / tiles.max(1))
            .min(k / COOPMAT_SPLIT_MIN_K)
            .clamp(1, COOPMAT_MAX_SPLITS),
    };
    let chunk = k.div_ceil(splits).next_multiple_of(COOPMAT_BK);
    (k.div_ceil(chunk), chunk)
}

/// Smallest M, N and K for the cooperative-matrix path (below, the tiled
/// kernel wastes less of its tile).
pub const COOPMAT_MIN: [u64; 3] = [128, 64, 64];

/// Columns from which the cooperative-matrix path converts non-f16 weights
/// to half rows in scratch memory first ([`dequantize_first`]).
pub const DEQUANT_FIRST_MIN_N: u64 = 128;

/// Whether the cooperative-matrix path first converts the weights
/// (quantized or f32, `t`) to dense half rows in scratch memory, so the
/// kernel stages plain halves: for at least [`DEQUANT_FIRST_MIN_N`]
/// columns, where the one pass over the weights costs less than
/// dequantizing them again in every column tile, and when the copy fits
/// one binding. The `matmul_dequant` option forces it for every size,
/// `matmul_nodequant` turns it off.
pub fn dequantize_first(facts: &Facts, t: DType, s: &Shape) -> bool {
    let tuning = &facts.tuning;
    if t == DType::F16 || t == DType::BF16 || tuning.matmul_nodequant {
        return false;
    }
    let fits = facts.fits_binding(dequantized_bytes(s));
    fits && s.k.is_multiple_of(4) && (s.n >= DEQUANT_FIRST_MIN_N || tuning.matmul_dequant)
}

/// Bytes of the weights as dense half rows: K x M per weight batch.
pub fn dequantized_bytes(s: &Shape) -> u64 {
    let batches = (s.ne12 / s.r2.max(1)) * (s.ne13 / s.r3.max(1));
    s.k * s.m * batches * 2
}

/// A kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// `mul_mat_vec`: N <= 8, `cols` columns per workgroup (1, 2, 4 or 8).
    MatVec {
        /// Columns per workgroup.
        cols: u32,
    },
    /// `mul_mat_tiled`: 64 x 64 register-tiled f32 GEMM.
    Tiled,
    /// `mul_mat_coopmat`: 128 x 128 cooperative-matrix GEMM, edges tiled.
    CoopMat {
        /// Plain code in place of the cooperative-matrix calls (tests on
        /// devices without them, forced by `coopmat-emulated`).
        emulated: bool,
    },
}

impl Path {
    /// Name used in logs and by `BACKPLANE_WEBGPU_MATMUL`.
    pub fn name(self) -> &'static str {
        match self {
            Path::MatVec { .. } => "matvec",
            Path::Tiled => "tiled",
            Path::CoopMat { emulated: false } => "coopmat",
            Path::CoopMat { emulated: true } => "coopmat-emulated",
        }
    }
}

/// How the kernels read the weights (see `shaders/wgsl/mul_mat_common.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// Block-quantized, offsets in bytes.
    Quant,
    /// f32/f16 aligned to 4 elements, offsets in vec4s.
    Vec4,
    /// f32/f16/bf16 element by element, offsets in elements.
    Scalar,
    /// f16 rows read 8 halves at a time as `vec4<u32>` (mat-vec only:
    /// K % 16 == 0, offsets and strides multiples of 16 bytes), offsets in
    /// units of 8 halves.
    Half8,
    /// Block-quantized rows read as `vec4<u32>` (integer mat-vec of q4_K,
    /// whose 144-byte blocks stay 16-byte aligned when the offset and
    /// strides are), offsets in bytes.
    Quant16,
    /// q4_0 stored split ([`crate::split`]): each block's quants one
    /// `vec4<u32>`, the scales after all quants (integer mat-vec only),
    /// offsets in bytes of the quants.
    Split,
}

/// The shape of a MUL_MAT: `dst[M, N, ne12, ne13] = a[K, M, ne02, ne03]^T b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Shared dimension.
    pub k: u64,
    /// Weight rows = dst rows.
    pub m: u64,
    /// Activation rows = dst columns.
    pub n: u64,
    /// Batch dims of src1 / dst.
    pub ne12: u64,
    /// Batch dims of src1 / dst.
    pub ne13: u64,
    /// Broadcast ratios ne12 / ne02 and ne13 / ne03.
    pub r2: u64,
    /// See `r2`.
    pub r3: u64,
}

impl Shape {
    /// An unbatched m x k by k x n product (for unit tests).
    #[cfg(test)]
    pub(crate) fn unbatched(m: u64, n: u64, k: u64) -> Shape {
        Shape {
            k,
            m,
            n,
            ne12: 1,
            ne13: 1,
            r2: 1,
            r3: 1,
        }
    }

    /// The shape of MUL_MAT(a, b), or why they do not fit.
    pub fn of(a: &TensorDesc, b: &TensorDesc) -> Result<Shape, String> {
        let (an, bn) = (a.ne, b.ne);
        if an.iter().chain(&bn).any(|&x| x < 0) {
            return Err("negative dimension".into());
        }
        if an[0] != bn[0] {
            return Err(format!(
                "src0 ne0={} differs from src1 ne0={}",
                an[0], bn[0]
            ));
        }
        for d in [2, 3] {
            if an[d] == 0 || bn[d] % an[d] != 0 {
                return Err(format!(
                    "src1 ne{d}={} is not a multiple of src0 ne{d}={}",
                    bn[d], an[d]
                ));
            }
        }
        Ok(Shape {
            k: an[0] as u64,
            m: an[1] as u64,
            n: bn[1] as u64,
            ne12: bn[2] as u64,
            ne13: bn[3] as u64,
            r2: (bn[2] / an[2]) as u64,
            r3: (bn[3] / an[3]) as u64,
        })
    }

    /// Number of batches (ne12 * ne13).
    pub fn batches(&self) -> u64 {
        self.ne12 * self.ne13
    }
}

/// The offset of `t` within its binding, in bytes (its offset modulo the
/// storage offset alignment).
pub fn rem_bytes(facts: &Facts, t: &TensorDesc) -> u64 {
    t.offset % facts.offset_alignment.max(1)
}

/// Whether the cooperative-matrix kernel can run on this device: 16x16x16
/// half matrices, subgroups of one known size, 16 of them per workgroup,
/// and room for its tiles.
pub fn coopmat_ready(facts: &Facts) -> bool {
    let (lo, hi) = facts.subgroup_size;
    facts.coopmat_f16_16
        && facts.f16
        && facts.subgroups
        && lo == hi
        && lo > 0
        && COOPMAT_SUBGROUPS * lo <= facts.max_invocations
        && facts.workgroup_storage_bytes >= COOPMAT_SHARED_BYTES
}

/// How the weights `a` (type `t`) are read.
pub fn weight_layout(facts: &Facts, a: &TensorDesc, t: DType) -> WeightLayout {
    if t.is_quantized() {
        return WeightLayout::Quant;
    }
    let size = t.type_size() as u64;
    let vec = 4 * size;
    let aligned = t != DType::BF16
        && a.ne[0] % 4 == 0
        && rem_bytes(facts, a).is_multiple_of(vec)
        && a.nb[1..].iter().all(|&s| s.is_multiple_of(vec));
    if aligned {
        WeightLayout::Vec4
    } else {
        WeightLayout::Scalar
    }
}

/// The mat-vec kernel's layout for weights `a` of type `t`: [`WeightLayout::Half8`]
/// for f16 rows that allow 16-byte loads, [`WeightLayout::Quant16`] for
/// such q4_K rows under the integer kernel, else [`weight_layout`].
pub fn matvec_weight_layout(facts: &Facts, a: &TensorDesc, t: DType) -> WeightLayout {
    let aligned16 =
        rem_bytes(facts, a).is_multiple_of(16) && a.nb[1..].iter().all(|&s| s.is_multiple_of(16));
    let tuning = &facts.tuning;
    if t == DType::F16 && a.ne[0] % 16 == 0 && aligned16 && !tuning.matmul_nohalf8 {
        WeightLayout::Half8
    } else if t == DType::Q4_K && matvec_int8(tuning, t) && aligned16 && !tuning.matmul_noquant16 {
        WeightLayout::Quant16
    } else {
        weight_layout(facts, a, t)
    }
}

/// Whether the kernels can read the activations `b` in place: f32 rows of
/// whole aligned vec4s ([`activations_vec4`]). Otherwise they are
/// converted to f32 rows of K rounded up to 4 first.
pub fn activations_direct(facts: &Facts, b: &TensorDesc, t: DType) -> bool {
    t == DType::F32 && activations_vec4(facts, b, t)
}

/// Whether src1 (type `t`) is rows of whole aligned vec4s: rows dense,
/// K % 4 == 0 and every offset and stride a multiple of 4 elements
/// (`mul_mat_convert` then copies a vec4 per invocation).
pub fn activations_vec4(facts: &Facts, b: &TensorDesc, t: DType) -> bool {
    let size = t.type_size() as u64;
    let vec = 4 * size;
    b.nb[0] == size
        && b.ne[0] % 4 == 0
        && rem_bytes(facts, b).is_multiple_of(vec)
        && b.nb[1..].iter().all(|&s| s.is_multiple_of(vec))
}

/// Bytes of converted activations: K rounded up to 4, f32.
pub fn converted_bytes(s: &Shape) -> u64 {
    s.k.next_multiple_of(4) * s.n * s.batches() * 4
}

/// Weights per unit of the integer mat-vec (`Q8_RUNS` runs of 32 in
/// `common/quant_dot`): one block, a pair of q4_K sub-blocks, or two
/// 32-weight runs of a q6_K block that share their bytes.
pub fn matvec_int8_unit(t: DType) -> u64 {
    if matches!(t, DType::Q4_K | DType::Q6_K) {
        64
    } else {
        32
    }
}

/// Units per row of `k` weights the mat-vec kernel loops over: integer
/// units ([`matvec_int8_unit`]) with quantized activations (`q8`), 8
/// halves for [`WeightLayout::Half8`], else runs of 16 weights.
pub fn matvec_units(t: DType, layout: WeightLayout, q8: bool, k: u64) -> u64 {
    if q8 {
        k / matvec_int8_unit(t)
    } else if layout == WeightLayout::Half8 {
        k / 8
    } else {
        k.div_ceil(16)
    }
}

/// Weight types whose mat-vec multiplies integer quants: the activations
/// are quantized to 32-value runs of signed bytes first (ggml's q8_1) and
/// the kernel uses packed 4 x 8-bit dot products. The `matmul_xf32`
/// option keeps f32 activations (the float kernel) for comparison.
/// q6_K joined them because its float kernel read each 16 weights with
/// about eight unaligned word loads and decoded them to f32 (229 us, 30%
/// of the bandwidth, for the 128256 x 2048 output matrix of a 1b Llama
/// on an H100).
pub fn matvec_int8(tuning: &Tuning, t: DType) -> bool {
    matches!(
        t,
        DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q5_1
            | DType::Q8_0
            | DType::Q4_K
            | DType::Q6_K
    ) && !tuning.matmul_xf32
}

/// Rows of dst per mat-vec workgroup ([`MATVEC_ROWS`] unless the
/// `matmul_rows` option, 1..=16, says otherwise).
pub fn matvec_rows(tuning: &Tuning) -> u32 {
    tuning
        .matmul_rows
        .filter(|r| (1..=16).contains(r))
        .unwrap_or(MATVEC_ROWS)
}

/// Mat-vec columns per workgroup for `n` columns.
fn matvec_cols(n: u64) -> u32 {
    n.clamp(1, MATVEC_MAX_N).next_power_of_two() as u32
}

/// The kernel for a MUL_MAT of weight type `t` and shape `s` whose dst
/// rows are contiguous (`dst_dense`, needed by the cooperative-matrix
/// store), with an optional forced path.
///
/// f32 weights go through the cooperative-matrix kernel too, rounded to
/// f16 while staged, as ggml's Vulkan backend does with cooperative
/// matrices (within MUL_MAT's NMSE bound of 5e-4; 88.6 TFLOP/s against
/// the tiled kernel's 19.6 at n = 512 on an H200);
/// `BACKPLANE_WEBGPU_MATMUL=tiled` keeps full f32.
/// bf16 weights never do: their range exceeds f16's.
pub fn choose_path(
    facts: &Facts,
    t: DType,
    s: &Shape,
    dst_dense: bool,
    forced: Option<&str>,
) -> Path {
    let coopmat_type = dst_dense && t != DType::BF16;
    let coopmat_ok = coopmat_ready(facts) && coopmat_type;
    match forced {
        Some("matvec" | "matvec-wg") => {
            return Path::MatVec {
                cols: matvec_cols(s.n),
            };
        }
        Some("tiled" | "tiled8") => return Path::Tiled,
        Some("coopmat") if coopmat_ok && s.m >= 16 && s.n >= 16 => {
            return Path::CoopMat { emulated: false };
        }
        Some("coopmat-emulated") if coopmat_type && facts.f16 && s.m >= 16 && s.n >= 16 => {
            return Path::CoopMat { emulated: true };
        }
        _ => {}
    }
    if s.n <= MATVEC_MAX_N {
        Path::MatVec {
            cols: matvec_cols(s.n),
        }
    } else if coopmat_ok && s.m >= COOPMAT_MIN[0] && s.n >= COOPMAT_MIN[1] && s.k >= COOPMAT_MIN[2]
    {
        Path::CoopMat { emulated: false }
    } else {
        Path::Tiled
    }
}

/// Whether the mat-vec kernel reduces with subgroup operations (the device
/// has them and `BACKPLANE_WEBGPU_MATMUL=matvec-wg` does not ask for the
/// workgroup-memory tree).
pub fn matvec_subgroups(facts: &Facts) -> bool {
    facts.subgroups && facts.tuning.matmul_path != Some("matvec-wg")
}

/// Workgroup size of the mat-vec kernel for weights of type `t` whose
/// rows are `units` units long (see the kernel): with subgroup reductions
/// 128, or 64 for f32, q4_K and integer q6_K weights (units of 64
/// weights); 64 with the workgroup-memory
/// tree; and never more than `units` rounded up to a power of two (at
/// least [`MATVEC_MIN_WG`]), so short rows (q4_0 at K = 2048: 64 units)
/// leave no invocation without a unit. On an H200 at K = 14336, 64
/// measured 10% faster for f32 (rows long enough to keep 64 invocations
/// busy) and for q4_K (20.0-20.8 against 22.5-23.1 us: its 224 units of
/// 64 weights per row leave a quarter of 128 invocations idle on their
/// second pass). `wg=N` in `BACKPLANE_WEBGPU_MATMUL` overrides it.
pub fn matvec_wg(facts: &Facts, subgroups: bool, t: DType, units: u64) -> u32 {
    let narrow = matches!(t, DType::F32 | DType::Q4_K)
        || (t == DType::Q6_K && matvec_int8(&facts.tuning, t));
    let by_type: u32 = if subgroups && !narrow { 128 } else { 64 };
    let by_units = units
        .clamp(1, u64::from(by_type))
        .next_power_of_two()
        .max(u64::from(MATVEC_MIN_WG)) as u32;
    let default = by_type.min(by_units);
    let wg = facts
        .tuning
        .matmul_wg
        .filter(|w| w.is_power_of_two() && (32..=1024).contains(w))
        .unwrap_or(default);
    wg.min(facts.max_invocations)
}

/// The tiled kernel's configuration for `rows` x `cols` outputs of
/// `batches` batches: (outputs per invocation along each side, 4 or 8;
/// K step, 32 or 16), the largest whose two tiles of K step x (16 * side +
/// 4) floats fit the workgroup memory. `big` asks for 8 x 8 whenever it fits.
pub fn tiled_config(facts: &Facts, rows: u64, cols: u64, batches: u64, big: bool) -> (u32, u32) {
    let fits = |side: u32, k: u32| 2 * k * (16 * side + 4) * 4 <= facts.workgroup_storage_bytes;
    let big_groups = rows.div_ceil(128) * cols.div_ceil(128) * batches;
    let side = if (big || big_groups >= TILED_BIG_MIN_GROUPS) && fits(8, 16) {
        8
    } else {
        4
    };
    (side, if fits(side, 32) { 32 } else { 16 })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn facts(coopmat: bool) -> Facts {
        Facts {
            coopmat_f16_16: coopmat,
            ..crate::facts::test_gpu()
        }
    }

    fn shape(m: u64, n: u64, k: u64) -> Shape {
        Shape::unbatched(m, n, k)
    }

    #[test]
    fn paths_follow_shape_and_device() {
        let h200 = facts(true);
        let s1 = shape(4096, 1, 14336);
        assert_eq!(
            choose_path(&h200, DType::Q4_0, &s1, true, None),
            Path::MatVec { cols: 1 }
        );
        assert_eq!(
            choose_path(&h200, DType::F16, &shape(4096, 5, 14336), true, None),
            Path::MatVec { cols: 8 }
        );
        let s512 = shape(4096, 512, 14336);
        assert_eq!(
            choose_path(&h200, DType::F16, &s512, true, None),
            Path::CoopMat { emulated: false }
        );
        assert_eq!(
            choose_path(&h200, DType::Q4_K, &s512, true, None),
            Path::CoopMat { emulated: false }
        );
        assert_eq!(
            choose_path(&h200, DType::F32, &s512, true, None),
            Path::CoopMat { emulated: false }
        );
        assert_eq!(
            choose_path(&h200, DType::BF16, &s512, true, None),
            Path::Tiled
        );
        assert_eq!(
            choose_path(&h200, DType::F16, &s512, false, None),
            Path::Tiled
        );
        assert_eq!(
            choose_path(&h200, DType::F16, &shape(67, 37, 256), true, None),
            Path::Tiled
        );
        let lavapipe = Facts {
            subgroup_size: (8, 8),
            ..facts(false)
        };
        assert_eq!(
            choose_path(&lavapipe, DType::F16, &s512, true, None),
            Path::Tiled
        );
        assert_eq!(
            choose_path(&lavapipe, DType::F16, &s512, true, Some("coopmat")),
            Path::Tiled
        );
        let emulated = Path::CoopMat { emulated: true };
        assert_eq!(
            choose_path(
                &lavapipe,
                DType::Q6_K,
                &s512,
                true,
                Some("coopmat-emulated")
            ),
            emulated
        );
        assert_eq!(
            choose_path(&h200, DType::F16, &s512, true, Some("matvec")),
            Path::MatVec { cols: 8 }
        );
    }

    #[test]
    fn weights_go_to_half_first_for_wide_products() {
        let h200 = facts(true);
        let wide = shape(4096, 512, 14336);
        for t in [DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F32] {
            assert!(dequantize_first(&h200, t, &wide), "{t:?}");
            assert!(
                !dequantize_first(&h200, t, &shape(4096, 64, 14336)),
                "{t:?}"
            );
        }
        // Half weights are staged as they are; bf16 never goes to half.
        assert!(!dequantize_first(&h200, DType::F16, &wide));
        assert!(!dequantize_first(&h200, DType::BF16, &wide));
        // f32 rows must be whole vec4s.
        assert!(!dequantize_first(
            &h200,
            DType::F32,
            &shape(4096, 512, 4098)
        ));
        // A half copy over the binding limit keeps the fused kernel.
        let mut small = facts(true);
        small.max_binding_bytes = 64 << 20;
        assert_eq!(dequantized_bytes(&wide), 4096 * 14336 * 2);
        assert!(!dequantize_first(&small, DType::Q4_0, &wide));
        let batched = Shape {
            ne12: 6,
            r2: 3,
            ..wide
        };
        assert_eq!(dequantized_bytes(&batched), 2 * 4096 * 14336 * 2);
    }

    #[test]
    fn matvec_workgroup_shrinks_to_short_rows() {
        let h200 = facts(true);
        // q4_0 units are 32 weights: K = 14336 keeps 128 invocations, K =
        // 2048 (64 units) and K = 8192 (256) take what fills them.
        assert_eq!(matvec_wg(&h200, true, DType::Q4_0, 14336 / 32), 128);
        assert_eq!(matvec_wg(&h200, true, DType::Q4_0, 8192 / 32), 128);
        assert_eq!(matvec_wg(&h200, true, DType::Q4_0, 2048 / 32), 64);
        assert_eq!(matvec_wg(&h200, true, DType::Q4_0, 40), 64);
        // Never below one subgroup.
        assert_eq!(matvec_wg(&h200, true, DType::Q4_0, 3), MATVEC_MIN_WG);
        // Integer q6_K and q4_K take 64 for long rows; the float q6_K
        // kernel (xf32, units of 16 weights) keeps 128.
        assert_eq!(matvec_wg(&h200, true, DType::Q6_K, 8192 / 64), 64);
        assert_eq!(matvec_wg(&h200, true, DType::Q6_K, 2048 / 64), 32);
        assert_eq!(matvec_wg(&h200, true, DType::Q4_K, 14336 / 64), 64);
        let mut xf32 = facts(true);
        xf32.tuning.matmul_xf32 = true;
        assert_eq!(matvec_wg(&xf32, true, DType::Q6_K, 2048 / 16), 128);
        // wg=N still wins.
        let mut forced = facts(true);
        forced.tuning.matmul_wg = Some(128);
        assert_eq!(matvec_wg(&forced, true, DType::Q4_0, 64), 128);
    }

    #[test]
    fn q6k_multiplies_integers_unless_xf32() {
        let mut tuning = Tuning::default();
        assert!(matvec_int8(&tuning, DType::Q6_K));
        assert_eq!(matvec_int8_unit(DType::Q6_K), 64);
        tuning.matmul_xf32 = true;
        assert!(!matvec_int8(&tuning, DType::Q6_K));
    }

    #[test]
    fn tiled_config_follows_shape_and_memory() {
        let f = facts(false);
        assert_eq!(tiled_config(&f, 4096, 512, 1, false), (4, 32));
        assert_eq!(tiled_config(&f, 4096, 4096, 1, false), (8, 32));
        let small = Facts {
            workgroup_storage_bytes: 16 << 10,
            ..facts(false)
        };
        assert_eq!(tiled_config(&small, 4096, 4096, 1, false), (4, 16));
        let mid = Facts {
            workgroup_storage_bytes: 32 << 10,
            ..facts(false)
        };
        assert_eq!(tiled_config(&mid, 4096, 4096, 1, false), (8, 16));
    }

    #[test]
    fn coopmat_needs_a_fixed_subgroup_size() {
        assert!(coopmat_ready(&facts(true)));
        assert!(!coopmat_ready(&Facts {
            subgroup_size: (32, 64),
            ..facts(true)
        }));
        assert!(!coopmat_ready(&Facts {
            subgroups: false,
            ..facts(true)
        }));
        assert!(!coopmat_ready(&Facts {
            workgroup_storage_bytes: 32 << 10,
            ..facts(true)
        }));
    }

    #[test]
    fn layouts_follow_alignment() {
        let f = facts(false);
        let a = TensorDesc::new(DType::F16, [64, 16, 1, 1]);
        assert_eq!(weight_layout(&f, &a, DType::F16), WeightLayout::Vec4);
        let odd = TensorDesc::new(DType::F16, [33, 16, 1, 1]);
        assert_eq!(weight_layout(&f, &odd, DType::F16), WeightLayout::Scalar);
        let q = TensorDesc::new(DType::Q4_0, [64, 16, 1, 1]);
        assert_eq!(weight_layout(&f, &q, DType::Q4_0), WeightLayout::Quant);
        // The mat-vec reads f16 rows 8 halves at a time when K % 16 == 0
        // and every row starts on 16 bytes.
        assert_eq!(
            matvec_weight_layout(&f, &a, DType::F16),
            WeightLayout::Half8
        );
        let k40 = TensorDesc::new(DType::F16, [40, 16, 1, 1]);
        assert_eq!(
            matvec_weight_layout(&f, &k40, DType::F16),
            WeightLayout::Vec4
        );
        let f32w = TensorDesc::new(DType::F32, [64, 16, 1, 1]);
        assert_eq!(
            matvec_weight_layout(&f, &f32w, DType::F32),
            WeightLayout::Vec4
        );
        let b = TensorDesc::new(DType::F32, [64, 9, 1, 1]);
        assert!(activations_direct(&f, &b, DType::F32));
        let mut t = b;
        t.nb.swap(0, 1);
        assert!(!activations_direct(&f, &t, DType::F32));
        assert!(!activations_direct(
            &f,
            &TensorDesc::new(DType::F32, [33, 9, 1, 1]),
            DType::F32
        ));
    }
}
