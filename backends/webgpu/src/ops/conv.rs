//! Convolutions, as ggml: CONV_2D (direct; f32 or f16 kernel, f32 input
//! and output) and IM2COL (1-D and 2-D; f32 input, f32 or f16 output).
//! Kernels: `shaders/wgsl/{conv2d,im2col}.wgsl`.
//! Convolution op_params: s0, s1, p0, p1, d0, d1 (x then y), and for
//! IM2COL [6] = 1 when 2-D.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{check_layout, dtype, elem_layout, ne_u32, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

/// Workgroup size of the one-invocation-per-output kernels.
const WG: u32 = 256;

/// Strides, paddings and dilations: `[s0, s1, p0, p1, d0, d1]` (the op
/// contract has checked them: positive strides and dilations, paddings not
/// negative).
fn conv_params(d: &TensorDesc) -> Result<[u32; 6], String> {
    let p: [i32; 6] = std::array::from_fn(|i| d.op_params[i]);
    let mut out = [0u32; 6];
    for (o, v) in out.iter_mut().zip(p) {
        *o = u32::try_from(v).map_err(|_| format!("conv parameters {p:?} must not be negative"))?;
    }
    Ok(out)
}

/// Whether the kernels run this node: the types they implement and the
/// layouts they index (the op contract has checked the shapes and
/// parameters).
pub fn supports(_facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    match d.op().map_err(|e| e.to_string())? {
        Op::Conv2d => {
            let (k, x) = (src(graph, node, 0)?, src(graph, node, 1)?);
            want_type("kernel", k, &[DType::F32, DType::F16])?;
            check_layout(&[("kernel", k), ("input", x), ("dst", d)])
        }
        Op::Im2col => {
            let x = src(graph, node, 1)?;
            if d.op_params[6] == 0 && x.ne[3] != 1 {
                return Err(format!(
                    "1-D input {:?} must have ne3 = 1 (a batch of 3-d inputs)",
                    x.ne
                ));
            }
            check_layout(&[("input", x), ("dst", d)])
        }
        op => Err(format!("{op} is not a convolution op")),
    }
}

/// Records the kernel of `graph[node]`.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::Conv2d => encode_conv2d(e, node),
        Op::Im2col => encode_im2col(e, node),
        op => Err(format!("{op} is not a convolution op")),
    }
}

fn encode_conv2d(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ik, ix) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (bk, k_off, ks) = elem_layout(e, ik)?;
    let (bx, x_off, xs) = elem_layout(e, ix)?;
    let (bd, d_off, ds) = elem_layout(e, node)?;
    let [kw, kh, cin, _] = ne_u32(&g[ik])?;
    let [iw, ih, _, _] = ne_u32(&g[ix])?;
    let [ow, oh, cout, n] = ne_u32(d)?;
    let [s0, s1, p0, p1, d0, d1] = conv_params(d)?;
    let params = Params::new()
        .u32x4([ow, oh, cout, n])
        .u32x4([iw, ih, cin, kw])
        .u32(kh)
        .u32x4([s0, s1, p0, p1])
        .u32(d0)
        .u32(d1)
        .u32(k_off)
        .u32x4(ks)
        .u32(x_off)
        .u32x4(xs)
        .u32(d_off)
        .u32x4(ds);
    let key = PipelineKey::new("conv2d", "")
        .ty("KERNEL", type_name(dtype(&g[ik])?))
        .wg(WG);
    let total = d.nelements() as u64;
    e.dispatch_linear(
        &key,
        Checks::On,
        &[bk, bx, bd],
        &params,
        total.div_ceil(u64::from(WG)),
    )
}

fn encode_im2col(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ik, ix) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (bx, x_off, xs) = elem_layout(e, ix)?;
    let (bd, d_off, ds) = elem_layout(e, node)?;
    let [s0, s1, p0, p1, d0, d1] = conv_params(d)?;
    let kn = ne_u32(&g[ik])?;
    let xn = ne_u32(&g[ix])?;
    let dn = ne_u32(d)?;
    // 2-D: input [W, H, C, N] -> [C*KH*KW, OW, OH, N]; 1-D: [W, C, N] ->
    // [C*KW, OW, N], run as 2-D with KH = IH = OH = 1.
    let (kh, ih, oh, n, x_sh, x_sc, x_sn, d_s2, d_s3) = if d.op_params[6] == 1 {
        (
            kn[1], xn[1], dn[2], dn[3], xs[1], xs[2], xs[3], ds[2], ds[3],
        )
    } else {
        (1, 1, 1, dn[2], 0, xs[1], xs[2], 0, ds[2])
    };
    let params = Params::new()
        .u32x4([dn[0], dn[1], oh, n])
        .u32x4([kn[0], kh, xn[0], ih])
        .u32x4([s0, s1, p0, p1])
        .u32(d0)
        .u32(d1)
        .u32(x_off)
        .u32x4([xs[0], x_sh, x_sc, x_sn])
        .u32(d_off)
        .u32x4([ds[0], ds[1], d_s2, d_s3]);
    let key = PipelineKey::new("im2col", "")
        .ty("DST", type_name(dtype(d)?))
        .wg(WG);
    let total = d.nelements() as u64;
    e.dispatch_linear(
        &key,
        Checks::On,
        &[bx, bd],
        &params,
        total.div_ceil(u64::from(WG)),
    )
}
