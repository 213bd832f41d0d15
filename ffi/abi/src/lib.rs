//! The stable plugin ABI of backplane.
//!
//! This is the only crate a backend author depends on. It defines the element
//! types ([`DType`]), the op set ([`Op`]) and the `#[repr(C)]` tensor
//! descriptor ([`TensorDesc`]) that graphs cross the plugin boundary as.

pub mod dtype;
pub mod op;
pub mod tensor;

pub use dtype::{DType, UnknownDType};
pub use op::{GluOp, Op, SortOrder, UnaryOp, UnknownGluOp, UnknownOp, UnknownUnaryOp, rope_mode};
pub use tensor::{
    MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, NO_TENSOR, TensorDesc, contiguous_strides, flags,
};
