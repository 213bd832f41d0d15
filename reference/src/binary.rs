//! ADD, SUB, MUL, DIV with b broadcast over a.

use backplane_abi::Op;

use super::{Node, for_each_index};
use backplane_runtime::ComputeError;

/// `dst = a op b`, b's index taken modulo its shape in every dim.
pub(crate) fn binary(n: &Node) -> Result<(), ComputeError> {
    let (a, b) = (n.src(0)?, n.src(1)?);
    let f: fn(f64, f64) -> f64 = match n.op {
        Op::Add => |x, y| x + y,
        Op::Sub => |x, y| x - y,
        Op::Mul => |x, y| x * y,
        _ => |x, y| x / y,
    };
    let bne = b.ne();
    let mut out = Vec::with_capacity(a.nelements() as usize);
    for_each_index(a.ne(), |i| {
        let j = [i[0] % bne[0], i[1] % bne[1], i[2] % bne[2], i[3] % bne[3]];
        out.push(f(a.at(i), b.at(j)));
    });
    n.store(&out)
}
