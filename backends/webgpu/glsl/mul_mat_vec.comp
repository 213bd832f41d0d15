#version 450
// MUL_MAT with 1..8 columns (NCOLS) of f32 activations and q4_0 or q8_0
// weights (A_Q4_0 / A_Q8_0), f32 dst, ggml semantics: dst[m, n, i2, i3] =
// sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3].
//
// What WGSL cannot say: the blocks (18 or 34 bytes, only 2-byte aligned)
// are read as 16-bit and 8-bit storage values through aliased views of one
// binding, the f16 scale as a float16_t load.
//
// A workgroup computes NROWS rows x NCOLS columns. Eight neighbouring
// invocations share a block, each taking 4 of its 32 weights (one 16-bit
// word of q4_0 quants, 4 bytes of q8_0 quants), so neighbours read
// neighbouring words of the weights and of the activations; a block is
// dequantized once per row and used for every column. subgroupAdd, then a
// sum over the subgroups in workgroup memory.
//
// Bindings follow the backend's convention: tensors 0..2 as storage
// buffers, the parameters a uniform at binding 3 (dynamic offset).

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

layout(binding = 0, std430) readonly buffer AHalf { float16_t a_half[]; };
layout(binding = 0, std430) readonly buffer AU16 { uint16_t a_u16[]; };
layout(binding = 0, std430) readonly buffer AI8 { int8_t a_i8[]; };
layout(binding = 1, std430) readonly buffer B { float b[]; };
#if defined(X_VEC4)
layout(binding = 1, std430) readonly buffer B4 { vec4 b4[]; };
#endif
layout(binding = 2, std430) writeonly buffer D { float d[]; };

// Field order is the order of the words the host writes (all u32).
layout(binding = 3, std140) uniform Params {
    uint K;
    uint M;
    uint ne12;
    uint r2;
    uint r3;
    uint row_groups;
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
} p;

#if defined(A_Q4_0)
const uint BLOCK_BYTES = 18;
#elif defined(A_Q8_0)
const uint BLOCK_BYTES = 34;
#else
#error "define A_Q4_0 or A_Q8_0"
#endif

shared float partial[NROWS * NCOLS][WG_SIZE];

// Invocations per block, and the blocks a workgroup takes per step.
const uint LANES = 8;
const uint BLOCKS_PER_STEP = WG_SIZE / LANES;

// Position within its block of weight i (0..3) of lane `lane`.
uint weight_index(uint lane, uint i) {
#if defined(A_Q4_0)
    // Quant byte j holds weight j (low nibble) and j + 16 (high nibble);
    // lane l reads bytes 2l and 2l + 1.
    return 2 * lane + (i & 1) + 16 * (i >> 1);
#else
    return 4 * lane + i;
#endif
}

// The 4 weights of lane `lane` of the block at byte `at` (even), without
// the block's scale.
vec4 quants(uint at, uint lane) {
#if defined(A_Q4_0)
    const uint q = uint(a_u16[(at >> 1) + 1 + lane]);
    return vec4(float(q & 0xFu), float((q >> 8) & 0xFu), float((q >> 4) & 0xFu),
                float(q >> 12)) - 8.0;
#else
    const uint first = at + 2 + 4 * lane;
    return vec4(float(int(a_i8[first])), float(int(a_i8[first + 1])),
                float(int(a_i8[first + 2])), float(int(a_i8[first + 3])));
#endif
}

void main() {
    const uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (group >= p.row_groups) {
        return;
    }
    const uint batch = gl_WorkGroupID.z;
    const uint i12 = batch % p.ne12;
    const uint i13 = batch / p.ne12;
    const uint a_base = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    const uint b_base = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
    const uint blocks = p.K / 32;
    const uint tid = gl_LocalInvocationID.x;

    float acc[NROWS][NCOLS];
    [[unroll]] for (uint r = 0; r < NROWS; r++) {
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            acc[r][c] = 0.0;
        }
    }
#if defined(X_VEC4)
    // Activation rows dense and 16-byte aligned: each invocation takes
    // whole blocks, their activations as 8 vec4 loads per column and
    // their quants as 16-bit words (fewest loads: lavapipe gathers every
    // load of every invocation).
    for (uint blk = tid; blk < blocks; blk += WG_SIZE) {
        vec4 x[NCOLS][8];
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            const uint x0 = ((b_base + c * p.b_nb1) >> 2) + blk * 8;
            [[unroll]] for (uint v = 0; v < 8; v++) {
                x[c][v] = b4[x0 + v];
            }
        }
        [[unroll]] for (uint r = 0; r < NROWS; r++) {
            const uint row = min(group * NROWS + r, p.M - 1);
            const uint at = a_base + row * p.a_nb1 + blk * BLOCK_BYTES;
            const float scale = float(a_half[at >> 1]);
            float s[NCOLS];
            [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                s[c] = 0.0;
            }
#if defined(A_Q4_0)
            // Word i: weights 2i, 2i + 1 (low nibbles), 2i + 16, 2i + 17.
            [[unroll]] for (uint i = 0; i < 8; i++) {
                const uint q = uint(a_u16[(at >> 1) + 1 + i]);
                const vec2 lo = vec2(float(q & 0xFu), float((q >> 8) & 0xFu)) - 8.0;
                const vec2 hi = vec2(float((q >> 4) & 0xFu), float(q >> 12)) - 8.0;
                [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                    const vec4 xl = x[c][i >> 1];
                    const vec4 xh = x[c][4 + (i >> 1)];
                    s[c] += (i & 1) == 0 ? dot(lo, xl.xy) + dot(hi, xh.xy)
                                         : dot(lo, xl.zw) + dot(hi, xh.zw);
                }
            }
#else
            // Word i: weights 2i and 2i + 1, signed bytes.
            [[unroll]] for (uint i = 0; i < 16; i++) {
                const int q = int(uint(a_u16[(at >> 1) + 1 + i]));
                const vec2 w = vec2(float((q << 24) >> 24), float((q << 16) >> 24));
                [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                    const vec4 xv = x[c][i >> 1];
                    s[c] += (i & 1) == 0 ? dot(w, xv.xy) : dot(w, xv.zw);
                }
            }
#endif
            [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                acc[r][c] += scale * s[c];
            }
        }
    }
#else
    const uint lane = tid % LANES;
    for (uint blk = tid / LANES; blk < blocks; blk += BLOCKS_PER_STEP) {
        vec4 x[NCOLS];
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            const uint x0 = b_base + c * p.b_nb1 + blk * 32 * p.b_nb0;
            [[unroll]] for (uint i = 0; i < 4; i++) {
                x[c][i] = b[x0 + weight_index(lane, i) * p.b_nb0];
            }
        }
        [[unroll]] for (uint r = 0; r < NROWS; r++) {
            // Rows past M repeat the last one and are never stored.
            const uint row = min(group * NROWS + r, p.M - 1);
            const uint at = a_base + row * p.a_nb1 + blk * BLOCK_BYTES;
            const float scale = float(a_half[at >> 1]);
            const vec4 w = quants(at, lane);
            [[unroll]] for (uint c = 0; c < NCOLS; c++) {
                acc[r][c] += scale * dot(w, x[c]);
            }
        }
    }
#endif
    [[unroll]] for (uint r = 0; r < NROWS; r++) {
        [[unroll]] for (uint c = 0; c < NCOLS; c++) {
            const float s = subgroupAdd(acc[r][c]);
            if (subgroupElect()) {
                partial[r * NCOLS + c][gl_SubgroupID] = s;
            }
        }
    }
    barrier();
    if (tid < NROWS * NCOLS) {
        const uint r = tid / NCOLS;
        const uint c = tid % NCOLS;
        const uint row = group * NROWS + r;
        if (row < p.M) {
            float s = 0.0;
            for (uint i = 0; i < gl_NumSubgroups; i++) {
                s += partial[tid][i];
            }
            const uint at = p.d_off + row * p.d_nb0 + c * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3;
            d[at] = s;
        }
    }
}
