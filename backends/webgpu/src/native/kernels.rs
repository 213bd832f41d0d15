//! The SPIR-V this build embedded: `build.rs` compiles every variant of the
//! GLSL in `glsl/` (with the `native-vulkan` feature) and writes the table
//! [`KERNELS`], each entry its module or the reason it was left out.

/// One variant `build.rs` compiled, by name (`mul_mat_vec_q4_0_n1_r2w128`).
#[derive(Clone, Copy, Debug)]
pub struct BuiltKernel {
    /// The variant's name.
    pub name: &'static str,
    /// Its SPIR-V (little-endian words), or why the build left it out.
    pub spirv: Result<&'static [u8], &'static str>,
}

#[cfg(feature = "native-vulkan")]
include!(concat!(env!("OUT_DIR"), "/native_kernels.rs"));

/// Every native kernel this build compiled: none without the feature.
#[cfg(not(feature = "native-vulkan"))]
pub static KERNELS: &[BuiltKernel] = &[];

/// Why no native kernel exists in a build without the feature.
pub const NOT_BUILT: &str = "plugin built without the native-vulkan feature";

/// Whether this build has native kernels at all.
pub fn built() -> bool {
    !KERNELS.is_empty()
}

/// The SPIR-V words of kernel `name`, or why there are none.
pub fn spirv(name: &str) -> Result<Vec<u32>, String> {
    if !built() {
        return Err(NOT_BUILT.to_string());
    }
    let kernel = KERNELS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| format!("no native kernel {name} in this build"))?;
    let bytes = kernel
        .spirv
        .map_err(|why| format!("native kernel {name}: {why}"))?;
    if bytes.len() % 4 != 0 || bytes.len() < 20 {
        return Err(format!(
            "native kernel {name}: {} bytes are not a SPIR-V module",
            bytes.len()
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

/// Whether kernel `name` is in this build with its SPIR-V (not left out).
pub fn available(name: &str) -> Result<(), String> {
    if !built() {
        return Err(NOT_BUILT.to_string());
    }
    match KERNELS.iter().find(|k| k.name == name) {
        Some(BuiltKernel { spirv: Ok(_), .. }) => Ok(()),
        Some(BuiltKernel {
            spirv: Err(why), ..
        }) => Err(format!("native kernel {name}: {why}")),
        None => Err(format!("no native kernel {name} in this build")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPIR-V's magic number, first word of every module.
    const SPIRV_MAGIC: u32 = 0x0723_0203;

    #[test]
    fn every_built_kernel_is_a_spirv_module_or_says_why_not() {
        if !built() {
            assert_eq!(spirv("mul_mat_vec_q4_0_n1_r2w128").unwrap_err(), NOT_BUILT);
            eprintln!("skipped: {NOT_BUILT}");
            return;
        }
        for k in KERNELS {
            match k.spirv {
                Ok(_) => {
                    let words = spirv(k.name).unwrap();
                    assert_eq!(words[0], SPIRV_MAGIC, "{}", k.name);
                }
                Err(why) => assert!(!why.is_empty(), "{}", k.name),
            }
        }
        // The mat-vec and KHR GEMM kernels need nothing the bundled
        // glslang lacks.
        for ty in ["q4_0", "q8_0"] {
            for c in super::super::configs::MATVEC_CONFIGS {
                for n in 1..=8 {
                    available(&format!("mul_mat_vec_{ty}_n{n}_{}", c.name)).unwrap();
                }
            }
        }
        for ty in ["f16", "q4_0", "q8_0"] {
            for c in super::super::configs::GEMM_CONFIGS {
                for form in ["", "_aligned"] {
                    for shape in ["16x16x16", "emulated"] {
                        available(&format!("mul_mat_coopmat_{ty}_{}{form}_{shape}", c.name))
                            .unwrap();
                    }
                }
            }
        }
        for c in super::super::configs::CM2_CONFIGS {
            available(&format!("mul_mat_{}_f16", c.name)).unwrap();
        }
        for c in super::super::configs::FA_CM2_CONFIGS {
            for (dk, dv) in super::super::configs::FA_CM2_HEADS {
                available(&format!("flash_attn_cm2_{}_{dk}x{dv}", c.name)).unwrap();
            }
        }
        for c in super::super::configs::PEAK_CONFIGS {
            available(&format!("coopmat_peak_{}", c.name)).unwrap();
        }
        assert!(
            available("mul_mat_vec_q4_1_n1")
                .unwrap_err()
                .contains("no native kernel")
        );
    }
}
