//! Convolutions and state-space ops, as ggml: SSM_CONV and SSM_SCAN
//! (Mamba-1 and Mamba-2, f32), CONV_2D (direct; f32 or f16 kernel, f32
//! input and output) and IM2COL (1-D and 2-D; f32 input, f32 or f16
//! output). Kernels: `shaders/wgsl/{ssm_conv,ssm_scan,conv2d,im2col}.wgsl`.
//! Convolution op_params: s0, s1, p0, p1, d0, d1 (x then y), and for
//! IM2COL [6] = 1 when 2-D.

use backplane_abi::{DType, Op, TensorDesc};
use backplane_shaders::PipelineKey;

use crate::encode::{Encoder, Params};
use crate::facts::Facts;
use crate::ops::{dtype, nb_elems, ne_u32, src, src_index, type_name, want_type};
use crate::pipelines::Checks;

/// Workgroup size of the one-invocation-per-output kernels.
const WG: u32 = 256;

/// Largest workgroup of the scan.
const SCAN_WG: u32 = 128;

/// Lanes summing one channel's state in the scan, at most.
const SCAN_LANES: u32 = 32;

/// Checks the element strides and sizes of each named tensor.
fn check_layout(tensors: &[(&str, &TensorDesc)]) -> Result<(), String> {
    for (what, t) in tensors {
        let elem = dtype(t)?.type_size() as u64;
        nb_elems(t, elem).map_err(|e| format!("{what}: {e}"))?;
        ne_u32(t).map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

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
        Op::SsmConv => {
            let (x, c) = (src(graph, node, 0)?, src(graph, node, 1)?);
            check_layout(&[("sx", x), ("c", c), ("dst", d)])
        }
        Op::SsmScan => supports_scan(graph, node),
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

/// SSM_SCAN: dense result of u32-indexable size, element strides.
fn supports_scan(graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = &graph[node];
    let names = ["s", "x", "dt", "A", "B", "C", "ids"];
    let mut all: Vec<(&str, &TensorDesc)> = Vec::with_capacity(8);
    for (i, name) in names.iter().enumerate() {
        all.push((name, src(graph, node, i)?));
    }
    if !d.is_contiguous() {
        return Err(format!("dst {:?} must be dense", d.ne));
    }
    all.push(("dst", d));
    check_layout(&all)?;
    u32::try_from(d.nelements())
        .map_err(|_| format!("dst of {} values does not fit u32 indices", d.nelements()))?;
    Ok(())
}

/// Records the kernel of `graph[node]`.
pub fn encode(e: &mut Encoder, node: usize) -> Result<(), String> {
    match e.graph[node].op().map_err(|x| x.to_string())? {
        Op::SsmConv => encode_ssm_conv(e, node),
        Op::SsmScan => encode_ssm_scan(e, node),
        Op::Conv2d => encode_conv2d(e, node),
        Op::Im2col => encode_im2col(e, node),
        op => Err(format!("{op} is not a convolution op")),
    }
}

/// Element offset and strides of graph tensor `i`, with its binding.
fn layout(e: &Encoder, i: usize) -> Result<(crate::encode::Binding, u32, [u32; 4]), String> {
    let t = &e.graph[i];
    let elem = dtype(t)?.type_size() as u64;
    let b = e.binding(i)?;
    let off = b.elem_offset(elem)?;
    Ok((b, off, nb_elems(t, elem)?))
}

fn encode_ssm_conv(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let (ix, ic) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (bx, x_off, xs) = layout(e, ix)?;
    let (bc, c_off, cs) = layout(e, ic)?;
    let (bd, d_off, ds) = layout(e, node)?;
    let [n_r, n_t, n_s, _] = ne_u32(&g[node])?;
    let params = Params::new()
        .u32x4([n_r, n_t, n_s, g[ic].ne[0] as u32])
        .u32x4([x_off, xs[0], xs[1], xs[2]])
        .u32(c_off)
        .u32(cs[0])
        .u32(cs[1])
        .u32x4([d_off, ds[0], ds[1], ds[2]]);
    let key = PipelineKey::new("ssm_conv", "").wg(WG);
    let n = u64::from(n_r) * u64::from(n_t) * u64::from(n_s);
    e.dispatch_linear(
        &key,
        Checks::On,
        &[bx, bc, bd],
        &params,
        n.div_ceil(u64::from(WG)),
    )
}

fn encode_ssm_scan(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let idx: Vec<usize> = (0..7)
        .map(|i| src_index(g, node, i))
        .collect::<Result<_, _>>()?;
    let mut bindings = Vec::with_capacity(9);
    let mut lay = Vec::with_capacity(8);
    for &i in idx.iter().chain(std::iter::once(&node)) {
        let (b, off, st) = layout(e, i)?;
        bindings.push(b);
        lay.push((off, st));
    }
    let (s, x, a, b) = (&g[idx[0]], &g[idx[1]], &g[idx[3]], &g[idx[4]]);
    let [d_state, head_dim, n_head, n_slots] = ne_u32(s)?;
    let [_, _, n_tok, n_seqs] = ne_u32(x)?;
    let n_group = b.ne[1] as u32;
    let y_len = x.nelements() as u32;
    let lanes = d_state.next_power_of_two().min(SCAN_LANES);
    let jper = d_state.div_ceil(lanes);
    let wg_max = SCAN_WG.min(e.facts().max_invocations.max(lanes));
    let rows = (wg_max / lanes).min(head_dim.next_power_of_two()).max(1);
    let (ls, lx, ldt, la, lb, lc, lids, ld) = (
        lay[0], lay[1], lay[2], lay[3], lay[4], lay[5], lay[6], lay[7],
    );
    let a_s0 = if a.ne[0] == 1 { 0 } else { la.1[0] };
    let mut key = PipelineKey::new("ssm_scan", "")
        .wg(rows * lanes)
        .define("TJ", lanes.to_string())
        .define("JPER", jper.to_string())
        .define("ROWS", rows.to_string());
    // The error flag is one binding more; without room, a bad id reads slot 0.
    if bindings.len() < e.facts().max_storage_buffers as usize {
        key = key.define("HAS_ERROR_FLAG", "");
        bindings.push(e.error_flag());
    }
    let params = Params::new()
        .u32x4([d_state, head_dim, n_head, n_tok])
        .u32x4([n_head / n_group, n_slots, node as u32 + 1, y_len])
        .u32(ls.0)
        .u32x4(ls.1)
        .u32(lx.0)
        .u32x4(lx.1)
        .u32x4([ldt.0, ldt.1[0], ldt.1[1], ldt.1[2]])
        .u32(la.0)
        .u32(a_s0)
        .u32(la.1[1])
        .u32(lb.0)
        .u32x4(lb.1)
        .u32(lc.0)
        .u32x4(lc.1)
        .u32(lids.0)
        .u32(lids.1[0])
        .u32(ld.0);
    let groups = [head_dim.div_ceil(rows), n_head, n_seqs];
    e.dispatch(&key, Checks::On, &bindings, &params, groups)
}

fn encode_conv2d(e: &mut Encoder, node: usize) -> Result<(), String> {
    let g = e.graph;
    let d = &g[node];
    let (ik, ix) = (src_index(g, node, 0)?, src_index(g, node, 1)?);
    let (bk, k_off, ks) = layout(e, ik)?;
    let (bx, x_off, xs) = layout(e, ix)?;
    let (bd, d_off, ds) = layout(e, node)?;
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
    let (bx, x_off, xs) = layout(e, ix)?;
    let (bd, d_off, ds) = layout(e, node)?;
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
