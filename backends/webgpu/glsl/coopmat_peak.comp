#version 450
// The cooperative-matrix multiply-add rate a device reaches through this
// API, with no memory traffic: matrices loaded once, then multiplied
// p.iters times in registers, the accumulators stored only when p.store
// asks (never while timing; the compiler cannot know that).
//
// Without WORKGROUP_SCOPE (KHR cooperative matrices) each subgroup holds a
// BM x BN grid of 16 x 16 accumulators, (BM / 16) A and (BN / 16) B
// matrices of 16 x 16, and multiplies them with K = 16: the shape of one
// subgroup's share of a GEMM tile. With WORKGROUP_SCOPE
// (VK_NV_cooperative_matrix2) the workgroup holds one BM x BN accumulator
// and multiplies a BM x BK by a BK x BN matrix, as the cm2 GEMM's K step
// does. ACC_F16: f16 accumulators.
//
// KHR only, each adding one part of a GEMM's K step to the loop:
// SHARED: every step loads its A and B matrices (BK / 16 slices of
// them) from workgroup memory first (rows padded to 24 halves,
// alternating between two copies so the loads cannot be hoisted), as a
// GEMM's inner loop does. STAGE: before that, the workgroup writes the
// step's copy (each invocation its share, 8 bytes a store) and waits at
// a barrier, as a GEMM stages its tiles; the values come from registers,
// or with GLOBAL from loads of the storage buffer (a 64-step cycle of
// small tiles that stays in the L2 cache): everything a GEMM's step does
// except reading DRAM. PREFETCH (with GLOBAL): the loads for the next
// step are issued after the barrier, before this step's products, and
// wait in registers, as the GEMMs here stage their tiles.

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#ifdef WORKGROUP_SCOPE
#extension GL_NV_cooperative_matrix2 : require
#endif
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG_SIZE, local_size_y = 1, local_size_z = 1) in;

// One buffer seen as halves (the inputs, zeros) and as the accumulators'
// type (the stores).
layout(binding = 0, std430) buffer InH { float16_t ih[]; };
layout(binding = 0, std430) buffer InV { f16vec4 iv[]; };
#ifdef ACC_F16
#define ACC_TYPE float16_t
layout(binding = 0, std430) buffer Out { float16_t o[]; };
#else
#define ACC_TYPE float
layout(binding = 0, std430) buffer Out { float o[]; };
#endif

layout(binding = 1, std140) uniform Params {
    uint iters;
    uint store;
} p;

#ifdef SHARED
// Row pitch of the staged 16 x 16 matrices, in f16vec4s (24 halves).
const uint PITCH4 = 6u;
const uint SLICES = BK / 16u;
// Matrices of one copy: (BM / 16) A and (BN / 16) B per K slice.
const uint MATRICES = (BM / 16u + BN / 16u) * SLICES;
const uint COPY = MATRICES * 16u * PITCH4;
shared f16vec4 staged[2u * COPY];
#endif

void main() {
#ifdef WORKGROUP_SCOPE
    tensorLayoutNV<2> la = createTensorLayoutNV(2);
    la = setTensorLayoutDimensionNV(la, BM, BK);
    tensorLayoutNV<2> lb = createTensorLayoutNV(2);
    lb = setTensorLayoutDimensionNV(lb, BK, BN);
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;
    coopMatLoadTensorNV(a, ih, 0, sliceTensorLayoutNV(la, 0, BM, 0, BK));
    coopMatLoadTensorNV(b, ih, 0, sliceTensorLayoutNV(lb, 0, BK, 0, BN));
    coopmat<ACC_TYPE, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> c =
        coopmat<ACC_TYPE, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    [[dont_unroll]]
    for (uint i = 0u; i < p.iters; ++i) {
        c = coopMatMulAdd(a, b, c);
    }
    if (p.store != 0u) {
        tensorLayoutNV<2> lc = createTensorLayoutNV(2);
        lc = setTensorLayoutDimensionNV(lc, BM, BN);
        coopMatStoreTensorNV(c, o, 0, sliceTensorLayoutNV(lc, 0, BM, 0, BN));
    }
#else
    const uint TM = BM / 16u;
    const uint TN = BN / 16u;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[TM];
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[TN];
    coopmat<ACC_TYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        coopMatLoad(a[i], ih, i * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    }
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
        coopMatLoad(b[j], ih, (TM + j) * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
    }
    [[unroll]] for (uint t = 0u; t < TM * TN; ++t) {
        c[t] = coopmat<ACC_TYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    }
#ifdef SHARED
    for (uint e = gl_LocalInvocationIndex; e < staged.length(); e += WG_SIZE) {
        staged[e] = f16vec4(0.0);
    }
    barrier();
#endif
#ifdef PREFETCH
    // The vectors of a copy each invocation stages, loaded a step ahead.
    const uint PER_INVOCATION = MATRICES * 64u / WG_SIZE;
    f16vec4 next[PER_INVOCATION];
    [[unroll]] for (uint l = 0u; l < PER_INVOCATION; ++l) {
        next[l] = iv[gl_LocalInvocationIndex + l * WG_SIZE];
    }
#endif
    [[dont_unroll]]
    for (uint it = 0u; it < p.iters; ++it) {
#ifdef SHARED
        const uint copy = (it & 1u) * COPY;
#ifdef PREFETCH
        [[unroll]] for (uint l = 0u; l < PER_INVOCATION; ++l) {
            const uint e = gl_LocalInvocationIndex + l * WG_SIZE;
            staged[copy + (e / 64u) * 16u * PITCH4 + ((e % 64u) / 4u) * PITCH4 + e % 4u] = next[l];
        }
        barrier();
        [[unroll]] for (uint l = 0u; l < PER_INVOCATION; ++l) {
            next[l] = iv[((it + 1u) & 63u) * MATRICES * 64u + gl_LocalInvocationIndex + l * WG_SIZE];
        }
#elif defined(STAGE)
        // Vector e of the copy: matrix e / 64, row (e % 64) / 4, vector e % 4.
        for (uint e = gl_LocalInvocationIndex; e < MATRICES * 64u; e += WG_SIZE) {
#ifdef GLOBAL
            const f16vec4 v = iv[(it & 63u) * MATRICES * 64u + e];
#else
            const f16vec4 v = f16vec4(float16_t(it & 7u));
#endif
            staged[copy + (e / 64u) * 16u * PITCH4 + ((e % 64u) / 4u) * PITCH4 + e % 4u] = v;
        }
        barrier();
#endif
        [[unroll]] for (uint sl = 0u; sl < SLICES; ++sl) {
            const uint at = copy + sl * (TM + TN) * 16u * PITCH4;
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                coopMatLoad(a[i], staged, at + i * 16u * PITCH4, PITCH4,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
                coopMatLoad(b[j], staged, at + (TM + j) * 16u * PITCH4, PITCH4,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                [[unroll]] for (uint j = 0u; j < TN; ++j) {
                    c[i * TN + j] = coopMatMulAdd(a[i], b[j], c[i * TN + j]);
                }
            }
        }
#else
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
                c[i * TN + j] = coopMatMulAdd(a[i], b[j], c[i * TN + j]);
            }
        }
#endif
    }
    if (p.store != 0u) {
        [[unroll]] for (uint t = 0u; t < TM * TN; ++t) {
            coopMatStore(c[t], o, t * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
        }
    }
#endif
}
