//! ADD, SUB, MUL and DIV, with b broadcast over a.

use backplane_abi::Op;

use super::Out;
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

impl Graph {
    fn binary(
        &mut self,
        op: Op,
        a: TensorId,
        b: TensorId,
        inplace: bool,
    ) -> Result<TensorId, GraphError> {
        let out = if inplace { Out::Alias(a) } else { Out::Fresh };
        self.node(op, [0; 16], &[a, b], out)
    }

    /// `a + b`, b broadcast over a; result has a's type and shape.
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Add, a, b, false)
    }
    /// `a += b` in place: the result aliases a.
    pub fn add_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Add, a, b, true)
    }
    /// `a - b` with broadcast.
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Sub, a, b, false)
    }
    /// `a -= b` in place.
    pub fn sub_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Sub, a, b, true)
    }
    /// `a * b` with broadcast.
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Mul, a, b, false)
    }
    /// `a *= b` in place.
    pub fn mul_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Mul, a, b, true)
    }
    /// `a / b` with broadcast.
    pub fn div(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Div, a, b, false)
    }
    /// `a /= b` in place.
    pub fn div_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary(Op::Div, a, b, true)
    }
}
