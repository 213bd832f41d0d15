//! Element-wise functions of one tensor (SQR, SQRT, LOG, SIN, COS, SCALE,
//! CLAMP, FILL, UNARY) and the gated linear units (GLU).

use backplane_abi::{GluOp, Op, UnaryOp};

use super::{Out, f32_param};
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    fn simple_unary(
        &mut self,
        op: Op,
        a: TensorId,
        params: &[(usize, i32)],
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        for &(i, v) in params {
            p[i] = v;
        }
        let out = if inplace { Out::Alias(a) } else { Out::Fresh };
        self.node(op, p, &[a], out)
    }

    /// `a * a`.
    pub fn sqr(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sqr, a, &[], false)
    }
    /// `sqrt(a)`.
    pub fn sqrt(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sqrt, a, &[], false)
    }
    /// `ln(a)`.
    pub fn log(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Log, a, &[], false)
    }
    /// `sin(a)`.
    pub fn sin(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Sin, a, &[], false)
    }
    /// `cos(a)`.
    pub fn cos(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Cos, a, &[], false)
    }

    /// `a * s + b` element-wise.
    pub fn scale_bias(
        &mut self,
        a: TensorId,
        s: f32,
        b: f32,
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        self.simple_unary(
            Op::Scale,
            a,
            &[(0, f32_param(s)), (1, f32_param(b))],
            inplace,
        )
    }
    /// `a * s`.
    pub fn scale(&mut self, a: TensorId, s: f32) -> Result<TensorId, GraphError> {
        self.scale_bias(a, s, 0.0, false)
    }
    /// Clamp every element to `[min, max]`.
    pub fn clamp(&mut self, a: TensorId, min: f32, max: f32) -> Result<TensorId, GraphError> {
        self.simple_unary(
            Op::Clamp,
            a,
            &[(0, f32_param(min)), (1, f32_param(max))],
            false,
        )
    }
    /// A tensor of a's shape and type filled with `value`.
    pub fn fill(&mut self, a: TensorId, value: f32) -> Result<TensorId, GraphError> {
        self.simple_unary(Op::Fill, a, &[(0, f32_param(value))], false)
    }

    /// Element-wise unary function.
    pub fn unary(&mut self, a: TensorId, f: UnaryOp) -> Result<TensorId, GraphError> {
        self.unary_impl(a, f, [0.0; 4], false)
    }
    /// Element-wise unary function in place.
    pub fn unary_inplace(&mut self, a: TensorId, f: UnaryOp) -> Result<TensorId, GraphError> {
        self.unary_impl(a, f, [0.0; 4], true)
    }
    /// xIELU activation with its four parameters. As ggml_xielu, the node
    /// stores `beta + softplus(alpha_n)`, `softplus(alpha_p)`, `beta`, `eps`.
    pub fn xielu(
        &mut self,
        a: TensorId,
        alpha_n: f32,
        alpha_p: f32,
        beta: f32,
        eps: f32,
    ) -> Result<TensorId, GraphError> {
        // ggml_compute_softplus_f32
        let softplus = |x: f32| if x > 20.0 { x } else { x.exp().ln_1p() };
        self.unary_impl(
            a,
            UnaryOp::Xielu,
            [beta + softplus(alpha_n), softplus(alpha_p), beta, eps],
            false,
        )
    }

    fn unary_impl(
        &mut self,
        a: TensorId,
        f: UnaryOp,
        extra: [f32; 4],
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let mut params = vec![(0, f.code() as i32)];
        params.extend(
            extra
                .iter()
                .enumerate()
                .map(|(i, &v)| (i + 1, f32_param(v))),
        );
        self.simple_unary(Op::Unary, a, &params, inplace)
    }

    /// Gated linear unit on one tensor: its rows split in halves, the gate
    /// half first unless `swapped`.
    pub fn glu_split(
        &mut self,
        a: TensorId,
        f: GluOp,
        swapped: bool,
    ) -> Result<TensorId, GraphError> {
        self.glu_impl(a, None, f, swapped, 0.0, 0.0)
    }
    /// Gated linear unit over two tensors of one shape: `f(a) * b`.
    pub fn glu(&mut self, a: TensorId, b: TensorId, f: GluOp) -> Result<TensorId, GraphError> {
        self.glu_impl(a, Some(b), f, false, 0.0, 0.0)
    }
    /// gpt-oss SwiGLU: `x = min(a, limit)`, `y = clamp(b, -limit, limit)`,
    /// `out = x * sigmoid(alpha * x) * (y + 1)`.
    pub fn swiglu_oai(
        &mut self,
        a: TensorId,
        b: Option<TensorId>,
        alpha: f32,
        limit: f32,
    ) -> Result<TensorId, GraphError> {
        self.glu_impl(a, b, GluOp::SwigluOai, false, alpha, limit)
    }

    fn glu_impl(
        &mut self,
        a: TensorId,
        b: Option<TensorId>,
        f: GluOp,
        swapped: bool,
        alpha: f32,
        limit: f32,
    ) -> Result<TensorId, GraphError> {
        let mut p = [0; 16];
        p[0] = f.code() as i32;
        p[1] = swapped as i32;
        p[2] = f32_param(alpha);
        p[3] = f32_param(limit);
        let mut srcs = vec![a];
        srcs.extend(b);
        self.node(Op::Glu, p, &srcs, Out::Fresh)
    }
}
