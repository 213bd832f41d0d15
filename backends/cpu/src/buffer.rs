//! CPU buffers: host memory in ggml's layout (`cpu`), and the repacked
//! weight layout of [`crate::repack`] (`cpu_repack`), an extra buffer type
//! the host puts mat-mul weights in.
//!
//! Every buffer is registered in the library's [`BufferTable`] while it
//! lives, so a graph naming memory we never handed out is refused, and a
//! stream knows which tensors are repacked.

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc};
use std::sync::Arc;

use backplane_abi::plugin::{Buffer, BufferType, PluginError};
use backplane_abi::support::memory::{LiveBuffers, check_access};
use backplane_abi::{Op, TensorDesc};

use crate::repack::Repack;

/// Alignment of CPU buffers and of tensor offsets in them (one cache line,
/// enough for AVX-512 loads).
pub const CPU_ALIGNMENT: u64 = 64;

/// Name of the CPU buffer type.
pub const CPU_BUFFER_TYPE: &str = "cpu";

/// Name of the CPU's repacked weight buffer type.
pub const CPU_REPACK_BUFFER_TYPE: &str = "cpu_repack";

/// Huge page size on x86-64 and most aarch64 Linux systems.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back `len` bytes at `ptr` with transparent huge
/// pages (where it only does so on request); a refusal changes nothing
/// but speed.
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: the range is one live allocation of ours; MADV_HUGEPAGE only
    // changes how the kernel backs it, never its contents.
    unsafe {
        libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Live CPU buffers of this library by base address (their id), each
/// with whether tensors in it are in the repacked layout; used to check
/// that every tensor a graph names lies inside memory we handed out.
pub(crate) type BufferTable = Arc<LiveBuffers<bool>>;

/// An empty table of this library's buffers.
pub(crate) fn new_table() -> BufferTable {
    Arc::new(LiveBuffers::new(CPU_BUFFER_TYPE))
}

/// Host memory, 64-byte aligned, in ggml's layout or repacked.
pub struct CpuBufferType {
    buffers: BufferTable,
    repacked: bool,
}

impl CpuBufferType {
    /// The plain (`repacked = false`) or repacked buffer type over `buffers`.
    pub(crate) fn new(buffers: BufferTable, repacked: bool) -> CpuBufferType {
        CpuBufferType { buffers, repacked }
    }
}

impl BufferType for CpuBufferType {
    fn name(&self) -> String {
        if self.repacked {
            CPU_REPACK_BUFFER_TYPE
        } else {
            CPU_BUFFER_TYPE
        }
        .to_string()
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let size = usize::try_from(size_bytes)
            .map_err(|_| PluginError::out_of_memory(format!("cpu buffer of {size_bytes} bytes")))?;
        // Large buffers (weights, caches) start on a huge-page boundary and
        // ask for huge pages: streaming hundreds of megabytes of weights per
        // token through 4 KiB pages costs a page walk every 4 KiB.
        let align = if size >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            CPU_ALIGNMENT as usize
        };
        let layout = Layout::from_size_align(size.max(1), align).map_err(|e| {
            PluginError::out_of_memory(format!("cpu buffer of {size_bytes} bytes: {e}"))
        })?;
        let ptr = if size >= HUGE_PAGE {
            // Advise before the first touch (zeroing), or the pages are
            // already 4 KiB ones.
            // SAFETY: layout has nonzero size.
            let ptr = unsafe { alloc(layout) };
            if !ptr.is_null() {
                advise_huge_pages(ptr, size);
                // SAFETY: a fresh allocation of `size` bytes.
                unsafe { std::ptr::write_bytes(ptr, 0, size) };
            }
            ptr
        } else {
            // SAFETY: layout has nonzero size.
            unsafe { alloc_zeroed(layout) }
        };
        if ptr.is_null() {
            return Err(PluginError::out_of_memory(format!(
                "cpu buffer of {size_bytes} bytes"
            )));
        }
        self.buffers.insert(ptr as u64, size_bytes, self.repacked);
        Ok(Box::new(CpuBuffer {
            ptr,
            layout,
            size: size_bytes,
            repacked: self.repacked,
            buffers: self.buffers.clone(),
        }))
    }

    fn alignment(&self) -> u64 {
        CPU_ALIGNMENT
    }

    fn is_host(&self) -> bool {
        // Repacked bytes must not be read as ggml's.
        !self.repacked
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.repacked && runs_repacked(graph, node).is_ok()
    }
}

/// Whether `graph[node]` runs with its weights (`src[0]`) repacked: a
/// MUL_MAT (or the GET_ROWS of a tied embedding, which reads rows back)
/// the CPU supports, on a weight the layout and this CPU's kernels cover;
/// otherwise why not.
pub(crate) fn runs_repacked(graph: &[TensorDesc], node: usize) -> Result<(), String> {
    let d = graph.get(node).ok_or("node out of range")?;
    let op = d.op().map_err(|e| e.to_string())?;
    if !matches!(op, Op::MulMat | Op::GetRows) {
        return Err("only MUL_MAT and GET_ROWS read repacked weights".into());
    }
    let w = d
        .src(0)
        .and_then(|s| graph.get(s))
        .ok_or("an op without its weights")?;
    let r = Repack::for_tensor(w)?;
    if crate::simd::kernels().repacked(r.dtype).is_none() {
        return Err(format!("this CPU has no repacked {} kernel", r.dtype));
    }
    crate::CpuBackend::supports_node(graph, node)
}

/// One host allocation; its id is its base address.
pub struct CpuBuffer {
    ptr: *mut u8,
    layout: Layout,
    size: u64,
    repacked: bool,
    buffers: BufferTable,
}

// SAFETY: the buffer owns its allocation; concurrent access to the bytes is
// the host's responsibility as the contract states (as with ggml buffers).
unsafe impl Send for CpuBuffer {}
// SAFETY: as above.
unsafe impl Sync for CpuBuffer {}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        self.buffers.remove(self.ptr as u64);
        // SAFETY: allocated in alloc_buffer with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

impl CpuBuffer {
    /// Byte range `[start, start + len)` of this buffer for `offset` bytes
    /// into `tensor`, or an error when it falls outside.
    fn range(&self, tensor: &TensorDesc, offset: u64, len: u64) -> Result<usize, PluginError> {
        let kind = self.buffers.kind();
        let start = check_access(kind, self.ptr as u64, self.size, tensor, offset, len)?;
        // Inside an allocation of `size` bytes, which fit a usize.
        Ok(start as usize)
    }

    /// The repacked geometry of `tensor` and its whole bytes, after the
    /// same range check as every access.
    fn repacked(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        len: u64,
    ) -> Result<(Repack, *mut u8), PluginError> {
        self.range(tensor, offset, len)?;
        let r = Repack::for_tensor(tensor).map_err(|e| {
            PluginError::bad_input(format!("tensor in a {CPU_REPACK_BUFFER_TYPE} buffer: {e}"))
        })?;
        // The range check covered offset 0 of the tensor too.
        Ok((r, self.ptr.wrapping_add(tensor.offset as usize)))
    }
}

impl Buffer for CpuBuffer {
    fn id(&self) -> u64 {
        self.ptr as u64
    }

    fn base(&self) -> usize {
        if self.repacked { 0 } else { self.ptr as usize }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        if self.repacked {
            let (r, p) = self.repacked(tensor, offset, data.len() as u64)?;
            // SAFETY: the tensor lies inside the allocation (range checked);
            // exclusive access during the call is the host's contract.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p, tensor.nbytes() as usize) };
            r.write(bytes, offset as usize, data);
            return Ok(());
        }
        let start = self.range(tensor, offset, data.len() as u64)?;
        // SAFETY: range checked against the allocation.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(start), data.len()) };
        Ok(())
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        if self.repacked {
            let (r, p) = self.repacked(tensor, offset, out.len() as u64)?;
            // SAFETY: as in set_tensor, reading only.
            let bytes = unsafe { std::slice::from_raw_parts(p, tensor.nbytes() as usize) };
            r.read(bytes, offset as usize, out);
            return Ok(());
        }
        let start = self.range(tensor, offset, out.len() as u64)?;
        // SAFETY: range checked against the allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(start), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, size)?;
        // A range of ggml's layout is scattered over repacked groups: go
        // through set_tensor's conversion.
        if self.repacked {
            return self.set_tensor(tensor, offset, &vec![value; size as usize]);
        }
        // SAFETY: range checked against the allocation.
        unsafe { std::ptr::write_bytes(self.ptr.add(start), value, size as usize) };
        Ok(())
    }

    fn cpy_tensor(&self, src: &TensorDesc, dst: &TensorDesc) -> Result<bool, PluginError> {
        let n = src.nbytes();
        if n != dst.nbytes() {
            return Err(PluginError::bad_input(format!(
                "copy of {n} bytes into a {}-byte tensor",
                dst.nbytes()
            )));
        }
        let dst_start = self.range(dst, 0, n)?;
        if self.repacked {
            // The host converts through get_tensor / set_tensor.
            return Ok(false);
        }
        let src_ptr = match self.buffers.locate(None, src) {
            Ok(live) if !live.data => (src.buffer as usize + src.offset as usize) as *const u8,
            _ => return Ok(false),
        };
        // SAFETY: both ranges checked against live allocations; `copy` allows overlap.
        unsafe { std::ptr::copy(src_ptr, self.ptr.add(dst_start), n as usize) };
        Ok(true)
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        // Repacking only moves bytes, so a buffer of one value is that in
        // either layout.
        // SAFETY: the whole allocation.
        unsafe { std::ptr::write_bytes(self.ptr, value, self.size as usize) };
        Ok(())
    }
}
