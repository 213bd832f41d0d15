// The MUL_MAT kernels' weights, binding 0 (`src0`), as the host's layout
// defines them (mul_mat_common says the layouts): whole vec4<u32> units
// for W_HALF8 and QUANT_BUF_VEC4, vec4s for W_VEC4, else SRC0_TYPE
// elements.

#if defined(W_HALF8) || defined(QUANT_BUF_VEC4)
@group(0) @binding(0) var<storage, read_write> src0: array<vec4<u32>>;
#elif defined(W_VEC4)
@group(0) @binding(0) var<storage, read_write> src0: array<vec4<SRC0_TYPE>>;
#else
@group(0) @binding(0) var<storage, read_write> src0: array<SRC0_TYPE>;
#endif
