//! Op constructors: each gathers its operands and parameters, asks the op
//! contract ([`backplane_abi::contract`]) for the result's type and shape,
//! and appends the node, or returns a [`GraphError`] with the contract's
//! reason.
//!
//! One file per op family, named as the contract's families are.

mod attention;
mod binary;
mod conv;
mod layout;
mod matmul;
mod norm;
mod reduce;
mod rope;
mod softmax;
mod ssm;
mod unary;

pub use backplane_abi::contract::conv_output_size;
pub use conv::Conv2dParams;
pub use rope::RopeParams;

use backplane_abi::contract::{self, Chosen, Refusal};
use backplane_abi::{DType, MAX_OP_PARAMS, MAX_SRC, Op, TensorDesc};

use crate::error::GraphError;
use crate::graph::{ABSENT, Graph, TensorId};

/// Op parameters of a node under construction.
pub(crate) type Params = [i32; MAX_OP_PARAMS];

/// Where a new node's result lives.
#[derive(Clone, Copy)]
pub(crate) enum Out {
    /// A fresh tensor of the type and shape the contract computes.
    Fresh,
    /// A fresh tensor of a type the caller chooses (IM2COL).
    FreshOf(DType),
    /// The memory of an existing tensor (in-place ops, CPY, SET_ROWS).
    Alias(TensorId),
    /// This descriptor, as laid out by the caller (views).
    Laid(TensorDesc),
}

impl From<Refusal> for GraphError {
    fn from(r: Refusal) -> GraphError {
        GraphError::InvalidOp {
            op: r.op,
            message: r.detail(),
        }
    }
}

/// `f` as an op parameter (bit pattern).
pub(crate) fn f32_param(f: f32) -> i32 {
    f.to_bits() as i32
}

impl Graph {
    pub(crate) fn d(&self, t: TensorId) -> Result<TensorDesc, GraphError> {
        self.try_desc(t).copied()
    }

    /// A result that aliases `of` (in-place op): same shape and strides.
    pub(crate) fn alias(&self, of: TensorId) -> Result<TensorDesc, GraphError> {
        let mut d = self.d(of)?;
        d.flags = 0;
        d.view_src = of.0 as i32;
        d.view_offset = 0;
        d.op_params = [0; MAX_OP_PARAMS];
        d.src = [backplane_abi::NO_TENSOR; MAX_SRC];
        Ok(d)
    }

    /// Appends node `op` over `srcs` ([`ABSENT`] for an empty slot) with
    /// `params`, once the op contract accepts them; the result is where
    /// `out` says, of the type and shape the contract computes.
    pub(crate) fn node(
        &mut self,
        op: Op,
        params: Params,
        srcs: &[TensorId],
        out: Out,
    ) -> Result<TensorId, GraphError> {
        let mut descs = [None; MAX_SRC];
        for (slot, &s) in descs.iter_mut().zip(srcs) {
            if s != ABSENT {
                *slot = Some(self.d(s)?);
            }
        }
        let refs: [Option<&TensorDesc>; MAX_SRC] = descs.each_ref().map(Option::as_ref);
        let given = match out {
            Out::Alias(t) => Some(self.alias(t)?),
            Out::Laid(d) => Some(d),
            Out::Fresh | Out::FreshOf(_) => None,
        };
        let chosen = match (out, &given) {
            (Out::FreshOf(t), _) => Chosen::Type(t),
            (_, Some(d)) => Chosen::Result(d),
            _ => Chosen::Nothing,
        };
        let mut d = match given {
            Some(mut d) => {
                d.op_params = params;
                contract::check(op, &d, &refs)?;
                d
            }
            None => {
                let shape = contract::result(op, &params, &refs, chosen)?;
                let mut d = TensorDesc::new(shape.dtype, shape.ne);
                d.op_params = params;
                d
            }
        };
        d.op_params = params;
        Ok(self.push_node(d, op, srcs))
    }
}
