//! The compiled configurations of the native MUL_MAT kernels, shared by
//! `build.rs` (which compiles one SPIR-V variant per configuration, weight
//! type and column count or matrix shape) and the backend (which names
//! and dispatches them). Plain data only: `build.rs` includes this file.

/// One tile configuration of the cooperative-matrix GEMM
/// (`glsl/mul_mat_coopmat.comp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmConfig {
    /// Name in the kernel names (`mul_mat_coopmat_f16_128x128k32_16x16x16`)
    /// and in `BACKPLANE_WEBGPU_NATIVE_GEMM`.
    pub name: &'static str,
    /// Output rows (weight rows) of a workgroup's tile.
    pub bm: u32,
    /// Output columns (activation rows) of a workgroup's tile.
    pub bn: u32,
    /// K values staged per step.
    pub bk: u32,
    /// Rows of one subgroup's share of the tile.
    pub wm: u32,
    /// Columns of one subgroup's share of the tile.
    pub wn: u32,
    /// Two workgroup-memory stages (one barrier per K step) instead of
    /// one (two barriers).
    pub double_buffer: bool,
    /// Activations converted to f16 rows first (by the WGSL kernel
    /// `mul_mat_convert`, as the WGSL GEMM does) and staged from those:
    /// half the bytes in every tile that reads them.
    pub b_half: bool,
    /// Each step's tiles loaded two steps ahead into a second register
    /// set (`PREFETCH2`) instead of one step ahead.
    pub prefetch_two: bool,
}

impl GemmConfig {
    /// A `bm` x `bn` tile, `bk` per step, subgroup shares `wm` x `wn`,
    /// one stage, f32 activations: the base the table's variants change.
    pub const fn tile(
        name: &'static str,
        bm: u32,
        bn: u32,
        bk: u32,
        wm: u32,
        wn: u32,
    ) -> GemmConfig {
        GemmConfig {
            name,
            bm,
            bn,
            bk,
            wm,
            wn,
            double_buffer: false,
            b_half: false,
            prefetch_two: false,
        }
    }

    /// Subgroups of 32 invocations in a workgroup.
    pub const fn subgroups(&self) -> u32 {
        (self.bm / self.wm) * (self.bn / self.wn)
    }

    /// Invocations of a workgroup.
    pub const fn workgroup_size(&self) -> u32 {
        32 * self.subgroups()
    }
}

/// Every GEMM configuration built; the first is the default. A name is
/// `{bm}x{bn}k{bk}`, then `w16` (16 subgroups of 32 x 32) or `w64` (64 x
/// 64 shares) where a 128 x 128 tile is not split into 64 x 32 shares,
/// `h` for f16 activations, `db` for two stages and `p2` for loads two
/// steps ahead.
pub const GEMM_CONFIGS: &[GemmConfig] = &[
    GemmConfig::tile("128x128k32", 128, 128, 32, 64, 32),
    GemmConfig {
        double_buffer: true,
        ..GemmConfig::tile("128x128k32db", 128, 128, 32, 64, 32)
    },
    GemmConfig::tile("128x128k64", 128, 128, 64, 64, 32),
    GemmConfig::tile("128x128k32w16", 128, 128, 32, 32, 32),
    GemmConfig::tile("128x256k32", 128, 256, 32, 64, 64),
    GemmConfig::tile("256x128k32", 256, 128, 32, 64, 64),
    GemmConfig {
        b_half: true,
        ..GemmConfig::tile("128x128k32h", 128, 128, 32, 64, 32)
    },
    GemmConfig {
        b_half: true,
        ..GemmConfig::tile("128x128k32w64h", 128, 128, 32, 64, 64)
    },
    GemmConfig {
        b_half: true,
        double_buffer: true,
        ..GemmConfig::tile("128x128k32w64hdb", 128, 128, 32, 64, 64)
    },
    GemmConfig {
        double_buffer: true,
        ..GemmConfig::tile("128x128k32w64db", 128, 128, 32, 64, 64)
    },
    GemmConfig {
        b_half: true,
        ..GemmConfig::tile("256x128k32h", 256, 128, 32, 64, 64)
    },
    GemmConfig {
        b_half: true,
        prefetch_two: true,
        ..GemmConfig::tile("256x128k32hp2", 256, 128, 32, 64, 64)
    },
];

/// One configuration of the `VK_NV_cooperative_matrix2` GEMM
/// (`glsl/mul_mat_cm2.comp`, f16 weights): a workgroup-scope BM x BN
/// accumulator, BK per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cm2Config {
    /// Name in the kernel names (`mul_mat_cm2_128x128k32_f16`) and in
    /// `BACKPLANE_WEBGPU_NATIVE_GEMM`.
    pub name: &'static str,
    /// Output rows of a workgroup's tile.
    pub bm: u32,
    /// Output columns of a workgroup's tile.
    pub bn: u32,
    /// K values per step.
    pub bk: u32,
    /// Invocations of a workgroup.
    pub workgroup_size: u32,
    /// Activations converted to dense f16 rows first (`mul_mat_convert`).
    pub b_half: bool,
    /// The next step's blocks loaded before this step's product
    /// (`PREFETCH`), so the loads can overlap the multiply.
    pub prefetch: bool,
    /// Whole, aligned tiles loaded without clamping, the K loop unrolled
    /// this many steps deep (`UNCLAMPED`, `UNROLL`; needs `b_half`); 0:
    /// every tile loaded through clamping layouts.
    pub unclamped_unroll: u32,
}

impl Cm2Config {
    /// A `bm` x `bn` tile, `bk` per step, 256 invocations, f32 activations
    /// loaded as they are, every tile through clamping layouts, no
    /// prefetch: the base the table's variants change.
    pub const fn tile(name: &'static str, bm: u32, bn: u32, bk: u32) -> Cm2Config {
        Cm2Config {
            name,
            bm,
            bn,
            bk,
            workgroup_size: 256,
            b_half: false,
            prefetch: false,
            unclamped_unroll: 0,
        }
    }
}

/// Every cm2 GEMM configuration built (chosen by name only). A name is
/// `cm2_{bm}x{bn}k{bk}` and the letters of what differs from
/// [`Cm2Config::tile`]: `h` f16 activations, `p` prefetch, `u` (`u1`)
/// unclamped loads unrolled 8 (1) deep.
pub const CM2_CONFIGS: &[Cm2Config] = &[
    Cm2Config::tile("cm2_128x128k32", 128, 128, 32),
    Cm2Config::tile("cm2_128x256k32", 128, 256, 32),
    Cm2Config::tile("cm2_128x256k64", 128, 256, 64),
    Cm2Config {
        b_half: true,
        ..Cm2Config::tile("cm2_128x128k32h", 128, 128, 32)
    },
    Cm2Config {
        b_half: true,
        ..Cm2Config::tile("cm2_128x256k32h", 128, 256, 32)
    },
    Cm2Config {
        b_half: true,
        ..Cm2Config::tile("cm2_128x256k64h", 128, 256, 64)
    },
    Cm2Config {
        b_half: true,
        prefetch: true,
        ..Cm2Config::tile("cm2_128x256k32hp", 128, 256, 32)
    },
    Cm2Config {
        b_half: true,
        prefetch: true,
        ..Cm2Config::tile("cm2_128x128k32hp", 128, 128, 32)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 8,
        ..Cm2Config::tile("cm2_128x256k32hu", 128, 256, 32)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 8,
        ..Cm2Config::tile("cm2_128x256k64hu", 128, 256, 64)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 8,
        ..Cm2Config::tile("cm2_128x128k32hu", 128, 128, 32)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 8,
        ..Cm2Config::tile("cm2_128x128k64hu", 128, 128, 64)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 1,
        ..Cm2Config::tile("cm2_128x256k32hu1", 128, 256, 32)
    },
    Cm2Config {
        b_half: true,
        unclamped_unroll: 1,
        ..Cm2Config::tile("cm2_128x256k64hu1", 128, 256, 64)
    },
];

/// One configuration of the integer mat-vec (`glsl/mul_mat_vec.comp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatVecConfig {
    /// Name in the kernel names (`mul_mat_vec_q4_0_n1_r2w128`) and in
    /// `BACKPLANE_WEBGPU_NATIVE_MATVEC`.
    pub name: &'static str,
    /// Rows of dst per workgroup.
    pub rows: u32,
    /// Invocations of a workgroup.
    pub workgroup_size: u32,
    /// Blocks read as the 4-byte words that hold them (5 or 9 loads,
    /// as the WGSL kernel reads them) instead of the 16-byte words (2 or
    /// 3 loads, more shifting).
    pub word_loads: bool,
}

/// Every mat-vec configuration built; the first is the default (the
/// fastest for q4_0 on an H100, an H200 and lavapipe: docs/webgpu.md).
pub const MATVEC_CONFIGS: &[MatVecConfig] = &[
    MatVecConfig {
        name: "r2w128u32",
        rows: 2,
        workgroup_size: 128,
        word_loads: true,
    },
    MatVecConfig {
        name: "r2w128",
        rows: 2,
        workgroup_size: 128,
        word_loads: false,
    },
    MatVecConfig {
        name: "r1w128",
        rows: 1,
        workgroup_size: 128,
        word_loads: false,
    },
    MatVecConfig {
        name: "r4w128",
        rows: 4,
        workgroup_size: 128,
        word_loads: false,
    },
    MatVecConfig {
        name: "r2w64",
        rows: 2,
        workgroup_size: 64,
        word_loads: false,
    },
    MatVecConfig {
        name: "r4w64",
        rows: 4,
        workgroup_size: 64,
        word_loads: false,
    },
    MatVecConfig {
        name: "r1w128u32",
        rows: 1,
        workgroup_size: 128,
        word_loads: true,
    },
];

/// Most activation columns of the mat-vec (one variant per count).
pub const MATVEC_MAX_COLS: u32 = 8;

/// Cooperative-matrix shapes (M x N x K of one multiply-add) the default
/// GEMM configuration is built for; the other configurations only for the
/// first (16x16x16).
pub const COOPMAT_SHAPES: &[(u32, u32, u32)] = &[(16, 16, 16), (16, 8, 16), (16, 16, 8)];

/// One configuration of the `VK_NV_cooperative_matrix2` attention
/// (`glsl/flash_attn_cm2.comp`): BR queries against BC keys per step, as
/// workgroup-scope matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaCm2Config {
    /// Name in the kernel names (`flash_attn_cm2_64x32w128_256x256`) and
    /// in `BACKPLANE_WEBGPU_NATIVE_FA`.
    pub name: &'static str,
    /// Query rows of a workgroup.
    pub br: u32,
    /// Keys per step.
    pub bc: u32,
    /// Invocations of a workgroup.
    pub workgroup_size: u32,
    /// Row sums of P by a row reduce of the f32 scores instead of P times
    /// a matrix of ones (`ROWSUM_REDUCE`).
    pub rowsum_reduce: bool,
    /// P V summed in f16 over each block of keys, then added to the f32
    /// output (`PV_HALF`; ggml's CPU kernel keeps f16 V sums too).
    pub pv_half: bool,
    /// V loaded with K, before the scores (`V_EARLY`), so its load
    /// overlaps them.
    pub v_early: bool,
    /// O kept in f16 (`O_HALF`; ggml's CPU kernel sums f16 V in f16).
    pub o_half: bool,
}

impl FaCm2Config {
    /// `br` queries against `bc` keys per step over `workgroup_size`
    /// invocations, every sum in f32, K and V loaded in turn: the base the
    /// table's variants change.
    pub const fn tile(name: &'static str, br: u32, bc: u32, workgroup_size: u32) -> FaCm2Config {
        FaCm2Config {
            name,
            br,
            bc,
            workgroup_size,
            rowsum_reduce: false,
            pv_half: false,
            v_early: false,
            o_half: false,
        }
    }
}

/// Every cm2 attention configuration built. Without a name forced, head
/// sizes above 128 take the first and the others the second (the fastest
/// of each at head 256 and head 128 on an H100 in alternating runs:
/// docs/webgpu.md). Every configuration gives each
/// subgroup at least 16 query rows: on an H100 (driver 580.159.04) 64
/// rows over 8 subgroups gave wrong results in 87 of 1,333 cases; 128
/// rows over 4 subgroups, and 128 x 128 blocks, ran far slower or not at
/// all there, and are not built either. A name is `{br}x{bc}w{invocations}`
/// and the letters of what differs from [`FaCm2Config::tile`], in this
/// order: `r` row-sum reduce, `h` P V in f16, `v` V loaded early, `o` O
/// in f16.
pub const FA_CM2_CONFIGS: &[FaCm2Config] = &[
    FaCm2Config {
        rowsum_reduce: true,
        ..FaCm2Config::tile("128x64w256r", 128, 64, 256)
    },
    FaCm2Config::tile("64x64w128", 64, 64, 128),
    FaCm2Config::tile("128x64w256", 128, 64, 256),
    FaCm2Config::tile("64x32w128", 64, 32, 128),
    FaCm2Config::tile("32x32w128", 32, 32, 128),
    FaCm2Config::tile("128x32w256", 128, 32, 256),
    FaCm2Config {
        rowsum_reduce: true,
        pv_half: true,
        ..FaCm2Config::tile("128x64w256rh", 128, 64, 256)
    },
    FaCm2Config {
        rowsum_reduce: true,
        pv_half: true,
        ..FaCm2Config::tile("64x64w128rh", 64, 64, 128)
    },
    FaCm2Config {
        rowsum_reduce: true,
        pv_half: true,
        ..FaCm2Config::tile("64x32w128rh", 64, 32, 128)
    },
    FaCm2Config {
        pv_half: true,
        ..FaCm2Config::tile("64x32w128h", 64, 32, 128)
    },
    FaCm2Config {
        rowsum_reduce: true,
        pv_half: true,
        v_early: true,
        ..FaCm2Config::tile("128x64w256rhv", 128, 64, 256)
    },
    FaCm2Config {
        rowsum_reduce: true,
        pv_half: true,
        v_early: true,
        ..FaCm2Config::tile("64x32w128rhv", 64, 32, 128)
    },
    FaCm2Config {
        rowsum_reduce: true,
        o_half: true,
        ..FaCm2Config::tile("128x64w256ro", 128, 64, 256)
    },
    FaCm2Config {
        rowsum_reduce: true,
        o_half: true,
        ..FaCm2Config::tile("64x32w128ro", 64, 32, 128)
    },
];

/// K and V head sizes, rounded up to multiples of 16, the cm2 attention
/// is built for (matrix sizes are fixed when a kernel is compiled).
pub const FA_CM2_HEADS: &[(u32, u32)] = &[
    (48, 48),
    (64, 64),
    (80, 80),
    (96, 96),
    (112, 112),
    (128, 128),
    (192, 128),
    (192, 192),
    (256, 256),
];

/// One configuration of the cooperative-matrix peak probe
/// (`glsl/coopmat_peak.comp`, run by `examples/coopmat_peak.rs`):
/// matrices held in registers and multiplied in a loop with no memory
/// traffic, so the multiply-add rate the device reaches through this API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakConfig {
    /// Name in the kernel names (`coopmat_peak_khr32x64`).
    pub name: &'static str,
    /// `VK_NV_cooperative_matrix2` workgroup-scope matrices (one BM x BN
    /// accumulator per workgroup) instead of KHR subgroup-scope 16 x 16
    /// ones (a BM x BN grid of them per subgroup, K = 16).
    pub workgroup_scope: bool,
    /// Accumulator rows (of a workgroup or of a subgroup).
    pub bm: u32,
    /// Accumulator columns.
    pub bn: u32,
    /// K of one multiply-add (16 at subgroup scope).
    pub bk: u32,
    /// Invocations of a workgroup.
    pub workgroup_size: u32,
    /// f16 accumulators instead of f32.
    pub f16_acc: bool,
    /// Where each step's matrices come from (subgroup scope only).
    pub feed: PeakFeed,
}

/// Where a peak-probe step's A and B matrices come from: each level adds
/// one part of a GEMM's K step to the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeakFeed {
    /// Registers: loaded once, before the loop.
    Registers,
    /// Workgroup memory, loaded every step (`SHARED`).
    Shared,
    /// As `Shared`, the step's tiles first written by the workgroup from
    /// registers and a barrier (`STAGE`).
    Staged,
    /// As `Staged`, the values loaded from the storage buffer (L2-resident
    /// tiles) first (`GLOBAL`).
    Global,
    /// As `Global`, the next step's loads issued before this step's
    /// products and kept in registers (`PREFETCH`), as the GEMMs do.
    Prefetched,
}

impl PeakConfig {
    /// KHR 16 x 16 x 16 matrices, a `bm` x `bn` grid per subgroup, one K
    /// slice of 16 per step, 128 invocations, f32 accumulators, the
    /// matrices kept in registers.
    pub const fn khr(name: &'static str, bm: u32, bn: u32) -> PeakConfig {
        PeakConfig {
            name,
            workgroup_scope: false,
            bm,
            bn,
            bk: 16,
            workgroup_size: 128,
            f16_acc: false,
            feed: PeakFeed::Registers,
        }
    }

    /// One NV cm2 workgroup-scope `bm` x `bn` accumulator, K `bk`, 256
    /// invocations, f32.
    pub const fn cm2(name: &'static str, bm: u32, bn: u32, bk: u32) -> PeakConfig {
        PeakConfig {
            name,
            workgroup_scope: true,
            bm,
            bn,
            bk,
            workgroup_size: 256,
            f16_acc: false,
            feed: PeakFeed::Registers,
        }
    }

    /// Multiply-add flops one workgroup does per loop step, with
    /// subgroups of `subgroup_size` invocations.
    pub const fn flops_per_step(&self, subgroup_size: u32) -> u64 {
        let one = 2 * self.bm as u64 * self.bn as u64 * self.bk as u64;
        if self.workgroup_scope {
            one
        } else {
            one * (self.workgroup_size / subgroup_size) as u64
        }
    }
}

/// Every peak-probe configuration built: the KHR shapes of one subgroup's
/// share of the GEMM tiles, fed from registers, then (`s`) from workgroup
/// memory, (`b`) staged by the workgroup behind a barrier, (`g`) staged
/// from L2-resident loads, (`p`) those loads a step ahead, with K steps
/// of 32 or 64 (`k32`, `k64`), and
/// the cm2 GEMM's workgroup tiles (`f`: f16 accumulators).
pub const PEAK_CONFIGS: &[PeakConfig] = &[
    PeakConfig::khr("khr32x64", 32, 64),
    PeakConfig {
        f16_acc: true,
        ..PeakConfig::khr("khr32x64f", 32, 64)
    },
    PeakConfig::khr("khr64x64", 64, 64),
    PeakConfig {
        feed: PeakFeed::Shared,
        ..PeakConfig::khr("khr32x32s", 32, 32)
    },
    PeakConfig {
        feed: PeakFeed::Shared,
        ..PeakConfig::khr("khr32x64s", 32, 64)
    },
    PeakConfig {
        feed: PeakFeed::Shared,
        ..PeakConfig::khr("khr64x64s", 64, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Staged,
        ..PeakConfig::khr("khr32x64k32b", 32, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Global,
        ..PeakConfig::khr("khr32x64k32g", 32, 64)
    },
    PeakConfig {
        bk: 64,
        feed: PeakFeed::Global,
        ..PeakConfig::khr("khr32x64k64g", 32, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Staged,
        ..PeakConfig::khr("khr64x64k32b", 64, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Global,
        ..PeakConfig::khr("khr64x64k32g", 64, 64)
    },
    PeakConfig {
        bk: 64,
        feed: PeakFeed::Global,
        ..PeakConfig::khr("khr64x64k64g", 64, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Prefetched,
        ..PeakConfig::khr("khr32x64k32p", 32, 64)
    },
    PeakConfig {
        bk: 32,
        feed: PeakFeed::Prefetched,
        ..PeakConfig::khr("khr64x64k32p", 64, 64)
    },
    PeakConfig {
        bk: 64,
        feed: PeakFeed::Prefetched,
        ..PeakConfig::khr("khr64x64k64p", 64, 64)
    },
    PeakConfig::cm2("cm2_128x256k32", 128, 256, 32),
    PeakConfig {
        f16_acc: true,
        ..PeakConfig::cm2("cm2_128x256k32f", 128, 256, 32)
    },
    PeakConfig::cm2("cm2_128x128k32", 128, 128, 32),
];
