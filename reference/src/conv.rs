//! CONV_2D (direct) and IM2COL (1-D and 2-D). op_params: s0, s1, p0, p1,
//! d0, d1 (x then y), and for IM2COL [6] = 1 when 2-D.

use super::Node;
use backplane_runtime::ComputeError;
use backplane_runtime::conv_output_size;

struct Geometry {
    s: [i64; 2],
    p: [i64; 2],
    d: [i64; 2],
}

/// Stride, padding and dilation (the contract has checked them).
fn geometry(n: &Node) -> Geometry {
    let [s0, s1, p0, p1, d0, d1] = [0, 1, 2, 3, 4, 5].map(|i| n.p_i32(i) as i64);
    Geometry {
        s: [s0, s1],
        p: [p0, p1],
        d: [d0, d1],
    }
}

/// `out[ow, oh, co, b] = Σ_{ci, kh, kw} kernel[kw, kh, ci, co] *
/// input[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ci, b]`, zero outside.
pub(crate) fn conv_2d(n: &Node) -> Result<(), ComputeError> {
    let (k, x) = (n.src(0)?, n.src(1)?);
    let g = geometry(n);
    let (kn, xn) = (k.ne(), x.ne());
    let ow = conv_output_size(xn[0], kn[0], g.s[0] as i32, g.p[0] as i32, g.d[0] as i32);
    let oh = conv_output_size(xn[1], kn[1], g.s[1] as i32, g.p[1] as i32, g.d[1] as i32);
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for b in 0..xn[3] {
        for co in 0..kn[3] {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..kn[2] {
                        for kh in 0..kn[1] {
                            let iy = y * g.s[1] + kh * g.d[1] - g.p[1];
                            if iy < 0 || iy >= xn[1] {
                                continue;
                            }
                            for kw in 0..kn[0] {
                                let ix = xo * g.s[0] + kw * g.d[0] - g.p[0];
                                if ix < 0 || ix >= xn[0] {
                                    continue;
                                }
                                acc += k.get(kw, kh, ci, co) * x.get(ix, iy, ci, b);
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    n.store(&out)
}

/// Unfolds input patches into columns, as ggml_im2col. 2-D: input
/// `[W, H, C, N]` -> `[C*KH*KW, OW, OH, N]` with column index
/// `c*KH*KW + kh*KW + kw`; 1-D: input `[W, C, N]` -> `[C*KW, OW, N]`. The
/// kernel tensor only lends its shape. Taps outside the input are zero; in
/// 1-D the height tap is `-p1` as in ggml (so p1 must be 0 to read data).
pub(crate) fn im2col(n: &Node) -> Result<(), ComputeError> {
    let (k, x) = (n.src(0)?, n.src(1)?);
    let is_2d = n.p_i32(6) == 1;
    let g = geometry(n);
    let (kn, xn) = (k.ne(), x.ne());
    let (batch, channels, ih, iw) = if is_2d {
        (xn[3], xn[2], xn[1], xn[0])
    } else {
        (xn[2], xn[1], 1, xn[0])
    };
    let (kh_n, kw_n) = if is_2d { (kn[1], kn[0]) } else { (1, kn[0]) };
    let dn = n.dst.ne();
    let (oh, ow) = if is_2d { (dn[2], dn[1]) } else { (1, dn[1]) };
    let mut out = vec![0f64; n.dst.nelements() as usize];
    for b in 0..batch {
        for y in 0..oh {
            for xo in 0..ow {
                let base = ((b * oh + y) * ow + xo) * channels * kh_n * kw_n;
                for c in 0..channels {
                    for kh in 0..kh_n {
                        for kw in 0..kw_n {
                            let ix = xo * g.s[0] + kw * g.d[0] - g.p[0];
                            let iy = y * g.s[1] + kh * g.d[1] - g.p[1];
                            if iy < 0 || iy >= ih || ix < 0 || ix >= iw {
                                continue;
                            }
                            let v = if is_2d {
                                x.get(ix, iy, c, b)
                            } else {
                                x.get(ix, c, b, 0)
                            };
                            out[(base + c * kh_n * kw_n + kh * kw_n + kw) as usize] = v;
                        }
                    }
                }
            }
        }
    }
    n.store(&out)
}
