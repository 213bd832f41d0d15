//! With the `native-vulkan` feature: compiles the GLSL kernels of `glsl/`
//! to SPIR-V with shaderc (glslang built from source), validates each
//! module with SPIRV-Tools for its Vulkan target, and writes
//! `$OUT_DIR/native_kernels.rs`, the table `src/native/kernels.rs`
//! includes (each kernel's SPIR-V embedded with `include_bytes!`, or the
//! reason it was left out). Without the feature it does nothing and the
//! backend has the WGSL kernels only.

/// The kernel configurations, shared with the backend.
#[cfg(feature = "native-vulkan")]
#[allow(dead_code)]
#[path = "src/native/configs.rs"]
mod configs;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/native/configs.rs");
    #[cfg(feature = "native-vulkan")]
    native::build();
}

#[cfg(feature = "native-vulkan")]
mod native {
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};

    /// Every kernel targets Vulkan 1.2 (SPIR-V 1.5): wgpu-hal's instance
    /// may stop at 1.2, and SPIR-V 1.5 carries cooperative matrices as an
    /// extension.
    const VULKAN_1_2: u32 = shaderc::EnvVersion::Vulkan1_2 as u32;

    /// SPIRV-Tools' `spv_target_env` for Vulkan 1.2.
    const SPV_ENV_VULKAN_1_2: u32 = 23;

    /// Vulkan 1.3 (SPIR-V 1.6), for kernels whose extension glslang
    /// accepts only there (`GL_NV_cooperative_matrix2`): they run only on
    /// devices with that extension, all of them Vulkan 1.3 drivers.
    const VULKAN_1_3: u32 = shaderc::EnvVersion::Vulkan1_3 as u32;

    /// SPIRV-Tools' `spv_target_env` for Vulkan 1.3.
    const SPV_ENV_VULKAN_1_3: u32 = 25;

    /// One compiled variant: a name the backend looks up, its source file
    /// and macro definitions.
    struct Variant {
        name: String,
        file: &'static str,
        defines: Vec<(&'static str, String)>,
        /// Compiled for Vulkan 1.3 (SPIR-V 1.6) instead of 1.2.
        vulkan_1_3: bool,
    }

    use crate::configs::{
        CM2_CONFIGS, COOPMAT_SHAPES, FA_CM2_CONFIGS, FA_CM2_HEADS, GEMM_CONFIGS, MATVEC_CONFIGS,
        MATVEC_MAX_COLS, PEAK_CONFIGS,
    };

    /// Weight layouts of the native mat-vec: the variant name's weight
    /// part, its macros.
    const MATVEC_TYPES: &[(&str, &[&str])] = &[
        ("q4_0", &["A_Q4_0"]),
        ("q8_0", &["A_Q8_0"]),
        // q4_0 stored split (`crate::split`).
        ("q4_0_split", &["A_Q4_0", "W_SPLIT"]),
    ];

    /// Weight layouts of the cooperative-matrix GEMM: the variant name's
    /// weight part, its macros.
    const COOPMAT_TYPES: &[(&str, &[&str])] = &[
        ("f16", &["A_F16"]),
        ("q4_0", &["A_Q4_0"]),
        ("q8_0", &["A_Q8_0"]),
        // q4_0 stored split (`crate::split`).
        ("q4_0_split", &["A_Q4_0", "W_SPLIT"]),
    ];

    /// The macros of a `bm` x `bn` tile, `bk` per step, `wg` invocations.
    fn tile_defines(bm: u32, bn: u32, bk: u32, wg: u32) -> Vec<(&'static str, String)> {
        vec![
            ("BM", bm.to_string()),
            ("BN", bn.to_string()),
            ("BK", bk.to_string()),
            ("WG_SIZE", wg.to_string()),
        ]
    }

    /// The macros `names`, each defined with no value.
    fn macros(names: &[&'static str]) -> Vec<(&'static str, String)> {
        names.iter().map(|&n| (n, String::new())).collect()
    }

    /// Defines each macro whose flag is on (with no value).
    fn push_flags(defines: &mut Vec<(&'static str, String)>, flags: &[(bool, &'static str)]) {
        for &(on, name) in flags {
            if on {
                defines.push((name, String::new()));
            }
        }
    }

    fn variants() -> Vec<Variant> {
        let mut out = Vec::new();
        for &(ty, flags) in MATVEC_TYPES {
            for c in MATVEC_CONFIGS {
                for cols in 1..=MATVEC_MAX_COLS {
                    let mut defines = macros(flags);
                    defines.extend([
                        ("NCOLS", cols.to_string()),
                        ("NROWS", c.rows.to_string()),
                        ("WG_SIZE", c.workgroup_size.to_string()),
                    ]);
                    if c.word_loads {
                        defines.push(("WORD_LOADS", String::new()));
                    }
                    out.push(Variant {
                        name: format!("mul_mat_vec_{ty}_n{cols}_{}", c.name),
                        file: "mul_mat_vec.comp",
                        defines,
                        vulkan_1_3: false,
                    });
                }
            }
        }
        for &(ty, flags) in COOPMAT_TYPES {
            for (i, c) in GEMM_CONFIGS.iter().enumerate() {
                let mut base = macros(flags);
                base.extend([
                    ("BM", c.bm.to_string()),
                    ("BN", c.bn.to_string()),
                    ("BK", c.bk.to_string()),
                    ("WM", c.wm.to_string()),
                    ("WN", c.wn.to_string()),
                ]);
                push_flags(
                    &mut base,
                    &[
                        (c.double_buffer, "DOUBLE_BUFFER"),
                        (c.b_half, "B_F16"),
                        (c.prefetch_two, "PREFETCH2"),
                    ],
                );
                // Each configuration twice: with checked loads, and with
                // the loads of whole aligned steps (`_aligned`, ALIGNED).
                for aligned in [false, true] {
                    let mut tile = base.clone();
                    push_flags(&mut tile, &[(aligned, "ALIGNED")]);
                    let name = format!(
                        "mul_mat_coopmat_{ty}_{}{}",
                        c.name,
                        if aligned { "_aligned" } else { "" }
                    );
                    let mut emulated = tile.clone();
                    emulated.push(("EMULATED", String::new()));
                    out.push(Variant {
                        name: format!("{name}_emulated"),
                        file: "mul_mat_coopmat.comp",
                        defines: emulated,
                        vulkan_1_3: false,
                    });
                    // Every shape for the default configuration, 16x16x16
                    // for the others.
                    let shapes = if i == 0 {
                        COOPMAT_SHAPES
                    } else {
                        &COOPMAT_SHAPES[..1]
                    };
                    for &(m, n, k) in shapes {
                        let mut defines = tile.clone();
                        defines.extend([
                            ("TM", m.to_string()),
                            ("TN", n.to_string()),
                            ("TK", k.to_string()),
                        ]);
                        out.push(Variant {
                            name: format!("{name}_{m}x{n}x{k}"),
                            file: "mul_mat_coopmat.comp",
                            defines,
                            vulkan_1_3: false,
                        });
                    }
                }
            }
        }
        for c in CM2_CONFIGS {
            let mut defines = tile_defines(c.bm, c.bn, c.bk, c.workgroup_size);
            if c.b_half {
                defines.push(("B_F16", String::new()));
            }
            if c.prefetch {
                defines.push(("PREFETCH", String::new()));
            }
            if c.unclamped_unroll > 0 {
                assert!(c.b_half, "{}: UNCLAMPED needs B_F16", c.name);
                defines.push(("UNCLAMPED", String::new()));
                defines.push(("UNROLL", format!("{}u", c.unclamped_unroll)));
            }
            out.push(Variant {
                name: format!("mul_mat_{}_f16", c.name),
                file: "mul_mat_cm2.comp",
                defines,
                vulkan_1_3: true,
            });
        }
        for c in PEAK_CONFIGS {
            let mut defines = tile_defines(c.bm, c.bn, c.bk, c.workgroup_size);
            use crate::configs::PeakFeed;
            assert!(
                c.feed == PeakFeed::Registers || !c.workgroup_scope,
                "{}: fed matrices are KHR only",
                c.name
            );
            assert!(
                c.workgroup_scope || c.bk == 16 || c.feed != PeakFeed::Registers,
                "{}: K steps past 16 need fed matrices",
                c.name
            );
            push_flags(
                &mut defines,
                &[
                    (c.workgroup_scope, "WORKGROUP_SCOPE"),
                    (c.feed != PeakFeed::Registers, "SHARED"),
                    (
                        matches!(
                            c.feed,
                            PeakFeed::Staged | PeakFeed::Global | PeakFeed::Prefetched
                        ),
                        "STAGE",
                    ),
                    (
                        matches!(c.feed, PeakFeed::Global | PeakFeed::Prefetched),
                        "GLOBAL",
                    ),
                    (c.feed == PeakFeed::Prefetched, "PREFETCH"),
                    (c.f16_acc, "ACC_F16"),
                ],
            );
            out.push(Variant {
                name: format!("coopmat_peak_{}", c.name),
                file: "coopmat_peak.comp",
                defines,
                vulkan_1_3: c.workgroup_scope,
            });
        }
        for c in FA_CM2_CONFIGS {
            for &(dk, dv) in FA_CM2_HEADS {
                let mut defines = vec![
                    ("BR", c.br.to_string()),
                    ("BC", c.bc.to_string()),
                    ("DKP", dk.to_string()),
                    ("DVP", dv.to_string()),
                    ("WG_SIZE", c.workgroup_size.to_string()),
                ];
                push_flags(
                    &mut defines,
                    &[
                        (c.rowsum_reduce, "ROWSUM_REDUCE"),
                        (c.pv_half, "PV_HALF"),
                        (c.v_early, "V_EARLY"),
                        (c.o_half, "O_HALF"),
                    ],
                );
                out.push(Variant {
                    name: format!("flash_attn_cm2_{}_{dk}x{dv}", c.name),
                    file: "flash_attn_cm2.comp",
                    defines,
                    vulkan_1_3: true,
                });
            }
        }
        out
    }

    /// Whether a compile error says the compiler does not know a GLSL
    /// extension (the kernel is then left out, with the message as the
    /// reason, instead of failing the build).
    fn unknown_extension(message: &str) -> bool {
        message.contains("extension not supported")
    }

    pub fn build() {
        let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
            .join("glsl");
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
        println!("cargo::rerun-if-changed={}", dir.display());
        // The validator must refuse a module without its memory model, or
        // it is not checking anything.
        assert!(
            validate(&[0x0723_0203, 0x0001_0500, 0, 1, 0], SPV_ENV_VULKAN_1_2).is_err(),
            "SPIRV-Tools accepted an invalid module"
        );
        let compiler = shaderc::Compiler::new().expect("shaderc: no compiler");
        let mut table = String::new();
        for v in variants() {
            let path = dir.join(v.file);
            println!("cargo::rerun-if-changed={}", path.display());
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let entry = match compile(&compiler, &v, &source) {
                Ok(words) => {
                    let env = if v.vulkan_1_3 {
                        SPV_ENV_VULKAN_1_3
                    } else {
                        SPV_ENV_VULKAN_1_2
                    };
                    if let Err(e) = validate(&words, env) {
                        panic!("{}: SPIR-V from {} fails validation: {e}", v.name, v.file);
                    }
                    let file = out.join(format!("{}.spv", v.name));
                    write(&file, &words);
                    format!(
                        "Ok(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{}.spv\")))",
                        v.name
                    )
                }
                Err(e) if unknown_extension(&e) => {
                    println!("cargo::warning={}: left out: {e}", v.name);
                    format!(
                        "Err({:?})",
                        format!("the GLSL compiler lacks an extension: {e}")
                    )
                }
                Err(e) => panic!("{}: compiling {}: {e}", v.name, v.file),
            };
            writeln!(
                table,
                "    BuiltKernel {{ name: {:?}, spirv: {entry} }},",
                v.name
            )
            .expect("writing to a String");
        }
        let text = format!(
            "/// Every native kernel this build compiled, or why it left one out.\n\
             pub static KERNELS: &[BuiltKernel] = &[\n{table}];\n"
        );
        std::fs::write(out.join("native_kernels.rs"), text).expect("writing native_kernels.rs");
    }

    fn compile(
        compiler: &shaderc::Compiler,
        v: &Variant,
        source: &str,
    ) -> Result<Vec<u32>, String> {
        let mut options =
            shaderc::CompileOptions::new().map_err(|e| format!("shaderc options: {e}"))?;
        if v.vulkan_1_3 {
            options.set_target_env(shaderc::TargetEnv::Vulkan, VULKAN_1_3);
            options.set_target_spirv(shaderc::SpirvVersion::V1_6);
        } else {
            options.set_target_env(shaderc::TargetEnv::Vulkan, VULKAN_1_2);
            options.set_target_spirv(shaderc::SpirvVersion::V1_5);
        }
        options.set_optimization_level(shaderc::OptimizationLevel::Performance);
        for (name, value) in &v.defines {
            let value = (!value.is_empty()).then_some(value.as_str());
            options.add_macro_definition(name, value);
        }
        compiler
            .compile_into_spirv(
                source,
                shaderc::ShaderKind::Compute,
                v.file,
                "main",
                Some(&options),
            )
            .map(|a| a.as_binary().to_vec())
            .map_err(|e| e.to_string())
    }

    fn write(path: &Path, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }

    /// SPIRV-Tools' C API, linked into the build script with shaderc's
    /// static library.
    mod spirv_tools {
        use std::ffi::{c_char, c_void};

        #[repr(C)]
        pub struct Position {
            pub line: usize,
            pub column: usize,
            pub index: usize,
        }

        #[repr(C)]
        pub struct Diagnostic {
            pub position: Position,
            pub error: *const c_char,
            pub is_text_source: bool,
        }

        unsafe extern "C" {
            pub fn spvContextCreate(env: u32) -> *mut c_void;
            pub fn spvContextDestroy(context: *mut c_void);
            pub fn spvValidateBinary(
                context: *const c_void,
                words: *const u32,
                num_words: usize,
                diagnostic: *mut *mut Diagnostic,
            ) -> i32;
            pub fn spvDiagnosticDestroy(diagnostic: *mut Diagnostic);
        }
    }

    /// Runs SPIRV-Tools' validator on `words` for target `env`.
    fn validate(words: &[u32], env: u32) -> Result<(), String> {
        use spirv_tools::*;
        // SAFETY: the context and diagnostic are created and destroyed
        // here; `words` outlives the call.
        unsafe {
            let context = spvContextCreate(env);
            if context.is_null() {
                return Err("SPIRV-Tools: no context".into());
            }
            let mut diagnostic: *mut Diagnostic = std::ptr::null_mut();
            let result = spvValidateBinary(context, words.as_ptr(), words.len(), &mut diagnostic);
            let message = if diagnostic.is_null() || (*diagnostic).error.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr((*diagnostic).error)
                    .to_string_lossy()
                    .into_owned()
            };
            if !diagnostic.is_null() {
                spvDiagnosticDestroy(diagnostic);
            }
            spvContextDestroy(context);
            if result == 0 {
                Ok(())
            } else {
                Err(format!("error {result}: {message}"))
            }
        }
    }
}
