//! The hostile-plugin catalogue: broken and malicious plugins
//! (`tests/fixtures/hostile`, one misbehaviour per build, plus files that
//! are not plugins at all) against the registry. Each test checks that the
//! host survives, that the file or device is refused with one line naming
//! the cause and the value, and that a small graph on the CPU still gives
//! the right result afterwards. Build the fixtures first with
//! `cargo xtask plugins --fixtures`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backplane::registry::{
    LoadedBackend, MAX_REASON_LINES, ProbeOptions, Registry, RegistryOptions, SearchPath,
};
use backplane::{DType, Graph};
use backplane_tests::{
    assert_add_mul_mat_computes, cpu_plugin, cpu_plugin_name, fixture, install, install_cpu_plugin,
    plugin_file_name, refusal_reason, scratch_dir, scratch_dir_with,
};

/// Probe timeout in these tests (the hang cases wait this long).
const TIMEOUT: Duration = Duration::from_secs(5);

fn probe_options(cache: Option<PathBuf>) -> ProbeOptions {
    ProbeOptions {
        enabled: true,
        timeout: TIMEOUT,
        exe: None,
        cache,
    }
}

/// Loads `dirs` with the built-in CPU backend, probing as `probe` says.
fn load_probed(dirs: &[&Path], probe: &ProbeOptions) -> Registry {
    Registry::load_with(
        &RegistryOptions {
            search: SearchPath::only(dirs.iter().copied()),
            builtin: Some(backplane::builtin_cpu()),
        },
        probe,
    )
}

/// Loads `dir` with the built-in CPU backend, probing every file.
fn load(dir: &Path) -> Registry {
    load_probed(&[dir], &probe_options(None))
}

/// A scratch dir holding hostile fixture `behaviour` and the CPU plugin.
fn with_hostile(behaviour: &str) -> (PathBuf, String) {
    let name = format!("hostile-{behaviour}");
    let dir = scratch_dir_with(
        &name,
        &[(fixture(&name), &name), (cpu_plugin(), cpu_plugin_name())],
    );
    (dir, plugin_file_name(&name))
}

/// The refusal of `file`, checked to be one non-empty line.
fn refusal<'a>(reg: &'a Registry, file: &str) -> &'a str {
    let reason = refusal_reason(reg, file);
    assert!(!reason.trim().is_empty(), "empty reason for {file}");
    assert_eq!(reason.lines().count(), MAX_REASON_LINES, "{reason}");
    reason
}

/// The loaded hostile backend.
fn hostile(reg: &Registry) -> &LoadedBackend {
    reg.backend("hostile")
        .unwrap_or_else(|| panic!("hostile plugin did not load: {:?}", reg.refused()))
}

/// The host still computes right: add and mul_mat on the registry's CPU
/// device.
fn assert_cpu_still_computes(reg: &Registry) {
    let cpu = reg.backend("cpu").expect("a cpu backend is always there");
    assert_add_mul_mat_computes(&cpu.devices[0]);
}

/// The file is refused with a reason containing every part of `want`, and
/// the host goes on computing.
fn assert_file_refused(behaviour: &str, want: &[&str]) {
    let (dir, file) = with_hostile(behaviour);
    let reg = load(&dir);
    let reason = refusal(&reg, &file);
    for w in want {
        assert!(reason.contains(w), "{behaviour}: want {w:?} in: {reason}");
    }
    assert!(reg.backend("hostile").is_none());
    assert_cpu_still_computes(&reg);
}

/// The plugin loads but its device is refused with a reason containing
/// every part of `want`.
fn assert_device_refused(behaviour: &str, want: &[&str]) {
    let (dir, _) = with_hostile(behaviour);
    let reg = load(&dir);
    let b = hostile(&reg);
    assert!(b.devices.is_empty(), "{behaviour}: {:?}", b.devices);
    let reason = b.refused_devices.first().expect("a refused device");
    assert_eq!(reason.lines().count(), 1, "{reason}");
    for w in want {
        assert!(reason.contains(w), "{behaviour}: want {w:?} in: {reason}");
    }
    assert_cpu_still_computes(&reg);
}

#[test]
fn hang_in_score_is_refused_after_the_timeout_naming_the_stage() {
    let start = Instant::now();
    assert_file_refused("hang-score", &["probe timed out after 5 s in score"]);
    assert!(start.elapsed() < TIMEOUT * 4, "{:?}", start.elapsed());
}

#[test]
fn hang_in_init_is_refused_after_the_timeout_naming_the_stage() {
    assert_file_refused("hang-init", &["probe timed out after 5 s in init"]);
}

#[test]
fn hang_in_devices_is_refused_after_the_timeout_naming_the_stage() {
    assert_file_refused("hang-devices", &["probe timed out after 5 s in devices"]);
}

#[test]
fn exit_at_load_is_refused_with_the_exit_code() {
    assert_file_refused(
        "exit-at-load",
        &["probe process exited with code 3 in open"],
    );
}

#[test]
fn abort_in_init_is_refused_with_the_signal() {
    assert_file_refused("abort-in-init", &["killed by signal 6 (SIGABRT) in init"]);
}

#[test]
fn crash_in_devices_is_refused_with_the_signal() {
    assert_file_refused(
        "crash-in-devices",
        &["killed by signal 11 (SIGSEGV) in devices"],
    );
}

#[test]
fn panic_in_devices_is_refused_with_the_panic_message() {
    assert_file_refused(
        "panic-in-devices",
        &["devices() failed", "hostile fixture panics in devices"],
    );
}

#[test]
fn panic_in_buffer_type_refuses_the_device_with_the_panic_message() {
    assert_device_refused(
        "panic-in-buffer-type",
        &["device 0 refused", "hostile fixture panics in buffer_type"],
    );
}

#[test]
fn panic_in_buffer_drop_is_caught_and_the_host_goes_on() {
    let (dir, _) = with_hostile("panic-in-drop");
    let reg = load(&dir);
    let device = &hostile(&reg).devices[0];
    let buffer = device.buffer_type().alloc_buffer(64).unwrap();
    assert_eq!(buffer.size(), 64);
    drop(buffer);
    // Twice: the plugin stays usable after a caught drop panic.
    drop(device.buffer_type().alloc_buffer(64).unwrap());
    assert_cpu_still_computes(&reg);
}

#[test]
fn device_type_code_200_refuses_the_device_naming_the_code() {
    assert_device_refused(
        "device-type-200",
        &["device type code 200 is unknown to this host", "3 accel"],
    );
}

#[test]
fn device_of_a_newer_kind_is_refused_and_the_rest_of_the_plugin_loads() {
    // A plugin built against a later ABI that appended a device kind
    // (code 4): this host keeps its known device and names the new code.
    let (dir, _) = with_hostile("device-type-newer");
    let reg = load(&dir);
    let b = hostile(&reg);
    assert_eq!(b.devices.len(), 1);
    assert_eq!(b.devices[0].name(), "hostile1");
    assert!(
        b.refused_devices[0].contains("device type code 4 is unknown"),
        "{:?}",
        b.refused_devices
    );
    assert_cpu_still_computes(&reg);
}

#[test]
fn memory_free_over_total_refuses_the_device_with_both_values() {
    assert_device_refused(
        "memory-free-over-total",
        &["200 bytes free > 100 bytes total"],
    );
}

#[test]
fn score_above_the_limit_is_refused_with_the_value_and_the_rule() {
    assert_file_refused("score-max", &["score 4294967295", "at most 1000000"]);
}

#[test]
fn alignment_of_2_pow_63_refuses_the_device_with_the_rule() {
    assert_device_refused(
        "alignment-huge",
        &[
            "alignment 9223372036854775808",
            "power of two from 1 to 65536",
        ],
    );
}

/// A tensor of 16 f32 for alloc_size checks.
fn sixteen_floats() -> backplane::TensorDesc {
    let mut g = Graph::new();
    let t = g.input("t", DType::F32, &[16]).unwrap();
    g.tensors()[t.index()]
}

#[test]
fn alloc_size_of_u64_max_is_an_error_and_falls_back_to_the_tensor_size() {
    let (dir, _) = with_hostile("alloc-size-max");
    let reg = load(&dir);
    let buft = hostile(&reg).devices[0].buffer_type();
    let t = sixteen_floats();
    let err = buft.try_alloc_size(&t).unwrap_err();
    assert!(
        err.message
            .contains("alloc_size 18446744073709551615 for a tensor of 64 bytes"),
        "{err}"
    );
    assert_eq!(buft.alloc_size(&t), 64);
    assert_cpu_still_computes(&reg);
}

#[test]
fn alloc_size_below_the_tensor_size_is_an_error() {
    let (dir, _) = with_hostile("alloc-size-small");
    let reg = load(&dir);
    let buft = hostile(&reg).devices[0].buffer_type();
    let err = buft.try_alloc_size(&sixteen_floats()).unwrap_err();
    assert!(err.message.contains("alloc_size 63"), "{err}");
    assert!(err.message.contains("must be from 64"), "{err}");
    assert_cpu_still_computes(&reg);
}

/// Asks the device of hostile fixture `behaviour` for a buffer of `size`
/// bytes, which must fail, then checks the host still computes: the error.
fn allocation_error(behaviour: &str, size: u64) -> String {
    let (dir, _) = with_hostile(behaviour);
    let reg = load(&dir);
    let err = hostile(&reg).devices[0]
        .buffer_type()
        .alloc_buffer(size)
        .err()
        .unwrap_or_else(|| panic!("{behaviour}: a buffer of {size} bytes was accepted"));
    assert_cpu_still_computes(&reg);
    err.message.into()
}

#[test]
fn buffer_id_zero_is_an_allocation_error() {
    let err = allocation_error("buffer-id-zero", 64);
    assert!(err.contains("buffer id 0"), "{err}");
    assert!(err.contains("hostile-mem"), "{err}");
}

#[test]
fn buffer_shorter_than_asked_is_an_allocation_error() {
    let err = allocation_error("buffer-short", 1024);
    assert!(err.contains("buffer of 512 bytes for 1024 asked"), "{err}");
}

#[test]
fn long_description_with_escape_and_nul_is_cleaned_and_capped() {
    let (dir, _) = with_hostile("long-description");
    let reg = load(&dir);
    let d = hostile(&reg).devices[0].description();
    assert!(!d.chars().any(char::is_control), "{d:?}");
    assert!(d.starts_with("\\u{1b}[2J\\u{1b}[31mred\\u{0}nul"), "{d}");
    assert!(d.contains("(100016 characters, cut at 256)"), "{d}");
    assert!(d.chars().count() < 400);
    assert_cpu_still_computes(&reg);
}

#[test]
fn plugin_registering_another_files_name_is_refused_and_cpu_stays() {
    let dir = scratch_dir("hostile-squat");
    install(&fixture("hostile-squat-cpu"), &dir, "squat");
    let reg = load(&dir);
    let reason = refusal(&reg, &plugin_file_name("squat"));
    assert!(
        reason.contains("registers as backend 'cpu' but its file name says 'squat'"),
        "{reason}"
    );
    assert_eq!(reg.backends().iter().filter(|b| b.name == "cpu").count(), 1);
    assert_cpu_still_computes(&reg);

    // Next to the real CPU plugin, that one loads.
    let cpu_file = install_cpu_plugin(&dir);
    let reg = load(&dir);
    let cpu = reg.backend("cpu").unwrap();
    assert_eq!(cpu.source.path(), Some(cpu_file.as_path()));
    assert_cpu_still_computes(&reg);
}

#[test]
fn zero_byte_and_text_files_keep_the_loaders_message() {
    let dir = scratch_dir("hostile-not-elf");
    std::fs::write(dir.join(plugin_file_name("empty")), b"").unwrap();
    std::fs::write(
        dir.join(plugin_file_name("text")),
        "hello, I am a text file, not a shared library.\n".repeat(4),
    )
    .unwrap();
    let reg = load(&dir);
    let empty = refusal(&reg, &plugin_file_name("empty"));
    assert!(
        empty.starts_with("not a loadable library: dlopen failed: "),
        "{empty}"
    );
    assert!(empty.contains("file too short"), "{empty}");
    let text = refusal(&reg, &plugin_file_name("text"));
    assert!(text.contains("invalid ELF header"), "{text}");
    assert_cpu_still_computes(&reg);
}

#[test]
fn missing_dependency_names_the_missing_library() {
    // The hostile fixture with one needed library renamed in its dynamic
    // string table: the loader cannot find `libgcc_x.so.1`.
    let mut bytes = std::fs::read(fixture("hostile-score-max")).unwrap();
    let needle = b"libgcc_s.so.1\0";
    let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) else {
        eprintln!("fixture does not need libgcc_s; nothing to rename");
        return;
    };
    bytes[at + 7] = b'x';
    let dir = scratch_dir("hostile-missing-dep");
    std::fs::write(dir.join(plugin_file_name("nodep")), &bytes).unwrap();
    let reg = load(&dir);
    let reason = refusal(&reg, &plugin_file_name("nodep"));
    assert!(
        reason.contains("libgcc_x.so.1: cannot open shared object file"),
        "{reason}"
    );
    assert_cpu_still_computes(&reg);
}

#[cfg(unix)]
#[test]
fn symlink_loops_and_unreadable_directories_are_reported() {
    let dir = scratch_dir("hostile-links");
    let looped = dir.join(plugin_file_name("loop"));
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let dangling = dir.join(plugin_file_name("dangling"));
    std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
    // A "directory" that is a file cannot be listed.
    let not_dir = dir.join("not-a-dir");
    std::fs::write(&not_dir, b"").unwrap();
    let reg = load_probed(&[&dir, &not_dir], &probe_options(None));
    let why = |p: &Path| {
        reg.refused()
            .iter()
            .find(|r| r.path == p)
            .map(|r| r.reason.clone())
            .unwrap_or_else(|| panic!("{} not reported: {:?}", p.display(), reg.refused()))
    };
    assert!(
        why(&looped).contains("symbolic link loop"),
        "{}",
        why(&looped)
    );
    assert!(
        why(&dangling).contains("does not resolve"),
        "{}",
        why(&dangling)
    );
    assert!(
        why(&not_dir).starts_with("plugin directory cannot be read"),
        "{}",
        why(&not_dir)
    );
    assert_cpu_still_computes(&reg);
}

#[test]
fn warm_start_uses_the_probe_cache_and_runs_no_probe() {
    let (dir, file) = with_hostile("exit-at-load");
    let cache = dir.join("probe-cache.json");
    let load_cached = || load_probed(&[&dir], &probe_options(Some(cache.clone())));
    let cold = load_cached();
    assert!(refusal(&cold, &file).contains("exited with code 3"));
    let written = std::fs::read(&cache).expect("the cold start wrote the cache");
    let stamp = std::fs::metadata(&cache).unwrap().modified().unwrap();
    // Every probe that runs records its outcome and rewrites the cache: a
    // warm start that leaves it untouched ran none.
    let warm = load_cached();
    assert_eq!(refusal(&warm, &file), refusal(&cold, &file));
    assert!(warm.backend("cpu").unwrap().source.path().is_some());
    assert_eq!(
        std::fs::metadata(&cache).unwrap().modified().unwrap(),
        stamp
    );
    assert_eq!(std::fs::read(&cache).unwrap(), written);
    assert_cpu_still_computes(&warm);
    // A file changed in place (same name) is probed again.
    let cpu_file = dir.join(plugin_file_name(cpu_plugin_name()));
    let mut bytes = std::fs::read(&cpu_file).unwrap();
    bytes.push(0);
    std::fs::write(&cpu_file, &bytes).unwrap();
    let changed = load_cached();
    assert_ne!(std::fs::read(&cache).unwrap(), written);
    assert!(changed.backend("cpu").unwrap().source.path().is_some());
}

#[test]
fn bad_root_module_header_is_one_line_naming_both_versions() {
    // abi_stable's header is its magic string, then the major and minor
    // version (u32 each): claim minor 99.
    let mut bytes = std::fs::read(fixture("hostile-long-description")).unwrap();
    let magic = b"abi stable library for Rust     ";
    let at = bytes
        .windows(magic.len())
        .position(|w| w == magic)
        .expect("the fixture has abi_stable's header");
    bytes[at + 36..at + 40].copy_from_slice(&99u32.to_le_bytes());
    let dir = scratch_dir("hostile-bad-header");
    let name = plugin_file_name("badheader");
    std::fs::write(dir.join(&name), &bytes).unwrap();
    let reg = load(&dir);
    let reason = refusal(&reg, &name);
    assert!(
        reason.starts_with("incompatible abi_stable library header: the file says abi_stable 0.99"),
        "{reason}"
    );
    assert_cpu_still_computes(&reg);
}

#[test]
fn with_probing_off_the_in_process_checks_still_refuse() {
    // BACKPLANE_PROBE=off: files are judged in process (no protection
    // against hangs and crashes), but the value rules still hold.
    let dir = scratch_dir("hostile-unprobed");
    install(&fixture("hostile-score-max"), &dir, "hostile-score-max");
    install(&fixture("hostile-squat-cpu"), &dir, "squat");
    std::fs::write(dir.join(plugin_file_name("empty")), b"").unwrap();
    let reg = load_probed(
        &[&dir],
        &ProbeOptions {
            enabled: false,
            ..probe_options(None)
        },
    );
    let score = refusal(&reg, &plugin_file_name("hostile-score-max"));
    assert!(score.contains("score 4294967295"), "{score}");
    let squat = refusal(&reg, &plugin_file_name("squat"));
    assert!(squat.contains("registers as backend 'cpu'"), "{squat}");
    let empty = refusal(&reg, &plugin_file_name("empty"));
    assert!(empty.contains("file too short"), "{empty}");
    assert_cpu_still_computes(&reg);
}
