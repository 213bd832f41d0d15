//! What the WebGPU integration tests share (each test file uses part of
//! it, hence the dead-code allowance).
#![allow(dead_code)]

pub mod replay;

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

/// `f32` values as their little-endian bytes, as a buffer holds them.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes read back as `f32` values (a trailing partial
/// value is dropped).
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// `n / 18` q4_0 blocks (`n` bytes rounded down to whole blocks): each is
/// the f16 `scale`, then 16 bytes of nibbles in a fixed pattern shifted
/// by `seed`.
pub fn q4_0_pattern(n: u64, scale: f32, seed: u64) -> Vec<u8> {
    let scale = half::f16::from_f32(scale).to_bits().to_le_bytes();
    (0..n / 18)
        .flat_map(|blk| {
            let quants = (0..16u64).map(move |i| ((blk * 7 + i * 13 + seed) % 256) as u8);
            scale.into_iter().chain(quants)
        })
        .collect()
}
