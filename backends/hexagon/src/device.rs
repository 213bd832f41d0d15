//! The backend contract over DSP sessions: one [`HexagonDevice`] per
//! session, its buffers in shared memory, and a stream that sends each
//! compute node of a graph to the DSP as one message.

use std::sync::Arc;

use backplane_abi::TensorDesc;
use backplane_abi::plugin::{
    Backend, Buffer, BufferType, Device, DeviceType, Memory, PluginError, Verdict,
};
use backplane_abi::support::memory::{LiveBuffers, check_access};

use crate::encode::{Planned, mib, plan_node};
use crate::msg::{HtpReq, vtcm_need};
use crate::session::Session;
use crate::transport::SharedMem;

/// Alignment of tensor offsets: one HVX vector.
pub const HEXAGON_ALIGNMENT: u64 = 128;
/// Largest buffer: rpcmem sizes are a C `int`.
pub const HEXAGON_MAX_BUFFER: u64 = (1 << 31) - 4096;

/// Live buffers of one device by id.
type BufferTable = Arc<LiveBuffers<()>>;

/// One DSP session as a device.
pub struct HexagonDevice {
    index: usize,
    session: Arc<Session>,
    buft: Arc<HexagonBufferType>,
}

impl HexagonDevice {
    /// The device over an opened session; `index` names it (`htp0`, buffer type `hexagon0`).
    pub fn new(index: usize, session: Session) -> HexagonDevice {
        let session = Arc::new(session);
        let buft = Arc::new(HexagonBufferType {
            index,
            session: session.clone(),
            buffers: Arc::new(LiveBuffers::new(format!("hexagon{index}"))),
        });
        HexagonDevice {
            index,
            session,
            buft,
        }
    }

    /// The VTCM budget ops are checked against.
    pub fn vtcm_budget(&self) -> u64 {
        self.session.info().vtcm_bytes
    }

    fn verdict(&self, graph: &[TensorDesc], node: usize) -> Result<(), String> {
        let Some(planned) = plan_node(graph, node)? else {
            return Ok(());
        };
        let need = vtcm_need(&planned.req, self.session.n_threads());
        let budget = self.vtcm_budget();
        if need > budget {
            return Err(format!(
                "needs {} of VTCM, budget {}",
                mib(need),
                mib(budget)
            ));
        }
        Ok(())
    }
}

impl Device for HexagonDevice {
    fn name(&self) -> String {
        format!("htp{}", self.index)
    }

    fn description(&self) -> String {
        let info = self.session.info();
        let how = match self.session.transport_kind() {
            "emulated" => "emulated on the host",
            _ => "FastRPC",
        };
        format!(
            "Hexagon HTP v{} session {} ({how}, {} HVX threads, {} VTCM)",
            info.arch,
            self.index,
            self.session.n_threads(),
            mib(info.vtcm_bytes)
        )
    }

    fn device_type(&self) -> DeviceType {
        DeviceType::Accel
    }

    fn memory(&self) -> Memory {
        Memory::default()
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        self.verdict(graph, node).into()
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }

    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        crate::refuse_stream_params(params)?;
        Ok(Box::new(HexagonStream {
            name: self.name(),
            session: self.session.clone(),
            buffers: self.buft.buffers.clone(),
        }))
    }
}

/// Shared (rpcmem) memory of one session.
pub struct HexagonBufferType {
    index: usize,
    session: Arc<Session>,
    buffers: BufferTable,
}

impl BufferType for HexagonBufferType {
    fn name(&self) -> String {
        format!("hexagon{}", self.index)
    }

    fn alloc_buffer(&self, size_bytes: u64) -> Result<Box<dyn Buffer>, PluginError> {
        if size_bytes > HEXAGON_MAX_BUFFER {
            return Err(PluginError::out_of_memory(format!(
                "buffer of {size_bytes} bytes is over the rpcmem limit of {HEXAGON_MAX_BUFFER}"
            )));
        }
        let (id, mem) = self.session.alloc_buffer(size_bytes.max(1))?;
        self.buffers.insert(id, size_bytes, ());
        Ok(Box::new(HexagonBuffer {
            id,
            mem,
            size: size_bytes,
            session: self.session.clone(),
            buffers: self.buffers.clone(),
        }))
    }

    fn alignment(&self) -> u64 {
        HEXAGON_ALIGNMENT
    }

    fn max_size(&self) -> u64 {
        HEXAGON_MAX_BUFFER
    }

    fn is_host(&self) -> bool {
        true
    }
}

/// One shared-memory buffer, bound to an id on the DSP.
pub struct HexagonBuffer {
    id: u64,
    mem: SharedMem,
    size: u64,
    session: Arc<Session>,
    buffers: BufferTable,
}

impl Drop for HexagonBuffer {
    fn drop(&mut self) {
        self.buffers.remove(self.id);
        self.session.free_buffer(self.id, &self.mem);
    }
}

impl HexagonBuffer {
    /// Byte offset in this buffer of `len` bytes at `offset` into `tensor`.
    fn range(&self, tensor: &TensorDesc, offset: u64, len: u64) -> Result<usize, PluginError> {
        let kind = self.buffers.kind();
        let start = check_access(kind, self.id, self.size, tensor, offset, len)?;
        // Inside the shared allocation, which is addressable.
        Ok(start as usize)
    }
}

impl Buffer for HexagonBuffer {
    fn id(&self) -> u64 {
        self.id
    }

    fn base(&self) -> usize {
        self.mem.ptr as usize
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn set_tensor(&self, tensor: &TensorDesc, offset: u64, data: &[u8]) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, data.len() as u64)?;
        // SAFETY: the range lies inside the shared allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.mem.ptr.add(start), data.len())
        };
        Ok(())
    }

    fn get_tensor(
        &self,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PluginError> {
        let start = self.range(tensor, offset, out.len() as u64)?;
        // SAFETY: the range lies inside the shared allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(self.mem.ptr.add(start), out.as_mut_ptr(), out.len())
        };
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
        // SAFETY: the range lies inside the shared allocation.
        unsafe { std::ptr::write_bytes(self.mem.ptr.add(start), value, size as usize) };
        Ok(())
    }

    fn clear(&self, value: u8) -> Result<(), PluginError> {
        // SAFETY: the whole allocation.
        unsafe { std::ptr::write_bytes(self.mem.ptr, value, self.size as usize) };
        Ok(())
    }
}

/// A stream: sends a graph's compute nodes to the session, in order.
pub struct HexagonStream {
    name: String,
    session: Arc<Session>,
    buffers: BufferTable,
}

impl HexagonStream {
    /// Checks every tensor a request touches lies inside a live buffer of this device.
    fn check_memory(
        &self,
        graph: &[TensorDesc],
        node: usize,
        planned: &Planned,
    ) -> Result<(), PluginError> {
        let table = self.buffers.lock();
        for &t in &planned.tensors {
            table
                .locate(Some(t), &graph[t])
                .map_err(|e| PluginError::bad_input(format!("node {node}: {e}")))?;
        }
        Ok(())
    }
}

impl Backend for HexagonStream {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let mut reqs: Vec<HtpReq> = Vec::new();
        let mut nodes: Vec<usize> = Vec::new();
        for node in 0..graph.len() {
            let planned = match plan_node(graph, node) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(reason) => {
                    return Err(PluginError::unsupported(format!("node {node}: {reason}")));
                }
            };
            self.check_memory(graph, node, &planned)?;
            reqs.push(planned.req);
            nodes.push(node);
        }
        if reqs.is_empty() {
            return Ok(());
        }
        let label = |i: usize| {
            let op = graph[nodes[i]].op().map(|o| o.name()).unwrap_or("?");
            format!("graph_compute node {} ({op})", nodes[i])
        };
        self.session
            .run_labelled(&mut reqs, "graph_compute", &label)
    }

    fn synchronize(&self) -> Result<(), PluginError> {
        self.session.sync()
    }
}
