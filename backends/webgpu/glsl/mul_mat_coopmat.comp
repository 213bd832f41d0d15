#version 450
// MUL_MAT GEMM with VK_KHR_cooperative_matrix: f32 activations (src1,
// rounded to f16 while staged), f16, q4_0 or q8_0 weights (A_F16, A_Q4_0,
// A_Q8_0; quantized blocks dequantized to f16 while staged), f32 dst,
// ggml semantics as in mul_mat_vec.comp.
//
// A workgroup of 128 invocations (4 subgroups of 32) computes a 64 x 64
// output tile: each subgroup a 32 x 32 quarter as (32 / TM) x (32 / TN)
// accumulators of TM x TN, multiplying TM x TK weight matrices by
// TK x TN activation matrices read from workgroup memory. K advances
// 32 at a time (one quantized block per weight row). The tile goes
// through workgroup memory to dst, bounds-checked, with any dst strides.
//
// EMULATED: the same staging and write-out with the matrix products as
// plain code (each invocation 32 outputs of the tile, f16 inputs, f32
// sums), for devices without cooperative matrices (tests on lavapipe).

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#if !defined(EMULATED)
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#endif
#extension GL_EXT_control_flow_attributes : require

#define WG_SIZE 128
#define BM 64
#define BN 64
#define BK 32
// Row stride of the staged tiles in halves (padded against bank conflicts).
#define SK (BK + 8)
#define CM (32 / TM)
#define CN (32 / TN)

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer AHalf { float16_t a_half[]; };
layout(binding = 0, std430) readonly buffer AU16 { uint16_t a_u16[]; };
layout(binding = 0, std430) readonly buffer AI8 { int8_t a_i8[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
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
} p;

shared float16_t sh_a[BM * SK];
shared float16_t sh_b[BN * SK];
shared float sh_c[BM * BN];

#if defined(A_Q4_0)
const uint BLOCK_BYTES = 18;
#elif defined(A_Q8_0)
const uint BLOCK_BYTES = 34;
#elif !defined(A_F16)
#error "define A_F16, A_Q4_0 or A_Q8_0"
#endif

// Stages 16 weights of row `row` (weights K index k0 + 16 * half) at
// `dst` in sh_a; rows past M are zeros.
void stage_weights(uint a_base, uint row, uint k0, uint half_, uint dst) {
    if (row >= p.M) {
        [[unroll]] for (uint j = 0; j < 16; j++) {
            sh_a[dst + j] = float16_t(0.0);
        }
        return;
    }
    const uint at = a_base + row * p.a_nb1;
#if defined(A_F16)
    const uint first = k0 + 16 * half_;
    [[unroll]] for (uint j = 0; j < 16; j++) {
        const uint k = first + j;
        sh_a[dst + j] = k < p.K ? a_half[(at >> 1) + k] : float16_t(0.0);
    }
#else
    const uint blk = at + (k0 / 32) * BLOCK_BYTES;
    const float scale = float(a_half[blk >> 1]);
#if defined(A_Q4_0)
    // Byte j holds weight j (low nibble) and weight j + 16 (high nibble).
    const uint shift = 4 * half_;
    [[unroll]] for (uint i = 0; i < 8; i++) {
        const uint q = uint(a_u16[(blk >> 1) + 1 + i]);
        sh_a[dst + 2 * i] = float16_t(scale * (float((q >> shift) & 0xFu) - 8.0));
        sh_a[dst + 2 * i + 1] = float16_t(scale * (float((q >> (8 + shift)) & 0xFu) - 8.0));
    }
#else
    [[unroll]] for (uint j = 0; j < 16; j++) {
        sh_a[dst + j] = float16_t(scale * float(int(a_i8[blk + 2 + 16 * half_ + j])));
    }
#endif
#endif
}

void main() {
    const uint tile_m = gl_WorkGroupID.x * BM;
    const uint tile_n = gl_WorkGroupID.y * BN;
    const uint batch = gl_WorkGroupID.z;
    const uint i12 = batch % p.ne12;
    const uint i13 = batch / p.ne12;
    const uint a_base = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    const uint b_base = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
    const uint tid = gl_LocalInvocationID.x;
#if defined(EMULATED)
    // Invocation t: row t % BM of the tile, columns em_n .. em_n + 31.
    const uint em_m = tid % BM;
    const uint em_n = (tid / BM) * 32;
    float acc[32];
    [[unroll]] for (uint j = 0; j < 32; j++) {
        acc[j] = 0.0;
    }
#else
    const uint sg = gl_SubgroupID;
    const uint sg_m = (sg & 1) * 32;
    const uint sg_n = (sg >> 1) * 32;

    // acc[i * CN + j]: rows sg_m + i * TM, columns sg_n + j * TN.
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[CM * CN];
    [[unroll]] for (uint i = 0; i < CM * CN; i++) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    }
#endif

    // Each invocation stages 16 consecutive K values of one weight row and
    // of one activation column.
    const uint stage_row = tid >> 1;
    const uint half_ = tid & 1;
    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        stage_weights(a_base, tile_m + stage_row, k0, half_, stage_row * SK + 16 * half_);
        {
            const uint n = tile_n + stage_row;
            const uint first = k0 + 16 * half_;
            const uint x0 = b_base + n * p.b_nb1;
            [[unroll]] for (uint j = 0; j < 16; j++) {
                const uint k = first + j;
                const float x = (n < p.N && k < p.K) ? b[x0 + k * p.b_nb0] : 0.0;
                sh_b[stage_row * SK + 16 * half_ + j] = float16_t(x);
            }
        }
        barrier();
#if defined(EMULATED)
        for (uint kk = 0; kk < BK; kk++) {
            const float a = float(sh_a[em_m * SK + kk]);
            [[unroll]] for (uint j = 0; j < 32; j++) {
                acc[j] += a * float(sh_b[(em_n + j) * SK + kk]);
            }
        }
#else
        [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> ma[CM];
            coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> mb[CN];
            [[unroll]] for (uint i = 0; i < CM; i++) {
                coopMatLoad(ma[i], sh_a, (sg_m + i * TM) * SK + kk, SK,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0; j < CN; j++) {
                coopMatLoad(mb[j], sh_b, (sg_n + j * TN) * SK + kk, SK,
                            gl_CooperativeMatrixLayoutColumnMajor);
            }
            [[unroll]] for (uint i = 0; i < CM; i++) {
                [[unroll]] for (uint j = 0; j < CN; j++) {
                    acc[i * CN + j] = coopMatMulAdd(ma[i], mb[j], acc[i * CN + j]);
                }
            }
        }
#endif
        barrier();
    }

    // sh_c[n * BM + m] = C[m][n].
#if defined(EMULATED)
    [[unroll]] for (uint j = 0; j < 32; j++) {
        sh_c[(em_n + j) * BM + em_m] = acc[j];
    }
#else
    [[unroll]] for (uint i = 0; i < CM; i++) {
        [[unroll]] for (uint j = 0; j < CN; j++) {
            coopMatStore(acc[i * CN + j], sh_c, (sg_n + j * TN) * BM + sg_m + i * TM, BM,
                         gl_CooperativeMatrixLayoutColumnMajor);
        }
    }
#endif
    barrier();
    const uint d_base = p.d_off + i12 * p.d_nb2 + i13 * p.d_nb3;
    for (uint idx = tid; idx < BM * BN; idx += WG_SIZE) {
        const uint m = tile_m + idx % BM;
        const uint n = tile_n + idx / BM;
        if (m < p.M && n < p.N) {
            d[d_base + m * p.d_nb0 + n * p.d_nb1] = sh_c[idx];
        }
    }
}
