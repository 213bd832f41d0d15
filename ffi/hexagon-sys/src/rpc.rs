//! FastRPC, rpcmem and dspqueue entry points of `libcdsprpc.so`.

use std::ffi::{c_char, c_int, c_void};
use std::fmt;

use libloading::Library;

/// `AEE_SUCCESS`.
pub const AEE_SUCCESS: c_int = 0;
/// `AEE_EEXPIRED`: a dspqueue read or write timed out.
pub const AEE_EEXPIRED: c_int = 12;
/// `CDSP_DOMAIN_ID`: the compute DSP.
pub const CDSP_DOMAIN_ID: c_int = 3;
/// `DSPRPC_CONTROL_UNSIGNED_MODULE` request of `remote_session_control`.
pub const DSPRPC_CONTROL_UNSIGNED_MODULE: u32 = 2;
/// `RPCMEM_HEAP_ID_SYSTEM`.
pub const RPCMEM_HEAP_ID_SYSTEM: c_int = 25;
/// `RPCMEM_DEFAULT_FLAGS` (cached).
pub const RPCMEM_DEFAULT_FLAGS: u32 = 1;
/// `FASTRPC_MAP_FD`: map a shared-memory fd into the DSP process.
pub const FASTRPC_MAP_FD: c_int = 2;
/// `DSPQUEUE_TIMEOUT_NONE`: block without a timeout.
pub const DSPQUEUE_TIMEOUT_NONE: u32 = 0xffff_ffff;

/// A FastRPC handle of a 64-bit interface (`remote_handle64`).
pub type RemoteHandle64 = u64;

/// An opaque dspqueue (`dspqueue_t`).
pub type DspQueue = *mut c_void;

/// `remote_buf`: one marshalled buffer argument.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RemoteBuf {
    /// Start of the buffer.
    pub pv: *mut c_void,
    /// Length in bytes.
    pub n_len: usize,
}

/// `remote_arg`: one argument of `remote_handle64_invoke`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union RemoteArg {
    /// A buffer.
    pub buf: RemoteBuf,
    /// A handle.
    pub h64: RemoteHandle64,
}

/// `struct remote_rpc_control_unsigned_module`: run in an unsigned PD.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RemoteRpcControlUnsignedModule {
    /// DSP domain id.
    pub domain: c_int,
    /// Nonzero to enable.
    pub enable: c_int,
}

/// `struct dspqueue_buffer`: a shared buffer referenced by a packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DspQueueBuffer {
    /// rpcmem fd.
    pub fd: u32,
    /// Bytes used.
    pub size: u32,
    /// Offset within the fd's memory.
    pub offset: u32,
    /// `DSPQUEUE_BUFFER_FLAG_*`.
    pub flags: u32,
    /// The buffer's address in the receiver (union of `void *` and `uint64_t`).
    pub address: u64,
}

/// `REMOTE_SCALARS_MAKE(method, in, out)`: the scalars word of an invoke.
pub const fn remote_scalars_make(method: u32, n_in: u32, n_out: u32) -> u32 {
    ((method & 0x1f) << 24) | ((n_in & 0xff) << 16) | ((n_out & 0xff) << 8)
}

/// Why `libcdsprpc.so` could not be used.
#[derive(Debug)]
pub struct LoadError {
    /// What was being loaded (library path or symbol name).
    pub what: String,
    /// The loader's message.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.message)
    }
}

impl std::error::Error for LoadError {}

/// The loader's whole message on one line: libloading 0.9 says only
/// "dlopen failed" and keeps the system's words ("libcdsprpc.so: cannot open
/// shared object file: No such file or directory") in `source()`, so the
/// chain is walked and each cause not already said is appended.
fn loader_message(e: &libloading::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string().replace('\n', " ");
        if !text.is_empty() && !out.contains(&text) {
            out = if out.ends_with(" failed") {
                // "dlopen failed" says nothing the cause does not.
                text
            } else {
                format!("{out}: {text}")
            };
        }
        cause = c.source();
    }
    out
}

type DspQueueCallback = Option<unsafe extern "C" fn(DspQueue, c_int, *mut c_void)>;

macro_rules! cdsprpc {
    ($($(#[$m:meta])* $name:ident: $ty:ty,)*) => {
        /// The entry points of `libcdsprpc.so`, resolved once; the library
        /// stays loaded while this value lives. Calling any of them is
        /// `unsafe`: the caller upholds the SDK's contract for each.
        pub struct CdspRpc {
            $($(#[$m])* pub $name: $ty,)*
            _lib: Library,
        }

        impl CdspRpc {
            /// Loads `path` (default `libcdsprpc.so` from the loader path)
            /// and resolves every entry point.
            pub fn load(path: Option<&str>) -> Result<CdspRpc, LoadError> {
                let path = path.unwrap_or("libcdsprpc.so");
                // SAFETY: loading runs the library's initialisers; libcdsprpc
                // is the vendor's user-space library, meant to be dlopened.
                let lib = unsafe { Library::new(path) }
                    .map_err(|e| LoadError { what: path.to_string(), message: loader_message(&e) })?;
                $(
                    // SAFETY: the symbol's type is the SDK declaration copied
                    // above; the pointer is used only while `_lib` lives.
                    let $name: $ty = unsafe {
                        *lib.get::<$ty>(concat!(stringify!($name), "\0").as_bytes()).map_err(|e| LoadError {
                            what: stringify!($name).to_string(),
                            message: loader_message(&e),
                        })?
                    };
                )*
                Ok(CdspRpc { $($name,)* _lib: lib })
            }
        }
    };
}

cdsprpc! {
    /// `int remote_handle64_open(const char *name, remote_handle64 *ph)`.
    remote_handle64_open: unsafe extern "C" fn(*const c_char, *mut RemoteHandle64) -> c_int,
    /// `int remote_handle64_invoke(remote_handle64 h, uint32_t scalars, remote_arg *pra)`.
    remote_handle64_invoke: unsafe extern "C" fn(RemoteHandle64, u32, *mut RemoteArg) -> c_int,
    /// `int remote_handle64_close(remote_handle64 h)`.
    remote_handle64_close: unsafe extern "C" fn(RemoteHandle64) -> c_int,
    /// `int remote_session_control(uint32_t req, void *data, uint32_t datalen)`.
    remote_session_control: unsafe extern "C" fn(u32, *mut c_void, u32) -> c_int,
    /// `void *rpcmem_alloc(int heapid, uint32_t flags, int size)`.
    rpcmem_alloc: unsafe extern "C" fn(c_int, u32, c_int) -> *mut c_void,
    /// `void rpcmem_free(void *po)`.
    rpcmem_free: unsafe extern "C" fn(*mut c_void),
    /// `int rpcmem_to_fd(void *po)`.
    rpcmem_to_fd: unsafe extern "C" fn(*mut c_void) -> c_int,
    /// `int fastrpc_mmap(int domain, int fd, void *addr, int offset, size_t length, enum fastrpc_map_flags flags)`.
    fastrpc_mmap: unsafe extern "C" fn(c_int, c_int, *mut c_void, c_int, usize, c_int) -> c_int,
    /// `int fastrpc_munmap(int domain, int fd, void *addr, size_t length)`.
    fastrpc_munmap: unsafe extern "C" fn(c_int, c_int, *mut c_void, usize) -> c_int,
    /// `AEEResult dspqueue_create(int domain, uint32_t flags, uint32_t req_queue_size, uint32_t resp_queue_size, dspqueue_callback_t packet_cb, dspqueue_callback_t error_cb, void *ctx, dspqueue_t *queue)`.
    dspqueue_create: unsafe extern "C" fn(c_int, u32, u32, u32, DspQueueCallback, DspQueueCallback, *mut c_void, *mut DspQueue) -> c_int,
    /// `AEEResult dspqueue_close(dspqueue_t queue)`.
    dspqueue_close: unsafe extern "C" fn(DspQueue) -> c_int,
    /// `AEEResult dspqueue_export(dspqueue_t queue, uint64_t *queue_id)`.
    dspqueue_export: unsafe extern "C" fn(DspQueue, *mut u64) -> c_int,
    /// `AEEResult dspqueue_write(dspqueue_t queue, uint32_t flags, uint32_t num_buffers, struct dspqueue_buffer *buffers, uint32_t message_length, const uint8_t *message, uint32_t timeout_us)`.
    dspqueue_write: unsafe extern "C" fn(DspQueue, u32, u32, *mut DspQueueBuffer, u32, *const u8, u32) -> c_int,
    /// `AEEResult dspqueue_read(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers, uint32_t *num_buffers, struct dspqueue_buffer *buffers, uint32_t max_message_length, uint32_t *message_length, uint8_t *message, uint32_t timeout_us)`.
    dspqueue_read: unsafe extern "C" fn(DspQueue, *mut u32, u32, *mut u32, *mut DspQueueBuffer, u32, *mut u32, *mut u8, u32) -> c_int,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_an_error_naming_it() {
        let e = CdspRpc::load(Some("/nonexistent/libcdsprpc.so"))
            .err()
            .expect("must fail");
        assert!(e.to_string().contains("/nonexistent/libcdsprpc.so"), "{e}");
    }

    #[test]
    fn missing_library_error_keeps_the_loaders_cause_on_one_line() {
        let e = CdspRpc::load(Some("/nonexistent/libcdsprpc.so"))
            .err()
            .expect("must fail");
        let text = e.to_string();
        assert_eq!(e.what, "/nonexistent/libcdsprpc.so");
        assert!(
            text.contains("cannot open shared object file")
                && text.contains("No such file or directory"),
            "{text}"
        );
        assert!(!text.contains("dlopen failed"), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn a_library_without_the_entry_points_names_the_missing_symbol_and_cause() {
        // libc is loaded in every process and has none of FastRPC's symbols.
        let e = CdspRpc::load(Some("libc.so.6")).err().expect("must fail");
        assert_eq!(e.what, "remote_handle64_open");
        assert!(e.message.contains("undefined symbol"), "{e}");
        assert!(!e.message.contains("dlsym failed"), "{e}");
    }

    #[test]
    fn remote_arg_and_queue_buffer_match_the_sdk_layout() {
        assert_eq!(std::mem::size_of::<RemoteArg>(), 16);
        assert_eq!(std::mem::size_of::<DspQueueBuffer>(), 24);
        assert_eq!(remote_scalars_make(2, 1, 0), 0x0201_0000);
    }
}
