//! What the WebGPU integration tests share (each test file uses part of
//! it, hence the dead-code allowance).
#![allow(dead_code)]

use std::sync::Arc;

use backplane_abi::plugin::{Device, Reg};
use backplane_abi::{DType, Op, TensorDesc};
use backplane_webgpu::device::WebGpuReg;

/// The registration and its first device (lavapipe on machines without a
/// GPU), or `None` with the reason printed when this machine has no
/// WebGPU adapter. Keep the registration alive while the device is used.
pub fn first_device() -> Option<(WebGpuReg, Arc<dyn Device>)> {
    let reg = WebGpuReg::new();
    let Some(dev) = reg.devices().into_iter().next() else {
        eprintln!(
            "no WebGPU device here: {}",
            reg.no_device_reason().unwrap_or_default()
        );
        return None;
    };
    Some((reg, dev))
}

/// An f32 leaf of shape `ne` at `offset` in `buffer`.
pub fn leaf(ne: [i64; 4], offset: u64, buffer: u64) -> TensorDesc {
    let mut d = TensorDesc::new(DType::F32, ne);
    d.buffer = buffer;
    d.offset = offset;
    d
}

/// An f32 node `op` of shape `ne` at `offset` in `buffer`, reading the
/// graph's tensors `srcs`.
pub fn node(op: Op, ne: [i64; 4], offset: u64, buffer: u64, srcs: &[usize]) -> TensorDesc {
    let mut d = leaf(ne, offset, buffer);
    d.op = op.code();
    for (k, &s) in srcs.iter().enumerate() {
        d.src[k] = s as i32;
    }
    d
}
