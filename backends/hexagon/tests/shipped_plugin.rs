//! The plugin users load (`libbackplane_hexagon.so`, as `cargo xtask
//! plugins` builds it, without the `emulation` feature) holds no emulated
//! DSP and no fault injection: its symbol table has none of the DSP C but
//! the VTCM planner, no `EmulatedTransport`, and its bytes no `emu_fault`
//! option. The same checks find all of them in the emulation build
//! (`libbackplane_hexagon-emu.so`), so they can see what they look for.
//!
//! Beside each other, as `cargo xtask plugins` installs them, the registry
//! loads the shipped file unless a test setting asks for the emulation.
//!
//! Both files come from `target/plugins/` (or `$BACKPLANE_TEST_PLUGIN_DIR`);
//! run `cargo xtask plugins` first.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use backplane::registry::{LoadedBackend, Registry, RegistryOptions, SearchPath, Source};

/// Serialises the tests that set the environment the plugin reads at load.
static ENV: Mutex<()> = Mutex::new(());

/// The DSP C the shipped plugin may hold: the VTCM planner of
/// `htp/vtcm-plan.c`, which supports_op calls.
const PLANNER_SYMBOLS: [&str; 3] = ["htp_op_vtcm_need", "htp_mm_plan", "htp_rows_plan"];

/// The fault-injection option of the emulated DSP and the test double.
const FAULT_OPTION: &[u8] = b"emu_fault";

/// The shipped plugin's file name.
const SHIPPED: &str = "libbackplane_hexagon.so";
/// The emulation build's file name.
const EMULATION: &str = "libbackplane_hexagon-emu.so";

fn target_dir() -> PathBuf {
    option_env!("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

/// Where the plugins users load are built.
fn plugin_dir() -> PathBuf {
    std::env::var_os("BACKPLANE_TEST_PLUGIN_DIR")
        .map_or_else(|| target_dir().join("plugins"), PathBuf::from)
}

/// The built plugin file `name` (the emulation build from
/// `target/test-plugins/`), or a failure saying how to build it.
fn plugin_path(name: &str) -> PathBuf {
    let dir = if name == EMULATION {
        target_dir().join("test-plugins")
    } else {
        plugin_dir()
    };
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo xtask plugins` to build the plugins this test reads",
        path.display()
    );
    path
}

/// The bytes of plugin file `name`.
fn plugin(name: &str) -> Vec<u8> {
    let path = plugin_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory holding copies of the plugin files `names`.
fn dir_with(test: &str, names: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hexagon-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for name in names {
        std::fs::copy(plugin_path(name), dir.join(name)).expect("copying a plugin");
    }
    dir.canonicalize().expect("canonical dir")
}

/// The hexagon backend the registry loads from `dir` with
/// `BACKPLANE_HEXAGON_EMULATE` set to `emulate` (or unset), and the registry.
fn load_hexagon(dir: &Path, emulate: Option<&str>) -> Registry {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the variables change only under ENV, and the plugin reads
    // them only while the registry loads it, under ENV too.
    unsafe {
        std::env::remove_var("BACKPLANE_HEXAGON_CDSPRPC");
        match emulate {
            Some(v) => std::env::set_var("BACKPLANE_HEXAGON_EMULATE", v),
            None => std::env::remove_var("BACKPLANE_HEXAGON_EMULATE"),
        }
    }
    let reg = Registry::load(&RegistryOptions {
        search: SearchPath::only([dir]),
        builtin: None,
    });
    // SAFETY: as above.
    unsafe { std::env::remove_var("BACKPLANE_HEXAGON_EMULATE") };
    reg
}

fn hexagon(reg: &Registry) -> &LoadedBackend {
    reg.backend("hexagon")
        .unwrap_or_else(|| panic!("no hexagon backend; refused: {:?}", reg.refused()))
}

fn variant(b: &LoadedBackend) -> Option<&str> {
    match &b.source {
        Source::File { variant, .. } => variant.as_deref(),
        Source::Builtin => panic!("hexagon is never built in"),
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    let v = u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
    usize::try_from(v).ok()
}

/// The NUL-terminated string at `at` of a string table.
fn c_str(table: &[u8], at: usize) -> Option<&str> {
    let rest = table.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Every symbol name of a little-endian ELF64 file, from `.symtab` and
/// `.dynsym`; `None` when the file is not one or is cut short.
fn symbol_names(elf: &[u8]) -> Option<Vec<String>> {
    const SHT_SYMTAB: u32 = 2;
    const SHT_DYNSYM: u32 = 11;
    const SYM_SIZE: usize = 24;
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = u64_at(elf, 0x28)?;
    let shentsize = usize::from(u16_at(elf, 0x3a)?);
    let shnum = usize::from(u16_at(elf, 0x3c)?);
    let section = |i: usize| -> Option<(u32, usize, usize, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(elf, h + 4)?,
            u64_at(elf, h + 24)?,
            u64_at(elf, h + 32)?,
            u32_at(elf, h + 40)? as usize,
        ))
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (kind, offset, size, link) = section(i)?;
        if kind != SHT_SYMTAB && kind != SHT_DYNSYM {
            continue;
        }
        let (_, str_offset, str_size, _) = section(link)?;
        let strings = elf.get(str_offset..str_offset.checked_add(str_size)?)?;
        let symbols = elf.get(offset..offset.checked_add(size)?)?;
        for sym in symbols.chunks_exact(SYM_SIZE) {
            let name = c_str(strings, u32_at(sym, 0)? as usize)?;
            if !name.is_empty() {
                names.push(name.to_string());
            }
        }
    }
    Some(names)
}

/// What of the emulation a plugin file holds: DSP C symbols other than the
/// planner's, Rust symbols of the emulated transport, the fault option.
fn emulation_traces(file: &str) -> (Vec<String>, bool) {
    let bytes = plugin(file);
    let symbols = symbol_names(&bytes).unwrap_or_else(|| panic!("{file}: not an ELF64 file"));
    assert!(
        symbols.iter().any(|s| s == PLANNER_SYMBOLS[0]),
        "{file}: the VTCM planner's symbol is missing, so the table lacks the C symbols"
    );
    let emulation: Vec<String> = symbols
        .into_iter()
        .filter(|s| {
            (s.starts_with("htp_") && !PLANNER_SYMBOLS.contains(&s.as_str()))
                || s.starts_with("qurt_")
                || s.starts_with("dbl_")
                || s.contains("EmulatedTransport")
        })
        .collect();
    let fault_option = bytes.windows(FAULT_OPTION.len()).any(|w| w == FAULT_OPTION);
    (emulation, fault_option)
}

#[test]
fn the_shipped_plugin_has_no_emulated_dsp_or_fault_injection() {
    let (symbols, fault_option) = emulation_traces(SHIPPED);
    assert!(
        symbols.is_empty(),
        "the shipped plugin links emulation code: {symbols:?}"
    );
    assert!(
        !fault_option,
        "the shipped plugin holds the fault-injection option emu_fault"
    );
}

#[test]
fn the_emulation_build_holds_what_the_shipped_check_looks_for() {
    let (symbols, fault_option) = emulation_traces(EMULATION);
    for wanted in ["htp_emu_queue_write", "htp_iface_open", "htp_main_loop"] {
        assert!(
            symbols.iter().any(|s| s == wanted),
            "{wanted} missing from the emulation build"
        );
    }
    assert!(
        symbols.iter().any(|s| s.contains("EmulatedTransport")),
        "no EmulatedTransport symbol in the emulation build"
    );
    assert!(fault_option, "emu_fault missing from the emulation build");
}

#[test]
fn the_emulation_build_is_chosen_only_where_its_directory_is_searched() {
    // Users' plugin directory: no emulation build in it.
    assert!(
        !plugin_dir().join(EMULATION).exists(),
        "{EMULATION} beside the plugins users load"
    );
    // A directory with both, as a test's search path gives: the emulation
    // build outscores the shipped one and, asked, offers the emulated DSP.
    let dir = dir_with("both", &[SHIPPED, EMULATION]);
    let reg = load_hexagon(&dir, Some("1"));
    let b = hexagon(&reg);
    assert_eq!((variant(b), b.score), (Some("emu"), 2));
    let d = b.devices.first().expect("an emulated device");
    assert!(d.description().contains("emulated"), "{}", d.description());
    // The shipped one alone scores 1 and, with no DSP here, says why
    // without pointing at a test switch.
    let dir = dir_with("shipped-alone", &[SHIPPED]);
    let reg = load_hexagon(&dir, None);
    let b = hexagon(&reg);
    assert_eq!((variant(b), b.score), (None, 1));
    let why = b.no_device_reason.as_deref().unwrap_or("");
    assert!(b.devices.is_empty() && why.contains("libcdsprpc"), "{why}");
    assert!(!why.contains("EMULATE"), "{why}");
}

#[test]
fn the_shipped_plugin_asked_to_emulate_says_it_cannot_and_where_the_emulation_is() {
    let dir = dir_with("shipped", &[SHIPPED]);
    let reg = load_hexagon(&dir, Some("1"));
    let b = hexagon(&reg);
    assert!(b.devices.is_empty(), "a device from the shipped plugin?");
    let why = b.no_device_reason.as_deref().unwrap_or("");
    assert!(
        why.contains("BACKPLANE_HEXAGON_EMULATE=1")
            && why.contains(EMULATION)
            && why.contains("BACKPLANE_PLUGIN_PATH"),
        "{why}"
    );
}
