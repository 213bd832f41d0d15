//! The packed-panel path of MUL_MAT ([`simd::Gemm`]).
//!
//! The output of each batch is cut into blocks of `mc` weight rows x `nc`
//! columns that threads take from a shared counter (rows first, so
//! consecutive blocks share their activation columns). For each `kc`-long
//! K panel a thread packs its block's weight rows into its own part of the
//! scratch buffer, then sweeps the columns `nr` at a time, running
//! the micro-kernel over every packed group of `mr` rows: the `nr`
//! columns' panel stays in L1 and the packed rows in L2. Kernels with
//! [`simd::Gemm::b_packed`] get the activations packed too, once per node
//! before the blocks ([`simd::pack_columns`]), so that each call reads its
//! columns as one sequential stream.

use super::convert::raw;
use super::drive::{MulMat, parallel_for};
use backplane_abi::TensorDesc;

use crate::ops::{NodeCtx, SharedPtr};
use crate::simd::{self, MAX_NR};

/// Scratch bytes each thread needs to pack one block.
pub fn pack_bytes(g: &simd::Gemm) -> usize {
    (g.mc / g.mr * g.kc * g.group_bytes).next_multiple_of(64)
}

/// Scratch bytes of the activation blocks' scale pairs, if `g` wants them.
pub fn scale_bytes(g: &simd::Gemm, b: &TensorDesc) -> usize {
    if !g.b_scales {
        return 0;
    }
    let rows = (b.ne[1] * b.ne[2] * b.ne[3]) as usize;
    rows * b.ne[0] as usize / g.vt.block_size() * 8
}

/// Scratch bytes of the packed activations, if `g` wants them.
pub fn columns_bytes(g: &simd::Gemm, b: &TensorDesc) -> usize {
    if !g.b_packed {
        return 0;
    }
    let rows = (b.ne[1] * b.ne[2] * b.ne[3]) as usize;
    rows * b.ne[0] as usize * 4
}

/// Runs a MUL_MAT job whose activations are rows of `g.vt`, with `g`;
/// `extra` holds [`pack_bytes`] per thread, then [`scale_bytes`], then
/// [`columns_bytes`].
///
/// Packed activations (`g.b_packed`) are laid out per batch of `n`
/// columns, per K panel, per group of `nr` columns: the group at column
/// `c` of the panel at `k0` (`kl` long) starts at float
/// `batch * n * k + k0 * n + c * kl`, as [`simd::pack_columns`] writes it.
///
/// # Safety
/// The job's pointers cover their tensors, `job.rows` are rows of `g.vt`
/// and `extra` covers the bytes above, which no one else uses.
pub unsafe fn run(ctx: &NodeCtx<'_>, job: &MulMat, g: &simd::Gemm, extra: SharedPtr) {
    let (a, d) = (&job.a, &job.dst);
    let (k, m, n) = (a.ne[0] as usize, a.ne[1] as usize, d.ne[1] as usize);
    let (b2, b3) = (d.ne[2] as usize, d.ne[3] as usize);
    let (vt, nblk) = (g.vt, k / g.vt.block_size());
    let scales = raw(extra)
        .wrapping_add(ctx.n_threads * pack_bytes(g))
        .cast::<f32>();
    let scales = SharedPtr(scales.cast());
    // Activation row (i1, i12, i13)'s scale pairs.
    let scale_row = |i1: usize, i12: usize, i13: usize| {
        let ri = i1 + n * (i12 + b2 * i13);
        raw(scales).cast::<f32>().wrapping_add(ri * nblk * 2)
    };
    if g.b_scales {
        let row_bytes = vt.row_size(k).unwrap_or(0);
        parallel_for(ctx, n * b2 * b3, |_, ri| {
            let (i1, i12, i13) = (ri % n, ri / n % b2, ri / (n * b2));
            // SAFETY: the converted row holds `row_bytes` bytes and its
            // scale pairs `2 * nblk` floats of the scratch, written by this
            // item only.
            unsafe {
                let row = std::slice::from_raw_parts(job.rows.row(i1, i12, i13), row_bytes);
                let out = std::slice::from_raw_parts_mut(scale_row(i1, i12, i13), 2 * nblk);
                simd::block_scales(row, out);
            }
        });
    }
    let nr = g.nr.min(MAX_NR);
    let columns = raw(scales)
        .wrapping_add(if g.b_scales {
            n * b2 * b3 * nblk * 8
        } else {
            0
        })
        .cast::<f32>();
    let columns = SharedPtr(columns.cast());
    // Packed group of columns `c..` of batch `bi`, K panel `k0..k0 + kl`.
    let column_group = |bi: usize, k0: usize, kl: usize, c: usize| {
        raw(columns)
            .cast::<f32>()
            .wrapping_add(bi * n * k + k0 * n + c * kl)
    };
    if g.b_packed {
        debug_assert!(g.nc.is_multiple_of(nr) && vt == backplane_abi::DType::F32);
        let groups = n.div_ceil(nr);
        parallel_for(ctx, groups * b2 * b3, |_, item| {
            let (gi, bi) = (item % groups, item / groups);
            let (i12, i13) = (bi % b2, bi / b2);
            let (c, nj) = (gi * nr, nr.min(n - gi * nr));
            let mut cols = [std::ptr::null::<f32>(); MAX_NR];
            for (j, col) in cols.iter_mut().enumerate().take(nj) {
                *col = job.rows.row(c + j, i12, i13).cast();
            }
            let mut k0 = 0;
            while k0 < k {
                let kl = g.kc.min(k - k0);
                // SAFETY: the columns are f32 rows of k values; the group's
                // kl * nj floats lie in the scratch and only this item
                // writes them.
                unsafe { simd::pack_columns(&cols[..nj], k0, kl, column_group(bi, k0, kl, c)) };
                k0 += kl;
            }
        });
    }
    let (r2, r3) = (b2 / a.ne[2] as usize, b3 / a.ne[3] as usize);
    let batches = b2 * b3;
    // Smaller row blocks when there are too few blocks to keep every
    // thread busy.
    let mut mc = g.mc;
    while mc > g.mr && m.div_ceil(mc) * n.div_ceil(g.nc) * batches < 4 * ctx.n_threads {
        mc /= 2;
    }
    let mc = mc.next_multiple_of(g.mr);
    let (row_blocks, col_blocks) = (m.div_ceil(mc), n.div_ceil(g.nc));
    parallel_for(ctx, row_blocks * col_blocks * batches, |thread, item| {
        let (rb, cb, batch) = (
            item % row_blocks,
            item / row_blocks % col_blocks,
            item / (row_blocks * col_blocks),
        );
        let (i12, i13) = (batch % b2, batch / b2);
        let (r0, c0) = (rb * mc, cb * g.nc);
        let (mrows, ncols) = (mc.min(m - r0), g.nc.min(n - c0));
        let a_rows = job.a_ptr.0.wrapping_add(
            (i12 / r2) * a.nb[2] as usize + (i13 / r3) * a.nb[3] as usize + r0 * a.nb[1] as usize,
        );
        let out = job
            .dst_ptr
            .0
            .wrapping_add(i12 * d.nb[2] as usize + i13 * d.nb[3] as usize + r0 * 4);
        let buf = raw(extra).wrapping_add(thread * pack_bytes(g));
        let mut k0 = 0;
        while k0 < k {
            let kl = g.kc.min(k - k0);
            // SAFETY: the block's rows cover k elements; this thread owns
            // `buf`, which holds mc / mr groups of kc * group_bytes bytes.
            unsafe { (g.pack)(a_rows, a.nb[1] as usize, mrows, k0, kl, buf) };
            // One micro-kernel call: packed rows r.. times columns j0...
            let call = |r: usize, j0: usize| {
                let (mm, nj) = (g.mr.min(mrows - r), nr.min(ncols - j0));
                let mut bp = [std::ptr::null(); MAX_NR];
                let mut sp = [std::ptr::null(); MAX_NR];
                let mut cp = [std::ptr::null_mut(); MAX_NR];
                let blk0 = k0 / vt.block_size();
                let packed = column_group(batch, k0, kl, c0 + j0)
                    .cast::<u8>()
                    .cast_const();
                for j in 0..nj {
                    let i1 = c0 + j0 + j;
                    bp[j] = if g.b_packed {
                        packed
                    } else {
                        job.rows
                            .row(i1, i12, i13)
                            .wrapping_add(blk0 * vt.type_size())
                    };
                    sp[j] = scale_row(i1, i12, i13).wrapping_add(2 * blk0).cast_const();
                    cp[j] = out
                        .wrapping_add(i1 * d.nb[1] as usize)
                        .cast::<f32>()
                        .wrapping_add(r);
                }
                // SAFETY: group r / mr of the packed block holds kl
                // elements; the columns (and their scale pairs) cover
                // k0 + kl elements and the outputs mm rows.
                unsafe {
                    (g.panel)(
                        kl,
                        buf.wrapping_add(r / g.mr * kl * g.group_bytes),
                        &bp[..nj],
                        &sp[..nj],
                        &cp[..nj],
                        mm,
                        k0 > 0,
                    )
                };
            };
            // Columns `nr` at a time (in L1), each met by every group of
            // the block (in L2).
            for j0 in (0..ncols).step_by(nr) {
                for r in (0..mrows).step_by(g.mr) {
                    call(r, j0);
                }
            }
            k0 += kl;
        }
    });
}
