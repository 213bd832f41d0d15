//! A real compute-DSP session through `libcdsprpc.so`.
//!
//! The DSP library (`libbackplane_htp_skel.so`, built from `htp/` with the
//! Hexagon SDK and qaic from `htp/htp_iface.idl`) is opened by URI; its
//! methods are invoked with the marshalling qaic generates for them: all
//! primitive inputs packed into one input buffer, primitive outputs into one
//! output buffer. Method ids 0 and 1 are `open` and `close`.
//!
//! Tested without a Snapdragon against the test double of `libcdsprpc.so`
//! that build.rs makes from `emu/cdsprpc-double*.c`: it unmarshals invokes
//! as qaic's skel does and runs `htp/htp-dsp.c` (the DSP platform layer) with
//! the message loop and kernels in process (see `src/tests_fastrpc.rs` and
//! `tests/fastrpc_plugin.rs`).

use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex};

use backplane_hexagon_sys::{
    AEE_EEXPIRED, CDSP_DOMAIN_ID, CdspRpc, DSPRPC_CONTROL_UNSIGNED_MODULE, DspQueue,
    FASTRPC_MAP_FD, HapPowerHmxV2, RPCMEM_DEFAULT_FLAGS, RPCMEM_HEAP_ID_SYSTEM, RemoteArg,
    RemoteBuf, RemoteRpcControlUnsignedModule, remote_scalars_make,
};

use super::{SharedMem, Transport, TransportError};
use crate::msg::{self, HtpDspInfo, HtpReq, HtpRsp};

/// Method ids of htp_iface.idl.
mod method {
    pub const START: u32 = 2;
    pub const STOP: u32 = 3;
    pub const POWER: u32 = 4;
    pub const INFO: u32 = 5;
}

/// Bytes a dspqueue packet takes beyond its message (header and alignment),
/// allowed for when sizing the queues so `depth` packets fit.
const DSPQUEUE_PACKET_OVERHEAD: u32 = 64;

/// A dspqueue handle that may cross threads (the library locks internally).
struct Queue(DspQueue);
// SAFETY: dspqueue handles are usable from any thread of the process.
unsafe impl Send for Queue {}

/// A FastRPC session on the compute DSP.
pub struct FastRpcTransport {
    api: Arc<CdspRpc>,
    handle: u64,
    queue: Mutex<Option<Queue>>,
}

impl FastRpcTransport {
    /// Enables the unsigned PD and opens the session at `uri`.
    pub fn open(api: Arc<CdspRpc>, uri: &str) -> Result<FastRpcTransport, TransportError> {
        let mut ctrl = RemoteRpcControlUnsignedModule {
            domain: CDSP_DOMAIN_ID,
            enable: 1,
        };
        // SAFETY: the control struct outlives the call and its size is passed.
        let rc = unsafe {
            (api.remote_session_control)(
                DSPRPC_CONTROL_UNSIGNED_MODULE,
                (&mut ctrl as *mut RemoteRpcControlUnsignedModule).cast::<c_void>(),
                std::mem::size_of::<RemoteRpcControlUnsignedModule>() as u32,
            )
        };
        if rc != 0 {
            return Err(TransportError::Call {
                what: "remote_session_control(unsigned PD)",
                code: rc,
            });
        }
        let c_uri = CString::new(uri).map_err(|_| TransportError::Open {
            uri: uri.to_string(),
            code: -1,
        })?;
        let mut handle = 0u64;
        // SAFETY: a NUL-terminated URI and a valid out pointer.
        let rc = unsafe { (api.remote_handle64_open)(c_uri.as_ptr(), &mut handle) };
        if rc != 0 {
            return Err(TransportError::Open {
                uri: uri.to_string(),
                code: rc,
            });
        }
        Ok(FastRpcTransport {
            api,
            handle,
            queue: Mutex::new(None),
        })
    }

    /// Invokes `method` with one packed input and one packed output buffer (either may be empty).
    fn invoke(
        &self,
        what: &'static str,
        method: u32,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), TransportError> {
        let mut args = Vec::with_capacity(2);
        if !input.is_empty() {
            args.push(RemoteArg {
                buf: RemoteBuf {
                    pv: input.as_ptr() as *mut c_void,
                    n_len: input.len(),
                },
            });
        }
        if !output.is_empty() {
            args.push(RemoteArg {
                buf: RemoteBuf {
                    pv: output.as_mut_ptr().cast::<c_void>(),
                    n_len: output.len(),
                },
            });
        }
        let scalars = remote_scalars_make(
            method,
            u32::from(!input.is_empty()),
            u32::from(!output.is_empty()),
        );
        // SAFETY: the buffers outlive the call; the scalars word counts them.
        let rc =
            unsafe { (self.api.remote_handle64_invoke)(self.handle, scalars, args.as_mut_ptr()) };
        if rc != 0 {
            Err(TransportError::Call { what, code: rc })
        } else {
            Ok(())
        }
    }

    fn queue(&self) -> Result<DspQueue, TransportError> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|q| q.0)
            .ok_or(TransportError::Call {
                what: "dspqueue (session not started)",
                code: -1,
            })
    }
}

impl Transport for FastRpcTransport {
    fn kind(&self) -> &'static str {
        "fastrpc"
    }

    fn vote_hmx_clock(&self, req: &HapPowerHmxV2) -> Result<(), TransportError> {
        self.invoke("htp_iface_power", method::POWER, &req.to_bytes(), &mut [])
            .map_err(|e| match e {
                TransportError::Call { code, .. } => TransportError::HmxClock { code },
                other => other,
            })
    }

    fn info(&self) -> Result<HtpDspInfo, TransportError> {
        let mut out = [0u8; std::mem::size_of::<HtpDspInfo>()];
        self.invoke("htp_iface_info", method::INFO, &[], &mut out)?;
        Ok(msg::from_bytes(&out))
    }

    fn start(&self, session_id: u32, n_hvx: u32, depth: u32) -> Result<(), TransportError> {
        let mut q: DspQueue = std::ptr::null_mut();
        let packet = |msg: usize| msg as u32 + DSPQUEUE_PACKET_OVERHEAD;
        let req_bytes = depth.saturating_mul(packet(std::mem::size_of::<HtpReq>()));
        let rsp_bytes = depth.saturating_mul(packet(std::mem::size_of::<HtpRsp>()));
        // SAFETY: no callbacks (polling mode); a valid out pointer.
        let rc = unsafe {
            (self.api.dspqueue_create)(
                CDSP_DOMAIN_ID,
                0,
                req_bytes,
                rsp_bytes,
                None,
                None,
                std::ptr::null_mut(),
                &mut q,
            )
        };
        if rc != 0 {
            return Err(TransportError::Call {
                what: "dspqueue_create",
                code: rc,
            });
        }
        let mut id = 0u64;
        // SAFETY: the queue was just created.
        let rc = unsafe { (self.api.dspqueue_export)(q, &mut id) };
        let started = if rc != 0 {
            Err(TransportError::Call {
                what: "dspqueue_export",
                code: rc,
            })
        } else {
            // qaic packs (uint32 session_id, uint64 queue_id, uint32 n_hvx) with natural alignment.
            let mut input = [0u8; 24];
            input[..4].copy_from_slice(&session_id.to_ne_bytes());
            input[8..16].copy_from_slice(&id.to_ne_bytes());
            input[16..20].copy_from_slice(&n_hvx.to_ne_bytes());
            self.invoke("htp_iface_start", method::START, &input, &mut [])
        };
        if let Err(e) = started {
            // SAFETY: the queue is ours and unused.
            unsafe { (self.api.dspqueue_close)(q) };
            return Err(e);
        }
        *self.queue.lock().unwrap_or_else(|e| e.into_inner()) = Some(Queue(q));
        Ok(())
    }

    fn alloc_shared(&self, size: u64) -> Result<SharedMem, TransportError> {
        let len = i32::try_from(size).map_err(|_| TransportError::Call {
            what: "rpcmem_alloc (size over 2 GiB)",
            code: -1,
        })?;
        // SAFETY: plain allocation call.
        let ptr = unsafe {
            (self.api.rpcmem_alloc)(RPCMEM_HEAP_ID_SYSTEM, RPCMEM_DEFAULT_FLAGS, len.max(1))
        };
        if ptr.is_null() {
            return Err(TransportError::Call {
                what: "rpcmem_alloc",
                code: 2,
            });
        }
        // SAFETY: ptr came from rpcmem_alloc.
        let fd = unsafe { (self.api.rpcmem_to_fd)(ptr) };
        // SAFETY: maps the whole allocation by its fd.
        let rc = unsafe {
            (self.api.fastrpc_mmap)(CDSP_DOMAIN_ID, fd, ptr, 0, size as usize, FASTRPC_MAP_FD)
        };
        if rc != 0 {
            // SAFETY: unmapped, ours.
            unsafe { (self.api.rpcmem_free)(ptr) };
            return Err(TransportError::Call {
                what: "fastrpc_mmap",
                code: rc,
            });
        }
        Ok(SharedMem {
            ptr: ptr.cast::<u8>(),
            size,
            fd,
        })
    }

    fn free_shared(&self, mem: &SharedMem) {
        // SAFETY: memory from alloc_shared, released once by its owner.
        unsafe {
            (self.api.fastrpc_munmap)(
                CDSP_DOMAIN_ID,
                mem.fd,
                mem.ptr.cast::<c_void>(),
                mem.size as usize,
            );
            (self.api.rpcmem_free)(mem.ptr.cast::<c_void>());
        }
    }

    fn write(&self, req: &HtpReq, timeout_us: u32) -> Result<(), TransportError> {
        let q = self.queue()?;
        let bytes = msg::as_bytes(req);
        // SAFETY: a live queue; the message outlives the call (it is copied).
        let rc = unsafe {
            (self.api.dspqueue_write)(
                q,
                0,
                0,
                std::ptr::null_mut(),
                bytes.len() as u32,
                bytes.as_ptr(),
                timeout_us,
            )
        };
        match rc {
            0 => Ok(()),
            AEE_EEXPIRED => Err(TransportError::QueueFull {
                waited_us: timeout_us,
            }),
            _ => Err(TransportError::Call {
                what: "dspqueue_write",
                code: rc,
            }),
        }
    }

    fn read(&self, timeout_us: u32) -> Result<HtpRsp, TransportError> {
        let q = self.queue()?;
        let mut buf = [0u8; std::mem::size_of::<HtpRsp>()];
        let (mut flags, mut n_bufs, mut len) = (0u32, 0u32, 0u32);
        // SAFETY: a live queue and buffers of the stated sizes.
        let rc = unsafe {
            (self.api.dspqueue_read)(
                q,
                &mut flags,
                0,
                &mut n_bufs,
                std::ptr::null_mut(),
                buf.len() as u32,
                &mut len,
                buf.as_mut_ptr(),
                timeout_us,
            )
        };
        match rc {
            0 => Ok(msg::from_bytes(&buf[..(len as usize).min(buf.len())])),
            AEE_EEXPIRED => Err(TransportError::Timeout {
                waited_us: timeout_us,
            }),
            _ => Err(TransportError::Call {
                what: "dspqueue_read",
                code: rc,
            }),
        }
    }
}

impl Drop for FastRpcTransport {
    fn drop(&mut self) {
        let q = self
            .queue
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(q) = q {
            let _ = self.invoke("htp_iface_stop", method::STOP, &[], &mut []);
            // SAFETY: the DSP loop has stopped using the queue.
            unsafe { (self.api.dspqueue_close)(q.0) };
        }
        // SAFETY: the handle is open and closed once.
        unsafe { (self.api.remote_handle64_close)(self.handle) };
    }
}
