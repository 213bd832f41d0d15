//! MUL_MAT and MUL_MAT_ID.
//!
//! As ggml does, each node first converts all activation rows (`src1`) to the
//! weight type's [`vec_dot_type`] once, into the backend's scratch buffer
//! ([`convert`]), then splits the output over the thread pool in blocks of
//! weight rows x activation columns, each computed by the SIMD tile kernel
//! chosen for this CPU ([`crate::simd`]) with K cut into cache-sized panels
//! ([`drive`]). Weights with a packed GEMM take the packed-panel path
//! instead when there are many columns ([`packed`]), with the activations
//! left in f32 (float weights) or quantized to q8_0 (q4_0, q8_0) or q8_K
//! (q4_K).

mod convert;
mod drive;
mod packed;

use backplane_abi::{DType, MAX_SRC, Op, TensorDesc};
use backplane_quant::vec_dot_type;

use crate::error::CpuError;
use crate::ops::{NodeCtx, SharedPtr};
use crate::simd;

/// Whether MUL_MAT / MUL_MAT_ID can run on these operands.
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    // Fast path: a plain yes without building anything; the detailed
    // checks below only run to explain a refusal.
    if op == Op::MulMat && mul_mat_ok(dst, src) {
        return Ok(());
    }
    match op {
        Op::MulMat => check_mul_mat(dst, src).map(|_| ()),
        Op::MulMatId => check_mul_mat_id(dst, src).map(|_| ()),
        _ => Err(format!("{op} is not a mat-mul")),
    }
}

/// Whether [`check_mul_mat`] would accept these operands: the same
/// conditions (never weaker), with no allocation and no copies, for the
/// success path of [`supports`] (called per node across the plugin ABI).
#[inline]
fn mul_mat_ok(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> bool {
    let (Some(a), Some(b)) = (src[0], src[1]) else {
        return false;
    };
    let (Ok(ta), Ok(tb)) = (a.dtype(), b.dtype()) else {
        return false;
    };
    // Every MAT_TYPES block size is a power of two.
    let bs = ta.block_size() as i64;
    dst.dtype == DType::F32.code()
        && simd::MAT_TYPES.contains(&ta)
        && tb.is_float()
        && a.ne.iter().chain(&b.ne).chain(&dst.ne).all(|&n| n >= 0)
        && a.ne[0] == b.ne[0]
        && bs.count_ones() == 1
        && a.ne[0] & (bs - 1) == 0
        && a.nb[0] == ta.type_size() as u64
        && dst.nb[0] == 4
        && (2..4).all(|d| a.ne[d] == 1 || (a.ne[d] != 0 && b.ne[d] % a.ne[d] == 0))
        && dst.ne == [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
}

/// Shapes and types of a checked MUL_MAT / MUL_MAT_ID.
#[derive(Clone, Copy, Debug)]
struct Shapes {
    ta: DType,
    tb: DType,
    a: TensorDesc,
    b: TensorDesc,
}

fn dtype_of(d: &TensorDesc, what: &str) -> Result<DType, String> {
    d.dtype().map_err(|e| format!("{what}: {e}"))
}

fn check_common(dst: &TensorDesc, a: &TensorDesc, b: &TensorDesc) -> Result<Shapes, String> {
    let (ta, tb, td) = (
        dtype_of(a, "src0")?,
        dtype_of(b, "src1")?,
        dtype_of(dst, "dst")?,
    );
    if !simd::MAT_TYPES.contains(&ta) {
        return Err(format!("src0 type {ta} has no CPU mat-mul kernel"));
    }
    if !tb.is_float() {
        return Err(format!("src1 type {tb} must be f32, f16 or bf16"));
    }
    if td != DType::F32 {
        return Err(format!("dst type {td} must be f32"));
    }
    for (name, d) in [("src0", a), ("src1", b), ("dst", dst)] {
        if d.ne.iter().any(|&n| n < 0) {
            return Err(format!("{name} has a negative dimension {:?}", d.ne));
        }
    }
    if a.ne[0] != b.ne[0] {
        return Err(format!(
            "src0 row length {} != src1 row length {}",
            a.ne[0], b.ne[0]
        ));
    }
    if a.ne[0] % ta.block_size() as i64 != 0 {
        return Err(format!(
            "row length {} is not a multiple of {ta}'s block size {}",
            a.ne[0],
            ta.block_size()
        ));
    }
    if a.nb[0] != ta.type_size() as u64 {
        return Err(format!(
            "src0 ({ta}) rows must be contiguous (nb0 = {}, expected {})",
            a.nb[0],
            ta.type_size()
        ));
    }
    if dst.nb[0] != 4 {
        return Err(format!("dst rows must be contiguous (nb0 = {})", dst.nb[0]));
    }
    Ok(Shapes {
        ta,
        tb,
        a: *a,
        b: *b,
    })
}

fn check_mul_mat(dst: &TensorDesc, src: &[Option<&TensorDesc>; MAX_SRC]) -> Result<Shapes, String> {
    let (Some(a), Some(b)) = (src[0], src[1]) else {
        return Err("MUL_MAT needs two sources".into());
    };
    let s = check_common(dst, a, b)?;
    for d in 2..4 {
        if a.ne[d] == 0 || b.ne[d] % a.ne[d] != 0 {
            return Err(format!(
                "src1 dim {d} ({}) is not a multiple of src0's ({})",
                b.ne[d], a.ne[d]
            ));
        }
    }
    let want = [a.ne[1], b.ne[1], b.ne[2], b.ne[3]];
    if dst.ne != want {
        return Err(format!("dst shape {:?} != expected {want:?}", dst.ne));
    }
    Ok(s)
}

fn check_mul_mat_id(
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<Shapes, String> {
    let (Some(a), Some(b), Some(ids)) = (src[0], src[1], src[2]) else {
        return Err("MUL_MAT_ID needs three sources (experts, b, ids)".into());
    };
    let s = check_common(dst, a, b)?;
    if dtype_of(ids, "ids")? != DType::I32 || ids.nb[0] != 4 {
        return Err("ids must be i32 with contiguous rows".into());
    }
    if a.ne[3] != 1 || b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1 {
        return Err("experts and src1 must be 3-d, ids 2-d".into());
    }
    let (n_used, t) = (ids.ne[0], ids.ne[1]);
    if b.ne[2] != t || b.ne[1] == 0 || n_used % b.ne[1] != 0 {
        return Err(format!("src1 {:?} does not fit ids {:?}", b.ne, ids.ne));
    }
    let want = [a.ne[1], n_used, t, 1];
    if dst.ne != want {
        return Err(format!("dst shape {:?} != expected {want:?}", dst.ne));
    }
    Ok(s)
}

/// The kernel for `ta`, or an `Unsupported` error.
fn kernel_for(ctx: &NodeCtx<'_>, ta: DType) -> Result<&'static simd::MatKernel, CpuError> {
    simd::kernels()
        .mat(ta)
        .ok_or_else(|| ctx.unsupported(format!("no kernel for {ta}")))
}

/// Runs MUL_MAT.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run_mul_mat(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let s = check_mul_mat(ctx.dst, &ctx.src).map_err(|r| ctx.unsupported(r))?;
    if ctx.dst.nelements() == 0 {
        return Ok(());
    }
    let kern = if ctx.src_repacked[0] {
        crate::repack::Repack::for_tensor(&s.a).map_err(|r| ctx.unsupported(r))?;
        simd::kernels()
            .repacked(s.ta)
            .ok_or_else(|| ctx.unsupported(format!("no repacked {} kernel on this CPU", s.ta)))?
    } else {
        kernel_for(ctx, s.ta)?
    };
    let gemm = kern.gemm.filter(|g| ctx.dst.ne[1] as usize >= g.min_n);
    let (vt, pack) = match &gemm {
        Some(g) => (
            g.vt,
            packed::pack_bytes(g) * ctx.n_threads
                + packed::scale_bytes(g, &s.b)
                + packed::columns_bytes(g, &s.b),
        ),
        None => (vec_dot_type(s.ta), 0),
    };
    let mut scratch = ctx.scratch.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the caller guarantees src1 covers its tensor.
    let rows = unsafe { convert::activations(ctx, &s.b, s.tb, vt, pack, &mut scratch)? };
    let job = drive::MulMat {
        kern,
        ta: s.ta,
        vt,
        a: s.a,
        a_ptr: ctx.src_ptr[0],
        rows,
        dst: *ctx.dst,
        dst_ptr: ctx.dst_ptr,
    };
    match &gemm {
        // SAFETY: pointers cover their tensors; `rows` (in `g.vt`), the
        // per-thread packing space and the scale pairs live in the locked
        // scratch.
        Some(g) => unsafe { packed::run(ctx, &job, g, SharedPtr(job.rows.extra)) },
        // SAFETY: pointers cover their tensors; `rows` lives in the locked scratch.
        None => unsafe { drive::run(ctx, &job) },
    }
    Ok(())
}

/// Runs MUL_MAT_ID.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run_mul_mat_id(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let s = check_mul_mat_id(ctx.dst, &ctx.src).map_err(|r| ctx.unsupported(r))?;
    if ctx.dst.nelements() == 0 {
        return Ok(());
    }
    let ids = ctx.src(2)?;
    let kern = kernel_for(ctx, s.ta)?;
    let vt = vec_dot_type(s.ta);
    let n_experts = s.a.ne[2] as usize;
    let (n_used, n_tok) = (ids.ne[0] as usize, ids.ne[1] as usize);
    // Read and check every id before touching anything.
    let id_at = |slot: usize, t: usize| -> i32 {
        let off = slot as u64 * ids.nb[0] + t as u64 * ids.nb[1];
        // SAFETY: slot < ne0, t < ne1 and the caller guarantees ids covers its tensor.
        unsafe {
            ctx.src_ptr[2]
                .0
                .add(off as usize)
                .cast::<i32>()
                .read_unaligned()
        }
    };
    for t in 0..n_tok {
        for slot in 0..n_used {
            let e = id_at(slot, t);
            if e < 0 || e as usize >= n_experts {
                return Err(ctx.bad_input(format!(
                    "expert id {e} at ({slot}, {t}) out of range 0..{n_experts}"
                )));
            }
        }
    }
    let mut scratch = ctx.scratch.lock().unwrap_or_else(|e| e.into_inner());
    // Expert lists after the converted rows: counts, offsets, entries.
    let list_words = 2 * (n_experts + 1) + n_used * n_tok;
    // SAFETY: the caller guarantees src1 covers its tensor.
    let rows = unsafe { convert::activations(ctx, &s.b, s.tb, vt, list_words * 4, &mut scratch)? };
    // SAFETY: `activations` reserved `list_words` u32 words at `rows.extra`.
    let words = unsafe { std::slice::from_raw_parts_mut(rows.extra.cast::<u32>(), list_words) };
    let (start, entries) = words.split_at_mut(2 * (n_experts + 1));
    let (start, fill) = start.split_at_mut(n_experts + 1);
    start.fill(0);
    for t in 0..n_tok {
        for slot in 0..n_used {
            start[id_at(slot, t) as usize + 1] += 1;
        }
    }
    for e in 0..n_experts {
        start[e + 1] += start[e];
    }
    fill.copy_from_slice(start);
    for t in 0..n_tok {
        for slot in 0..n_used {
            let e = id_at(slot, t) as usize;
            entries[fill[e] as usize] = (t * n_used + slot) as u32;
            fill[e] += 1;
        }
    }
    let job = drive::MulMatId {
        kern,
        ta: s.ta,
        vt,
        a: s.a,
        a_ptr: ctx.src_ptr[0],
        rows,
        dst: *ctx.dst,
        dst_ptr: ctx.dst_ptr,
        n_used,
        e_b: s.b.ne[1] as usize,
        start,
        entries,
    };
    // SAFETY: pointers cover their tensors; the lists live in the locked scratch.
    unsafe { drive::run_id(ctx, &job) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast MUL_MAT check accepts exactly what the detailed one does.
    #[test]
    fn fast_check_matches_detailed() {
        let types = [DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::I32];
        let shapes: [[i64; 4]; 5] = [
            [256, 4, 1, 1],
            [256, 4, 2, 3],
            [512, 4, 2, 1],
            [255, 4, 1, 1],
            [256, 0, 0, 1],
        ];
        let mut n = 0;
        for ta in types {
            for tb in types {
                for sa in shapes {
                    for sb in shapes {
                        for td in [DType::F32, DType::F16] {
                            let a = TensorDesc::new(ta, sa);
                            let b = TensorDesc::new(tb, sb);
                            for dn in [[sa[1], sb[1], sb[2], sb[3]], sa] {
                                let d = TensorDesc::new(td, dn);
                                let mut src = [None; MAX_SRC];
                                src[0] = Some(&a);
                                src[1] = Some(&b);
                                let fast = mul_mat_ok(&d, &src);
                                let full = check_mul_mat(&d, &src).is_ok();
                                assert_eq!(fast, full, "{ta} {sa:?} x {tb} {sb:?} -> {td} {dn:?}");
                                n += usize::from(full);
                            }
                        }
                    }
                }
            }
        }
        assert!(n > 0);
    }
}
