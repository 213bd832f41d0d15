// The mat-vec kernels' weights (binding 0, `src0`: common/weights_binding)
// and activations (binding 1, `src1`) as the host's layout defines them
// (mul_mat_vec.wgsl, mul_mat_vec_glu.wgsl): src1 the q8_1 runs (X_Q8) or
// f32 vec4s.

#include "common/weights_binding"
#ifdef X_Q8
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<u32>>;
#else
@group(0) @binding(1) var<storage, read_write> src1: array<vec4<f32>>;
#endif
