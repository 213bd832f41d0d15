//! Element-wise functions: SQR SQRT LOG SIN COS SCALE CLAMP FILL, every
//! UNARY function and every GLU variant, with ggml's formulas and constants.

use backplane_abi::{GluOp, Op, UnaryOp};

use super::{Node, for_each_index};
use backplane_runtime::ComputeError;

/// √(2/π), ggml's `SQRT_2_OVER_PI`.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// ggml's `GELU_COEF_A`.
const GELU_COEF_A: f64 = 0.044715;
/// ggml's `GELU_QUICK_COEF`.
const GELU_QUICK_COEF: f64 = -1.702;
/// 1/√2, ggml's `SQRT_2_INV`.
const SQRT_2_INV: f64 = std::f64::consts::FRAC_1_SQRT_2;

/// GELU, tanh approximation (ggml_gelu_f32 without the f16 table).
pub(crate) fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

/// GELU with the exact error function.
pub(crate) fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x * SQRT_2_INV))
}

/// `x * sigmoid(1.702 x)`.
pub(crate) fn gelu_quick(x: f64) -> f64 {
    x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))
}

/// `x * sigmoid(x)`.
pub(crate) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// ggml's softplus: `x` above 20, else `ln(1 + e^x)`.
pub(crate) fn softplus(x: f64) -> f64 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// The error function to about 1e-14: its Maclaurin series below 2, the
/// continued fraction of erfc above.
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    let r = if ax < 2.0 {
        // Maclaurin series: erf x = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)).
        let mut term = ax;
        let mut sum = ax;
        let x2 = ax * ax;
        let mut k = 0.0;
        loop {
            k += 1.0;
            term *= -x2 / k;
            let add = term / (2.0 * k + 1.0);
            sum += add;
            if add.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else if ax < 6.0 {
        // erfc x = e^(-x²)/√π / (x + (1/2)/(x + (2/2)/(x + ...))).
        let mut f = 0.0;
        for k in (1..=200).rev() {
            f = (k as f64 / 2.0) / (ax + f);
        }
        1.0 - (-ax * ax).exp() / (std::f64::consts::PI.sqrt() * (ax + f))
    } else {
        1.0
    };
    r.copysign(x)
}

fn unary_fn(f: UnaryOp, p: [f64; 4]) -> impl Fn(f64) -> f64 {
    move |x: f64| match f {
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sgn => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        UnaryOp::Neg => -x,
        UnaryOp::Step => f64::from(x > 0.0),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Elu => {
            if x > 0.0 {
                x
            } else {
                x.exp_m1()
            }
        }
        UnaryOp::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Gelu => gelu(x),
        UnaryOp::GeluQuick => gelu_quick(x),
        UnaryOp::Silu => silu(x),
        UnaryOp::Hardswish => x * ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::Hardsigmoid => ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Softplus => softplus(x),
        UnaryOp::GeluErf => gelu_erf(x),
        UnaryOp::Xielu => {
            // params as ggml_xielu stores them: alpha_n (beta + softplus
            // already applied), alpha_p (softplus applied), beta, eps.
            let [alpha_n, alpha_p, beta, eps] = p;
            if x > 0.0 {
                alpha_p * x * x + beta * x
            } else {
                (x.min(eps).exp_m1() - x) * alpha_n + beta * x
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Trunc => x.trunc(),
    }
}

fn map(n: &Node, f: impl Fn(f64) -> f64) -> Result<(), ComputeError> {
    let a = n.src(0)?;
    let mut out = Vec::with_capacity(a.nelements() as usize);
    for_each_index(a.ne(), |i| out.push(f(a.at(i))));
    n.store(&out)
}

/// SQR, SQRT, LOG, SIN, COS, SCALE (`x * s + b`), CLAMP and FILL.
pub(crate) fn simple(n: &Node) -> Result<(), ComputeError> {
    let (p0, p1) = (n.p_f32(0) as f64, n.p_f32(1) as f64);
    match n.op {
        Op::Sqr => map(n, |x| x * x),
        Op::Sqrt => map(n, f64::sqrt),
        Op::Log => map(n, f64::ln),
        Op::Sin => map(n, f64::sin),
        Op::Cos => map(n, f64::cos),
        Op::Scale => map(n, |x| x * p0 + p1),
        // ggml: MAX(MIN(x, max), min); a NaN input becomes max.
        Op::Clamp => map(n, |x| {
            let m = if x < p1 { x } else { p1 };
            if m > p0 { m } else { p0 }
        }),
        Op::Fill => map(n, |_| p0),
        op => Err(n.unsupported(format!("{op} is not an element-wise op"))),
    }
}

/// UNARY: the function in op_params[0], extra f32 params in [1..5].
pub(crate) fn unary(n: &Node) -> Result<(), ComputeError> {
    let code = n.p_i32(0);
    let f = UnaryOp::from_code(code as u32).map_err(|e| n.unsupported(e.to_string()))?;
    let p = [1, 2, 3, 4].map(|i| n.p_f32(i) as f64);
    map(n, unary_fn(f, p))
}

/// GLU: `f(x) * g` where x and g are a and b, or the two halves of each row
/// of a (x first unless op_params[1] says swapped).
pub(crate) fn glu(n: &Node) -> Result<(), ComputeError> {
    let code = n.p_i32(0);
    let f = GluOp::from_code(code as u32).map_err(|e| n.unsupported(e.to_string()))?;
    let swapped = n.p_i32(1) != 0;
    let (alpha, limit) = (n.p_f32(2) as f64, n.p_f32(3) as f64);
    let a = n.src(0)?;
    let b = n.opt(1);
    let nc = n.dst.ne()[0];
    let act = move |x: f64, g: f64| -> f64 {
        match f {
            GluOp::Reglu => (if x > 0.0 { x } else { 0.0 }) * g,
            GluOp::Geglu => gelu(x) * g,
            GluOp::Swiglu => silu(x) * g,
            GluOp::GegluErf => gelu_erf(x) * g,
            GluOp::GegluQuick => gelu_quick(x) * g,
            GluOp::SwigluOai => {
                let x = x.min(limit);
                // std::clamp(g, -limit, limit), without panicking on odd limits.
                let g = if g < -limit {
                    -limit
                } else if limit < g {
                    limit
                } else {
                    g
                };
                x / (1.0 + (alpha * -x).exp()) * (g + 1.0)
            }
        }
    };
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for_each_index(n.dst.ne(), |[i0, i1, i2, i3]| {
        let (x, g) = match &b {
            Some(b) => (a.get(i0, i1, i2, i3), b.get(i0, i1, i2, i3)),
            None => {
                let (xo, go) = if swapped { (nc, 0) } else { (0, nc) };
                (a.get(i0 + xo, i1, i2, i3), a.get(i0 + go, i1, i2, i3))
            }
        };
        out.push(act(x, g));
    });
    n.store(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (1.9, 0.992_790_429_235_257_4),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!(
                (erf(x) - want).abs() < 1e-13,
                "erf({x}) = {} != {want}",
                erf(x)
            );
        }
    }
}
