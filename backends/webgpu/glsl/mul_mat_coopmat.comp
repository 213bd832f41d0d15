#version 450
// MUL_MAT GEMM with VK_KHR_cooperative_matrix: f32 activations (src1,
// rounded to f16 while staged), f16, q4_0 or q8_0 weights (A_F16, A_Q4_0,
// A_Q8_0; quantized blocks dequantized to f16 while staged), f32 dst,
// ggml semantics as in mul_mat_vec.comp.
//
// Tile configuration (build.rs, src/native/configs.rs): a workgroup
// computes a BM x BN output tile with (BM / WM) x (BN / WN) subgroups of
// 32, each a WM x WN share as (WM / TM) x (WN / TN) accumulators of
// TM x TN, fed by TM x TK weight and TK x TN activation matrices read
// from workgroup memory. K advances BK at a time.
//
// Staging: the weight tile is cut into parts of 8 consecutive K values of
// one row, the activation tile into runs of 4 of one column; invocation t
// takes parts t, t + WG_SIZE, ..., so neighbouring invocations read
// neighbouring bytes (f16 weights and f32 activations as 16-byte loads
// where the host says rows are aligned). The next step's raw data is
// loaded into registers before the current step multiplies, and
// dequantized (q4_0: nibbles turned into halves by their bits, no integer
// conversion) and stored after it. Tiles are K-contiguous rows padded by
// 8 halves (no bank conflicts for 8-row matrix loads). DOUBLE_BUFFER:
// two stages, one barrier per step; otherwise one stage, two barriers.
// PREFETCH2: two register sets, each step's data loaded two steps before
// it multiplies, so a load has a whole step more to arrive (on an H100
// the loads a single step ahead left half of a 256 x 128 tile's time to
// waiting).
//
// Rows past M and columns past N repeat the last one (never stored); K
// values past K are zeros. Split K (host: too few tiles to fill the GPU):
// workgroup z = split * batches + batch takes K values k_chunk * split ..
// (a multiple of BK, so only the last split's last step can pass K) and
// stores its partial sums in its own plane (the host points dst at
// scratch memory and adds the planes up afterwards). Accumulators go straight to dst with
// coopMatStore when they lie inside it and dst rows are 16-byte aligned
// (FLAG_D_DIRECT), else through a per-subgroup TM x TN staging area with
// bounds checks and any dst strides.
//
// B_F16: the activations arrive as f16 rows converted by the host (the
// WGSL kernel mul_mat_convert: rows of K rounded up to 4, zeros past K,
// offset and strides in units of 4 halves), staged 4 halves (8 bytes) per
// load: half the bytes of f32 activations in every tile.
//
// ALIGNED (host-chosen per product, src/ops/matmul/native.rs): K is a
// multiple of BK, so every step lies inside K, and f16 weight rows (f32
// activation rows) are 16-byte aligned: the loads go without K tests or
// alignment branches (on an H100 the WGSL kernel's shape ran at 0.67x
// of the WGSL kernel with them, within 2% without).
//
// W_SPLIT (with A_Q4_0): the weights are stored split (the backend's
// split.rs): a row's blocks' 16 quant bytes each, rows a_nb1 bytes apart
// from a_off, then every block's f16 scale from byte w_scales. A part's
// 4 quant bytes are one aligned 32-bit load, its block's scale one
// 16-bit load (ggml's 18-byte blocks take three 16-bit loads).
//
// EMULATED: the same staging with the matrix products as plain code
// (each invocation BM * BN / WG_SIZE outputs of one tile row, f16 inputs,
// f32 sums), for devices without cooperative matrices (tests on lavapipe).

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#if !defined(EMULATED)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#endif

#define NSG ((BM / WM) * (BN / WN))
#define WG_SIZE (NSG * 32)
// Row stride of the staged tiles in f16vec4s: BK halves plus 8.
#define SA (BK / 4 + 2)
// Parts of 8 weights per tile row, runs of 4 activations per tile column.
#define A_PARTS (BK / 8)
#define B_RUNS (BK / 4)
#define A_LOADS (BM * A_PARTS / WG_SIZE)
#define B_LOADS (BN * B_RUNS / WG_SIZE)
#if (BM * A_PARTS) % WG_SIZE != 0 || (BN * B_RUNS) % WG_SIZE != 0
#error "the tiles must split evenly over the workgroup"
#endif
#if defined(DOUBLE_BUFFER)
#define STAGES 2
#else
#define STAGES 1
#endif

// Flags (host: ops/matmul/native.rs).
#define FLAG_A_VEC4 1u
#define FLAG_B_VEC4 2u
#define FLAG_D_DIRECT 4u
#define FLAG_COLUMNS_FIRST 8u

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer AU16 { uint16_t a_u16[]; };
layout(binding = 0, std430) readonly buffer AV4 { uvec4 a_v4[]; };
layout(binding = 0, std430) readonly buffer AU32 { uint a_u32[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 1, std430) readonly buffer B4 { vec4 b4[]; };
layout(binding = 1, std430) readonly buffer BH { uvec2 bh[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

layout(binding = 3, std140) uniform Params {
    uint K;
    uint M;
    uint ne12;
    uint r2;
    uint r3;
    uint row_tiles;
    uint a_off;   // bytes
    uint a_nb1;   // bytes
    uint a_nb2;
    uint a_nb3;
    uint b_off;   // elements
    uint b_nb0;
    uint b_nb1;
    uint b_nb2;
    uint b_nb3;
    uint d_off;   // elements
    uint d_nb0;
    uint d_nb1;
    uint d_nb2;
    uint d_nb3;
    uint N;
    uint flags;
    uint batches;
    uint k_chunk;
    uint split_plane;   // elements of dst between splits
    uint w_scales;      // bytes; W_SPLIT only
} p;

#if defined(W_SPLIT) && !defined(A_Q4_0)
#error "W_SPLIT is for q4_0 only"
#endif

shared f16vec4 sh_a[STAGES * BM * SA];
shared f16vec4 sh_b[STAGES * BN * SA];
#if !defined(EMULATED)
shared float sh_out[NSG * TM * TN];
#endif

#if defined(A_Q4_0)
const uint BLOCK_HALVES = 9;
#elif defined(A_Q8_0)
const uint BLOCK_HALVES = 17;
#elif !defined(A_F16)
#error "define A_F16, A_Q4_0 or A_Q8_0"
#endif

// Raw data of weight part `i` of the tile at K step k0: 8 halves (f16),
// or the block's scale bits (x) and the part's quant bytes (q4_0: 4 in y;
// q8_0: 8 in y, z). `full`: the whole step lies inside K.
uvec4 fetch_a(uint a_base, uint tile_m, uint k0, uint i, bool full) {
    const uint row = min(tile_m + i / A_PARTS, p.M - 1);
    const uint part = i % A_PARTS;
    const uint at = a_base + row * p.a_nb1;
#if defined(A_F16)
    const uint k = k0 + 8 * part;
#if defined(ALIGNED)
    return a_v4[(at >> 4) + (k >> 3)];
#else
    if (full && (p.flags & FLAG_A_VEC4) != 0) {
        return a_v4[(at >> 4) + (k >> 3)];
    }
    uvec4 r = uvec4(0);
    [[unroll]] for (uint j = 0; j < 8; j++) {
        const uint h = k + j < p.K ? uint(a_u16[(at >> 1) + k + j]) : 0u;
        r[j >> 1] |= h << (16 * (j & 1));
    }
    return r;
#endif
#else
    // Part i of a row: quarter i % 4 of block i / 4 of the step.
    const uint blk = (k0 >> 5) + (part >> 2);
#if !defined(ALIGNED)
    if (32 * blk >= p.K) {
        return uvec4(0);
    }
#endif
    const uint j = part & 3;
#if defined(W_SPLIT)
    // The block's index in the tensor: its row's first, plus blk.
    const uint b = ((at - p.a_off) >> 4) + blk;
    return uvec4(uint(a_u16[(p.w_scales >> 1) + b]), a_u32[(at >> 2) + 4 * blk + j], 0, 0);
#else
    const uint at16 = (at >> 1) + blk * BLOCK_HALVES;
    uvec4 r = uvec4(uint(a_u16[at16]), 0, 0, 0);
#if defined(A_Q4_0)
    r.y = uint(a_u16[at16 + 1 + 2 * j]) | (uint(a_u16[at16 + 2 + 2 * j]) << 16);
#else
    r.y = uint(a_u16[at16 + 1 + 4 * j]) | (uint(a_u16[at16 + 2 + 4 * j]) << 16);
    r.z = uint(a_u16[at16 + 3 + 4 * j]) | (uint(a_u16[at16 + 4 + 4 * j]) << 16);
#endif
    return r;
#endif
#endif
}

#if defined(A_Q4_0)
// Bytes 0 and 1 (`lo`) or 2 and 3 of `q` (each below 16) as halves
// 1024 + q: their bits are 0x6400 | q.
f16vec2 nibble_halves(uint q, bool high) {
    const uint w = high ? (q >> 16) : q;
    return unpackFloat2x16((w & 0xFFu) | ((w & 0xFF00u) << 8) | 0x64006400u);
}
#endif

// Stores weight part `i` (raw `r`) into stage `stage` as halves.
void stash_a(uint stage, uint i, uvec4 r) {
    const uint base = stage * BM * SA + (i / A_PARTS) * SA;
    const uint part = i % A_PARTS;
#if defined(A_F16)
    sh_a[base + 2 * part] = f16vec4(unpackFloat2x16(r.x), unpackFloat2x16(r.y));
    sh_a[base + 2 * part + 1] = f16vec4(unpackFloat2x16(r.z), unpackFloat2x16(r.w));
#else
    const float16_t scale = unpackFloat2x16(r.x).x;
    const uint col = 8 * (part >> 2);
    const uint j = part & 3;
#if defined(A_Q4_0)
    // Quant byte t of a block holds weight t (low nibble) and t + 16
    // (high nibble); quarter j has bytes 4j .. 4j + 3.
    const uint lo = r.y & 0x0F0F0F0Fu;
    const uint hi = (r.y >> 4) & 0x0F0F0F0Fu;
    const float16_t bias = float16_t(1032.0);
    sh_a[base + col + j] = (f16vec4(nibble_halves(lo, false), nibble_halves(lo, true)) - bias) * scale;
    sh_a[base + col + 4 + j] = (f16vec4(nibble_halves(hi, false), nibble_halves(hi, true)) - bias) * scale;
#else
    // Quarter j: signed weights 8j .. 8j + 7.
    const ivec4 q0 = ivec4(bitfieldExtract(int(r.y), 0, 8), bitfieldExtract(int(r.y), 8, 8),
                           bitfieldExtract(int(r.y), 16, 8), bitfieldExtract(int(r.y), 24, 8));
    const ivec4 q1 = ivec4(bitfieldExtract(int(r.z), 0, 8), bitfieldExtract(int(r.z), 8, 8),
                           bitfieldExtract(int(r.z), 16, 8), bitfieldExtract(int(r.z), 24, 8));
    sh_a[base + col + 2 * j] = f16vec4(q0) * scale;
    sh_a[base + col + 2 * j + 1] = f16vec4(q1) * scale;
#endif
#endif
}

#if defined(B_F16)
#define B_RAW uvec2
// Activation run `i` of the tile at K step k0 (column clamped to N): 4
// halves; zeros past K (the copy's rows end at K rounded up to 4).
uvec2 fetch_b(uint b_base, uint tile_n, uint k0, uint i, bool full) {
    const uint col = min(tile_n + i / B_RUNS, p.N - 1);
    const uint k = k0 + 4 * (i % B_RUNS);
#if defined(ALIGNED)
    return bh[b_base + col * p.b_nb1 + (k >> 2)];
#else
    return k < p.K ? bh[b_base + col * p.b_nb1 + (k >> 2)] : uvec2(0);
#endif
}

void stash_b(uint stage, uint i, uvec2 x) {
    sh_b[stage * BN * SA + (i / B_RUNS) * SA + i % B_RUNS] =
        f16vec4(unpackFloat2x16(x.x), unpackFloat2x16(x.y));
}
#else
#define B_RAW vec4
// Activation run `i` of the tile at K step k0 (column clamped to N).
vec4 fetch_b(uint b_base, uint tile_n, uint k0, uint i, bool full) {
    const uint col = min(tile_n + i / B_RUNS, p.N - 1);
    const uint k = k0 + 4 * (i % B_RUNS);
    const uint at = b_base + col * p.b_nb1;
#if defined(ALIGNED)
    return b4[(at + k) >> 2];
#else
    if (full && (p.flags & FLAG_B_VEC4) != 0) {
        return b4[(at + k) >> 2];
    }
    vec4 r;
    [[unroll]] for (uint j = 0; j < 4; j++) {
        r[j] = k + j < p.K ? b[at + (k + j) * p.b_nb0] : 0.0;
    }
    return r;
#endif
}

void stash_b(uint stage, uint i, vec4 x) {
    sh_b[stage * BN * SA + (i / B_RUNS) * SA + i % B_RUNS] = f16vec4(x);
}
#endif

void main() {
    // Workgroups run in dispatch order (x fastest). FLAG_COLUMNS_FIRST:
    // consecutive workgroups take the column tiles of one row tile, so
    // those running together share weight rows.
    uint row_tile = gl_WorkGroupID.x;
    uint col_tile = gl_WorkGroupID.y;
    if ((p.flags & FLAG_COLUMNS_FIRST) != 0) {
        const uint linear = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
        row_tile = linear / gl_NumWorkGroups.y;
        col_tile = linear % gl_NumWorkGroups.y;
    }
    const uint tile_m = row_tile * BM;
    const uint tile_n = col_tile * BN;
    const uint split = gl_WorkGroupID.z / p.batches;
    const uint batch = gl_WorkGroupID.z % p.batches;
    const uint k_begin = split * p.k_chunk;
    const uint k_end = min(p.K, k_begin + p.k_chunk);
    const uint i12 = batch % p.ne12;
    const uint i13 = batch / p.ne12;
    const uint a_base = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    const uint b_base = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
    const uint tid = gl_LocalInvocationID.x;
#if defined(EMULATED)
#define EM_N (BM * BN / WG_SIZE)
#if WG_SIZE % BM != 0
#error "EMULATED needs WG_SIZE to be a multiple of BM"
#endif
    // Invocation t: tile row t % BM, columns em_n .. em_n + EM_N - 1.
    const uint em_m = tid % BM;
    const uint em_n = (tid / BM) * EM_N;
    float acc[EM_N];
    [[unroll]] for (uint j = 0; j < EM_N; j++) {
        acc[j] = 0.0;
    }
#else
#define CM (WM / TM)
#define CN (WN / TN)
    const uint sg = gl_SubgroupID;
    const uint wm = (sg % (BM / WM)) * WM;
    const uint wn = (sg / (BM / WM)) * WN;
    // acc[i * CN + j]: rows wm + i * TM, columns wn + j * TN.
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[CM * CN];
    [[unroll]] for (uint i = 0; i < CM * CN; i++) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    }
#endif

    uvec4 ra[A_LOADS];
    B_RAW rb[B_LOADS];
#define FETCH(RA, RB, KS)                                                              \
    {                                                                                  \
        const bool full_ = (KS) + BK <= p.K;                                           \
        [[unroll]] for (uint l = 0; l < A_LOADS; l++) {                                \
            RA[l] = fetch_a(a_base, tile_m, (KS), tid + l * WG_SIZE, full_);           \
        }                                                                              \
        [[unroll]] for (uint l = 0; l < B_LOADS; l++) {                                \
            RB[l] = fetch_b(b_base, tile_n, (KS), tid + l * WG_SIZE, full_);           \
        }                                                                              \
    }
#define STASH(STAGE, RA, RB)                                                           \
    {                                                                                  \
        [[unroll]] for (uint l = 0; l < A_LOADS; l++) {                                \
            stash_a((STAGE), tid + l * WG_SIZE, RA[l]);                                \
        }                                                                              \
        [[unroll]] for (uint l = 0; l < B_LOADS; l++) {                                \
            stash_b((STAGE), tid + l * WG_SIZE, RB[l]);                                \
        }                                                                              \
    }
#if defined(EMULATED)
#define MULTIPLY(STAGE)                                                                \
    {                                                                                  \
        const uint sa = (STAGE) * BM * SA;                                             \
        const uint sb = (STAGE) * BN * SA;                                             \
        [[unroll]] for (uint kk = 0; kk < BK / 4; kk++) {                              \
            const vec4 a = vec4(sh_a[sa + em_m * SA + kk]);                            \
            [[unroll]] for (uint j = 0; j < EM_N; j++) {                               \
                acc[j] += dot(a, vec4(sh_b[sb + (em_n + j) * SA + kk]));               \
            }                                                                          \
        }                                                                              \
    }
#else
#define MULTIPLY(STAGE)                                                                \
    {                                                                                  \
        const uint sa = (STAGE) * BM * SA;                                             \
        const uint sb = (STAGE) * BN * SA;                                             \
        [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {                              \
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> ma[CM];        \
            coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> mb[CN];        \
            [[unroll]] for (uint i = 0; i < CM; i++) {                                 \
                coopMatLoad(ma[i], sh_a, sa + (wm + i * TM) * SA + kk / 4, SA,         \
                            gl_CooperativeMatrixLayoutRowMajor);                       \
            }                                                                          \
            [[unroll]] for (uint j = 0; j < CN; j++) {                                 \
                coopMatLoad(mb[j], sh_b, sb + (wn + j * TN) * SA + kk / 4, SA,         \
                            gl_CooperativeMatrixLayoutColumnMajor);                    \
            }                                                                          \
            [[unroll]] for (uint i = 0; i < CM; i++) {                                 \
                [[unroll]] for (uint j = 0; j < CN; j++) {                             \
                    acc[i * CN + j] = coopMatMulAdd(ma[i], mb[j], acc[i * CN + j]);    \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }
#endif
    FETCH(ra, rb, k_begin);
#if defined(PREFETCH2)
    // Two register sets, loads two steps ahead: the step after next is
    // fetched before this step multiplies and stashed only after the next
    // one has (a whole step later), so each load has two steps' products
    // to land. The loop is unrolled by two so the sets keep their names.
    uvec4 ra2[A_LOADS];
    B_RAW rb2[B_LOADS];
#if defined(DOUBLE_BUFFER)
    STASH(0, ra, rb);
    if (k_begin + BK < k_end) {
        FETCH(ra2, rb2, k_begin + BK);
    }
    barrier();
#define STEP(KS, STAGE, RA_FETCH, RB_FETCH, RA_STASH, RB_STASH)                        \
    {                                                                                  \
        if ((KS) + 2 * BK < k_end) {                                                   \
            FETCH(RA_FETCH, RB_FETCH, (KS) + 2 * BK);                                  \
        }                                                                              \
        MULTIPLY(STAGE);                                                               \
        if ((KS) + BK < k_end) {                                                       \
            STASH((STAGE) ^ 1, RA_STASH, RB_STASH);                                    \
        }                                                                              \
        barrier();                                                                     \
    }
    for (uint k0 = k_begin; k0 < k_end; k0 += 2 * BK) {
        STEP(k0, 0, ra, rb, ra2, rb2);
        if (k0 + BK >= k_end) {
            break;
        }
        STEP(k0 + BK, 1, ra2, rb2, ra, rb);
    }
#else
    // One stage: step s is stashed from the set fetched two steps before,
    // which then fetches step s + 2.
    if (k_begin + BK < k_end) {
        FETCH(ra2, rb2, k_begin + BK);
    }
#define STEP(KS, RA, RB)                                                               \
    {                                                                                  \
        STASH(0, RA, RB);                                                              \
        barrier();                                                                     \
        if ((KS) + 2 * BK < k_end) {                                                   \
            FETCH(RA, RB, (KS) + 2 * BK);                                              \
        }                                                                              \
        MULTIPLY(0);                                                                   \
        barrier();                                                                     \
    }
    for (uint k0 = k_begin; k0 < k_end; k0 += 2 * BK) {
        STEP(k0, ra, rb);
        if (k0 + BK >= k_end) {
            break;
        }
        STEP(k0 + BK, ra2, rb2);
    }
#endif
#else
#if defined(DOUBLE_BUFFER)
    STASH(0, ra, rb);
    barrier();
    uint stage = 0;
#else
    const uint stage = 0;
#endif
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
        const uint k1 = k0 + BK;
        const bool more = k1 < k_end;
#if !defined(DOUBLE_BUFFER)
        STASH(0, ra, rb);
        barrier();
#endif
        if (more) {
            FETCH(ra, rb, k1);
        }
        MULTIPLY(stage);
#if defined(DOUBLE_BUFFER)
        if (more) {
            STASH(stage ^ 1, ra, rb);
        }
        stage ^= 1;
#endif
        barrier();
    }
#endif

    const uint d_base = p.d_off + split * p.split_plane + i12 * p.d_nb2 + i13 * p.d_nb3;
#if defined(EMULATED)
    const uint m = tile_m + em_m;
    [[unroll]] for (uint j = 0; j < EM_N; j++) {
        const uint n = tile_n + em_n + j;
        if (m < p.M && n < p.N) {
            d[d_base + m * p.d_nb0 + n * p.d_nb1] = acc[j];
        }
    }
#else
    const bool direct = (p.flags & FLAG_D_DIRECT) != 0;
    const uint lane = gl_SubgroupInvocationID;
    const uint staged = sg * TM * TN;
    [[unroll]] for (uint i = 0; i < CM; i++) {
        [[unroll]] for (uint j = 0; j < CN; j++) {
            const uint m0 = tile_m + wm + i * TM;
            const uint n0 = tile_n + wn + j * TN;
            if (m0 >= p.M || n0 >= p.N) {
                continue;
            }
            if (direct && m0 + TM <= p.M && n0 + TN <= p.N) {
                coopMatStore(acc[i * CN + j], d, d_base + m0 + n0 * p.d_nb1, p.d_nb1,
                             gl_CooperativeMatrixLayoutColumnMajor);
                continue;
            }
            // sh_out[staged + c * TM + r] = element (r, c).
            coopMatStore(acc[i * CN + j], sh_out, staged, TM, gl_CooperativeMatrixLayoutColumnMajor);
            controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                           gl_SemanticsAcquireRelease);
            for (uint e = lane; e < TM * TN; e += 32) {
                const uint m = m0 + e % TM;
                const uint n = n0 + e / TM;
                if (m < p.M && n < p.N) {
                    d[d_base + m * p.d_nb0 + n * p.d_nb1] = sh_out[staged + e];
                }
            }
            controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                           gl_SemanticsAcquireRelease);
        }
    }
#endif
}
