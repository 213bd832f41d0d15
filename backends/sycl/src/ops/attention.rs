//! FLASH_ATTN_EXT; kernel in `kernels/attention.cpp`.

use backplane_abi::{DType, MAX_SRC, TensorDesc};

use super::{Exec, want_type};
use crate::kernels::Source;
use crate::runtime::Arg;

type Srcs<'a> = [Option<&'a TensorDesc>; MAX_SRC];

/// Work-group size and head dims per item (FA_WG, FA_MAX_PER_ITEM).
const FA_WG: usize = 32;
const FA_MAX_DIM: i64 = 32 * 8;

const KV: [DType; 5] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q8_0,
];

pub(super) fn supports(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let (q, k, v) = (
        src[0].ok_or("needs q")?,
        src[1].ok_or("needs k")?,
        src[2].ok_or("needs v")?,
    );
    want_type("q", q, &[DType::F32, DType::F16])?;
    let tk = want_type("K", k, &KV)?;
    let tv = want_type("V", v, &KV)?;
    want_type("result", d, &[DType::F32])?;
    if tk.is_quantized() && !k.is_contiguous_rows() || tv.is_quantized() && !v.is_contiguous_rows()
    {
        return Err("quantized K/V rows must be dense".into());
    }
    if q.ne[0] > FA_MAX_DIM || v.ne[0] > FA_MAX_DIM {
        return Err(format!(
            "head size {} / {} over {FA_MAX_DIM}",
            q.ne[0], v.ne[0]
        ));
    }
    if let Some(m) = src[3] {
        want_type("mask", m, &[DType::F16, DType::F32])?;
    }
    if let Some(s) = src[4] {
        want_type("sinks", s, &[DType::F32])?;
        if s.nb[0] != 4 {
            return Err("sinks must be contiguous".into());
        }
    }
    Ok(())
}

pub(super) fn flash_attn_ext(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let q = x.src(i, 0).ok_or("needs q")?;
    let mut args = x.args(i);
    args.x[0] = i64::from(x.src(i, 3).is_some());
    args.x[1] = i64::from(x.src(i, 4).is_some());
    let p = x.node_ptrs(i)?;
    let sinks = match d.src(4) {
        Some(s) => x.ptr(s)?,
        None => p[0],
    };
    let groups = (q.ne[1] * q.ne[2] * q.ne[3]) as usize;
    if groups == 0 {
        return Ok(());
    }
    let k = x.kernel(Source::Attention, "k_flash_attn")?;
    let bytes = args_bytes(&args);
    let list = [
        Arg::Ptr(p[0]),
        Arg::Ptr(p[1]),
        Arg::Ptr(p[2]),
        Arg::Ptr(p[3]),
        Arg::Ptr(p[4]),
        Arg::Ptr(sinks),
        Arg::Bytes(bytes),
    ];
    // SAFETY: every pointer is a checked device address of this graph's
    // tensors; the kernel stays inside the shapes in `args`.
    unsafe {
        x.ctx
            .queue
            .launch(&k, [1, groups, FA_WG], [1, 1, FA_WG], &list)
    }
}

fn args_bytes(a: &crate::kernels::Args) -> &[u8] {
    // SAFETY: Args is repr(C) plain integers, 512 bytes.
    unsafe {
        std::slice::from_raw_parts(
            (a as *const crate::kernels::Args).cast(),
            std::mem::size_of::<crate::kernels::Args>(),
        )
    }
}
