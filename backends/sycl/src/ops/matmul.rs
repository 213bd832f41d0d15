//! MUL_MAT; kernels in `kernels/mul_mat.cpp`, path chosen by
//! [`crate::policy::choose`] from the type, the shape and the device's
//! architecture.
//!
//! Weights in ggml's layout that the policy wants reordered are reordered
//! in scratch memory at each product. Weights stored reordered (a
//! `<device>_reorder` buffer, [`crate::reorder`]) are read as they are by
//! the reordered mat-vec for single columns; any other product converts
//! them back to ggml's layout in scratch first (`k_unreorder`) and runs the
//! path the policy chooses, as ggml-sycl dequantizes its reordered weights
//! for wide products.

use backplane_abi::{MAX_SRC, TensorDesc};

use super::{Exec, dtype};
use crate::kernels::{Ptrs, Source};
use crate::policy::{self, MulMatPath, MulMatShape, Toggles};
use crate::runtime::DeviceInfo;

type Srcs<'a> = [Option<&'a TensorDesc>; MAX_SRC];

/// Work-group of the mat-vec kernels (one group per output row).
const MV_WG: usize = 64;
/// A GEMM kernel's tiling, as its template arguments in
/// `kernels/mul_mat.cpp`: a work-group of `gms * gns` sub-blocks of
/// [`GEMM_LANES`] work-items (which split K), each sub-block computing
/// `tm x tn` outputs, so a group covers a BM x BN tile of dst.
struct GemmTile {
    name: &'static str,
    /// Sub-blocks along M.
    gms: usize,
    /// Sub-blocks along N.
    gns: usize,
    /// Rows of dst per sub-block.
    tm: usize,
    /// Columns of dst per sub-block.
    tn: usize,
}

/// Work-items per GEMM sub-block (`SG` in the kernel).
const GEMM_LANES: usize = 8;
/// `k_gemm`: 16 x 16 tiles, for any N.
const GEMM: GemmTile = GemmTile {
    name: "k_gemm",
    gms: 4,
    gns: 8,
    tm: 4,
    tn: 2,
};
/// `k_gemm_narrow`: 64 x 1 tiles, for N up to [`NARROW_MAX_N`].
const GEMM_NARROW: GemmTile = GemmTile {
    name: "k_gemm_narrow",
    gms: 16,
    gns: 1,
    tm: 4,
    tn: 1,
};
/// Largest N that runs `k_gemm_narrow`.
const NARROW_MAX_N: usize = 4;

fn shape(d0: &TensorDesc, d1: &TensorDesc) -> Result<MulMatShape, String> {
    Ok(MulMatShape {
        src0: dtype(d0)?,
        src1: dtype(d1)?,
        k: d0.ne[0],
        m: d0.ne[1],
        n: d1.ne[1],
        batch: [d1.ne[2], d1.ne[3]],
        src0_dense_rows: d0.is_contiguous_rows(),
    })
}

pub(super) fn supports(src: &Srcs<'_>, info: &DeviceInfo, toggles: Toggles) -> Result<(), String> {
    let (a, b) = (
        src[0].ok_or("MUL_MAT needs a")?,
        src[1].ok_or("MUL_MAT needs b")?,
    );
    // The op contract has checked the types and shapes.
    let s = shape(a, b)?;
    if s.src0.is_quantized() && !s.src0_dense_rows {
        return Err("quantized weights must have dense rows".into());
    }
    policy::choose(&info.arch, toggles, &s).map(|_| ())
}

/// Bytes of `b`'s columns as q8_1 blocks, and the scratch they take.
fn q8_sizes(b: &TensorDesc) -> (usize, usize) {
    let batches = (b.ne[2] * b.ne[3]) as usize;
    let q8_bytes = (b.ne[0] / 32 * 36) as usize * b.ne[1] as usize * batches;
    (q8_bytes, q8_bytes.next_multiple_of(256))
}

fn log_path(x: &Exec<'_>, s: &MulMatShape, path: &str) {
    if x.settings.log {
        eprintln!(
            "backplane-sycl: MUL_MAT {} k={} m={} n={} -> {path}",
            s.src0.name(),
            s.k,
            s.m,
            s.n,
        );
    }
}

pub(super) fn mul_mat(x: &Exec<'_>, i: usize) -> Result<(), String> {
    if x.weights_reordered(i) {
        return mul_mat_stored_reordered(x, i);
    }
    mul_mat_ggml(x, i, x.node_ptrs(i)?, 0)
}

/// MUL_MAT over weights stored reordered: the reordered mat-vec straight
/// from them for one f32 column, else a ggml-layout copy in scratch.
fn mul_mat_stored_reordered(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let (a, b) = (
        x.src(i, 0).ok_or("MUL_MAT needs a")?,
        x.src(i, 1).ok_or("MUL_MAT needs b")?,
    );
    let r = crate::reorder::Reorder::for_tensor(a)?;
    let s = shape(a, b)?;
    if x.graph[i].nelements() == 0 {
        return Ok(());
    }
    let args = x.args(i);
    let mut ptrs = x.node_ptrs(i)?;
    let (q8_bytes, q8_region) = q8_sizes(b);
    if s.src1 == backplane_abi::DType::F32 && s.n == 1 && s.batch == [1, 1] {
        log_path(x, &s, "mmvq-reorder (stored reordered)");
        let scratch = x.scratch.get(&x.ctx.queue, q8_region)?;
        let mut qp = ptrs;
        qp[0] = scratch;
        x.launch_ptrs(Source::MulMat, "k_quantize_q8_1", q8_bytes / 36, qp, &args)?;
        ptrs[3] = scratch;
        ptrs[4] = ptrs[1];
        return x.launch(
            Source::MulMat,
            "k_mmvq_reordered",
            [1, s.m as usize, MV_WG],
            [1, 1, MV_WG],
            ptrs,
            &args,
        );
    }
    // Reserve the copy and whatever the chosen path takes after it at
    // once: growing the scratch later would free the copy.
    let copy_region = r.bytes().next_multiple_of(256);
    let scratch = x
        .scratch
        .get(&x.ctx.queue, copy_region + q8_region + a.nbytes() as usize)?;
    log_path(x, &s, "k_unreorder to scratch, then the path below");
    let mut up = ptrs;
    up[0] = scratch;
    x.launch_ptrs(Source::MulMat, "k_unreorder", r.blocks, up, &args)?;
    ptrs[1] = scratch;
    mul_mat_ggml(x, i, ptrs, copy_region)
}

/// MUL_MAT over weights in ggml's layout at `ptrs[1]`, by the policy's
/// path; scratch memory from byte `reserved` on is free to use.
fn mul_mat_ggml(x: &Exec<'_>, i: usize, ptrs: Ptrs, reserved: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let (a, b) = (
        x.src(i, 0).ok_or("MUL_MAT needs a")?,
        x.src(i, 1).ok_or("MUL_MAT needs b")?,
    );
    let s = shape(a, b)?;
    let path = policy::choose(&x.ctx.info.arch, x.settings.toggles, &s)?;
    log_path(x, &s, path.name());
    if d.nelements() == 0 {
        return Ok(());
    }
    let batches = (b.ne[2] * b.ne[3]) as usize;
    let (m, n) = (a.ne[1] as usize, b.ne[1] as usize);
    let args = x.args(i);
    let node_ptrs = ptrs;
    let mut ptrs = ptrs;
    match path {
        MulMatPath::Dmmv => x.launch(
            Source::MulMat,
            "k_dmmv",
            [batches, m, MV_WG],
            [1, 1, MV_WG],
            ptrs,
            &args,
        ),
        MulMatPath::Mmvq | MulMatPath::MmvqReordered => {
            let (q8_bytes, q8_region) = q8_sizes(b);
            let reordered = path == MulMatPath::MmvqReordered;
            let w_bytes = if reordered { a.nbytes() as usize } else { 0 };
            // The first `reserved` bytes of the scratch are the caller's.
            let scratch = x
                .scratch
                .get(&x.ctx.queue, reserved + q8_region + w_bytes)?;
            let scratch = scratch.wrapping_add(reserved);
            ptrs[0] = scratch;
            x.launch_ptrs(
                Source::MulMat,
                "k_quantize_q8_1",
                q8_bytes / 36,
                ptrs,
                &args,
            )?;
            ptrs = node_ptrs;
            ptrs[3] = scratch;
            if !reordered {
                return x.launch(
                    Source::MulMat,
                    "k_mmvq",
                    [batches, m, MV_WG],
                    [1, 1, MV_WG],
                    ptrs,
                    &args,
                );
            }
            // SAFETY: offset inside the scratch block sized above.
            let w = unsafe { scratch.add(q8_region) };
            let blocks = (a.ne[0] / 32 * a.ne[1]) as usize;
            let mut rp = ptrs;
            rp[0] = w;
            x.launch_ptrs(Source::MulMat, "k_reorder", blocks, rp, &args)?;
            ptrs[4] = w;
            x.launch(
                Source::MulMat,
                "k_mmvq_reordered",
                [1, m, MV_WG],
                [1, 1, MV_WG],
                ptrs,
                &args,
            )
        }
        MulMatPath::Gemm => {
            // Quantized weights are dequantized tile by tile inside the kernel.
            let t = if n <= NARROW_MAX_N {
                &GEMM_NARROW
            } else {
                &GEMM
            };
            let (bm, bn, g) = (t.gms * t.tm, t.gns * t.tn, t.gms * t.gns);
            x.launch(
                Source::MulMat,
                t.name,
                [batches, m.div_ceil(bm) * g, n.div_ceil(bn) * GEMM_LANES],
                [1, g, GEMM_LANES],
                ptrs,
                &args,
            )
        }
    }
}
