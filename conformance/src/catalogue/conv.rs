//! CONV_2D and IM2COL: hand-picked cases, then test-backend-ops' grids.

use backplane::{Conv2dParams, DType, Op, conv_output_size};

use super::{Catalogue, NMSE_DEFAULT, bound_for, dims};
use crate::case::{Fill, Work};

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    conv_cases(c);
    c.grid(conv_2d_ggml_grid);
    c.grid(im2col_ggml_grid);
    c.grid(conv_2d_ggml_grid_layouts);
}

fn conv_cases(c: &mut Catalogue) {
    let params = [
        Conv2dParams {
            s0: 1,
            s1: 1,
            p0: 0,
            p1: 0,
            d0: 1,
            d1: 1,
        },
        Conv2dParams {
            s0: 1,
            s1: 1,
            p0: 1,
            p1: 1,
            d0: 1,
            d1: 1,
        },
        Conv2dParams {
            s0: 2,
            s1: 3,
            p0: 1,
            p1: 0,
            d0: 1,
            d1: 2,
        },
    ];
    for kt in [DType::F32, DType::F16] {
        for p in params {
            for (w, h, cin, n, kw, kh, cout) in [
                (10i64, 8i64, 3i64, 2i64, 3i64, 3i64, 4i64),
                (19, 17, 5, 1, 5, 2, 3),
                (4, 4, 1, 1, 1, 1, 1),
            ] {
                let name = format!(
                    "CONV_2D(type_kernel={kt},input=[{w},{h},{cin},{n}],kernel=[{kw},{kh},{cin},{cout}],s=[{},{}],p=[{},{}],d=[{},{}])",
                    p.s0, p.s1, p.p0, p.p1, p.d0, p.d1
                );
                let ow = backplane::conv_output_size(w, kw, p.s0, p.p0, p.d0);
                let oh = backplane::conv_output_size(h, kh, p.s1, p.p1, p.d1);
                if ow <= 0 || oh <= 0 {
                    continue;
                }
                let flops = 2.0 * (ow * oh * cout * n * kw * kh * cin) as f64;
                let bound = if kt == DType::F16 { 1e-6 } else { NMSE_DEFAULT };
                c.push_work(Op::Conv2d, name, bound, Work::Flops(flops), move |b| {
                    let k = b.input(kt, &[kw, kh, cin, cout])?;
                    let x = b.input(DType::F32, &[w, h, cin, n])?;
                    b.g.conv_2d(k, x, p)
                });
            }
            for out in [DType::F32, DType::F16] {
                let (w, h, cin, n, kw, kh) = (12i64, 9i64, 3i64, 2i64, 3i64, 3i64);
                let name = format!(
                    "IM2COL(type_kernel={kt},dst={out},input=[{w},{h},{cin},{n}],kernel=[{kw},{kh},{cin}],s=[{},{}],p=[{},{}],d=[{},{}],2d=1)",
                    p.s0, p.s1, p.p0, p.p1, p.d0, p.d1
                );
                c.push(Op::Im2col, name, bound_for(out), move |b| {
                    let k = b.input(kt, &[kw, kh, cin, 4])?;
                    let x = b.input(DType::F32, &[w, h, cin, n])?;
                    b.g.im2col(k, x, p, true, out)
                });
                let name = format!(
                    "IM2COL(type_kernel={kt},dst={out},input=[{w},{cin},{n}],kernel=[{kw},{cin}],s0={},p0={},d0={},2d=0)",
                    p.s0, p.p0, p.d0
                );
                c.push(Op::Im2col, name, bound_for(out), move |b| {
                    let k = b.input(kt, &[kw, cin, 4])?;
                    let x = b.input(DType::F32, &[w, cin, n])?;
                    b.g.im2col(k, x, p, false, out)
                });
            }
        }
    }
}

fn params(s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32) -> Conv2dParams {
    Conv2dParams {
        s0,
        s1,
        p0,
        p1,
        d0,
        d1,
    }
}

/// test-backend-ops' CONV_2D loop: stride x 1|3 (y 5), padding x 5 (y
/// 2|5), dilation 2 x 4; 1 or 25 input and 1 or 12 output channels;
/// kernels 1, 2, 3 and 11 on each side; inputs 1 or [`GRID_W`] wide and 1
/// or [`GRID_H`] high, batch 2; f32 and f16 kernels. Like ggml, a shape
/// whose output size formula (truncating) gives at least 1 is kept.
/// Input width and height of the grid: ggml's 141 x 133 cost our f64
/// reference 38 s; 45 x 43 still fits every kernel at every dilation (the
/// same 1,568 cases survive) at a tenth of the work.
const GRID_W: i64 = 45;

/// See [`GRID_W`].
const GRID_H: i64 = 43;

fn conv_2d_ggml_grid(c: &mut Catalogue) {
    let (s1, p0, d0, d1) = (5, 5, 2, 4);
    for s0 in [1, 3] {
        for p1 in [2, 5] {
            for cin in [1i64, 25] {
                for cout in [1i64, 12] {
                    for kh in [1i64, 2, 3, 11] {
                        for kw in [1i64, 2, 3, 11] {
                            for h in [1i64, GRID_H] {
                                for w in [1i64, GRID_W] {
                                    let p = params(s0, s1, p0, p1, d0, d1);
                                    let ow = conv_output_size(w, kw, s0, p0, d0);
                                    let oh = conv_output_size(h, kh, s1, p1, d1);
                                    if ow <= 0 || oh <= 0 {
                                        continue;
                                    }
                                    for kt in [DType::F32, DType::F16] {
                                        push_conv(c, kt, [w, h, cin, 2], [kw, kh, cin, cout], p);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Input of the later grid's 256 x 256 x 192 -> 96 case (21 GFLOP).
const GRID_BIG_INPUT: i64 = 8;

/// Input channels of the later grid's cwhn cases where ggml has 25 (the
/// f64 reference of the whole cwhn loop took 10 s at 25).
const GRID_CWHN_CIN: i64 = 5;

/// The later test-backend-ops' CONV_2D loops (llama.cpp 0c1e5709): the
/// first grid again with input and kernel laid out channel-most
/// (cwhn = 1: a permuted view whose logical shape is unchanged;
/// [`GRID_CWHN_CIN`] input channels where ggml has 25), a
/// 192 -> 96-channel 3 x 3 layer ([`GRID_BIG_INPUT`] square here, ggml
/// 256), odd output channel counts (17, 33, 65), and a kernel that is a
/// view at a one-element offset.
fn conv_2d_ggml_grid_layouts(c: &mut Catalogue) {
    let (s1, p0, d0, d1) = (5, 5, 2, 4);
    for s0 in [1, 3] {
        for p1 in [2, 5] {
            for cin in [1i64, GRID_CWHN_CIN] {
                for cout in [1i64, 12] {
                    for kh in [1i64, 2, 3, 11] {
                        for kw in [1i64, 2, 3, 11] {
                            for h in [1i64, GRID_H] {
                                for w in [1i64, GRID_W] {
                                    let p = params(s0, s1, p0, p1, d0, d1);
                                    let ow = conv_output_size(w, kw, s0, p0, d0);
                                    let oh = conv_output_size(h, kh, s1, p1, d1);
                                    if ow <= 0 || oh <= 0 {
                                        continue;
                                    }
                                    for kt in [DType::F32, DType::F16] {
                                        let (i, k) = ([w, h, cin, 2], [kw, kh, cin, cout]);
                                        push_conv_ext(c, kt, i, k, p, true, 0);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for kt in [DType::F32, DType::F16] {
        for cwhn in [false, true] {
            let n = GRID_BIG_INPUT;
            let p = params(1, 1, 1, 1, 1, 1);
            push_conv_ext(c, kt, [n, n, 192, 1], [3, 3, 192, 96], p, cwhn, 0);
        }
    }
    let f16 = DType::F16;
    push_conv_ext(
        c,
        f16,
        [19, 17, 8, 2],
        [3, 3, 8, 65],
        params(1, 1, 1, 1, 1, 1),
        false,
        0,
    );
    push_conv_ext(
        c,
        f16,
        [19, 17, 16, 3],
        [3, 3, 16, 33],
        params(2, 3, 4, 2, 2, 1),
        false,
        0,
    );
    push_conv_ext(
        c,
        f16,
        [13, 11, 16, 3],
        [1, 1, 16, 33],
        params(1, 1, 0, 0, 1, 1),
        false,
        0,
    );
    push_conv_ext(
        c,
        f16,
        [19, 17, 8, 2],
        [3, 3, 8, 17],
        params(1, 1, 1, 1, 1, 1),
        false,
        1,
    );
}

/// A CONV_2D case with ggml's cwhn layout (input stored [C, W, H, N] and
/// kernel [Cout, Cin, KW, KH], both permuted back) and its kernel offset
/// (the kernel a view one element into a larger tensor).
fn push_conv_ext(
    c: &mut Catalogue,
    kt: DType,
    input: [i64; 4],
    kernel: [i64; 4],
    p: Conv2dParams,
    cwhn: bool,
    kernel_offset: i64,
) {
    if !cwhn && kernel_offset == 0 {
        return push_conv(c, kt, input, kernel, p);
    }
    let name = format!(
        "CONV_2D(ne_input=[{}],ne_kernel=[{}],type_kernel={kt},s=[{},{}],p=[{},{}],d=[{},{}],cwhn={},kernel_offset={kernel_offset})",
        dims(&input),
        dims(&kernel),
        p.s0,
        p.s1,
        p.p0,
        p.p1,
        p.d0,
        p.d1,
        cwhn as i32
    );
    let ow = conv_output_size(input[0], kernel[0], p.s0, p.p0, p.d0);
    let oh = conv_output_size(input[1], kernel[1], p.s1, p.p1, p.d1);
    let flops = 2.0 * (ow * oh * kernel[3] * input[3] * kernel[0] * kernel[1] * kernel[2]) as f64;
    let bound = if kt == DType::F16 { 1e-6 } else { NMSE_DEFAULT };
    c.push_work(Op::Conv2d, name, bound, Work::Flops(flops), move |b| {
        let uni = Fill::Uniform(-1.0, 1.0);
        let k = if cwhn {
            b.permuted(kt, kernel, [3, 2, 0, 1], uni)?
        } else if kernel_offset > 0 {
            let n: i64 = kernel.iter().product();
            let storage = b.input_with(kt, &[n + kernel_offset], uni)?;
            let es = kt.type_size() as u64;
            let nb1 = kernel[0] as u64 * es;
            let nb = [
                nb1,
                nb1 * kernel[1] as u64,
                nb1 * (kernel[1] * kernel[2]) as u64,
            ];
            b.g.view(storage, &kernel, &nb, kernel_offset as u64 * es)?
        } else {
            b.input(kt, &kernel)?
        };
        let x = if cwhn {
            b.permuted(DType::F32, input, [2, 0, 1, 3], uni)?
        } else {
            b.input(DType::F32, &input)?
        };
        b.g.conv_2d(k, x, p)
    });
}

fn push_conv(c: &mut Catalogue, kt: DType, input: [i64; 4], kernel: [i64; 4], p: Conv2dParams) {
    let name = format!(
        "CONV_2D(ne_input=[{}],ne_kernel=[{}],type_kernel={kt},s=[{},{}],p=[{},{}],d=[{},{}])",
        dims(&input),
        dims(&kernel),
        p.s0,
        p.s1,
        p.p0,
        p.p1,
        p.d0,
        p.d1
    );
    let ow = conv_output_size(input[0], kernel[0], p.s0, p.p0, p.d0);
    let oh = conv_output_size(input[1], kernel[1], p.s1, p.p1, p.d1);
    let flops = 2.0 * (ow * oh * kernel[3] * input[3] * kernel[0] * kernel[1] * kernel[2]) as f64;
    let bound = if kt == DType::F16 { 1e-6 } else { NMSE_DEFAULT };
    c.push_work(Op::Conv2d, name, bound, Work::Flops(flops), move |b| {
        let k = b.input(kt, &kernel)?;
        let x = b.input(DType::F32, &input)?;
        b.g.conv_2d(k, x, p)
    });
}

#[allow(clippy::too_many_arguments)]
fn push_im2col(
    c: &mut Catalogue,
    kt: DType,
    out: DType,
    input: [i64; 4],
    kernel: [i64; 4],
    p: Conv2dParams,
    is_2d: bool,
) {
    let name = format!(
        "IM2COL(type_input=f32,type_kernel={kt},dst_type={out},ne_input=[{}],ne_kernel=[{}],s=[{},{}],p=[{},{}],d=[{},{}],is_2D={is_2d})",
        dims(&input),
        dims(&kernel),
        p.s0,
        p.s1,
        p.p0,
        p.p1,
        p.d0,
        p.d1
    );
    c.push(Op::Im2col, name, bound_for(out), move |b| {
        let k = b.input(kt, &kernel)?;
        let x = b.input(DType::F32, &input)?;
        b.g.im2col(k, x, p, is_2d, out)
    });
}

/// test-backend-ops' IM2COL cases: whisper's 1-D encoder conv_cases, a 1-D and a
/// 2-D stride / padding / dilation sweep, and 2-D batches of 32 to 2560.
fn im2col_ggml_grid(c: &mut Catalogue) {
    let (f32_, f16_) = (DType::F32, DType::F16);
    // 1-D: y stride and dilation are unused (ggml passes 0; backplane wants 1).
    let p1d = params(1, 1, 1, 0, 1, 1);
    for (kt, out) in [(f32_, f32_), (f16_, f32_), (f16_, f16_)] {
        push_im2col(c, kt, out, [3000, 128, 1, 1], [3, 128, 1280, 1], p1d, false);
    }
    for s0 in [1, 3] {
        for p0 in [0, 3] {
            for d0 in [1, 3] {
                let p = params(s0, 1, p0, 0, d0, 1);
                push_im2col(c, f32_, f32_, [20, 2, 2, 1], [3, 2, 2, 1], p, false);
            }
        }
    }
    let p2d = params(1, 1, 1, 1, 1, 1);
    for (kt, out) in [(f32_, f32_), (f16_, f32_), (f16_, f16_)] {
        push_im2col(c, kt, out, [10, 10, 3, 1], [3, 3, 3, 1], p2d, true);
    }
    for s0 in [1, 3] {
        for s1 in [1, 3] {
            for p0 in [0, 3] {
                for p1 in [0, 3] {
                    for d0 in [1, 3] {
                        for d1 in [1, 3] {
                            let p = params(s0, s1, p0, p1, d0, d1);
                            push_im2col(c, f32_, f32_, [20, 20, 2, 2], [3, 3, 2, 2], p, true);
                        }
                    }
                }
            }
        }
    }
    for n in [32i64, 1024, 2048, 2560] {
        for ch in [1i64, 2] {
            push_im2col(c, f16_, f16_, [12, 12, ch, n], [3, 3, ch, n], p2d, true);
        }
    }
    let p = params(1, 1, 0, 0, 1, 1);
    push_im2col(c, f16_, f16_, [5, 5, 1, 32], [3, 4, 1, 32], p, true);
}
