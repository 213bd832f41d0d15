//! Safe layer over the shim of `backplane-sycl-sys`: the loaded runtime,
//! device info, queues, USM memory, kernel bundles and launches.

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use backplane_sycl_sys as sys;

use crate::arch::Architecture;

/// The loaded shim (and, through it, libsycl).
pub struct Runtime {
    lib: sys::ShimLibrary,
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, loaded on first use; the error says why it is unavailable.
pub fn runtime() -> Result<&'static Runtime, String> {
    RUNTIME
        .get_or_init(|| {
            configure_env();
            sys::load(&[]).map(|lib| Runtime { lib })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Defaults for the runtime's environment, set only where the user did not:
/// the OpenCL CPU driver of the wheel (`OCL_ICD_FILENAMES`, since the
/// wheel's .icd file names a placeholder path) and the persistent kernel
/// cache (`SYCL_CACHE_PERSISTENT=1`, `SYCL_CACHE_DIR`).
///
/// Why this mutates the process environment, although a plugin should not:
/// the consumers of these values take them from nowhere else. The OpenCL
/// ICD loader (`libOpenCL.so`) reads `OCL_ICD_FILENAMES` / `OCL_ICD_VENDORS`
/// with `getenv` when it first enumerates platforms and has no API to add a
/// vendor library; the SYCL runtime reads `SYCL_CACHE_*` through its
/// `SYCLConfig`, from the environment or a `sycl.conf` next to libsycl (in
/// the runtime's install, not ours). Passing the values to the shim would
/// not help: the shim could only call `setenv` itself. The alternatives are
/// to drop the defaults (the wheel-only install then shows no device unless
/// the user exports `OCL_ICD_FILENAMES`, and kernels are rebuilt in every
/// process) or to keep our own binary cache (a large change). So the
/// defaults stay, confined to one call: only unset variables are written,
/// once per process, from the registration (before the runtime starts any
/// thread), through `std::env::set_var`, which holds the standard library's
/// environment lock against concurrent Rust readers. A host that sets the
/// variables itself (`scripts/sycl-runtime.sh`, `cargo xtask test`) gets no
/// mutation at all.
fn configure_env() {
    let mut set = Vec::new();
    if std::env::var_os("OCL_ICD_FILENAMES").is_none()
        && let Some(lib) = sys::built_lib_dir()
    {
        let ocl = PathBuf::from(lib).join("libintelocl.so");
        if ocl.exists() {
            set.push(("OCL_ICD_FILENAMES", ocl.display().to_string()));
        }
    }
    if std::env::var_os("SYCL_CACHE_PERSISTENT").is_none() {
        set.push(("SYCL_CACHE_PERSISTENT", "1".to_string()));
    }
    if std::env::var_os("SYCL_CACHE_DIR").is_none() {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        if let Some(base) = base {
            set.push((
                "SYCL_CACHE_DIR",
                base.join("backplane/sycl").display().to_string(),
            ));
        }
    }
    for (k, v) in set {
        // SAFETY: runs once, when the plugin first touches the runtime (from
        // the registration, before any SYCL thread exists); only variables
        // that were unset are written, and they are ones the host does not
        // read (see above for why this cannot be avoided).
        unsafe { std::env::set_var(k, v) };
    }
}

/// The shim's last error on this thread.
fn last_error(rt: &Runtime) -> String {
    // SAFETY: returns a NUL-terminated thread-local string owned by the shim.
    unsafe { CStr::from_ptr(rt.lib.bp_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn check(rt: &Runtime, rc: i32) -> Result<(), String> {
    if rc == 0 { Ok(()) } else { Err(last_error(rt)) }
}

fn c_str(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The kind of a SYCL device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A CPU (e.g. Intel's OpenCL CPU device).
    Cpu,
    /// A GPU.
    Gpu,
    /// An accelerator (FPGA emulator, ...).
    Accelerator,
    /// Anything else.
    Other,
}

/// What the runtime says of one device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Index in the runtime's enumeration.
    pub index: i32,
    /// Device name.
    pub name: String,
    /// Vendor name.
    pub vendor: String,
    /// Driver version.
    pub driver_version: String,
    /// Backend (`opencl`, `level_zero`, ...).
    pub backend: String,
    /// Platform name.
    pub platform: String,
    /// Architecture and family.
    pub arch: Architecture,
    /// Kind.
    pub kind: DeviceKind,
    /// PCI device id (0 if unknown).
    pub device_id: u32,
    /// Compute units.
    pub compute_units: u32,
    /// Sub-group sizes offered.
    pub sub_group_sizes: Vec<u32>,
    /// Largest work-group.
    pub max_work_group_size: u64,
    /// Global memory in bytes.
    pub global_mem_bytes: u64,
    /// Free memory in bytes (0 if the runtime does not tell).
    pub free_mem_bytes: u64,
    /// Work-group local memory in bytes.
    pub local_mem_bytes: u64,
    /// Largest single allocation in bytes.
    pub max_alloc_bytes: u64,
    /// The device builds SYCL source at run time.
    pub can_compile_sycl: bool,
}

impl Runtime {
    /// Every device of every platform.
    pub fn devices(&'static self) -> Result<Vec<DeviceInfo>, String> {
        let mut n = 0i32;
        // SAFETY: writes one i32.
        check(self, unsafe { self.lib.bp_device_count(&mut n) })?;
        (0..n).map(|i| self.device_info(i)).collect()
    }

    fn device_info(&'static self, index: i32) -> Result<DeviceInfo, String> {
        // SAFETY: bp_device_info is plain data; all-zero is a valid value.
        let mut raw: sys::bp_device_info = unsafe { std::mem::zeroed() };
        // SAFETY: the shim fills the struct we own.
        check(self, unsafe {
            self.lib.bp_device_get_info(index, &mut raw)
        })?;
        let kind = match raw.kind as u32 {
            sys::BP_DEVICE_CPU => DeviceKind::Cpu,
            sys::BP_DEVICE_GPU => DeviceKind::Gpu,
            sys::BP_DEVICE_ACCEL => DeviceKind::Accelerator,
            _ => DeviceKind::Other,
        };
        Ok(DeviceInfo {
            index,
            name: c_str(&raw.name),
            vendor: c_str(&raw.vendor),
            driver_version: c_str(&raw.driver_version),
            backend: c_str(&raw.backend),
            platform: c_str(&raw.platform),
            arch: Architecture::from_name(&c_str(&raw.architecture)),
            kind,
            device_id: raw.device_id,
            compute_units: raw.compute_units,
            sub_group_sizes: raw.sub_group_sizes[..raw.n_sub_group_sizes.min(8) as usize].to_vec(),
            max_work_group_size: raw.max_work_group_size,
            global_mem_bytes: raw.global_mem_bytes,
            free_mem_bytes: raw.free_mem_bytes,
            local_mem_bytes: raw.local_mem_bytes,
            max_alloc_bytes: raw.max_alloc_bytes,
            can_compile_sycl: raw.can_compile_sycl != 0,
        })
    }
}

/// An in-order queue on one device (with its own context).
pub struct Queue {
    rt: &'static Runtime,
    raw: *mut sys::bp_queue,
}

// SAFETY: SYCL queues are thread-safe; the shim holds no thread-affine state.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: created by bp_queue_create, destroyed once.
        unsafe { self.rt.lib.bp_queue_destroy(self.raw) };
    }
}

/// One kernel argument.
pub enum Arg<'a> {
    /// A USM pointer.
    Ptr(*mut u8),
    /// Plain bytes (4, 8, 16, ... 512 long).
    Bytes(&'a [u8]),
}

impl Queue {
    /// A queue on device `index`.
    pub fn new(rt: &'static Runtime, index: i32) -> Result<Queue, String> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes the new queue pointer.
        check(rt, unsafe { rt.lib.bp_queue_create(index, &mut raw) })?;
        Ok(Queue { rt, raw })
    }

    /// Waits for all queued work; reports asynchronous errors.
    pub fn wait(&self) -> Result<(), String> {
        // SAFETY: a live queue.
        check(self.rt, unsafe { self.rt.lib.bp_queue_wait(self.raw) })
    }

    /// Device memory of `bytes` bytes aligned to `align`.
    pub fn malloc(&self, bytes: usize, align: usize) -> Result<*mut u8, String> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a live queue; writes the pointer.
        check(self.rt, unsafe {
            self.rt.lib.bp_malloc_device(self.raw, bytes, align, &mut p)
        })?;
        Ok(p.cast())
    }

    /// Frees memory from [`Queue::malloc`] (the caller waits for users first).
    pub fn free(&self, p: *mut u8) -> Result<(), String> {
        // SAFETY: `p` came from bp_malloc_device on this queue's context.
        check(self.rt, unsafe { self.rt.lib.bp_free(self.raw, p.cast()) })
    }

    /// Copies `bytes` bytes between host and/or USM memory.
    ///
    /// # Safety
    /// Both ranges must be valid for `bytes` bytes until the copy completes
    /// (at return when `wait`).
    pub unsafe fn memcpy(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        wait: bool,
    ) -> Result<(), String> {
        // SAFETY: the caller guarantees the ranges.
        check(self.rt, unsafe {
            self.rt
                .lib
                .bp_memcpy(self.raw, dst.cast(), src.cast(), bytes, i32::from(wait))
        })
    }

    /// Fills `bytes` bytes of USM memory with `value`.
    ///
    /// # Safety
    /// The range must be valid device memory of this queue's context.
    pub unsafe fn memset(
        &self,
        dst: *mut u8,
        value: u8,
        bytes: usize,
        wait: bool,
    ) -> Result<(), String> {
        // SAFETY: the caller guarantees the range.
        check(self.rt, unsafe {
            self.rt.lib.bp_memset(
                self.raw,
                dst.cast(),
                i32::from(value),
                bytes,
                i32::from(wait),
            )
        })
    }

    /// Builds SYCL `source` with virtual headers `includes` (name, text).
    pub fn build(
        &self,
        source: &str,
        includes: &[(&str, &str)],
        options: &[&str],
    ) -> Result<Bundle, String> {
        let cs = |s: &str| CString::new(s).map_err(|e| format!("NUL in kernel source: {e}"));
        let src = cs(source)?;
        let names: Vec<CString> = includes
            .iter()
            .map(|(n, _)| cs(n))
            .collect::<Result<_, _>>()?;
        let texts: Vec<CString> = includes
            .iter()
            .map(|(_, t)| cs(t))
            .collect::<Result<_, _>>()?;
        let opts: Vec<CString> = options.iter().map(|o| cs(o)).collect::<Result<_, _>>()?;
        let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let text_ptrs: Vec<*const c_char> = texts.iter().map(|c| c.as_ptr()).collect();
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
        let mut raw = std::ptr::null_mut();
        // SAFETY: every pointer refers to a live NUL-terminated string; the
        // counts match the arrays.
        check(self.rt, unsafe {
            self.rt.lib.bp_bundle_build(
                self.raw,
                src.as_ptr(),
                name_ptrs.as_ptr(),
                text_ptrs.as_ptr(),
                name_ptrs.len() as i32,
                opt_ptrs.as_ptr(),
                opt_ptrs.len() as i32,
                &mut raw,
            )
        })?;
        Ok(Bundle { rt: self.rt, raw })
    }

    /// Queues `kernel` over the nd-range `global` / `local` (3-D, last fastest).
    ///
    /// # Safety
    /// Every pointer argument must be USM memory of this queue's context
    /// that the kernel may access as it does until the launch completes.
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        global: [usize; 3],
        local: [usize; 3],
        args: &[Arg<'_>],
    ) -> Result<(), String> {
        let ptrs: Vec<*mut u8> = args
            .iter()
            .map(|a| {
                if let Arg::Ptr(p) = a {
                    *p
                } else {
                    std::ptr::null_mut()
                }
            })
            .collect();
        let raw: Vec<sys::bp_arg> = args
            .iter()
            .zip(&ptrs)
            .map(|(a, p)| match a {
                Arg::Ptr(_) => sys::bp_arg {
                    kind: sys::BP_ARG_POINTER,
                    size: 8,
                    value: (p as *const *mut u8).cast(),
                },
                Arg::Bytes(b) => sys::bp_arg {
                    kind: sys::BP_ARG_BYTES,
                    size: b.len() as u32,
                    value: b.as_ptr().cast(),
                },
            })
            .collect();
        // SAFETY: `raw` points into `ptrs` and `args`, alive for the call
        // (the shim copies argument values at submission).
        check(self.rt, unsafe {
            self.rt.lib.bp_launch(
                self.raw,
                kernel.raw,
                3,
                global.as_ptr(),
                local.as_ptr(),
                raw.as_ptr(),
                raw.len() as i32,
            )
        })
    }
}

/// An executable kernel bundle.
pub struct Bundle {
    rt: &'static Runtime,
    raw: *mut sys::bp_bundle,
}

// SAFETY: kernel bundles are immutable, shareable runtime objects.
unsafe impl Send for Bundle {}
// SAFETY: as above.
unsafe impl Sync for Bundle {}

impl Drop for Bundle {
    fn drop(&mut self) {
        // SAFETY: destroyed once.
        unsafe { self.rt.lib.bp_bundle_destroy(self.raw) };
    }
}

impl Bundle {
    /// The kernel `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live bundle and NUL-terminated name.
        check(self.rt, unsafe {
            self.rt
                .lib
                .bp_bundle_get_kernel(self.raw, c.as_ptr(), &mut raw)
        })?;
        Ok(Kernel { rt: self.rt, raw })
    }
}

/// One kernel, ready to launch.
pub struct Kernel {
    rt: &'static Runtime,
    raw: *mut sys::bp_kernel,
}

// SAFETY: kernels are shareable runtime objects; arguments are set per
// submission inside the shim.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: destroyed once.
        unsafe { self.rt.lib.bp_kernel_destroy(self.raw) };
    }
}

impl Kernel {
    /// Largest work-group this kernel runs with on `queue`'s device.
    pub fn max_work_group(&self, queue: &Queue) -> Result<usize, String> {
        let mut n = 0usize;
        // SAFETY: live kernel and queue; writes one usize.
        check(self.rt, unsafe {
            self.rt
                .lib
                .bp_kernel_max_work_group(self.raw, queue.raw, &mut n)
        })?;
        Ok(n)
    }
}
