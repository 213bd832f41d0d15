//! Not written yet: every op of this family is refused with that reason.

use backplane_abi::TensorDesc;

use crate::encode::Encoder;
use crate::facts::Facts;

/// Refuses every node: the family's kernels are not written yet.
pub fn supports(_facts: &Facts, _graph: &[TensorDesc], _node: usize) -> Result<(), String> {
    Err("op not implemented in the webgpu backend yet".into())
}

/// Never reached: [`supports`] refuses every node.
pub fn encode(_e: &mut Encoder, _node: usize) -> Result<(), String> {
    Err("op not implemented in the webgpu backend yet".into())
}
