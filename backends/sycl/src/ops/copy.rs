//! CPY/CONT, GET_ROWS and SET_ROWS; kernels in `kernels/copy.cpp`.
//!
//! Row indices are read back and checked on the host before a GET_ROWS or
//! SET_ROWS kernel runs, so an index out of range is an error and nothing
//! is written (this waits for the queue at each such node).

use backplane_abi::{DType, MAX_SRC, TensorDesc};

use super::{Exec, FLOATS, dtype, refused, want_type};
use crate::kernels::Source;

type Srcs<'a> = [Option<&'a TensorDesc>; MAX_SRC];

const PLAIN: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::I32];
const ROW_SOURCES: [DType; 7] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q8_0,
    DType::Q4_K,
    DType::I32,
];
const INDEX: [DType; 2] = [DType::I32, DType::I64];

pub(super) fn supports_cpy(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let a = src[0].ok_or("CPY needs a source")?;
    let (ta, td) = (dtype(a)?, dtype(d)?);
    if PLAIN.contains(&ta) && PLAIN.contains(&td) {
        return Ok(());
    }
    let whole = |t: &TensorDesc, ty: DType| t.ne[0] % ty.block_size() as i64 == 0;
    if ta == td && ta.is_quantized() {
        return if whole(a, ta) && whole(d, td) {
            Ok(())
        } else {
            Err("rows are not whole blocks".into())
        };
    }
    if matches!(td, DType::Q8_0 | DType::Q4_0) && FLOATS.contains(&ta) {
        return if whole(d, td) && whole(a, td) {
            Ok(())
        } else {
            Err(format!("rows of {} are not whole blocks", td.name()))
        };
    }
    Err(refused(format_args!("CPY {} -> {}", ta.name(), td.name())))
}

pub(super) fn supports_get_rows(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let (a, rows) = (
        src[0].ok_or("GET_ROWS needs a")?,
        src[1].ok_or("GET_ROWS needs rows")?,
    );
    let ta = want_type("a", a, &ROW_SOURCES)?;
    want_type("rows", rows, &INDEX)?;
    if ta == DType::I32 {
        want_type("result", d, &[DType::I32, DType::F32])?;
    } else {
        want_type("result", d, &[DType::F32, DType::F16])?;
    }
    if ta.is_quantized() && !a.is_contiguous_rows() {
        return Err("quantized rows must be dense".into());
    }
    Ok(())
}

pub(super) fn supports_set_rows(d: &TensorDesc, src: &Srcs<'_>) -> Result<(), String> {
    let (s, rows) = (
        src[0].ok_or("SET_ROWS needs a source")?,
        src[1].ok_or("SET_ROWS needs rows")?,
    );
    want_type("source", s, &FLOATS)?;
    want_type("rows", rows, &INDEX)?;
    let td = dtype(d)?;
    if !FLOATS.contains(&td) {
        return Err(format!(
            "{} (f32, f16, bf16 only)",
            refused(format_args!("SET_ROWS into {}", td.name()))
        ));
    }
    Ok(())
}

pub(super) fn cpy(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let a = x.src(i, 0).ok_or("CPY needs a source")?;
    let (ta, td) = (dtype(a)?, dtype(d)?);
    let mut args = x.args(i);
    if ta == td && ta.is_quantized() {
        let bs = ta.block_size() as i64;
        args.x[0] = bs;
        args.x[1] = ta.type_size() as i64;
        x.launch_1d(
            Source::Copy,
            "k_cpy_blocks",
            i,
            (d.nelements() / bs) as usize,
            &args,
        )
    } else if td.is_quantized() {
        x.launch_1d(
            Source::Copy,
            "k_cpy_quantize",
            i,
            (d.nelements() / 32) as usize,
            &args,
        )
    } else {
        x.launch_1d(Source::Copy, "k_cpy", i, d.nelements() as usize, &args)
    }
}

/// Reads the index tensor `rows` and checks every index is in `0..limit`
/// (`at(i0, i1, i2)` picks which ones matter).
fn check_indices(
    x: &Exec<'_>,
    i: usize,
    rows_idx: usize,
    limit: i64,
    what: &str,
) -> Result<(), String> {
    let rows = &x.graph[rows_idx];
    let bytes = x.read(x.ptr(rows_idx)?, rows.nbytes() as usize)?;
    let wide = dtype(rows)? == DType::I64;
    let [n0, n1, n2, n3] = rows.ne;
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            for i1 in 0..n1 {
                for i0 in 0..n0 {
                    let off = (i0 as u64 * rows.nb[0]
                        + i1 as u64 * rows.nb[1]
                        + i2 as u64 * rows.nb[2]
                        + i3 as u64 * rows.nb[3]) as usize;
                    let r = if wide {
                        i64::from_le_bytes(bytes[off..off + 8].try_into().expect("8 bytes"))
                    } else {
                        i64::from(i32::from_le_bytes(
                            bytes[off..off + 4].try_into().expect("4 bytes"),
                        ))
                    };
                    if r < 0 || r >= limit {
                        return Err(format!(
                            "node {i}: row index {r} at [{i0}, {i1}, {i2}] is outside 0..{limit} of the {what}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

pub(super) fn get_rows(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let a = x.src(i, 0).ok_or("GET_ROWS needs a")?;
    check_indices(
        x,
        i,
        d.src(1).ok_or("GET_ROWS needs rows")?,
        a.ne[1],
        "source",
    )?;
    let args = x.args(i);
    // Weights stored reordered (checked by Exec::run to be a matrix the
    // layout holds) have a kernel of their own.
    let kernel = if x.weights_reordered(i) {
        "k_get_rows_reordered"
    } else {
        "k_get_rows"
    };
    x.launch_1d(Source::Copy, kernel, i, d.nelements() as usize, &args)
}

pub(super) fn set_rows(x: &Exec<'_>, i: usize) -> Result<(), String> {
    let d = &x.graph[i];
    let s = x.src(i, 0).ok_or("SET_ROWS needs a source")?;
    check_indices(
        x,
        i,
        d.src(1).ok_or("SET_ROWS needs rows")?,
        d.ne[1],
        "destination",
    )?;
    let args = x.args(i);
    x.launch_1d(Source::Copy, "k_set_rows", i, s.nelements() as usize, &args)
}
