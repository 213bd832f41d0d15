//! What the WebGPU integration tests share.

use std::sync::Arc;

use backplane_abi::plugin::{Device, Reg};
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
