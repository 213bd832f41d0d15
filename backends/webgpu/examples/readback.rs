//! Times `get_tensor` of a logits-sized tensor (128,256 f32, 513 KB: a
//! Llama 3 vocabulary) on the first WebGPU adapter, as a model reads its
//! logits back after each decoded token:
//! `cargo run --release -p backplane-webgpu --example readback [-- REPEATS [ELEMENTS]]`.

use std::time::Instant;

use backplane_abi::plugin::Reg;
use backplane_abi::{DType, TensorDesc};
use backplane_webgpu::device::WebGpuReg;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let repeats: usize = args
        .next()
        .map_or(Ok(500), |a| a.parse())
        .map_err(|e| format!("repeats: {e}"))?;
    let elements: i64 = args
        .next()
        .map_or(Ok(128_256), |a| a.parse())
        .map_err(|e| format!("elements: {e}"))?;
    let reg = WebGpuReg::new();
    let dev = reg.devices().into_iter().next().ok_or_else(|| {
        format!(
            "no WebGPU device: {}",
            reg.no_device_reason().unwrap_or_default()
        )
    })?;
    let mut t = TensorDesc::new(DType::F32, [elements, 1, 1, 1]);
    let buf = dev
        .buffer_type()
        .alloc_buffer(t.nbytes() + 4096)
        .map_err(|e| e.to_string())?;
    t.buffer = buf.id();
    t.offset = 1024;
    let data: Vec<u8> = (0..t.nbytes()).map(|i| (i * 31 % 251) as u8).collect();
    buf.set_tensor(&t, 0, &data).map_err(|e| e.to_string())?;
    let mut out = vec![0u8; data.len()];
    let mut us: Vec<f64> = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        buf.get_tensor(&t, 0, &mut out).map_err(|e| e.to_string())?;
        us.push(t0.elapsed().as_secs_f64() * 1e6);
        if out != data {
            return Err("read back different bytes".into());
        }
    }
    us.sort_by(f64::total_cmp);
    let mean = us.iter().sum::<f64>() / us.len() as f64;
    println!(
        "get_tensor of {} bytes on {}: {} reads, median {:.1} us, mean {:.1}, min {:.1}, p90 {:.1}",
        data.len(),
        dev.name(),
        us.len(),
        us[us.len() / 2],
        mean,
        us[0],
        us[us.len() * 9 / 10]
    );
    Ok(())
}
