//! The kernel library: SYCL sources of `kernels/`, built at run time
//! per device on first use and cached in process (one bundle per source
//! file, one handle per kernel); the runtime's persistent cache
//! (`SYCL_CACHE_PERSISTENT`) keeps the binaries across processes.
//!
//! With the `log` option (`BACKPLANE_SYCL_LOG=1`, read when the device
//! opens) each build and its time are printed to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backplane_abi::TensorDesc;

use crate::runtime::{Arg, Bundle, Kernel, Queue};

/// A source file of `kernels/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Binary, unary, scale, GLU.
    Elementwise,
    /// CPY/CONT, GET_ROWS, SET_ROWS.
    Copy,
    /// RMS_NORM, SOFT_MAX, ROPE.
    Norm,
    /// MUL_MAT: DMMV, MMVQ, reorder, GEMM.
    MulMat,
    /// FLASH_ATTN_EXT.
    Attention,
}

impl Source {
    /// File name in `kernels/`.
    pub fn file(self) -> &'static str {
        match self {
            Source::Elementwise => "elementwise.cpp",
            Source::Copy => "copy.cpp",
            Source::Norm => "norm.cpp",
            Source::MulMat => "mul_mat.cpp",
            Source::Attention => "attention.cpp",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Source::Elementwise => include_str!("../kernels/elementwise.cpp"),
            Source::Copy => include_str!("../kernels/copy.cpp"),
            Source::Norm => include_str!("../kernels/norm.cpp"),
            Source::MulMat => include_str!("../kernels/mul_mat.cpp"),
            Source::Attention => include_str!("../kernels/attention.cpp"),
        }
    }
}

/// The header every source includes.
const COMMON: (&str, &str) = ("common.hpp", include_str!("../kernels/common.hpp"));

/// Shape and byte strides of one tensor, as `Tensor` in common.hpp.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorArg {
    /// Elements per dim.
    pub ne: [i64; 4],
    /// Byte strides.
    pub nb: [i64; 4],
}

impl TensorArg {
    /// From a descriptor.
    pub fn of(d: &TensorDesc) -> TensorArg {
        TensorArg {
            ne: d.ne,
            nb: d.nb.map(|b| b as i64),
        }
    }
}

/// Every kernel's last argument, as `Args` in common.hpp (512 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Args {
    /// dst, then src0..src3.
    pub t: [TensorArg; 5],
    /// ggml type codes, same order.
    pub ty: [i32; 8],
    /// The node's op_params.
    pub op: [i32; 16],
    /// Kernel-specific integers.
    pub x: [i64; 12],
}

const _: () = assert!(std::mem::size_of::<Args>() == 512);

impl Args {
    /// Args for `dst` and its sources (absent ones zero).
    pub fn new(dst: &TensorDesc, srcs: &[Option<&TensorDesc>]) -> Args {
        let mut a = Args {
            op: dst.op_params,
            ..Args::default()
        };
        a.t[0] = TensorArg::of(dst);
        a.ty[0] = dst.dtype as i32;
        for (i, s) in srcs.iter().enumerate().take(4) {
            if let Some(s) = s {
                a.t[i + 1] = TensorArg::of(s);
                a.ty[i + 1] = s.dtype as i32;
            }
        }
        a
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: Args is repr(C) plain data of 512 bytes without padding
        // holes that matter (all fields are integers).
        unsafe {
            std::slice::from_raw_parts((self as *const Args).cast(), std::mem::size_of::<Args>())
        }
    }
}

/// One build, for reports.
#[derive(Clone, Debug)]
pub struct BuildRecord {
    /// Source file.
    pub file: &'static str,
    /// Wall time of create + build (a persistent-cache hit is fast).
    pub time: Duration,
}

/// Bundles and kernels of one device.
pub struct Library {
    bundles: Mutex<HashMap<Source, Arc<Bundle>>>,
    kernels: Mutex<HashMap<&'static str, Arc<Kernel>>>,
    builds: Mutex<Vec<BuildRecord>>,
    log: bool,
}

impl Default for Library {
    fn default() -> Self {
        Library::new()
    }
}

impl Library {
    /// An empty library.
    pub fn new() -> Library {
        Library::with_log(false)
    }

    /// An empty library that prints each build to stderr when `log`.
    pub fn with_log(log: bool) -> Library {
        Library {
            bundles: Mutex::default(),
            kernels: Mutex::default(),
            builds: Mutex::default(),
            log,
        }
    }

    /// Builds so far.
    pub fn builds(&self) -> Vec<BuildRecord> {
        self.builds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The kernel `name` of `source`, building the source on first use.
    pub fn kernel(
        &self,
        queue: &Queue,
        source: Source,
        name: &'static str,
    ) -> Result<Arc<Kernel>, String> {
        if let Some(k) = self
            .kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Ok(k.clone());
        }
        let bundle = {
            let mut bundles = self.bundles.lock().unwrap_or_else(|e| e.into_inner());
            match bundles.get(&source) {
                Some(b) => b.clone(),
                None => {
                    let t0 = Instant::now();
                    let b = queue.build(source.text(), &[COMMON], &[]).map_err(|e| {
                        format!("building backends/sycl/kernels/{}: {e}", source.file())
                    })?;
                    let time = t0.elapsed();
                    if self.log {
                        eprintln!(
                            "backplane-sycl: built {} in {:.3} s",
                            source.file(),
                            time.as_secs_f64()
                        );
                    }
                    self.builds
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(BuildRecord {
                            file: source.file(),
                            time,
                        });
                    let b = Arc::new(b);
                    bundles.insert(source, b.clone());
                    b
                }
            }
        };
        let k = Arc::new(
            bundle
                .kernel(name)
                .map_err(|e| format!("kernel {name} of {}: {e}", source.file()))?,
        );
        self.kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, k.clone());
        Ok(k)
    }
}

/// Pointers of a launch: dst, then src0..src3 (absent ones repeat dst).
pub type Ptrs = [*mut u8; 5];

/// Queues `kernel` with the standard arguments.
///
/// # Safety
/// Every pointer must be USM memory of the queue's context covering what
/// the kernel reads and writes for `args`.
pub unsafe fn launch(
    queue: &Queue,
    kernel: &Kernel,
    global: [usize; 3],
    local: [usize; 3],
    ptrs: Ptrs,
    args: &Args,
) -> Result<(), String> {
    let list = [
        Arg::Ptr(ptrs[0]),
        Arg::Ptr(ptrs[1]),
        Arg::Ptr(ptrs[2]),
        Arg::Ptr(ptrs[3]),
        Arg::Ptr(ptrs[4]),
        Arg::Bytes(args.bytes()),
    ];
    // SAFETY: forwarded from the caller.
    unsafe { queue.launch(kernel, global, local, &list) }
}

/// Global and local sizes of a 1-D launch over `n` work-items laid out as
/// (1, y, x) with work-groups of `wg` (the kernels use `gid()`).
pub fn range_1d(n: usize, wg: usize) -> ([usize; 3], [usize; 3]) {
    let wg = wg.max(1);
    let groups = n.div_ceil(wg).max(1);
    let max_x_groups = 1 << 16;
    let gx = groups.min(max_x_groups);
    let gy = groups.div_ceil(gx);
    ([1, gy, gx * wg], [1, 1, wg])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_d_ranges_cover_every_item() {
        for n in [0usize, 1, 255, 256, 257, 1 << 20, (1 << 24) + 3] {
            let (g, l) = range_1d(n, 256);
            assert!(g[1] * g[2] >= n, "{n}");
            assert_eq!(g[2] % l[2], 0);
            assert!(g[2] / l[2] <= 1 << 16);
        }
    }
}
