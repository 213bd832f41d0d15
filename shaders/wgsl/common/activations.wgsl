// Activation functions shared by unary.wgsl and glu.wgsl, with ggml's
// formulas and constants. All math is in f32; arguments of exp and tanh
// that would overflow are clamped (inf/inf gives NaN on some drivers).

const SQRT_2_OVER_PI: f32 = 0.79788456080286535587989211986876;
const GELU_COEF_A: f32 = 0.044715;
const GELU_QUICK_COEF: f32 = -1.702;
const SQRT_2_INV: f32 = 0.70710678118654752440084436210484;

// tanh with its argument clamped: tanh(+-10) is +-1 in f32.
fn tanh_safe(x: f32) -> f32 {
    return tanh(clamp(x, -10.0, 10.0));
}

// exp(x) - 1 (the f32 rounding of exp(x) is far inside the tolerances).
fn expm1_f32(x: f32) -> f32 {
    return exp(x) - 1.0;
}

// Error function, Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7).
fn erf_f32(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
        + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - poly * exp(-a * a);
    return select(y, -y, x < 0.0);
}

// 1 / (1 + e^-x); e^-x overflowing to inf gives 0, as it should.
fn sigmoid_f32(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// GELU, tanh approximation (ggml_gelu_f32).
fn gelu_f32(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_safe(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)));
}

// GELU with the error function.
fn gelu_erf_f32(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_f32(x * SQRT_2_INV));
}

// x * sigmoid(1.702 x).
fn gelu_quick_f32(x: f32) -> f32 {
    return x * (1.0 / (1.0 + exp(GELU_QUICK_COEF * x)));
}

// x * sigmoid(x).
fn silu_f32(x: f32) -> f32 {
    return x / (1.0 + exp(-x));
}

// ggml's softplus: x above 20, else ln(1 + e^x).
fn softplus_f32(x: f32) -> f32 {
    if (x > 20.0) {
        return x;
    }
    return log(1.0 + exp(x));
}
