//! CONV_2D and IM2COL.

use backplane_abi::{DType, Op};

use super::{Out, Params};
use crate::error::GraphError;
use crate::graph::{Graph, TensorId};

/// Stride, padding and dilation of a 2-D convolution (x then y).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    /// Stride along x (dim 0).
    pub s0: i32,
    /// Stride along y (dim 1).
    pub s1: i32,
    /// Padding along x.
    pub p0: i32,
    /// Padding along y.
    pub p1: i32,
    /// Dilation along x.
    pub d0: i32,
    /// Dilation along y.
    pub d1: i32,
}

impl Conv2dParams {
    /// As op_params 0..6 (the contract checks them).
    fn params(&self) -> Params {
        let mut p = [0; 16];
        p[..6].copy_from_slice(&[self.s0, self.s1, self.p0, self.p1, self.d0, self.d1]);
        p
    }
}

impl Graph {
    /// Direct 2-D convolution as ggml_conv_2d_direct: kernel [KW, KH, Cin,
    /// Cout], input [W, H, Cin, N] -> [OW, OH, Cout, N] in the input's type.
    pub fn conv_2d(
        &mut self,
        kernel: TensorId,
        input: TensorId,
        p: Conv2dParams,
    ) -> Result<TensorId, GraphError> {
        self.node(Op::Conv2d, p.params(), &[kernel, input], Out::Fresh)
    }

    /// Image to columns as ggml_im2col. 2-D: kernel [KW, KH, C, *], input
    /// [W, H, C, N] -> [C*KH*KW, OW, OH, N]; 1-D: kernel [KW, C, *], input
    /// [W, C, N] -> [C*KW, OW, N].
    pub fn im2col(
        &mut self,
        kernel: TensorId,
        input: TensorId,
        p: Conv2dParams,
        is_2d: bool,
        out: DType,
    ) -> Result<TensorId, GraphError> {
        let mut params = p.params();
        params[6] = is_2d as i32;
        self.node(Op::Im2col, params, &[kernel, input], Out::FreshOf(out))
    }
}
