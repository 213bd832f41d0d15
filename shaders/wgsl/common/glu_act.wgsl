// The GLU functions (glu.wgsl and the fused mat-vec mul_mat_vec_glu.wgsl):
// act(x) * g for the OP_ variant the includer's key names, as ggml
// computes them in f32. alpha and limit are SWIGLU_OAI's parameters.
// Needs common/activations.

fn glu_act(x: f32, g: f32, alpha: f32, limit: f32) -> f32 {
#ifdef OP_REGLU
    return select(0.0, x, x > 0.0) * g;
#elif defined(OP_GEGLU)
    return gelu_f32(x) * g;
#elif defined(OP_SWIGLU)
    return silu_f32(x) * g;
#elif defined(OP_GEGLU_ERF)
    return gelu_erf_f32(x) * g;
#elif defined(OP_GEGLU_QUICK)
    return gelu_quick_f32(x) * g;
#elif defined(OP_SWIGLU_OAI)
    // gpt-oss: x = min(x, limit), g = clamp(g, -limit, limit).
    let xl = min(x, limit);
    let gl = select(select(g, limit, limit < g), -limit, g < -limit);
    return xl / (1.0 + exp(alpha * -xl)) * (gl + 1.0);
#else
#error glu_act: no OP_ variant defined
#endif
}
