//! Compiled pipelines, one per (key, checks), cached per device.
//!
//! Every kernel binds its tensors as `read_write` storage buffers at
//! bindings `0..n` and its parameters as a uniform at binding `n`. wgpu
//! treats a buffer used read-only and read-write in one dispatch as a
//! conflict, and the scheduler places a graph's tensors in one buffer, so
//! all storage bindings are `read_write` (their ranges never overlap except
//! for in-place kernels, which bind the shared tensor once). The uniform
//! has a dynamic offset: one bind group serves every parameter slot of a
//! parameter buffer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use backplane_shaders::PipelineKey;

use crate::{PARAM_SLOT_BYTES, lock};

/// Whether naga's runtime checks (bounds clamping, loop bounding) stay on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Checks {
    /// Checked: the default for every kernel.
    On,
    /// Unchecked (`create_shader_module_trusted`): only for built-in
    /// kernels whose indexing is proven by conformance cases with guard
    /// regions. A kernel with any file from outside the binary never gets
    /// it (see [`effective_checks`]).
    Trusted,
}

/// What `BACKPLANE_WEBGPU_CHECKS` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksSetting {
    /// Unset (or empty): each kernel keeps its own choice.
    Default,
    /// `on`: runtime checks on for every kernel.
    On,
    /// `off`: trust every built-in kernel. Honoured only by builds with
    /// debug assertions (for measuring what the checks cost); a release
    /// build ignores it with a warning.
    Off,
    /// Any other value: ignored with a warning.
    Unknown,
}

impl ChecksSetting {
    /// Reads a value of `BACKPLANE_WEBGPU_CHECKS`.
    pub fn parse(value: Option<&str>) -> ChecksSetting {
        match value {
            None | Some("") => ChecksSetting::Default,
            Some("on") => ChecksSetting::On,
            Some("off") => ChecksSetting::Off,
            Some(_) => ChecksSetting::Unknown,
        }
    }
}

/// Whether this build lets `BACKPLANE_WEBGPU_CHECKS=off` trust kernels that
/// did not ask for it: only builds with debug assertions (tests, local
/// measurements), never a release plugin.
pub const CONFIG_MAY_TRUST: bool = cfg!(debug_assertions);

/// The checks a kernel runs with: `requested` is the kernel's own choice,
/// `setting` the environment's, `from_outside` whether any of its files came
/// from outside the binary (`BACKPLANE_SHADER_DIR`), and `config_may_trust`
/// whether this build honours `off` ([`CONFIG_MAY_TRUST`]).
///
/// A kernel from outside is always checked: nothing proved its indexing,
/// whatever its built-in twin asks. `on` checks every kernel. `off`
/// trusts built-in kernels only where `config_may_trust`.
pub fn effective_checks(
    requested: Checks,
    setting: ChecksSetting,
    from_outside: bool,
    config_may_trust: bool,
) -> Checks {
    if from_outside {
        return Checks::On;
    }
    match setting {
        ChecksSetting::On => Checks::On,
        ChecksSetting::Off if config_may_trust => Checks::Trusted,
        ChecksSetting::Default | ChecksSetting::Off | ChecksSetting::Unknown => requested,
    }
}

/// The warning a setting deserves in this build, if any.
pub fn setting_warning(setting: ChecksSetting, config_may_trust: bool) -> Option<&'static str> {
    match setting {
        ChecksSetting::Off if !config_may_trust => Some(
            "backplane-webgpu: BACKPLANE_WEBGPU_CHECKS=off ignored: a release build keeps the \
             runtime checks of every kernel not proven in bounds (only debug builds honour off, \
             for measuring)",
        ),
        ChecksSetting::Unknown => {
            Some("backplane-webgpu: BACKPLANE_WEBGPU_CHECKS ignored: expected on or off")
        }
        _ => None,
    }
}

/// One compiled kernel.
pub struct Pipeline {
    /// The wgpu pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Its bind group layout (n storage buffers, then the uniform with a
    /// dynamic offset), shared by every pipeline with n storage buffers.
    pub layout: wgpu::BindGroupLayout,
    /// Label for profiles and errors.
    pub label: String,
    /// The checks it was compiled with (see [`effective_checks`]).
    pub checks: Checks,
}

/// The cache.
#[derive(Default)]
pub struct PipelineCache {
    /// Per key, the variants by (checks, storage bindings); looked up by
    /// reference so a hit allocates nothing.
    map: Mutex<HashMap<PipelineKey, Vec<Variant>>>,
    /// One bind group layout per number of storage bindings, shared by
    /// every pipeline with that many, so bind groups are interchangeable
    /// between them (see `encode::BindGroupCache`).
    layouts: Mutex<HashMap<usize, wgpu::BindGroupLayout>>,
    /// Nanoseconds spent compiling, in all (profiles leave it out of the
    /// per-kernel host cost).
    compile_ns: std::sync::atomic::AtomicU64,
}

/// A compiled variant of a key: (checks, storage bindings, pipeline).
type Variant = (Checks, usize, Arc<Pipeline>);

impl PipelineCache {
    /// The pipeline for `key` with `n_storage` storage bindings, compiled on
    /// first use. Shader and pipeline errors name the key.
    pub fn get(
        &self,
        device: &wgpu::Device,
        key: &PipelineKey,
        checks: Checks,
        n_storage: usize,
    ) -> Result<Arc<Pipeline>, String> {
        let find = |v: &Vec<Variant>| {
            v.iter()
                .find(|(c, n, _)| *c == checks && *n == n_storage)
                .map(|(_, _, p)| Arc::clone(p))
        };
        if let Some(p) = lock(&self.map).get(key).and_then(find) {
            return Ok(p);
        }
        let bgl = lock(&self.layouts)
            .entry(n_storage)
            .or_insert_with(|| layout(device, n_storage))
            .clone();
        let t0 = std::time::Instant::now();
        let p = Arc::new(compile(device, key, checks, bgl)?);
        self.compile_ns.fetch_add(
            t0.elapsed().as_nanos() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        lock(&self.map)
            .entry(key.clone())
            .or_default()
            .push((checks, n_storage, Arc::clone(&p)));
        Ok(p)
    }
}

impl PipelineCache {
    /// The bind group layout of every pipeline with `n_storage` storage
    /// bindings (the native kernels' pipelines share it, so cached bind
    /// groups fit them too).
    pub fn shared_layout(&self, device: &wgpu::Device, n_storage: usize) -> wgpu::BindGroupLayout {
        lock(&self.layouts)
            .entry(n_storage)
            .or_insert_with(|| layout(device, n_storage))
            .clone()
    }

    /// Nanoseconds spent compiling pipelines so far.
    pub fn compile_ns(&self) -> u64 {
        self.compile_ns.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// `BACKPLANE_WEBGPU_CHECKS`, read once per process; its warning, if any,
/// goes to stderr then.
fn checks_setting() -> ChecksSetting {
    static SETTING: std::sync::OnceLock<ChecksSetting> = std::sync::OnceLock::new();
    *SETTING.get_or_init(|| {
        let value = std::env::var("BACKPLANE_WEBGPU_CHECKS").ok();
        let setting = ChecksSetting::parse(value.as_deref());
        if let Some(w) = setting_warning(setting, CONFIG_MAY_TRUST) {
            eprintln!("{w}");
        }
        setting
    })
}

fn layout(device: &wgpu::Device, n_storage: usize) -> wgpu::BindGroupLayout {
    let mut entries: Vec<wgpu::BindGroupLayoutEntry> = (0..n_storage)
        .map(|i| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    entries.push(wgpu::BindGroupLayoutEntry {
        binding: n_storage as u32,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
        },
        count: None,
    });
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("backplane kernel"),
        entries: &entries,
    })
}

fn compile(
    device: &wgpu::Device,
    key: &PipelineKey,
    checks: Checks,
    bgl: wgpu::BindGroupLayout,
) -> Result<Pipeline, String> {
    let label = key.label();
    let shader = backplane_shaders::specialise(key).map_err(|e| format!("{label}: {e}"))?;
    let from_outside = !shader.outside.is_empty();
    let checks = effective_checks(checks, checks_setting(), from_outside, CONFIG_MAY_TRUST);
    if from_outside {
        let files: Vec<String> = shader.outside.iter().map(|f| format!("{f}.wgsl")).collect();
        eprintln!(
            "backplane-webgpu: {label}: {} from {}, not built in: runtime checks on",
            files.join(", "),
            backplane_shaders::SHADER_DIR_ENV
        );
    }
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(&label),
        source: wgpu::ShaderSource::Wgsl(shader.source.as_str().into()),
    };
    let module = match checks {
        Checks::On => device.create_shader_module(desc),
        // SAFETY: Trusted comes only from `effective_checks`, which gives it
        // to built-in kernels alone (never one with a file from outside the
        // binary), and only where the kernel asked for it (its indexing
        // proven in bounds by conformance cases with guard regions around
        // every output) or, in builds with debug assertions, where
        // BACKPLANE_WEBGPU_CHECKS=off asks for measuring.
        Checks::Trusted => unsafe {
            device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
        },
    };
    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&label),
        bind_group_layouts: &[Some(&bgl)],
        immediate_size: 0,
    });
    let constants: Vec<(&str, f64)> = shader
        .constants
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .collect();
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&label),
        layout: Some(&pl),
        module: &module,
        entry_point: Some(shader.entry),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &constants,
            zero_initialize_workgroup_memory: false,
        },
        cache: None,
    });
    if let Some(e) = pollster::block_on(scope.pop()) {
        if std::env::var_os("BACKPLANE_WEBGPU_DUMP_SHADERS").is_some() {
            eprintln!("--- {label} ---\n{}", shader.source);
        }
        return Err(format!("pipeline {label} failed to build: {e}"));
    }
    Ok(Pipeline {
        pipeline,
        layout: bgl,
        label,
        checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: [ChecksSetting; 4] = [
        ChecksSetting::Default,
        ChecksSetting::On,
        ChecksSetting::Off,
        ChecksSetting::Unknown,
    ];

    #[test]
    fn a_kernel_from_outside_the_binary_is_checked_whatever_the_settings() {
        for requested in [Checks::On, Checks::Trusted] {
            for setting in SETTINGS {
                for may_trust in [false, true] {
                    assert_eq!(
                        effective_checks(requested, setting, true, may_trust),
                        Checks::On,
                        "{requested:?} {setting:?} may_trust={may_trust}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_release_build_ignores_off_with_a_warning() {
        for requested in [Checks::On, Checks::Trusted] {
            assert_eq!(
                effective_checks(requested, ChecksSetting::Off, false, false),
                requested
            );
        }
        let w = setting_warning(ChecksSetting::Off, false).expect("a warning");
        assert!(w.contains("BACKPLANE_WEBGPU_CHECKS=off ignored"), "{w}");
        // No configuration of a release build trusts a kernel that did not
        // ask for it.
        for setting in SETTINGS {
            assert_eq!(
                effective_checks(Checks::On, setting, false, false),
                Checks::On
            );
        }
    }

    #[test]
    fn a_debug_build_honours_off_for_built_in_kernels_only() {
        assert_eq!(
            effective_checks(Checks::On, ChecksSetting::Off, false, true),
            Checks::Trusted
        );
        assert_eq!(
            effective_checks(Checks::Trusted, ChecksSetting::Off, true, true),
            Checks::On
        );
        assert_eq!(setting_warning(ChecksSetting::Off, true), None);
    }

    #[test]
    fn on_checks_every_kernel_and_default_keeps_each_kernels_choice() {
        for may_trust in [false, true] {
            assert_eq!(
                effective_checks(Checks::Trusted, ChecksSetting::On, false, may_trust),
                Checks::On
            );
            for requested in [Checks::On, Checks::Trusted] {
                assert_eq!(
                    effective_checks(requested, ChecksSetting::Default, false, may_trust),
                    requested
                );
            }
        }
        assert_eq!(ChecksSetting::parse(None), ChecksSetting::Default);
        assert_eq!(ChecksSetting::parse(Some("on")), ChecksSetting::On);
        assert_eq!(ChecksSetting::parse(Some("off")), ChecksSetting::Off);
        assert_eq!(ChecksSetting::parse(Some("yes")), ChecksSetting::Unknown);
        assert!(setting_warning(ChecksSetting::Unknown, true).is_some());
    }
}
