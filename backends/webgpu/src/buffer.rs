//! Device memory: a buffer type aligned to the device's
//! `min_storage_buffer_offset_alignment`, and buffers with
//! set/get/memset/copy. Reads go through a mapped staging buffer; writes
//! whose ends are not 4-byte aligned patch the surrounding words.

use std::sync::Arc;

use backplane_abi::TensorDesc;
use backplane_abi::plugin::{Buffer, BufferType, PluginError};
use backplane_abi::support::memory::check_access;

use crate::context::Ctx;
use crate::facts::{Facts, human_bytes};

/// wgpu's copy granularity.
const COPY_ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Device memory of one device.
pub struct WebGpuBufferType {
    name: String,
    ctx: Result<Arc<Ctx>, PluginError>,
    alignment: u64,
    max: u64,
}

impl WebGpuBufferType {
    /// The buffer type of a device (the context may have failed to open:
    /// then every allocation says why).
    pub fn new(name: String, ctx: Result<Arc<Ctx>, PluginError>, facts: &Facts) -> Self {
        WebGpuBufferType {
            name,
            ctx,
            alignment: facts.offset_alignment.max(COPY_ALIGN),
            max: facts.max_buffer_bytes,
        }
    }
}

impl BufferType for WebGpuBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let ctx = self.ctx.clone()?;
        if size_bytes > self.max {
            return Err(PluginError::out_of_memory(format!(
                "{}: {} > max buffer size {}",
                self.name,
                human_bytes(size_bytes),
                human_bytes(self.max)
            )));
        }
        let padded = size_bytes.max(COPY_ALIGN).next_multiple_of(COPY_ALIGN);
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("backplane tensors"),
            size: padded,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(PluginError::out_of_memory(format!(
                "{}: allocating {}: {e}",
                self.name,
                human_bytes(size_bytes)
            )));
        }
        let buffer = Arc::new(buffer);
        let id = ctx.register(Arc::clone(&buffer), size_bytes);
        Ok(Box::new(WebGpuBuffer {
            id,
            buffer,
            size: size_bytes,
            ctx,
        }))
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn max_size(&self) -> u64 {
        self.max
    }
}

/// One device allocation.
pub struct WebGpuBuffer {
    id: u64,
    buffer: Arc<wgpu::Buffer>,
    size: u64,
    ctx: Arc<Ctx>,
}

impl Drop for WebGpuBuffer {
    fn drop(&mut self) {
        self.ctx.unregister(self.id);
    }
}

fn other(e: String) -> PluginError {
    PluginError::other(e)
}

impl WebGpuBuffer {
    /// Absolute byte start of `len` bytes at `offset` within `tensor`.
    fn range(&self, tensor: &TensorDesc, offset: u64, len: u64) -> Result<u64, PluginError> {
        let kind = self.ctx.buffers.kind();
        Ok(check_access(kind, self.id, self.size, tensor, offset, len)?)
    }

    /// Reads `out.len()` bytes at absolute `start`.
    fn read(&self, start: u64, out: &mut [u8]) -> Result<(), PluginError> {
        read_buffer(&self.ctx, &self.buffer, start, out).map_err(other)
    }

    /// Writes `data` at absolute `start`, patching unaligned ends.
    fn write(&self, start: u64, data: &[u8]) -> Result<(), PluginError> {
        if data.is_empty() {
            return Ok(());
        }
        let end = start + data.len() as u64;
        let a_start = start - start % COPY_ALIGN;
        let a_end = end.next_multiple_of(COPY_ALIGN);
        if a_start == start && a_end == end {
            self.ctx.queue.write_buffer(&self.buffer, start, data);
            return Ok(());
        }
        let mut window = vec![0u8; (a_end - a_start) as usize];
        self.read(a_start, &mut window)?;
        let at = (start - a_start) as usize;
        window[at..at + data.len()].copy_from_slice(data);
        self.ctx.queue.write_buffer(&self.buffer, a_start, &window);
        Ok(())
    }
}

/// Copies `out.len()` bytes at byte `start` of `buffer` to the host through
/// a staging buffer, after all submitted work.
pub fn read_buffer(
    ctx: &Ctx,
    buffer: &wgpu::Buffer,
    start: u64,
    out: &mut [u8],
) -> Result<(), String> {
    if out.is_empty() {
        return Ok(());
    }
    let end = start + out.len() as u64;
    let a_start = start - start % COPY_ALIGN;
    let a_end = end.next_multiple_of(COPY_ALIGN).min(buffer.size());
    let len = a_end - a_start;
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("backplane readback"),
        size: len.next_multiple_of(COPY_ALIGN),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, a_start, &staging, 0, len);
    ctx.queue.submit([enc.finish()]);
    let slice = staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    ctx.wait_idle()?;
    rx.recv()
        .map_err(|_| "readback callback dropped".to_string())?
        .map_err(|e| format!("mapping readback buffer: {e}"))?;
    {
        let view = slice
            .get_mapped_range()
            .map_err(|e| format!("reading mapped readback buffer: {e}"))?;
        let at = (start - a_start) as usize;
        out.copy_from_slice(&view[at..at + out.len()]);
    }
    staging.unmap();
    Ok(())
}

impl Buffer for WebGpuBuffer {
    fn id(&self) -> u64 {
        self.id
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, data.len() as u64)?;
        self.write(start, data)
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, out.len() as u64)?;
        self.read(start, out)
    }

    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, size)?;
        let n = usize::try_from(size)
            .map_err(|_| PluginError::bad_input(format!("memset of {size} bytes")))?;
        self.write(start, &vec![value; n])
    }

    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        let n = src.nbytes();
        if n != dst.nbytes() {
            return Err(PluginError::bad_input(format!(
                "copy of {n} bytes into a {}-byte tensor",
                dst.nbytes()
            )));
        }
        let d = self.range(dst, 0, n)?;
        let Ok(sbuf) = self.ctx.buffer_of(None, src) else {
            return Ok(false);
        };
        let s = src.offset;
        let aligned = s.is_multiple_of(COPY_ALIGN)
            && d.is_multiple_of(COPY_ALIGN)
            && n.is_multiple_of(COPY_ALIGN);
        // WebGPU forbids a buffer-to-buffer copy within one buffer; the host
        // then copies through host memory.
        if !aligned || src.buffer == self.id {
            return Ok(false);
        }
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&sbuf, s, &self.buffer, d, n);
        self.ctx.queue.submit([enc.finish()]);
        Ok(true)
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        if value == 0 {
            let mut enc = self.ctx.device.create_command_encoder(&Default::default());
            enc.clear_buffer(&self.buffer, 0, None);
            self.ctx.queue.submit([enc.finish()]);
            return Ok(());
        }
        const CHUNK: u64 = 16 << 20;
        let total = self.buffer.size();
        let block = vec![value; CHUNK.min(total) as usize];
        let mut at = 0;
        while at < total {
            let n = CHUNK.min(total - at);
            self.ctx
                .queue
                .write_buffer(&self.buffer, at, &block[..n as usize]);
            at += n;
        }
        Ok(())
    }
}
