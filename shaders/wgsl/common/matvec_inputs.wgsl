// The mat-vec kernels' weights (binding 0, `src0`) and activations
// (binding 1, `src1`) as the host's layout defines declare them
// (mul_mat_vec.wgsl, mul_mat_vec_glu.wgsl; mul_mat_common says the
// layouts): whole vec4<u32> units for W_HALF8 and QUANT_BUF_VEC4, vec4s
// for W_VEC4, else SRC0_TYPE elements; src1 the q8_1 runs (X_Q8) or f32
// vec4s.

#if defined(W_HALF8) || defined(QUANT_BUF_VEC4)
@group(0) @binding(0) var<storage, read_write> src0: array<vec4<u32>>;
#elif defined(W_VEC4)
@group(0) @binding(0) var<storage, read_write> src0: array<vec4<SRC0_TYPE>>;
#else
@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
#endif
#ifdef X_Q8
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<f32>>;
#endif
