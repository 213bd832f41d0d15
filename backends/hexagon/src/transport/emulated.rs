//! The emulated DSP: `htp/` and `emu/htp-emu.c` linked into this library
//! (see build.rs), driven through the same entry points as the real one.

use std::sync::Mutex;

use backplane_hexagon_sys::HapPowerHmxV2;

use super::{SharedMem, Transport, TransportError};
use crate::msg::{self, HtpDspInfo, HtpReq, HtpRsp};

/// `HTP_EMU_EEXPIRED`.
const EMU_EEXPIRED: i32 = 12;

unsafe extern "C" {
    fn htp_iface_open(uri: *const std::ffi::c_char, handle: *mut u64) -> i32;
    fn htp_iface_close(handle: u64) -> i32;
    fn htp_iface_power(handle: u64, req: *const HapPowerHmxV2) -> i32;
    fn htp_iface_info(handle: u64, info: *mut HtpDspInfo) -> i32;
    fn htp_iface_start(handle: u64, session_id: u32, queue_id: u64, n_hvx: u32) -> i32;
    fn htp_iface_stop(handle: u64) -> i32;
    fn htp_emu_rpcmem_alloc(size: u64, fd: *mut i32) -> *mut u8;
    fn htp_emu_rpcmem_free(ptr: *mut u8);
    fn htp_emu_queue_create(depth: u32, queue_id: *mut u64) -> i32;
    fn htp_emu_queue_close(queue_id: u64) -> i32;
    fn htp_emu_queue_write(queue_id: u64, msg: *const u8, len: u32, timeout_us: u32) -> i32;
    fn htp_emu_queue_read(
        queue_id: u64,
        msg: *mut u8,
        max_len: u32,
        len: *mut u32,
        timeout_us: u32,
    ) -> i32;
    fn htp_emu_struct_sizes(req: *mut u32, rsp: *mut u32, hmx: *mut u32, info: *mut u32);
}

/// `sizeof` of `htp_req`, `htp_rsp`, `htp_hmx_clock` and `htp_dsp_info` as
/// the C compiler lays them out (tests compare them with the Rust mirrors).
pub fn c_struct_sizes() -> [u32; 4] {
    let mut s = [0u32; 4];
    let [a, b, c, d] = &mut s;
    // SAFETY: writes four u32 through valid pointers.
    unsafe { htp_emu_struct_sizes(a, b, c, d) };
    s
}

/// A session of the emulated DSP.
pub struct EmulatedTransport {
    handle: u64,
    queue: Mutex<Option<u64>>,
}

impl EmulatedTransport {
    /// Opens a session (`htp_iface_open`) of the emulated DSP at `uri`.
    pub fn open(uri: &str) -> Result<EmulatedTransport, TransportError> {
        let c_uri = std::ffi::CString::new(uri).map_err(|_| TransportError::Open {
            uri: uri.to_string(),
            code: -1,
        })?;
        let mut handle = 0u64;
        // SAFETY: a NUL-terminated string and a valid out pointer.
        let rc = unsafe { htp_iface_open(c_uri.as_ptr(), &mut handle) };
        if rc != 0 {
            return Err(TransportError::Open {
                uri: uri.to_string(),
                code: rc,
            });
        }
        Ok(EmulatedTransport {
            handle,
            queue: Mutex::new(None),
        })
    }

    fn queue_id(&self) -> Result<u64, TransportError> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or(TransportError::Call {
                what: "dspqueue (session not started)",
                code: -1,
            })
    }
}

impl Transport for EmulatedTransport {
    fn kind(&self) -> &'static str {
        "emulated"
    }

    fn vote_hmx_clock(&self, req: &HapPowerHmxV2) -> Result<(), TransportError> {
        // SAFETY: an open handle and a valid request.
        let rc = unsafe { htp_iface_power(self.handle, req) };
        if rc != 0 {
            Err(TransportError::HmxClock { code: rc })
        } else {
            Ok(())
        }
    }

    fn info(&self) -> Result<HtpDspInfo, TransportError> {
        let mut info = HtpDspInfo::default();
        // SAFETY: an open handle and a valid out pointer.
        let rc = unsafe { htp_iface_info(self.handle, &mut info) };
        if rc != 0 {
            Err(TransportError::Call {
                what: "htp_iface_info",
                code: rc,
            })
        } else {
            Ok(info)
        }
    }

    fn start(&self, session_id: u32, n_hvx: u32, depth: u32) -> Result<(), TransportError> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_some() {
            return Err(TransportError::Call {
                what: "htp_iface_start (already started)",
                code: -1,
            });
        }
        let mut id = 0u64;
        // SAFETY: a valid out pointer.
        let rc = unsafe { htp_emu_queue_create(depth, &mut id) };
        if rc != 0 {
            return Err(TransportError::Call {
                what: "dspqueue_create",
                code: rc,
            });
        }
        // SAFETY: an open handle and the queue just created.
        let rc = unsafe { htp_iface_start(self.handle, session_id, id, n_hvx) };
        if rc != 0 {
            // SAFETY: the queue is ours and unused.
            unsafe { htp_emu_queue_close(id) };
            return Err(TransportError::Call {
                what: "htp_iface_start",
                code: rc,
            });
        }
        *q = Some(id);
        Ok(())
    }

    fn alloc_shared(&self, size: u64) -> Result<SharedMem, TransportError> {
        let mut fd = 0i32;
        // SAFETY: a valid out pointer.
        let ptr = unsafe { htp_emu_rpcmem_alloc(size, &mut fd) };
        if ptr.is_null() {
            return Err(TransportError::Call {
                what: "rpcmem_alloc",
                code: 2,
            });
        }
        Ok(SharedMem { ptr, size, fd })
    }

    fn free_shared(&self, mem: &SharedMem) {
        // SAFETY: memory from htp_emu_rpcmem_alloc, freed once by its owner.
        unsafe { htp_emu_rpcmem_free(mem.ptr) };
    }

    fn write(&self, req: &HtpReq, timeout_us: u32) -> Result<(), TransportError> {
        let q = self.queue_id()?;
        let bytes = msg::as_bytes(req);
        // SAFETY: a live queue and a valid message.
        let rc = unsafe { htp_emu_queue_write(q, bytes.as_ptr(), bytes.len() as u32, timeout_us) };
        match rc {
            0 => Ok(()),
            EMU_EEXPIRED => Err(TransportError::QueueFull {
                waited_us: timeout_us,
            }),
            _ => Err(TransportError::Call {
                what: "dspqueue_write",
                code: rc,
            }),
        }
    }

    fn read(&self, timeout_us: u32) -> Result<HtpRsp, TransportError> {
        let q = self.queue_id()?;
        let mut buf = [0u8; std::mem::size_of::<HtpRsp>()];
        let mut len = 0u32;
        // SAFETY: a live queue and a buffer of the stated size.
        let rc = unsafe {
            htp_emu_queue_read(q, buf.as_mut_ptr(), buf.len() as u32, &mut len, timeout_us)
        };
        match rc {
            0 => Ok(msg::from_bytes(&buf[..len as usize])),
            EMU_EEXPIRED => Err(TransportError::Timeout {
                waited_us: timeout_us,
            }),
            _ => Err(TransportError::Call {
                what: "dspqueue_read",
                code: rc,
            }),
        }
    }
}

impl Drop for EmulatedTransport {
    fn drop(&mut self) {
        let q = self
            .queue
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // SAFETY: the handle is open; stop joins the DSP thread before the
        // queue it reads is closed.
        unsafe {
            if q.is_some() {
                htp_iface_stop(self.handle);
            }
            htp_iface_close(self.handle);
            if let Some(q) = q {
                htp_emu_queue_close(q);
            }
        }
    }
}
