//! The host's mirror of `htp/htp-msg.h`: the request and response records
//! exchanged with the DSP, and the DSP status codes.

use backplane_abi::plugin::{PluginError, error_kind};

/// Sources per request.
pub const MAX_SRC: usize = 4;
/// Bytes of a response's detail text.
pub const RSP_DETAIL: usize = 96;

/// `enum htp_msg_kind`.
pub mod kind {
    /// Run one op.
    pub const OP: u32 = 1;
    /// Bind a buffer id to shared memory.
    pub const MAP: u32 = 2;
    /// Forget a buffer id.
    pub const UNMAP: u32 = 3;
    /// Answered when everything before it is done.
    pub const SYNC: u32 = 4;
}

/// `enum htp_op`: the ops the DSP runs.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HtpOp {
    /// MUL_MAT.
    MulMat = 0,
    /// ADD.
    Add = 1,
    /// SUB.
    Sub = 2,
    /// MUL.
    Mul = 3,
    /// DIV.
    Div = 4,
    /// SCALE.
    Scale = 5,
    /// RMS_NORM.
    RmsNorm = 6,
    /// SOFT_MAX.
    SoftMax = 7,
    /// ROPE.
    Rope = 8,
    /// GLU with SWIGLU.
    GluSwiglu = 9,
    /// GET_ROWS.
    GetRows = 10,
    /// CPY and CONT.
    Cpy = 11,
}

/// `enum htp_status`.
pub mod status {
    /// Success.
    pub const OK: u32 = 0;
    /// DSP-internal failure.
    pub const INTERNAL: u32 = 1;
    /// Op, type or mode not implemented on the DSP.
    pub const NO_SUPPORT: u32 = 2;
    /// Shapes or parameters do not fit.
    pub const INVAL_PARAMS: u32 = 3;
    /// The op's VTCM plan exceeds the session's VTCM.
    pub const VTCM_TOO_SMALL: u32 = 4;
    /// A tensor is in an unmapped buffer or overruns it.
    pub const BAD_BUFFER: u32 = 5;
    /// An index (GET_ROWS) is out of range.
    pub const BAD_INDEX: u32 = 6;

    /// The name of a status code.
    pub fn name(code: u32) -> &'static str {
        match code {
            OK => "ok",
            INTERNAL => "internal",
            NO_SUPPORT => "not supported",
            INVAL_PARAMS => "invalid parameters",
            VTCM_TOO_SMALL => "VTCM too small",
            BAD_BUFFER => "bad buffer",
            BAD_INDEX => "index out of range",
            _ => "unknown status",
        }
    }
}

/// `struct htp_tensor`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HtpTensor {
    /// Buffer id (0 = absent).
    pub buf: u64,
    /// Byte offset in the buffer.
    pub offset: u64,
    /// ggml type code.
    pub ty: u32,
    /// Unused.
    pub reserved: u32,
    /// Elements per dim.
    pub ne: [u32; 4],
    /// Byte strides.
    pub nb: [u32; 4],
}

/// `struct htp_req`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HtpReq {
    /// [`kind`].
    pub kind: u32,
    /// [`HtpOp`] code.
    pub op: u32,
    /// Echoed in the response.
    pub seq: u32,
    /// Sources used.
    pub n_src: u32,
    /// ggml op params.
    pub params: [i32; 16],
    /// Sources.
    pub src: [HtpTensor; MAX_SRC],
    /// Result.
    pub dst: HtpTensor,
}

/// `struct htp_rsp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtpRsp {
    /// The request's seq.
    pub seq: u32,
    /// [`status`] code.
    pub status: u32,
    /// The request's op.
    pub op: u32,
    /// DSP time in microseconds.
    pub usecs: u32,
    /// NUL-terminated reason.
    pub detail: [u8; RSP_DETAIL],
}

impl Default for HtpRsp {
    fn default() -> HtpRsp {
        HtpRsp {
            seq: 0,
            status: 0,
            op: 0,
            usecs: 0,
            detail: [0; RSP_DETAIL],
        }
    }
}

impl HtpRsp {
    /// The detail text.
    pub fn detail(&self) -> String {
        let end = self
            .detail
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(RSP_DETAIL);
        String::from_utf8_lossy(&self.detail[..end]).into_owned()
    }

    /// `Ok` for status OK, else an error naming the DSP status and detail.
    pub fn into_result(self, what: &str) -> Result<(), PluginError> {
        if self.status == status::OK {
            return Ok(());
        }
        let kind = match self.status {
            status::NO_SUPPORT | status::VTCM_TOO_SMALL => error_kind::UNSUPPORTED,
            status::INVAL_PARAMS | status::BAD_BUFFER | status::BAD_INDEX => error_kind::BAD_INPUT,
            _ => error_kind::OTHER,
        };
        Err(PluginError::new(
            kind,
            format!(
                "{what}: DSP error {} ({}): {}",
                self.status,
                status::name(self.status),
                self.detail()
            ),
        ))
    }
}

/// `struct htp_dsp_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HtpDspInfo {
    /// Hexagon version (75 = v75).
    pub arch: u32,
    /// HVX contexts.
    pub n_hvx: u32,
    /// VTCM bytes of the session.
    pub vtcm_bytes: u64,
}

/// Views a `#[repr(C)]` plain-data record as bytes.
pub fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is one of this module's repr(C) records of integers with no
    // padding holes that matter (callers zero-initialise them); reading its
    // bytes is sound for the lifetime of the borrow.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Reads a record from the front of `bytes` (zero-filled when short).
pub fn from_bytes<T: Copy + Default>(bytes: &[u8]) -> T {
    let mut v = T::default();
    let n = bytes.len().min(std::mem::size_of::<T>());
    // SAFETY: every bit pattern is a valid value of these integer records.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut v as *mut T).cast::<u8>(), n) };
    v
}

unsafe extern "C" {
    /// `htp_op_vtcm_need` of htp/vtcm-plan.c, built for the host.
    fn htp_op_vtcm_need(req: *const HtpReq, n_threads: u32) -> u64;
}

/// VTCM bytes the op of `req` takes on `n_threads` HVX threads (the DSP's
/// own plan, compiled for the host).
pub fn vtcm_need(req: &HtpReq, n_threads: u32) -> u64 {
    // SAFETY: a pure function reading the request it is given.
    unsafe { htp_op_vtcm_need(req, n_threads) }
}
