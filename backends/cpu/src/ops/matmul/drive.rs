//! Splitting a mat-mul over the thread pool and over cache-sized panels.
//!
//! The output of each batch is cut into blocks of `mc` weight rows x `nc`
//! activation columns; threads take blocks from a shared counter. Inside a
//! block, K is cut into panels of `kc` elements (when there are more
//! columns than one tile holds), so the block's weight panel and activation
//! panel stay in L2 while every `mr x nr` tile of the block is computed;
//! later panels add to the outputs of the first.

use backplane_abi::{DType, TensorDesc};

use super::convert::Rows;
use crate::ops::{NodeCtx, SharedPtr};
use crate::simd::{MAX_NR, MatKernel};

/// A checked MUL_MAT with converted activations.
pub struct MulMat {
    pub kern: &'static MatKernel,
    pub ta: DType,
    pub vt: DType,
    pub a: TensorDesc,
    pub a_ptr: SharedPtr,
    pub rows: Rows,
    pub dst: TensorDesc,
    pub dst_ptr: SharedPtr,
}

/// A checked MUL_MAT_ID with converted activations and per-expert lists.
pub struct MulMatId<'s> {
    pub kern: &'static MatKernel,
    pub ta: DType,
    pub vt: DType,
    pub a: TensorDesc,
    pub a_ptr: SharedPtr,
    pub rows: Rows,
    pub dst: TensorDesc,
    pub dst_ptr: SharedPtr,
    pub n_used: usize,
    pub e_b: usize,
    /// `start[e]..start[e + 1]` are expert e's entries.
    pub start: &'s [u32],
    /// `t * n_used + slot` of each (token, slot) pair, grouped by expert.
    pub entries: &'s [u32],
}

// SAFETY: the raw pointers in `Rows` point at scratch memory that only the
// node's kernels read while the job lives; writes go to disjoint outputs.
unsafe impl Sync for MulMat {}
// SAFETY: as above.
unsafe impl Sync for MulMatId<'_> {}

/// Block sizes `(mc, nc, kc)` for `m` rows and `n` columns per batch.
fn blocking(
    kern: &MatKernel,
    m: usize,
    n: usize,
    k: usize,
    batches: usize,
    n_threads: usize,
) -> (usize, usize, usize) {
    if n <= kern.nr {
        // Mat-vec like: whole K, rows split finely for balance.
        let mc = (m * batches / (8 * n_threads).max(1))
            .clamp(8, 256)
            .next_multiple_of(8);
        return (mc, n.max(1), k);
    }
    let nc = 64usize.next_multiple_of(kern.nr);
    let blocks = |mc: usize| m.div_ceil(mc) * n.div_ceil(nc) * batches;
    let mut mc = 64;
    while mc > 16 && blocks(mc) < 4 * n_threads {
        mc /= 2;
    }
    (mc, nc, kern.kc.min(k).max(1))
}

/// Runs `f(thread, item)` for every item in `0..items`, spread over the
/// pool (`thread < ctx.n_threads` names the worker running it).
pub(super) fn parallel_for(ctx: &NodeCtx<'_>, items: usize, f: impl Fn(usize, usize) + Sync) {
    ctx.pool.for_each_item(items, &f);
}

/// Computes one block: `mrows` weight rows starting at `a` (rows `lda`
/// bytes apart) against `ncols` columns, `col(j)` giving column j's
/// activation row and its first output.
///
/// # Safety
/// Every pointer must cover what the kernel reads and writes.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    kern: &MatKernel,
    (ta, vt): (DType, DType),
    (k, kc): (usize, usize),
    a: *const u8,
    lda: usize,
    mrows: usize,
    ncols: usize,
    col: impl Fn(usize) -> (*const u8, *mut f32),
) {
    let mut k0 = 0;
    while k0 < k {
        let kl = kc.min(k - k0);
        let a_off = k0 / ta.block_size() * ta.type_size();
        let b_off = k0 / vt.block_size() * vt.type_size();
        let mut j0 = 0;
        while j0 < ncols {
            let nj = kern.nr.min(ncols - j0).min(MAX_NR);
            let mut bp = [std::ptr::null(); MAX_NR];
            let mut cp = [std::ptr::null_mut(); MAX_NR];
            for j in 0..nj {
                let (b, c) = col(j0 + j);
                bp[j] = b.wrapping_add(b_off);
                cp[j] = c;
            }
            let mr = if nj == 1 { kern.mr_vec } else { kern.mr };
            let mut r0 = 0;
            while r0 < mrows {
                let mm = mr.min(mrows - r0);
                let mut cr = [std::ptr::null_mut(); MAX_NR];
                for j in 0..nj {
                    cr[j] = cp[j].wrapping_add(r0);
                }
                // SAFETY: the caller guarantees the operands; kl is a whole
                // number of blocks (kc and k are).
                unsafe {
                    (kern.tile)(
                        kl,
                        a.wrapping_add(r0 * lda + a_off),
                        lda,
                        mm,
                        &bp[..nj],
                        &cr[..nj],
                        k0 > 0,
                    )
                };
                r0 += mm;
            }
            j0 += nj;
        }
        k0 += kl;
    }
}

/// Runs a MUL_MAT job.
///
/// # Safety
/// The job's pointers cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>, job: &MulMat) {
    let (a, d) = (&job.a, &job.dst);
    let (k, m, n) = (a.ne[0] as usize, a.ne[1] as usize, d.ne[1] as usize);
    let (b2, b3) = (d.ne[2] as usize, d.ne[3] as usize);
    let (r2, r3) = (b2 / a.ne[2] as usize, b3 / a.ne[3] as usize);
    let (mc, nc, kc) = blocking(job.kern, m, n, k, b2 * b3, ctx.n_threads);
    let (row_blocks, col_blocks) = (m.div_ceil(mc), n.div_ceil(nc));
    parallel_for(ctx, row_blocks * col_blocks * b2 * b3, |_, item| {
        let (rb, cb, batch) = (
            item % row_blocks,
            item / row_blocks % col_blocks,
            item / (row_blocks * col_blocks),
        );
        let (i12, i13) = (batch % b2, batch / b2);
        let (r0, c0) = (rb * mc, cb * nc);
        let a_row = job.a_ptr.0.wrapping_add(
            (i12 / r2) * a.nb[2] as usize + (i13 / r3) * a.nb[3] as usize + r0 * a.nb[1] as usize,
        );
        let out = job
            .dst_ptr
            .0
            .wrapping_add(i12 * d.nb[2] as usize + i13 * d.nb[3] as usize + r0 * 4);
        let col = |j: usize| {
            let i1 = c0 + j;
            (
                job.rows.row(i1, i12, i13),
                out.wrapping_add(i1 * d.nb[1] as usize).cast::<f32>(),
            )
        };
        let (mrows, ncols) = (mc.min(m - r0), nc.min(n - c0));
        // SAFETY: rows and columns are within the tensors.
        unsafe {
            block(
                job.kern,
                (job.ta, job.vt),
                (k, kc),
                a_row,
                a.nb[1] as usize,
                mrows,
                ncols,
                col,
            )
        };
    });
}

/// Runs a MUL_MAT_ID job.
///
/// # Safety
/// The job's pointers cover their tensors and its lists are consistent.
pub unsafe fn run_id(ctx: &NodeCtx<'_>, job: &MulMatId<'_>) {
    let (a, d) = (&job.a, &job.dst);
    let (k, m) = (a.ne[0] as usize, a.ne[1] as usize);
    let n_experts = a.ne[2] as usize;
    let count = |e: usize| (job.start[e + 1] - job.start[e]) as usize;
    let max_cols = (0..n_experts).map(count).max().unwrap_or(0);
    let active = (0..n_experts).filter(|&e| count(e) > 0).count();
    let (mc, nc, kc) = blocking(job.kern, m, max_cols, k, active.max(1), ctx.n_threads);
    let row_blocks = m.div_ceil(mc);
    let items_of = |e: usize| count(e).div_ceil(nc) * row_blocks;
    let total: usize = (0..n_experts).map(items_of).sum();
    parallel_for(ctx, total, |_, mut item| {
        let mut e = 0;
        while item >= items_of(e) {
            item -= items_of(e);
            e += 1;
        }
        let (rb, cb) = (item % row_blocks, item / row_blocks);
        let (r0, c0) = (rb * mc, cb * nc);
        let list = &job.entries[job.start[e] as usize + c0..job.start[e + 1] as usize];
        let a_row = job
            .a_ptr
            .0
            .wrapping_add(e * a.nb[2] as usize + r0 * a.nb[1] as usize);
        let col = |j: usize| {
            let pair = list[j] as usize;
            let (t, slot) = (pair / job.n_used, pair % job.n_used);
            let c = job
                .dst_ptr
                .0
                .wrapping_add(slot * d.nb[1] as usize + t * d.nb[2] as usize + r0 * 4);
            (job.rows.row(slot % job.e_b, t, 0), c.cast::<f32>())
        };
        let (mrows, ncols) = (mc.min(m - r0), nc.min(list.len()));
        // SAFETY: rows and columns are within the tensors.
        unsafe {
            block(
                job.kern,
                (job.ta, job.vt),
                (k, kc),
                a_row,
                a.nb[1] as usize,
                mrows,
                ncols,
                col,
            )
        };
    });
}
