//! The op contract: for every op, the operand types, the shape and
//! parameter rules and the result's type and shape, written once.
//!
//! The graph builder asks [`result`] for the shape of a node it is about to
//! add; the scheduler, the reference kernels and every backend ask
//! [`check`] whether an existing node keeps the rules. Either answers with a
//! [`Refusal`] naming the op, the operand, what was expected and what was
//! found. A backend's `supports_op` then only states what is its own: the
//! types it implements, the layouts its kernels index, its device limits.
//!
//! One file per op family; the same family names name the op's files in
//! the builder, the reference, the conformance catalogue and the backends:
//!
//! | family | ops |
//! |---|---|
//! | `binary` | ADD, SUB, MUL, DIV |
//! | `unary` | SQR, SQRT, LOG, SIN, COS, SCALE, CLAMP, FILL, UNARY, GLU |
//! | `reduce` | SUM, SUM_ROWS, CUMSUM, ARGMAX, ARGSORT, TOP_K |
//! | `layout` | RESHAPE, VIEW, PERMUTE, TRANSPOSE, CONT, CPY, REPEAT, CONCAT, PAD, GET_ROWS, SET_ROWS |
//! | `matmul` | MUL_MAT, MUL_MAT_ID |
//! | `norm` | NORM, RMS_NORM, L2_NORM |
//! | `softmax` | SOFT_MAX |
//! | `rope` | ROPE |
//! | `attention` | FLASH_ATTN_EXT |
//! | `conv` | CONV_2D, IM2COL |
//! | `ssm` | SSM_CONV, SSM_SCAN |

mod attention;
mod binary;
mod conv;
mod layout;
mod matmul;
mod norm;
mod reduce;
mod refusal;
mod rope;
mod softmax;
mod ssm;
mod unary;

#[cfg(test)]
mod tests;

pub use conv::conv_output_size;
pub use refusal::{Refusal, describe, type_list, wording};

use crate::{DType, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, Op, TensorDesc};

/// The float types element-wise ops accept.
pub const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];

/// The op families, each with its ops, in the order of the table above.
pub const FAMILIES: &[(&str, &[Op])] = &[
    ("binary", &[Op::Add, Op::Sub, Op::Mul, Op::Div]),
    (
        "unary",
        &[
            Op::Sqr,
            Op::Sqrt,
            Op::Log,
            Op::Sin,
            Op::Cos,
            Op::Scale,
            Op::Clamp,
            Op::Fill,
            Op::Unary,
            Op::Glu,
        ],
    ),
    (
        "reduce",
        &[
            Op::Sum,
            Op::SumRows,
            Op::Cumsum,
            Op::Argmax,
            Op::Argsort,
            Op::TopK,
        ],
    ),
    (
        "layout",
        &[
            Op::Reshape,
            Op::View,
            Op::Permute,
            Op::Transpose,
            Op::Cont,
            Op::Cpy,
            Op::Repeat,
            Op::Concat,
            Op::Pad,
            Op::GetRows,
            Op::SetRows,
        ],
    ),
    ("matmul", &[Op::MulMat, Op::MulMatId]),
    ("norm", &[Op::Norm, Op::RmsNorm, Op::L2Norm]),
    ("softmax", &[Op::SoftMax]),
    ("rope", &[Op::Rope]),
    ("attention", &[Op::FlashAttnExt]),
    ("conv", &[Op::Conv2d, Op::Im2col]),
    ("ssm", &[Op::SsmConv, Op::SsmScan]),
];

/// The family an op belongs to (`None` for leaves).
pub fn family(op: Op) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|(_, ops)| ops.contains(&op))
        .map(|(name, _)| *name)
}

/// A node's result as the contract computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The result's element type.
    pub dtype: DType,
    /// The result's element counts per dim.
    pub ne: [i64; MAX_DIMS],
}

/// What the caller fixes of a result that its sources do not determine:
/// IM2COL's output type, the shape of a RESHAPE or VIEW, SET_ROWS's
/// destination.
#[derive(Clone, Copy, Debug, Default)]
pub enum Chosen<'a> {
    /// Nothing: the sources and parameters determine the result.
    #[default]
    Nothing,
    /// The result's type.
    Type(DType),
    /// The result itself (its type, shape and strides).
    Result(&'a TensorDesc),
}

/// The result of `op` over sources `src` with parameters `params`, or why
/// the op refuses them. `chosen` gives what the caller picks of the result
/// where the op lets it (see [`Chosen`]).
pub fn result(
    op: Op,
    params: &[i32; MAX_OP_PARAMS],
    src: &[Option<&TensorDesc>],
    chosen: Chosen<'_>,
) -> Result<Shape, Refusal> {
    let o = Operands {
        op,
        params,
        src,
        chosen,
    };
    for (i, t) in src.iter().enumerate() {
        if let Some(t) = t {
            o.sane(i, t)?;
        }
    }
    if let Chosen::Result(t) = chosen {
        o.sane(usize::MAX, t)?;
    }
    let shape = rule(op)(&o)?;
    let n = shape.ne.iter().try_fold(
        1i64,
        |acc, &x| if x >= 1 { acc.checked_mul(x) } else { None },
    );
    if n.is_none() {
        return Err(o.refuse(
            "result",
            "every dim at least 1 and an element count that fits i64",
            format!("{:?}", shape.ne),
        ));
    }
    Ok(shape)
}

/// Whether node `dst` (its op, parameters, type and shape) keeps `op`'s
/// rules over sources `src`; the result shape on success.
pub fn check(op: Op, dst: &TensorDesc, src: &[Option<&TensorDesc>]) -> Result<Shape, Refusal> {
    let shape = result(op, &dst.op_params, src, Chosen::Result(dst))?;
    let found = dst.dtype().ok();
    if found != Some(shape.dtype) || dst.ne != shape.ne {
        return Err(Refusal::new(
            op,
            "result",
            format!(
                "[{}, {}, {}, {}] {}",
                shape.ne[0], shape.ne[1], shape.ne[2], shape.ne[3], shape.dtype
            ),
            describe(dst),
        ));
    }
    Ok(shape)
}

/// The sources of `d` as descriptors of `graph` (`None` for absent slots);
/// an error names a source index outside the graph.
pub fn sources<'g>(
    graph: &'g [TensorDesc],
    d: &TensorDesc,
) -> Result<[Option<&'g TensorDesc>; MAX_SRC], String> {
    let mut src = [None; MAX_SRC];
    for (i, &s) in d.src.iter().enumerate() {
        if s >= 0 {
            src[i] = Some(
                graph
                    .get(s as usize)
                    .ok_or_else(|| format!("source {i} index {s} out of range"))?,
            );
        }
    }
    Ok(src)
}

/// [`check`] for `graph[node]`, its sources resolved in `graph`. Errors
/// that are not the op's (a node or source index outside the graph, an
/// unknown op code) come back as text.
pub fn check_node(graph: &[TensorDesc], node: usize) -> Result<Shape, String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the graph ({} tensors)", graph.len()))?;
    let op = d.op().map_err(|e| e.to_string())?;
    let src = sources(graph, d)?;
    check(op, d, &src).map_err(|r| r.to_string())
}

type Rule = fn(&Operands<'_>) -> Result<Shape, Refusal>;

/// The rule of one op.
fn rule(op: Op) -> Rule {
    match op {
        Op::None => layout::leaf,
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::binary,
        Op::Sqr
        | Op::Sqrt
        | Op::Log
        | Op::Sin
        | Op::Cos
        | Op::Scale
        | Op::Clamp
        | Op::Fill
        | Op::Unary => unary::unary,
        Op::Glu => unary::glu,
        Op::Sum | Op::SumRows => reduce::sum,
        Op::Cumsum => reduce::cumsum,
        Op::Argmax => reduce::argmax,
        Op::Argsort => reduce::argsort,
        Op::TopK => reduce::top_k,
        Op::Reshape => layout::reshape,
        Op::View => layout::view,
        Op::Permute | Op::Transpose => layout::permute,
        Op::Cont => layout::cont,
        Op::Cpy => layout::cpy,
        Op::Repeat => layout::repeat,
        Op::Concat => layout::concat,
        Op::Pad => layout::pad,
        Op::GetRows => layout::get_rows,
        Op::SetRows => layout::set_rows,
        Op::MulMat => matmul::mul_mat,
        Op::MulMatId => matmul::mul_mat_id,
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::norm,
        Op::SoftMax => softmax::soft_max,
        Op::Rope => rope::rope,
        Op::FlashAttnExt => attention::flash_attn_ext,
        Op::Conv2d => conv::conv_2d,
        Op::Im2col => conv::im2col,
        Op::SsmConv => ssm::ssm_conv,
        Op::SsmScan => ssm::ssm_scan,
    }
}

/// One node's operands as a rule sees them, with the checks rules share.
pub(crate) struct Operands<'a> {
    pub(crate) op: Op,
    params: &'a [i32; MAX_OP_PARAMS],
    src: &'a [Option<&'a TensorDesc>],
    chosen: Chosen<'a>,
}

impl<'a> Operands<'a> {
    /// A refusal of this op.
    pub(crate) fn refuse(
        &self,
        operand: &str,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Refusal {
        Refusal::new(self.op, operand, expected, found)
    }

    /// `Ok` when `cond` holds, else a refusal of `operand`.
    pub(crate) fn need(
        &self,
        cond: bool,
        operand: &str,
        expected: impl FnOnce() -> String,
        found: impl FnOnce() -> String,
    ) -> Result<(), Refusal> {
        if cond {
            Ok(())
        } else {
            Err(self.refuse(operand, expected(), found()))
        }
    }

    /// Source `i` (`usize::MAX`: the result) has a known type, every dim
    /// at least 1, an element count within i64 and rows of whole blocks.
    fn sane(&self, i: usize, t: &TensorDesc) -> Result<(), Refusal> {
        let name = || {
            if i == usize::MAX {
                "result".to_string()
            } else {
                format!("src{i}")
            }
        };
        let dtype = t
            .dtype()
            .map_err(|e| self.refuse(&name(), "a known type", e.to_string()))?;
        let fits = t.ne.iter().try_fold(
            1i64,
            |acc, &x| if x >= 1 { acc.checked_mul(x) } else { None },
        );
        let bs = dtype.block_size() as i64;
        if fits.is_none() || t.ne[0] % bs != 0 {
            return Err(self.refuse(
                &name(),
                format!(
                    "every dim at least 1, an element count that fits i64 and ne0 whole {dtype} blocks of {bs}"
                ),
                format!("{:?}", t.ne),
            ));
        }
        Ok(())
    }

    /// Source `i`, called `name` by the op.
    pub(crate) fn src(&self, i: usize, name: &str) -> Result<&'a TensorDesc, Refusal> {
        self.opt(i)
            .ok_or_else(|| self.refuse(name, format!("a tensor as source {i}"), "none"))
    }

    /// Source `i` if present.
    pub(crate) fn opt(&self, i: usize) -> Option<&'a TensorDesc> {
        self.src.get(i).copied().flatten()
    }

    /// Source `i` and its type, which must be one of `allowed`.
    pub(crate) fn typed(
        &self,
        i: usize,
        name: &str,
        allowed: &[DType],
    ) -> Result<(&'a TensorDesc, DType), Refusal> {
        let t = self.src(i, name)?;
        Ok((t, self.of_type(name, t, allowed)?))
    }

    /// `t`'s type, which must be one of `allowed`.
    pub(crate) fn of_type(
        &self,
        name: &str,
        t: &TensorDesc,
        allowed: &[DType],
    ) -> Result<DType, Refusal> {
        let found = t
            .dtype()
            .map_err(|e| self.refuse(name, type_list(allowed), e.to_string()))?;
        self.need(
            allowed.contains(&found),
            name,
            || type_list(allowed),
            || found.name().to_string(),
        )?;
        Ok(found)
    }

    /// `t` is dense (`ggml_is_contiguous`).
    pub(crate) fn contiguous(&self, name: &str, t: &TensorDesc) -> Result<(), Refusal> {
        self.need(
            t.is_contiguous(),
            name,
            || "a contiguous tensor".into(),
            || format!("{} with strides {:?}", describe(t), t.nb),
        )
    }

    /// `t`'s rows are dense (`ggml_is_contiguous_rows`).
    pub(crate) fn rows(&self, name: &str, t: &TensorDesc) -> Result<(), Refusal> {
        self.need(
            t.is_contiguous_rows(),
            name,
            || "contiguous rows".into(),
            || format!("{} with strides {:?}", describe(t), t.nb),
        )
    }

    /// Parameter `i` as an i32.
    pub(crate) fn i32(&self, i: usize) -> i32 {
        self.params[i]
    }

    /// Parameter `i` as an f32 (bit pattern).
    pub(crate) fn f32(&self, i: usize) -> f32 {
        f32::from_bits(self.params[i] as u32)
    }

    /// The result type the caller chose, which must be one of `allowed`.
    pub(crate) fn chosen_type(&self, allowed: &[DType]) -> Result<DType, Refusal> {
        let t = match self.chosen {
            Chosen::Nothing => None,
            Chosen::Type(t) => Some(t),
            Chosen::Result(d) => d.dtype().ok(),
        };
        let t = t.ok_or_else(|| self.refuse("result", type_list(allowed), "no type chosen"))?;
        self.need(
            allowed.contains(&t),
            "result",
            || type_list(allowed),
            || t.name().to_string(),
        )?;
        Ok(t)
    }

    /// The result the caller chose, where the op takes its shape from it.
    pub(crate) fn chosen_result(&self) -> Result<&'a TensorDesc, Refusal> {
        match self.chosen {
            Chosen::Result(d) => Ok(d),
            _ => Err(self.refuse("result", "a chosen shape", "none")),
        }
    }
}

/// `b` tiles `a`: every dim of b divides a's (`ggml_can_repeat`).
pub fn can_repeat(b: &TensorDesc, a: &TensorDesc) -> bool {
    (0..MAX_DIMS).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0)
}
