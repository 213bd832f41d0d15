//! Device memory: a buffer type aligned to the device's
//! `min_storage_buffer_offset_alignment`, and buffers with
//! set/get/memset/copy. Reads go through a mapped staging buffer; writes
//! whose ends are not 4-byte aligned patch the surrounding words. The
//! split buffer type keeps q4_0 weights in the layout of [`crate::split`],
//! converting in set/get.

use std::sync::Arc;

use backplane_abi::plugin::{Buffer, BufferType, PluginError};
use backplane_abi::support::memory::check_access;
use backplane_abi::{Op, TensorDesc};

use crate::context::Ctx;
use crate::facts::{Facts, human_bytes};
use crate::lock;
use crate::split::Split;

/// wgpu's copy granularity.
const COPY_ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Device memory of one device, in ggml's layout or split.
pub struct WebGpuBufferType {
    name: String,
    ctx: Result<Arc<Ctx>, PluginError>,
    alignment: u64,
    max: u64,
    /// The split layout's buffer type, with the facts its `supports_op`
    /// decides by.
    split: Option<Facts>,
}

/// Split tensors are bound in whole 16-byte words (`vec4<u32>`).
const SPLIT_ALIGN: u64 = 16;

impl WebGpuBufferType {
    /// The buffer type of a device (the context may have failed to open:
    /// then every allocation says why).
    pub fn new(name: String, ctx: Result<Arc<Ctx>, PluginError>, facts: &Facts) -> Self {
        WebGpuBufferType {
            name,
            ctx,
            alignment: facts.offset_alignment.max(COPY_ALIGN),
            max: facts.max_buffer_bytes,
            split: None,
        }
    }

    /// The split-layout buffer type of a device ([`crate::split`]).
    pub fn split(name: String, ctx: Result<Arc<Ctx>, PluginError>, facts: &Facts) -> Self {
        WebGpuBufferType {
            alignment: facts.offset_alignment.max(SPLIT_ALIGN),
            split: Some(facts.clone()),
            ..WebGpuBufferType::new(name, ctx, facts)
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
        let align = if self.split.is_some() {
            SPLIT_ALIGN
        } else {
            COPY_ALIGN
        };
        let padded = size_bytes.max(align).next_multiple_of(align);
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
        let id = ctx.register(Arc::clone(&buffer), size_bytes, self.split.is_some());
        Ok(Box::new(WebGpuBuffer {
            id,
            buffer,
            size: size_bytes,
            ctx,
            split: self.split.is_some(),
        }))
    }

    fn alignment(&self) -> u64 {
        self.alignment
    }

    fn max_size(&self) -> u64 {
        self.max
    }

    fn alloc_size(&self, tensor: &TensorDesc) -> u64 {
        // The kernels bind a split tensor in whole 16-byte words.
        if self.split.is_some() {
            tensor.nbytes().next_multiple_of(SPLIT_ALIGN)
        } else {
            tensor.nbytes()
        }
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.split
            .as_ref()
            .is_some_and(|facts| runs_split(facts, graph, node).is_ok())
    }
}

/// One device allocation.
pub struct WebGpuBuffer {
    id: u64,
    buffer: Arc<wgpu::Buffer>,
    size: u64,
    ctx: Arc<Ctx>,
    split: bool,
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

    /// The split geometry of `tensor` and its absolute start, after the
    /// same range check as every access (and one of the whole tensor).
    fn split_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        len: u64,
    ) -> Result<(Split, u64), PluginError> {
        self.range(tensor, offset, len)?;
        let start = self.range(tensor, 0, tensor.nbytes())?;
        let s = Split::for_tensor(tensor).map_err(|e| {
            PluginError::bad_input(format!("tensor in a {} buffer: {e}", self.ctx.split_name()))
        })?;
        Ok((s, start))
    }

    /// Blocks `[first, end)` of the split tensor at absolute `start`, in
    /// ggml's layout.
    fn read_split_blocks(
        &self,
        s: Split,
        start: u64,
        first: usize,
        end: usize,
    ) -> Result<Vec<u8>, PluginError> {
        let [(qa, qn), (sa, sn)] = s.runs(first, end);
        let (mut quants, mut scales) = (vec![0u8; qn], vec![0u8; sn]);
        self.read(start + qa as u64, &mut quants)?;
        self.read(start + sa as u64, &mut scales)?;
        let mut ggml = vec![0u8; s.block_bytes() * (end - first)];
        s.join(&quants, &scales, &mut ggml);
        Ok(ggml)
    }

    /// Writes ggml bytes `data` at `offset` of a split tensor: whole blocks
    /// converted on the host, partly covered ones read back and merged.
    fn write_split(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PluginError> {
        let (s, start) = self.split_tensor(tensor, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let offset = offset as usize;
        let (first, end) = s.blocks_of(offset, data.len());
        let bb = s.block_bytes();
        let whole = offset.is_multiple_of(bb) && (offset + data.len()).is_multiple_of(bb);
        let mut ggml = if whole {
            vec![0u8; (end - first) * bb]
        } else {
            self.read_split_blocks(s, start, first, end)?
        };
        let at = offset - first * bb;
        ggml[at..at + data.len()].copy_from_slice(data);
        let [(qa, qn), (sa, sn)] = s.runs(first, end);
        let (mut quants, mut scales) = (vec![0u8; qn], vec![0u8; sn]);
        s.split(&ggml, &mut quants, &mut scales);
        self.write(start + qa as u64, &quants)?;
        self.write(start + sa as u64, &scales)
    }

    /// Reads ggml bytes at `offset` of a split tensor into `out`.
    fn read_split(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        let (s, start) = self.split_tensor(tensor, offset, out.len() as u64)?;
        if out.is_empty() {
            return Ok(());
        }
        let offset = offset as usize;
        let (first, end) = s.blocks_of(offset, out.len());
        let ggml = self.read_split_blocks(s, start, first, end)?;
        let at = offset - first * s.block_bytes();
        out.copy_from_slice(&ggml[at..at + out.len()]);
        Ok(())
    }

    /// Reads `out.len()` bytes at absolute `start`: from the last graph's
    /// prefetched outputs when they hold them, else through a staging copy.
    fn read(&self, start: u64, out: &mut [u8]) -> Result<(), PluginError> {
        if self.ctx.prefetch.read(self.id, start, out) {
            return Ok(());
        }
        read_buffer(&self.ctx, &self.buffer, start, out).map_err(other)
    }

    /// Writes `data` at absolute `start`, patching unaligned ends.
    fn write(&self, start: u64, data: &[u8]) -> Result<(), PluginError> {
        if data.is_empty() {
            return Ok(());
        }
        self.ctx.prefetch.forget();
        let end = start + data.len() as u64;
        let a_start = start - start % COPY_ALIGN;
        let a_end = end.next_multiple_of(COPY_ALIGN);
        let ctx = &self.ctx;
        if a_start == start && a_end == end {
            if !ctx.uploads.stage(&ctx.device, &self.buffer, start, data) {
                ctx.uploads.flush(&ctx.device, &ctx.queue);
                ctx.queue.write_buffer(&self.buffer, start, data);
            }
            return Ok(());
        }
        let mut window = vec![0u8; (a_end - a_start) as usize];
        self.read(a_start, &mut window)?;
        let at = (start - a_start) as usize;
        window[at..at + data.len()].copy_from_slice(data);
        ctx.uploads.flush(&ctx.device, &ctx.queue);
        ctx.queue.write_buffer(&self.buffer, a_start, &window);
        Ok(())
    }
}

/// Largest staging buffer kept between reads; a larger read gets one of
/// its own, freed after it.
const READBACK_KEEP_MAX: u64 = 64 << 20;

/// Smallest staging buffer kept (small reads such as the error flag then
/// share the one a model's logits grow).
const READBACK_KEEP_MIN: u64 = 64 << 10;

/// Copies `out.len()` bytes at byte `start` of `buffer` to the host through
/// a staging buffer, after all submitted work. Reads of up to
/// [`READBACK_KEEP_MAX`] bytes reuse the device's staging buffer (grown to
/// the next power of two) and map only the bytes copied: a model reading
/// its logits after every token then allocates nothing.
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
    let staging_bytes = len.next_multiple_of(COPY_ALIGN);
    let mut kept = lock(&ctx.readback);
    let reuse = staging_bytes <= READBACK_KEEP_MAX;
    if reuse && kept.as_ref().is_none_or(|b| b.size() < staging_bytes) {
        let size = staging_bytes.next_power_of_two().max(READBACK_KEEP_MIN);
        *kept = Some(staging_buffer(ctx, size));
    }
    let own;
    let staging = match kept.as_ref().filter(|_| reuse) {
        Some(b) => b,
        None => {
            own = staging_buffer(ctx, staging_bytes);
            &own
        }
    };
    let copied = map_copy(ctx, buffer, a_start, staging, len, |view| {
        let at = (start - a_start) as usize;
        out.copy_from_slice(&view[at..at + out.len()]);
    });
    if copied.is_err() && reuse {
        // A failed map may leave the buffer mapped or pending: start afresh.
        *kept = None;
    }
    copied
}

fn staging_buffer(ctx: &Ctx, size: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("backplane readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// Copies `len` bytes at `from` of `buffer` to the start of `staging`,
/// maps those bytes, hands them to `read` and unmaps.
fn map_copy(
    ctx: &Ctx,
    buffer: &wgpu::Buffer,
    from: u64,
    staging: &wgpu::Buffer,
    len: u64,
    read: impl FnOnce(&[u8]),
) -> Result<(), String> {
    ctx.uploads.flush(&ctx.device, &ctx.queue);
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, from, staging, 0, len);
    ctx.queue.submit([enc.finish()]);
    let slice = staging.slice(..len);
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
        read(&view);
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
        if self.split {
            return self.write_split(tensor, offset, data);
        }
        let start = self.range(tensor, offset, data.len() as u64)?;
        self.write(start, data)
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        if self.split {
            return self.read_split(tensor, offset, out);
        }
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
        // A range of ggml's layout is scattered over both runs: go through
        // set_tensor's conversion.
        if self.split {
            return self.write_split(tensor, offset, &vec![value; n]);
        }
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
        // Split bytes are copied as ggml's by the host (get + set).
        if self.split || self.ctx.is_split(src.buffer) {
            return Ok(false);
        }
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
        self.ctx.prefetch.forget();
        self.ctx.uploads.flush(&self.ctx.device, &self.ctx.queue);
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&sbuf, s, &self.buffer, d, n);
        self.ctx.queue.submit([enc.finish()]);
        Ok(true)
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        self.ctx.prefetch.forget();
        self.ctx.uploads.flush(&self.ctx.device, &self.ctx.queue);
        // Splitting only moves bytes, so a buffer of one value is that in
        // either layout.
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

/// Whether `graph[node]` runs with its weights (`src[0]`) in the split
/// layout: a MUL_MAT the device supports on a weight the layout holds;
/// otherwise why not.
fn runs_split(facts: &Facts, graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the graph ({} tensors)", graph.len()))?;
    let op = d.op().map_err(|e| e.to_string())?;
    if op != Op::MulMat {
        return Err(format!(
            "{op} cannot read weights in the split layout (only MUL_MAT)"
        ));
    }
    let w = d
        .src(0)
        .and_then(|s| graph.get(s))
        .ok_or("MUL_MAT without its weights")?;
    Split::for_tensor(w)?;
    crate::ops::supports(facts, graph, node)
}
