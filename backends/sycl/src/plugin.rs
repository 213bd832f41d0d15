//! The plugin contract of `backplane-abi` over SYCL devices: registration,
//! devices, device-memory buffers (USM) and streams (in-order queues).

use std::sync::{Arc, OnceLock};

use backplane_abi::plugin::{
    Backend, Buffer, BufferType, Device, DeviceCaps, DeviceType, Memory, PluginError, Reg, Verdict,
};
use backplane_abi::support::memory::{LiveBuffers, check_access};
use backplane_abi::{Op, TensorDesc};

pub use crate::context::ALIGNMENT;
use crate::context::{Ctx, Scratch};
use crate::kernels::Library;
use crate::ops;
use crate::options::Settings;
use crate::reorder::{REORDER_SUFFIX, Reorder};
use crate::runtime::{DeviceInfo, DeviceKind, Queue, runtime};

/// The SYCL backend's registration: one device per SYCL device.
pub struct SyclReg {
    devices: Vec<Arc<SyclDevice>>,
    reason: Option<String>,
}

impl SyclReg {
    /// Enumerates the runtime's devices (none, with the reason, when the
    /// runtime or its devices are missing).
    pub fn new() -> SyclReg {
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => {
                return SyclReg {
                    devices: Vec::new(),
                    reason: Some(e),
                };
            }
        };
        match rt.devices() {
            Ok(infos) if infos.is_empty() => SyclReg {
                devices: Vec::new(),
                reason: Some("the SYCL runtime found no device (for the OpenCL CPU device set OCL_ICD_FILENAMES=<venv>/lib/libintelocl.so)".into()),
            },
            Ok(infos) => {
                let settings = Settings::from_env();
                let devices = infos
                    .into_iter()
                    .enumerate()
                    .map(|(i, info)| Arc::new(SyclDevice::new(format!("sycl{i}"), info, settings)))
                    .collect();
                SyclReg { devices, reason: None }
            }
            Err(e) => SyclReg { devices: Vec::new(), reason: Some(format!("SYCL device enumeration failed: {e}")) },
        }
    }
}

impl Default for SyclReg {
    fn default() -> Self {
        SyclReg::new()
    }
}

impl Reg for SyclReg {
    fn name(&self) -> String {
        "sycl".into()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.devices
            .iter()
            .map(|d| d.clone() as Arc<dyn Device>)
            .collect()
    }

    fn no_device_reason(&self) -> Option<String> {
        self.reason.clone()
    }
}

/// One SYCL device.
pub struct SyclDevice {
    name: String,
    info: DeviceInfo,
    settings: Settings,
    ctx: OnceLock<Result<Arc<Ctx>, String>>,
}

impl SyclDevice {
    fn new(name: String, info: DeviceInfo, settings: Settings) -> SyclDevice {
        SyclDevice {
            name,
            info,
            settings,
            ctx: OnceLock::new(),
        }
    }

    /// The shared context, created on first use.
    fn ctx(&self) -> Result<Arc<Ctx>, PluginError> {
        self.ctx
            .get_or_init(|| {
                let rt = runtime()?;
                let queue = Queue::new(rt, self.info.index)?;
                Ok(Arc::new(Ctx {
                    info: self.info.clone(),
                    settings: self.settings,
                    queue,
                    library: Library::with_log(self.settings.log),
                    buffers: LiveBuffers::new(self.name.clone()),
                }))
            })
            .clone()
            .map_err(|e| PluginError::other(format!("{}: {e}", self.name)))
    }

    /// Name of this device's reordered buffer type (`sycl0_reorder`).
    fn reorder_name(&self) -> String {
        format!("{}{REORDER_SUFFIX}", self.name)
    }

    /// Whether the device offers the reordered layout: where the reorder
    /// optimisation applies ([`crate::policy::reorder_offered`]) and SYCL
    /// source can be built.
    fn offers_reorder(&self) -> bool {
        self.info.can_compile_sycl
            && crate::policy::reorder_offered(&self.info.arch, self.settings.toggles)
    }

    /// The plain or reordered buffer type of this device.
    fn buffer_type_of(&self, reordered: bool) -> SyclBufferType {
        SyclBufferType {
            name: if reordered {
                self.reorder_name()
            } else {
                self.name.clone()
            },
            ctx: self.ctx(),
            max: self.info.max_alloc_bytes,
            reordered,
            info: self.info.clone(),
            settings: self.settings,
        }
    }
}

impl Device for SyclDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn description(&self) -> String {
        let i = &self.info;
        format!(
            "{} ({} {}, arch {}, family {}, id {:#06x}, {} CUs, max wg {}, sub-groups {:?}, {} MiB)",
            i.name,
            i.backend,
            i.driver_version,
            i.arch.name,
            i.arch.family,
            i.device_id,
            i.compute_units,
            i.max_work_group_size,
            i.sub_group_sizes,
            i.global_mem_bytes >> 20
        )
    }

    fn device_type(&self) -> DeviceType {
        match self.info.kind {
            DeviceKind::Cpu => DeviceType::Cpu,
            DeviceKind::Gpu
                if self.info.arch.family.is_intel_gpu()
                    && self.info.arch.family <= crate::arch::Family::IGpuXe =>
            {
                DeviceType::IGpu
            }
            DeviceKind::Gpu => DeviceType::Gpu,
            _ => DeviceType::Accel,
        }
    }

    fn memory(&self) -> Memory {
        let free = if self.info.free_mem_bytes > 0 {
            self.info.free_mem_bytes
        } else {
            self.info.global_mem_bytes
        };
        Memory {
            free_bytes: free,
            total_bytes: self.info.global_mem_bytes,
        }
    }

    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        if !self.info.can_compile_sycl {
            return Verdict::unsupported(format!(
                "{} cannot build SYCL source at run time (no libsycl-jit)",
                self.name
            ));
        }
        ops::supports(graph, node, &self.info, self.settings.toggles).into()
    }

    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        let _ = is_host;
        name == self.name || name == self.reorder_name()
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        Arc::new(self.buffer_type_of(false))
    }

    fn extra_buffer_types(&self) -> Vec<Arc<dyn BufferType>> {
        if self.offers_reorder() {
            vec![Arc::new(self.buffer_type_of(true))]
        } else {
            Vec::new()
        }
    }

    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        let settings = Settings::from_params(params)?;
        Ok(Box::new(SyclStream {
            name: self.name.clone(),
            settings,
            ctx: self.ctx()?,
            scratch: Scratch::default(),
        }))
    }
}

/// Device memory (USM device allocations) of one device, in ggml's
/// layout or reordered ([`crate::reorder`]).
pub struct SyclBufferType {
    name: String,
    ctx: Result<Arc<Ctx>, PluginError>,
    max: u64,
    reordered: bool,
    info: DeviceInfo,
    settings: Settings,
}

impl BufferType for SyclBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        let ctx = self.ctx.clone()?;
        let size = usize::try_from(size_bytes)
            .map_err(|_| PluginError::out_of_memory(format!("{size_bytes} bytes")))?;
        let ptr = ctx
            .queue
            .malloc(size.max(1), ALIGNMENT as usize)
            .map_err(|e| PluginError::out_of_memory(format!("{}: {e}", self.name)))?;
        ctx.buffers.insert(ptr as u64, size_bytes, self.reordered);
        Ok(Box::new(SyclBuffer {
            ptr,
            size: size_bytes,
            ctx,
            reordered: self.reordered,
        }))
    }

    fn alignment(&self) -> u64 {
        ALIGNMENT
    }

    fn max_size(&self) -> u64 {
        self.max
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> bool {
        self.reordered
            && ops::runs_reordered(graph, node, &self.info, self.settings.toggles).is_ok()
    }
}

/// One device allocation; its id is its device address.
pub struct SyclBuffer {
    ptr: *mut u8,
    size: u64,
    ctx: Arc<Ctx>,
    reordered: bool,
}

// SAFETY: the buffer owns its allocation; all access goes through the queue.
unsafe impl Send for SyclBuffer {}
// SAFETY: as above.
unsafe impl Sync for SyclBuffer {}

impl Drop for SyclBuffer {
    fn drop(&mut self) {
        self.ctx.buffers.remove(self.ptr as u64);
        let _ = self.ctx.queue.wait();
        let _ = self.ctx.queue.free(self.ptr);
    }
}

impl SyclBuffer {
    fn range(&self, tensor: &TensorDesc, offset: u64, len: u64) -> Result<*mut u8, PluginError> {
        let kind = self.ctx.buffers.kind();
        let start = check_access(kind, self.ptr as u64, self.size, tensor, offset, len)?;
        // SAFETY: inside the allocation (checked above).
        Ok(unsafe { self.ptr.add(start as usize) })
    }

    /// The reordered geometry of `tensor` and its device address, after
    /// the same range check as every access (and one of the whole tensor).
    fn reordered_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        len: u64,
    ) -> Result<(Reorder, *mut u8), PluginError> {
        self.range(tensor, offset, len)?;
        let base = self.range(tensor, 0, tensor.nbytes())?;
        let r = Reorder::for_tensor(tensor).map_err(|e| {
            PluginError::bad_input(format!(
                "tensor in a {} buffer: {e}",
                self.ctx.reorder_name()
            ))
        })?;
        Ok((r, base))
    }
}

impl Buffer for SyclBuffer {
    fn id(&self) -> u64 {
        self.ptr as u64
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        if self.reordered {
            let (r, base) = self.reordered_tensor(tensor, offset, data.len() as u64)?;
            return crate::reorder::write(&self.ctx.queue, r, base, offset as usize, data)
                .map_err(PluginError::other);
        }
        let p = self.range(tensor, offset, data.len() as u64)?;
        // SAFETY: the device range is inside this buffer; the host slice
        // lives until the blocking copy returns.
        unsafe { self.ctx.queue.memcpy(p, data.as_ptr(), data.len(), true) }
            .map_err(PluginError::other)
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        if self.reordered {
            let (r, base) = self.reordered_tensor(tensor, offset, out.len() as u64)?;
            return crate::reorder::read(&self.ctx.queue, r, base, offset as usize, out)
                .map_err(PluginError::other);
        }
        let p = self.range(tensor, offset, out.len() as u64)?;
        // SAFETY: as in set_tensor.
        unsafe { self.ctx.queue.memcpy(out.as_mut_ptr(), p, out.len(), true) }
            .map_err(PluginError::other)
    }

    fn memset_tensor(
        &self,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), PluginError> {
        let p = self.range(tensor, offset, size)?;
        // A range of ggml's layout is scattered over both regions: go
        // through set_tensor's conversion.
        if self.reordered {
            return self.set_tensor(tensor, offset, &vec![value; size as usize]);
        }
        // SAFETY: inside this buffer.
        unsafe { self.ctx.queue.memset(p, value, size as usize, true) }.map_err(PluginError::other)
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
        // Reordered bytes are copied as ggml's by the host (get + set).
        if self.reordered || self.ctx.is_reordered(src) {
            return Ok(false);
        }
        let Ok(s) = self.ctx.address(None, src) else {
            return Ok(false);
        };
        // SAFETY: both ranges checked against live buffers of this device.
        unsafe { self.ctx.queue.memcpy(d, s, n as usize, true) }.map_err(PluginError::other)?;
        Ok(true)
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        // Reordering only moves bytes, so a buffer of one value is that in
        // either layout.
        // SAFETY: the whole allocation.
        unsafe {
            self.ctx
                .queue
                .memset(self.ptr, value, self.size as usize, true)
        }
        .map_err(PluginError::other)
    }
}

/// A stream: the device's queue; graphs run in order and `graph_compute`
/// returns when they are done.
pub struct SyclStream {
    name: String,
    /// This stream's options.
    pub settings: Settings,
    ctx: Arc<Ctx>,
    scratch: Scratch,
}

impl Drop for SyclStream {
    fn drop(&mut self) {
        self.scratch.release(&self.ctx.queue);
    }
}

impl Backend for SyclStream {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let mut ptrs = vec![std::ptr::null_mut::<u8>(); graph.len()];
        let mut reordered = vec![false; graph.len()];
        self.ctx.buffers.lock().check_graph(graph, |i, t, live| {
            ptrs[i] = (t.buffer as usize + t.offset as usize) as *mut u8;
            reordered[i] = live.data;
        })?;
        for (i, t) in graph.iter().enumerate() {
            let op = t
                .op()
                .map_err(|e| PluginError::unsupported(e.to_string()))?;
            if op == Op::None || op.is_view() {
                continue;
            }
            let exec = ops::Exec {
                ctx: &self.ctx,
                settings: &self.settings,
                scratch: &self.scratch,
                graph,
                ptrs: &ptrs,
                reordered: &reordered,
            };
            exec.run(i)
                .map_err(|e| PluginError::other(format!("{}: node {i} ({op}): {e}", self.name)))?;
        }
        self.ctx
            .queue
            .wait()
            .map_err(|e| PluginError::other(format!("{}: {e}", self.name)))
    }

    fn synchronize(&self) -> Result<(), PluginError> {
        self.ctx.queue.wait().map_err(PluginError::other)
    }
}
