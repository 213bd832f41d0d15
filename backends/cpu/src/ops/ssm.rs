//! State-space ops (Mamba): SSM_CONV, the causal depthwise convolution,
//! and SSM_SCAN, the selective scan.

use backplane_abi::{MAX_SRC, Op, TensorDesc};

use super::tensor::{Tensor, par_range};
use super::unary::softplus;
use crate::error::CpuError;
use crate::ops::NodeCtx;

/// Whether the state-space kernels accept these operands: dense rows and a
/// contiguous result for the scan (the op contract has checked the types
/// and shapes).
pub fn supports(
    op: Op,
    dst: &TensorDesc,
    src: &[Option<&TensorDesc>; MAX_SRC],
) -> Result<(), String> {
    match op {
        Op::SsmConv => Ok(()),
        Op::SsmScan => {
            let dense = |t: &TensorDesc| t.nb[0] == 4;
            if !src[..6].iter().flatten().all(|t| dense(t)) {
                return Err("every row of s, x, dt, A, B and C must be dense".into());
            }
            if !dst.is_contiguous() {
                return Err("dst must be contiguous".into());
            }
            Ok(())
        }
        _ => Err(format!("{op} is not a state-space op")),
    }
}

/// Runs one state-space node.
///
/// # Safety
/// The pointers in `ctx` cover their tensors.
pub unsafe fn run(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    // SAFETY: forwarded contract.
    unsafe {
        match ctx.op {
            Op::SsmConv => ssm_conv(ctx),
            Op::SsmScan => ssm_scan(ctx),
            op => Err(ctx.unsupported(format!("{op} is not a state-space op"))),
        }
    }
}

unsafe fn ssm_conv(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let sx = Tensor::src(ctx, 0)?;
    let c = Tensor::src(ctx, 1)?;
    let d = Tensor::dst(ctx)?;
    let (nc, nr) = (c.ne(0), d.ne(0));
    par_range(ctx, d.nrows(), nr * nc, |rows| {
        let mut out = vec![0f32; nr];
        for r in rows {
            let [t, seq, _] = d.row_index(r);
            for (i1, o) in out.iter_mut().enumerate() {
                let mut sum = 0f32;
                for i0 in 0..nc {
                    // SAFETY: the window t..t+nc lies in sx's dim 0 (shape checked).
                    unsafe {
                        sum += sx.read::<f32>((t + i0) * sx.nb(0) + i1 * sx.nb(1) + seq * sx.nb(2))
                            * c.read::<f32>(i0 * c.nb(0) + i1 * c.nb(1));
                    }
                }
                *o = sum;
            }
            // SAFETY: row r of dst, written only by this worker.
            unsafe { d.store_f32(d.row_offset_of(r), d.nb(0), &out) };
        }
        Ok(())
    })
}

unsafe fn ssm_scan(ctx: &NodeCtx<'_>) -> Result<(), CpuError> {
    let [s, x, dt, a, b, c] = [0, 1, 2, 3, 4, 5].map(|i| Tensor::src(ctx, i));
    let (s, x, dt, a, b, c) = (s?, x?, dt?, a?, b?, c?);
    let ids = Tensor::src(ctx, 6)?;
    let d = Tensor::dst(ctx)?;
    let (nc, nr, nh) = (s.ne(0), s.ne(1), x.ne(1));
    let (ng, nt, ns) = (b.ne(1), x.ne(2), x.ne(3));
    let n_states = s.ne(3);
    let y_len = x.nelements();
    let state_stride = nc * nr * nh;
    let mamba2 = a.ne(0) == 1;
    // Work items are (sequence, head) pairs: each owns its y values and its
    // slice of the final states.
    par_range(ctx, ns * nh, nt * nr * nc * 4, |items| {
        for item in items {
            let (seq, h) = (item / nh, item % nh);
            let g = h / (nh / ng);
            // SAFETY: ids has one element per sequence.
            let id = unsafe { ids.read::<i32>(seq * ids.nb(0)) };
            if id < 0 || id as usize >= n_states {
                return Err(ctx.bad_input(format!(
                    "state index {id} out of range 0..{n_states} in src6"
                )));
            }
            // This head's final state, [nc, nr], after y in dst.
            let st_off = (y_len + seq * state_stride + h * nr * nc) * 4;
            // SAFETY: the state slice belongs to this (seq, head) item alone;
            // sources are read-only here and lie within their tensors.
            unsafe {
                let state = d.slice_mut::<f32>(st_off, nr * nc);
                state.copy_from_slice(s.slice::<f32>(id as usize * s.nb(3) + h * s.nb(2), nr * nc));
                for t in 0..nt {
                    let dt_sp = softplus(dt.read::<f32>(h * 4 + t * dt.nb(1) + seq * dt.nb(2)));
                    let bv = b.slice::<f32>(g * b.nb(1) + t * b.nb(2) + seq * b.nb(3), nc);
                    let cv = c.slice::<f32>(g * c.nb(1) + t * c.nb(2) + seq * c.nb(3), nc);
                    let xs = x.slice::<f32>(h * x.nb(1) + t * x.nb(2) + seq * x.nb(3), nr);
                    let av = a.slice::<f32>(h * a.nb(1), a.ne(0));
                    let y_off = ((seq * nt + t) * nh + h) * nr;
                    let y = d.slice_mut::<f32>(y_off * 4, nr);
                    for (i1, (st, yo)) in state.chunks_exact_mut(nc).zip(y.iter_mut()).enumerate() {
                        let x_dt = xs[i1] * dt_sp;
                        let mut sum = 0f32;
                        if mamba2 {
                            let da = (dt_sp * av[0]).exp();
                            for ((sv, &bb), &cc) in st.iter_mut().zip(bv).zip(cv) {
                                *sv = *sv * da + bb * x_dt;
                                sum += *sv * cc;
                            }
                        } else {
                            for (((sv, &bb), &cc), &aa) in st.iter_mut().zip(bv).zip(cv).zip(av) {
                                *sv = *sv * (dt_sp * aa).exp() + bb * x_dt;
                                sum += *sv * cc;
                            }
                        }
                        *yo = sum;
                    }
                }
            }
        }
        Ok(())
    })
}
