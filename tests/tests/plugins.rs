//! Loading real built plugins: the CPU plugin and the fixtures of
//! `tests/fixtures/*`. Build them first with `cargo xtask plugins --fixtures`.

use backplane::registry::{MAX_REASON_LINES, Registry, RegistryOptions, SearchPath, Source};
use backplane::{DType, Graph};
use backplane_abi::plugin::DeviceType;
use backplane_tests::{
    assert_add_mul_mat_computes, bytes_f32, cpu_plugin, cpu_plugin_name, f32_bytes, fixture,
    install, install_cpu_plugin, load_only, place, plugin_file_name, refusal_reason, scratch_dir,
    scratch_dir_with,
};

/// Why the registry refused `file`, checked to be short and not empty.
fn short_refusal<'a>(reg: &'a Registry, file: &str) -> &'a str {
    let reason = refusal_reason(reg, file);
    assert!(!reason.trim().is_empty(), "empty reason for {file}");
    assert!(
        reason.lines().count() <= MAX_REASON_LINES,
        "reason too long:\n{reason}"
    );
    reason
}

/// Loads fixture `fixture_name` (installed under that name) beside the CPU
/// plugin, from a scratch dir for test `test`.
fn load_beside_cpu(test: &str, fixture_name: &str) -> Registry {
    let dir = scratch_dir_with(
        test,
        &[
            (fixture(fixture_name), fixture_name),
            (cpu_plugin(), cpu_plugin_name()),
        ],
    );
    load_only([&dir])
}

/// Loads the plugin files in `dir` and the built-in CPU backend.
fn load_with_builtin_cpu(dir: &std::path::Path) -> Registry {
    Registry::load(&RegistryOptions {
        search: SearchPath::only([dir]),
        builtin: Some(backplane::builtin_cpu()),
    })
}

/// A scratch dir for test `name` holding the CPU plugin.
fn dir_with_cpu_plugin(name: &str) -> std::path::PathBuf {
    let dir = scratch_dir(name);
    install_cpu_plugin(&dir);
    dir
}

#[test]
fn cpu_plugin_runs_a_graph_through_the_abi() {
    let dir = dir_with_cpu_plugin("cpu-graph");
    let reg = load_only([&dir]);
    assert!(reg.refused().is_empty(), "{:?}", reg.refused());
    let cpu = reg.backend("cpu").expect("cpu plugin loaded");
    assert!(matches!(cpu.source, Source::File { .. }));
    assert!(cpu.score > 0);
    let dev = &cpu.devices[0];
    assert_eq!(dev.device_type(), DeviceType::Cpu);
    assert!(dev.memory().total_bytes > 0);
    assert!(dev.buffer_type().is_host());
    assert_add_mul_mat_computes(dev);
}

#[test]
fn builtin_cpu_is_there_without_plugins_and_behaves_alike() {
    let dir = scratch_dir("builtin");
    let reg = load_with_builtin_cpu(&dir);
    let cpu = reg.backend("cpu").expect("built-in cpu");
    assert_eq!(cpu.source, Source::Builtin);
    assert_add_mul_mat_computes(&cpu.devices[0]);
}

#[test]
fn cpu_plugin_replaces_builtin_cpu() {
    let dir = dir_with_cpu_plugin("replace-builtin");
    let reg = load_with_builtin_cpu(&dir);
    let cpus: Vec<_> = reg.backends().iter().filter(|b| b.name == "cpu").collect();
    assert_eq!(cpus.len(), 1);
    assert!(matches!(cpus[0].source, Source::File { .. }));
}

#[test]
fn cpu_plugin_refuses_foreign_buffers_and_explains_unsupported_nodes() {
    let dir = dir_with_cpu_plugin("cpu-bad-input");
    let reg = load_only([&dir]);
    let dev = &reg.backend("cpu").unwrap().devices[0];
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4, 1]).unwrap();
    let b = g.input("b", DType::F32, &[4, 1]).unwrap();
    let c = g.add(a, b).unwrap();
    let mut descs = g.tensors().to_vec();
    // Out-of-range source index: a verdict with a reason, not a crash.
    descs[c.index()].src[0] = 99;
    let v = dev.supports_op(&descs, c.index());
    assert!(
        v.reason().is_some_and(|r| r.contains("out of range")),
        "{v:?}"
    );
    // Unallocated / foreign memory: an error, not a crash.
    let mut descs = g.tensors().to_vec();
    for d in &mut descs {
        d.buffer = 0x1000;
    }
    let err = dev
        .init_backend("")
        .unwrap()
        .graph_compute(&descs)
        .unwrap_err();
    assert!(
        err.message.contains("not inside a live cpu buffer"),
        "{err}"
    );
}

#[test]
fn refuses_plugin_built_against_other_interface() {
    let reg = load_beside_cpu("changed-abi", "changed");
    let reason = short_refusal(&reg, &plugin_file_name("changed"));
    assert!(reason.contains("incompatible plugin interface"), "{reason}");
    // The host goes on: the next plugin loaded.
    assert!(reg.backend("cpu").is_some());
}

/// Item 8 of the hostile catalogue: a plugin built against the first ABI 1
/// layout (getters returning bare values, `DeviceType`/`Verdict` as enums;
/// the `older` fixture reproduces it) loads in this host through the legacy
/// adapters: its device is listed with its values and a small graph computes
/// right on it.
#[test]
fn plugin_of_the_first_abi_1_layout_loads_and_computes() {
    let dir = scratch_dir("older-abi");
    install(&fixture("older"), &dir, "older");
    let reg = load_only([&dir]);
    let backend = reg
        .backend("older")
        .unwrap_or_else(|| panic!("older plugin refused: {:?}", reg.refused()));
    assert_eq!(backend.devices.len(), 1, "{:?}", backend.refused_devices);
    let device = &backend.devices[0];
    assert_eq!(device.name(), "older0");
    assert_eq!(device.device_type(), DeviceType::Accel);
    assert_eq!(device.memory().total_bytes, 1 << 21);

    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[6, 2]).unwrap();
    let b = g.input("b", DType::F32, &[6, 2]).unwrap();
    let c = g.add(a, b).unwrap();
    assert!(device.supports_op(g.tensors(), c.index()).is_supported());
    let (descs, buffer) = place(&g, &device.buffer_type());
    let av: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..12).map(|i| 3.0 - i as f32).collect();
    buffer
        .set_tensor(&descs[a.index()], 0, &f32_bytes(&av))
        .unwrap();
    buffer
        .set_tensor(&descs[b.index()], 0, &f32_bytes(&bv))
        .unwrap();
    let stream = device.init_backend("").unwrap();
    stream.graph_compute(&descs).unwrap();
    let mut out = vec![0u8; 12 * 4];
    buffer.get_tensor(&descs[c.index()], 0, &mut out).unwrap();
    let want: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
    assert_eq!(bytes_f32(&out), want);
    // An op it does not run is refused with the plugin's reason.
    let m = g.mul(a, b).unwrap();
    let v = device.supports_op(g.tensors(), m.index());
    assert!(v.reason().is_some_and(|r| r.contains("only ADD")), "{v:?}");
}

#[test]
fn panicking_plugin_returns_errors_and_host_goes_on() {
    let reg = load_beside_cpu("panicky", "panicky");
    let dev = &reg
        .backend("panicky")
        .expect("panicky plugin loads")
        .devices[0];
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4, 1]).unwrap();
    let c = g.add(a, a).unwrap();
    let v = dev.supports_op(g.tensors(), c.index());
    let reason = v
        .reason()
        .expect("a panicking supports_op is an Unsupported verdict");
    assert!(
        reason.contains("panicked in supports_op") && reason.contains("fixture panics"),
        "{reason}"
    );
    let err = dev
        .init_backend("")
        .unwrap()
        .graph_compute(g.tensors())
        .unwrap_err();
    assert!(err.is_panic(), "{err:?}");
    assert!(
        err.message.contains("fixture panics in graph_compute"),
        "{err}"
    );
    // Both again: the plugin stays usable, and so does the host.
    assert!(!dev.supports_op(g.tensors(), c.index()).is_supported());
    assert_add_mul_mat_computes(&reg.backend("cpu").unwrap().devices[0]);
}

#[test]
fn score_zero_plugin_is_skipped_with_reason() {
    let dir = scratch_dir("zero");
    install(&fixture("zero"), &dir, "zero");
    let reg = load_only([&dir]);
    assert!(reg.backend("zero").is_none());
    let reason = short_refusal(&reg, &plugin_file_name("zero"));
    assert!(reason.starts_with("score 0"), "{reason}");
}

#[test]
fn non_library_file_is_refused_with_reason() {
    let dir = scratch_dir("not-a-library");
    let name = plugin_file_name("junk");
    std::fs::write(dir.join(&name), "this is not a shared library\n").unwrap();
    let reg = load_only([&dir]);
    let reason = short_refusal(&reg, &name);
    assert!(reason.starts_with("not a loadable library"), "{reason}");
}

#[test]
fn truncated_library_is_refused_with_reason() {
    let dir = scratch_dir("truncated");
    let bytes = std::fs::read(cpu_plugin()).unwrap();
    let name = plugin_file_name("cpu-truncated");
    std::fs::write(dir.join(&name), &bytes[..4096]).unwrap();
    let reg = load_only([&dir]);
    let reason = short_refusal(&reg, &name);
    assert!(reason.starts_with("truncated ELF file"), "{reason}");
    assert!(reg.backends().is_empty());
}

#[test]
fn library_without_plugin_symbols_is_refused_with_reason() {
    // Any shared library that is not a plugin: a fixture stripped of nothing
    // but renamed is still a plugin, so use the system's libm.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .map(std::path::Path::new)
    .find(|p| p.is_file());
    let Some(libm) = libm else { return };
    let dir = scratch_dir("no-symbols");
    install(libm, &dir, "m");
    let reg = load_only([&dir]);
    let reason = short_refusal(&reg, &plugin_file_name("m"));
    assert!(
        reason.contains("no `backplane_plugin_abi_version` symbol"),
        "{reason}"
    );
}

#[test]
fn higher_scoring_variant_wins() {
    let dir = scratch_dir("variants");
    install(&fixture("variant-low"), &dir, "variant-low");
    install(&fixture("variant-high"), &dir, "variant-high");
    let reg = load_only([&dir]);
    let b = reg.backend("variant").expect("one variant loads");
    assert_eq!(b.score, 5);
    assert_eq!(b.devices[0].name(), "variant-high");
    assert!(matches!(&b.source, Source::File { variant: Some(v), .. } if v == "high"));
    let reason = refusal_reason(&reg, &plugin_file_name("variant-low"));
    assert!(reason.starts_with("not chosen: score 1 < 5"), "{reason}");
    assert_eq!(reg.backends().len(), 1);
}

#[test]
fn same_backend_twice_picks_first_in_search_order_and_warns() {
    let a = scratch_dir("twin-a");
    let b = scratch_dir("twin-b");
    install(&fixture("twin-one"), &a, "twin");
    install(&fixture("twin-two"), &b, "twin");
    for (dirs, want) in [([&a, &b], "twin-one"), ([&b, &a], "twin-two")] {
        let reg = load_only(dirs);
        let twins: Vec<_> = reg.backends().iter().filter(|x| x.name == "twin").collect();
        assert_eq!(twins.len(), 1);
        assert_eq!(twins[0].devices[0].name(), want);
        assert_eq!(reg.refused().len(), 1);
        assert!(reg.refused()[0].path.starts_with(dirs[1]));
        assert!(
            reg.refused()[0]
                .reason
                .starts_with("duplicate of backend 'twin'"),
            "{:?}",
            reg.refused()
        );
    }
}

#[test]
fn the_same_file_in_two_directories_is_a_copy_not_a_rival() {
    // Cargo leaves a cdylib beside the binaries as well as the copy
    // installed for plugins: the second is refused as a copy, quietly.
    let a = scratch_dir("copy-a");
    let b = scratch_dir("copy-b");
    install(&fixture("twin-one"), &a, "twin");
    install(&fixture("twin-one"), &b, "twin");
    let reg = load_only([&a, &b]);
    let twins: Vec<_> = reg.backends().iter().filter(|x| x.name == "twin").collect();
    assert_eq!(twins.len(), 1);
    assert_eq!(reg.refused().len(), 1);
    let refused = &reg.refused()[0];
    assert!(refused.path.starts_with(&b), "{refused:?}");
    assert!(refused.reason.starts_with("copy of "), "{refused:?}");
    assert!(refused.reason.contains("same bytes"), "{refused:?}");
}

#[test]
fn cpu_variants_are_scored_by_this_machine() {
    // Every variant xtask built is judged; at least the baseline loads, and
    // a variant this CPU lacks is refused with score 0, never run.
    let reg = load_only([backplane_tests::plugin_dir()]);
    let _ = cpu_plugin();
    let cpu = reg.backend("cpu").expect("a cpu variant loads");
    assert!(cpu.score >= 1);
    for r in reg.refused() {
        assert!(
            r.reason.starts_with("score 0") || r.reason.starts_with("not chosen"),
            "{r:?}"
        );
    }
}

#[test]
fn baseline_cpu_variant_runs_portable_kernels_only() {
    // The baseline variant must not use SIMD kernels even where the CPU has
    // them: it is what gets loaded on CPUs without them.
    let dir = scratch_dir("baseline-variant");
    install(&cpu_plugin(), &dir, "cpu");
    let reg = load_only([&dir]);
    let cpu = reg.backend("cpu").expect("the baseline cpu plugin loads");
    let desc = cpu.devices[0].description();
    assert!(desc.contains("mat-mul kernels: scalar;"), "{desc}");
}
