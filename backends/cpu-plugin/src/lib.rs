//! The CPU backend as a plugin: `backplane_cpu::plugin` exported through
//! `backplane_abi::export_plugin!`, with the ISA chosen by a cargo feature.
//!
//! Build every variant with `cargo xtask plugins`.

use backplane_cpu::plugin::{CPU_OPTIONS, CpuReg, Isa, score};

/// The ISA this build of the plugin is for.
const ISA: Isa = if cfg!(feature = "avx512") {
    Isa::Avx512
} else if cfg!(feature = "avx2") {
    Isa::Avx2
} else if cfg!(feature = "neon") {
    Isa::Neon
} else if cfg!(feature = "aarch64") || cfg!(target_arch = "aarch64") {
    Isa::Aarch64
} else {
    Isa::X86_64
};

backplane_abi::export_plugin! {
    reg: CpuReg::new(ISA),
    score: score(ISA),
    options: CPU_OPTIONS,
}
