//! The CPU backend behind the plugin contract of `backplane-abi`.
//!
//! Core links this statically as the always-present fallback (wrapped with
//! `backplane_abi::plugin::reg_object`), and `backplane-cpu-plugin` exports
//! it from a `cdylib` in ISA variants scored by [`score`].

use std::sync::Arc;

use backplane_abi::plugin::{
    Backend, BufferType, Device, DeviceType, Memory, PluginError, Reg, Verdict,
};
use backplane_abi::support::options::{OptionKind, OptionSpec, Options};
use backplane_abi::{MAX_SRC, TensorDesc};

use crate::buffer::{BufferTable, CpuBufferType, new_table};
use crate::{CpuBackend, CpuConfig, ops};

pub use crate::buffer::{CPU_ALIGNMENT, CPU_BUFFER_TYPE, CPU_REPACK_BUFFER_TYPE};

/// The CPU backend's options (`init_backend` params, see
/// `backplane_abi::support::options`).
pub const CPU_OPTIONS: &[OptionSpec] = &[OptionSpec {
    name: "threads",
    kind: OptionKind::Integer { min: 1, max: 4096 },
    default: "",
    meaning: "worker threads of a stream (default: one per physical core)",
    env: "",
}];

/// An instruction-set level a plugin variant is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// x86-64 baseline (SSE2).
    X86_64,
    /// x86-64 with AVX2, FMA and F16C (and OS support for YMM state).
    Avx2,
    /// x86-64 with AVX-512 F/BW/DQ/VL (and OS support for ZMM state).
    Avx512,
    /// aarch64 without SIMD kernels.
    Aarch64,
    /// aarch64 with NEON (ASIMD).
    Neon,
}

impl Isa {
    /// Variant name as used in plugin file names (`libbackplane_cpu-<name>.so`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::X86_64 => "x86-64",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Aarch64 => "aarch64",
            Isa::Neon => "neon",
        }
    }

    /// The best level this CPU and OS support (what the statically linked
    /// fallback reports).
    pub fn detect() -> Isa {
        let all: &[Isa] = if cfg!(target_arch = "aarch64") {
            &[Isa::Neon, Isa::Aarch64]
        } else {
            &[Isa::Avx512, Isa::Avx2, Isa::X86_64]
        };
        all.iter()
            .copied()
            .find(|&i| score(i) > 0)
            .unwrap_or(Isa::X86_64)
    }
}

/// Score of a variant built for `isa` on this machine: 0 when the CPU or OS
/// lacks it, else higher for better variants. Only reads CPUID and XCR0
/// (the latter only when CPUID says the OS enabled XSAVE), never executes an
/// instruction the CPU may lack.
pub fn score(isa: Isa) -> u32 {
    match isa {
        Isa::X86_64 => u32::from(cfg!(target_arch = "x86_64")),
        Isa::Avx2 => 10 * u32::from(cpu_facts::has_avx2()),
        Isa::Avx512 => 20 * u32::from(cpu_facts::has_avx512()),
        Isa::Aarch64 => u32::from(cfg!(target_arch = "aarch64")),
        Isa::Neon => 10 * u32::from(cpu_facts::has_neon()),
    }
}

#[cfg(target_arch = "x86_64")]
mod cpu_facts {
    use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};

    fn bit(r: u32, b: u32) -> bool {
        r >> b & 1 == 1
    }

    /// XCR0, or 0 when the OS has not enabled XSAVE (then XGETBV would fault).
    fn xcr0() -> u64 {
        // CPUID leaf 1 exists on every x86-64 CPU.
        let l1 = __cpuid(1);
        // ECX bit 27 = OSXSAVE: XGETBV is available and enabled by the OS.
        if !bit(l1.ecx, 27) {
            return 0;
        }
        // SAFETY: OSXSAVE is set, so XGETBV with ECX = 0 is valid here.
        unsafe { _xgetbv(0) }
    }

    fn leaf7() -> Option<(u32, u32)> {
        // Leaf 0 always exists and says how many leaves do.
        if __cpuid(0).eax < 7 {
            return None;
        }
        let l7 = __cpuid_count(7, 0);
        Some((l7.ebx, l7.ecx))
    }

    pub fn has_avx2() -> bool {
        let l1 = __cpuid(1);
        let (fma, avx, f16c) = (bit(l1.ecx, 12), bit(l1.ecx, 28), bit(l1.ecx, 29));
        let os_ymm = xcr0() & 0b110 == 0b110; // SSE + AVX state
        let avx2 = leaf7().is_some_and(|(ebx, _)| bit(ebx, 5));
        fma && avx && f16c && os_ymm && avx2
    }

    pub fn has_avx512() -> bool {
        let os_zmm = xcr0() & 0b1110_0110 == 0b1110_0110; // + opmask, ZMM_Hi256, Hi16_ZMM
        let f_dq_bw_vl = leaf7()
            .is_some_and(|(ebx, _)| bit(ebx, 16) && bit(ebx, 17) && bit(ebx, 30) && bit(ebx, 31));
        has_avx2() && os_zmm && f_dq_bw_vl
    }

    pub fn has_neon() -> bool {
        false
    }

    /// The CPU's brand string, e.g. "Intel(R) Xeon(R) ...".
    pub fn brand() -> Option<String> {
        if __cpuid(0x8000_0000).eax < 0x8000_0004 {
            return None;
        }
        let mut bytes = Vec::with_capacity(48);
        for leaf in 0x8000_0002..=0x8000_0004u32 {
            let r = __cpuid(leaf);
            for v in [r.eax, r.ebx, r.ecx, r.edx] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let s = String::from_utf8_lossy(&bytes)
            .trim_matches(char::from(0))
            .trim()
            .to_string();
        (!s.is_empty()).then_some(s)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod cpu_facts {
    pub fn has_avx2() -> bool {
        false
    }
    pub fn has_avx512() -> bool {
        false
    }
    pub fn has_neon() -> bool {
        #[cfg(target_arch = "aarch64")]
        {
            std::arch::is_aarch64_feature_detected!("neon")
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            false
        }
    }
    pub fn brand() -> Option<String> {
        None
    }
}

/// The CPU backend's registration: one device.
pub struct CpuReg {
    device: Arc<CpuDevice>,
}

impl CpuReg {
    /// The registration of a CPU plugin built for `isa`.
    pub fn new(isa: Isa) -> CpuReg {
        // A baseline variant runs the portable kernels only, so it is what
        // its name says on any CPU of its architecture.
        if matches!(isa, Isa::X86_64 | Isa::Aarch64) {
            crate::simd::limit_to_scalar();
        }
        let buffers = new_table();
        let buft = Arc::new(CpuBufferType::new(buffers.clone(), false));
        let repack = Arc::new(CpuBufferType::new(buffers.clone(), true));
        CpuReg {
            device: Arc::new(CpuDevice {
                isa,
                buft,
                repack,
                buffers,
            }),
        }
    }
}

impl Reg for CpuReg {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        vec![self.device.clone()]
    }
}

/// The host CPU.
pub struct CpuDevice {
    isa: Isa,
    buft: Arc<CpuBufferType>,
    repack: Arc<CpuBufferType>,
    buffers: BufferTable,
}

impl Device for CpuDevice {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn description(&self) -> String {
        let brand = cpu_facts::brand().unwrap_or_else(|| std::env::consts::ARCH.to_string());
        format!(
            "{brand} (variant {}, mat-mul kernels: {}; {} cores)",
            self.isa.name(),
            crate::simd::kernels().describe(),
            num_cpus::get_physical()
        )
    }

    fn device_type(&self) -> DeviceType {
        DeviceType::Cpu
    }

    fn memory(&self) -> Memory {
        host_memory()
    }

    fn supports_op(&self, graph: &[TensorDesc], node: usize) -> Verdict {
        let Some(d) = graph.get(node) else {
            return Verdict::unsupported(format!(
                "node {node} is not in the graph ({} tensors)",
                graph.len()
            ));
        };
        let op = match d.op() {
            Ok(op) => op,
            Err(e) => return Verdict::unsupported(e.to_string()),
        };
        let mut src = [None; MAX_SRC];
        for (i, &s) in d.src.iter().enumerate() {
            if s >= 0 {
                match graph.get(s as usize) {
                    Some(t) => src[i] = Some(t),
                    None => {
                        return Verdict::unsupported(format!("source {i} index {s} out of range"));
                    }
                }
            }
        }
        ops::supports(op, d, &src).into()
    }

    fn supports_buft(&self, name: &str, is_host: bool) -> bool {
        let _ = is_host;
        name == CPU_BUFFER_TYPE || name == CPU_REPACK_BUFFER_TYPE
    }

    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }

    fn extra_buffer_types(&self) -> Vec<Arc<dyn BufferType>> {
        if crate::simd::kernels().has_repacked() {
            vec![self.repack.clone()]
        } else {
            Vec::new()
        }
    }

    fn init_backend(&self, params: &str) -> Result<Box<dyn Backend>, PluginError> {
        let options = Options::from_params_and_env("cpu", CPU_OPTIONS, params, &[])?;
        let config = CpuConfig {
            // In 1..=4096 by the schema.
            n_threads: options.integer("threads").map(|n| n as usize),
        };
        Ok(Box::new(CpuStream {
            cpu: CpuBackend::new(config),
            buffers: self.buffers.clone(),
        }))
    }
}

/// Host memory from /proc/meminfo (0 / 0 where unavailable).
fn host_memory() -> Memory {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return Memory::default();
    };
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib * 1024)
    };
    Memory {
        free_bytes: field("MemAvailable:"),
        total_bytes: field("MemTotal:"),
    }
}

/// A CPU stream: the thread pool plus the table of buffers it may touch.
pub struct CpuStream {
    cpu: CpuBackend,
    buffers: BufferTable,
}

impl Backend for CpuStream {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn graph_compute(&self, graph: &[TensorDesc]) -> Result<(), PluginError> {
        let mut data = vec![std::ptr::null_mut::<u8>(); graph.len()];
        let mut repacked = vec![false; graph.len()];
        self.buffers.lock().check_graph(graph, |i, t, live| {
            data[i] = (t.buffer as usize + t.offset as usize) as *mut u8;
            repacked[i] = live.data;
        })?;
        for (i, t) in graph.iter().enumerate() {
            let is_compute = t
                .op()
                .is_ok_and(|op| op != backplane_abi::Op::None && !op.is_view());
            if !is_compute {
                continue;
            }
            for j in std::iter::once(i).chain((0..MAX_SRC).filter_map(|k| t.src(k))) {
                if data.get(j).is_none_or(|p| p.is_null()) {
                    return Err(PluginError::bad_input(format!(
                        "node {i}: tensor {j} is not allocated"
                    )));
                }
            }
        }
        // SAFETY: every non-null pointer covers its tensor inside a live
        // buffer of this plugin (checked above); every computed node and its
        // sources are allocated; exclusive access is the host's contract.
        unsafe { self.cpu.compute_with_layouts(graph, &data, &repacked) }.map_err(|e| match e {
            crate::CpuError::Unsupported { .. } => PluginError::unsupported(e.to_string()),
            _ => PluginError::bad_input(e.to_string()),
        })
    }
}
