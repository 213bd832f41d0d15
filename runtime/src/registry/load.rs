//! Opening one plugin file: the libloading preflight (ABI version, score)
//! and the abi_stable load (layout check, root module, registration).
//!
//! Libraries are never unloaded. Every object a plugin hands out (trait
//! objects, their vtables, `'static` strings inside error values) points
//! into the library's code and data, abi_stable's `LibHeader` is a
//! `&'static` into it, and a Rust cdylib may have registered thread-local
//! destructors that would run on unmapped code after `dlclose`. Keeping a
//! library mapped costs only address space; unloading one would turn any
//! leftover reference into a crash.

use std::path::Path;

use abi_stable::library::{LibraryError, RootModule, lib_header_from_path};
use backplane_abi::plugin::ext::{
    EXTRA_BUFFER_TYPES_SYMBOL, ExtEntry, ExtraBufferTypesV1, check_entry,
};
use backplane_abi::plugin::ext_options::{BackendOptionsV1, FfiOptionSpec, OPTIONS_SYMBOL};
use backplane_abi::plugin::legacy;
use backplane_abi::plugin::{ABI_VERSION, ABI_VERSION_SYMBOL, PluginModRef, RegBox, SCORE_SYMBOL};

/// Lines a user-facing refusal reason may have: one.
pub const MAX_REASON_LINES: usize = 1;
/// Characters a user-facing refusal reason may have.
const MAX_REASON_CHARS: usize = 400;

/// `text` as one line of bounded width: lines joined with `; `, control
/// characters escaped, cut at 400 characters (the full text stays in the
/// debug log).
pub fn short_reason(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let mut out = super::check::clean_text(&joined, MAX_REASON_CHARS);
    if joined.chars().count() > MAX_REASON_CHARS {
        // clean_text noted the length; say where the rest is.
        out.push_str(" (full text at debug level: BACKPLANE_LOG=debug)");
    }
    out
}

/// An error and its causes, `outer: inner: innermost`, skipping a cause
/// whose text the previous one already contains.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Why the system loader refused `path`, without the repeated path.
fn dlopen_reason(path: &Path, e: &(dyn std::error::Error + 'static)) -> String {
    let msg = error_chain(e);
    let path_str = path.display().to_string();
    let detail = msg
        .split_once(&format!("{path_str}: "))
        .map_or(msg.clone(), |(before, after)| {
            // `dlopen failed: /x/lib.so: file too short` -> `dlopen failed: file too short`
            format!("{}{after}", before)
        });
    format!("not a loadable library: {detail}")
}

/// Opens `path` with the system loader and reads the plain C symbols;
/// returns the score, or why the file is refused. The library stays loaded.
pub fn preflight(path: &Path) -> Result<u32, String> {
    preflight_staged(path, &mut |_| {})
}

/// [`preflight`], calling `stage` with `"open"`, `"abi_version"` and
/// `"score"` before each step (the probe reports the last stage reached).
pub fn preflight_staged(path: &Path, stage: &mut dyn FnMut(&str)) -> Result<u32, String> {
    check_elf_extents(path)?;
    stage("open");
    // SAFETY: loading a library runs its initialisers; plugins are trusted
    // code the user placed on the search path (as with ggml's backends),
    // and the registry has run this very load in a probe process first.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| dlopen_reason(path, &e))?;
    // Never unloaded (see the module docs).
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    let read = |name: &str| -> Result<u32, String> {
        // SAFETY: the symbols are `extern "C" fn() -> u32` by the plugin
        // contract; a library exporting them with another type is broken.
        let f = unsafe { lib.get::<extern "C" fn() -> u32>(name.as_bytes()) }
            .map_err(|_| format!("not a backplane plugin: no `{name}` symbol"))?;
        Ok(f())
    };
    stage("abi_version");
    let version = read(ABI_VERSION_SYMBOL)?;
    if version != ABI_VERSION {
        return Err(format!(
            "built for plugin ABI v{version}; this host speaks v{ABI_VERSION}"
        ));
    }
    stage("score");
    super::check::score(read(SCORE_SYMBOL)?)
}

/// Refuses an ELF file whose program or section headers, or segments, lie
/// past its end (a truncated copy): the system loader would map such a file
/// and the process would die of SIGBUS on first touch. Files that are not
/// ELF are left to the system loader to judge.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn check_elf_extents(path: &Path) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    /// An unsigned integer of `b.len()` bytes in the file's byte order.
    fn uint(b: &[u8], le: bool) -> u64 {
        let fold = |v: u64, byte: &u8| v << 8 | u64::from(*byte);
        if le {
            b.iter().rev().fold(0, fold)
        } else {
            b.iter().fold(0, fold)
        }
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = f.metadata().map_err(|e| format!("cannot stat: {e}"))?.len();
    let mut head = [0u8; 64];
    let n = f.read(&mut head).map_err(|e| format!("cannot read: {e}"))?;
    if n < 16 || head[..4] != *b"\x7fELF" {
        return Ok(());
    }
    let (is64, le) = (head[4] == 2, head[5] == 1);
    if n < if is64 { 64 } else { 52 } {
        return Err(format!(
            "truncated ELF file: {len} bytes, shorter than its header"
        ));
    }
    let h = |off: usize, size: usize| uint(&head[off..off + size], le);
    let (phoff, shoff, phentsize, phnum, shentsize, shnum) = if is64 {
        (
            h(0x20, 8),
            h(0x28, 8),
            h(0x36, 2),
            h(0x38, 2),
            h(0x3A, 2),
            h(0x3C, 2),
        )
    } else {
        (
            h(0x1C, 4),
            h(0x20, 4),
            h(0x2A, 2),
            h(0x2C, 2),
            h(0x2E, 2),
            h(0x30, 2),
        )
    };
    let truncated = |what: &str, end: u64| {
        format!("truncated ELF file: {what} ends at byte {end} but the file has {len}")
    };
    let ph_end = phoff.saturating_add(phentsize * phnum);
    if ph_end > len {
        return Err(truncated("the program header table", ph_end));
    }
    let sh_end = shoff.saturating_add(shentsize * shnum);
    if shnum > 0 && sh_end > len {
        return Err(truncated("the section header table", sh_end));
    }
    let mut table = vec![0u8; (phentsize * phnum) as usize];
    f.seek(SeekFrom::Start(phoff))
        .and_then(|_| f.read_exact(&mut table))
        .map_err(|e| format!("cannot read: {e}"))?;
    for (i, e) in table.chunks_exact(phentsize.max(1) as usize).enumerate() {
        let (offset, filesz) = if is64 {
            (uint(&e[8..16], le), uint(&e[32..40], le))
        } else {
            (uint(&e[4..8], le), uint(&e[16..20], le))
        };
        let end = offset.saturating_add(filesz);
        if end > len {
            return Err(truncated(&format!("segment {i}"), end));
        }
    }
    Ok(())
}

#[cfg(not(all(unix, not(target_vendor = "apple"))))]
fn check_elf_extents(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// Loads the root module through abi_stable (checking version and layout)
/// and creates the backend registration.
pub fn load(path: &Path) -> Result<RegBox, String> {
    let header = lib_header_from_path(path).map_err(|e| library_error(path, e))?;
    let reg = match header.init_root_module::<PluginModRef>() {
        Ok(module) => (module.new_reg())().into_result(),
        // A plugin of the first ABI 1 layout still loads, through adapters.
        Err(e @ LibraryError::AbiInstability(_)) => {
            match header.init_root_module::<legacy::PluginModRef>() {
                Ok(module) => {
                    tracing::debug!(path = %path.display(), "plugin of the first ABI 1 layout: loaded through the legacy adapters");
                    legacy::new_reg(module)
                }
                Err(legacy_error) => {
                    tracing::debug!(path = %path.display(), "not the first ABI 1 layout either:\n{legacy_error}");
                    return Err(library_error(path, e));
                }
            }
        }
        Err(e) => return Err(library_error(path, e)),
    };
    reg.map_err(|e| format!("plugin init failed: {}", short_reason(&e.message)))
}

/// The plugin's extra-buffer-types extension, if it exports one whose
/// layout this host accepts (a bad one costs the extension, with a
/// warning, not the plugin).
pub fn extra_buffer_types_ext(path: &Path) -> Option<&'static ExtraBufferTypesV1> {
    // SAFETY: the library is already loaded (this only takes another
    // reference); plugins are never unloaded.
    let lib = unsafe { libloading::Library::new(path) }.ok()?;
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: the symbol has this type by the extension's contract; its
    // result's layout is checked before the module is used.
    let f = unsafe {
        lib.get::<extern "C" fn() -> ExtEntry<ExtraBufferTypesV1>>(
            EXTRA_BUFFER_TYPES_SYMBOL.as_bytes(),
        )
    }
    .ok()?;
    match check_entry(EXTRA_BUFFER_TYPES_SYMBOL, &f()) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(path = %path.display(), "{e}");
            None
        }
    }
}

/// The plugin's option schema from its options extension; empty when it
/// exports none (built before options existed) or one whose layout this
/// host refuses (with a warning; the plugin still loads).
pub fn option_schema(path: &Path) -> Vec<FfiOptionSpec> {
    // SAFETY: the library is already loaded (this only takes another
    // reference); plugins are never unloaded.
    let Ok(lib) = (unsafe { libloading::Library::new(path) }) else {
        return Vec::new();
    };
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: the symbol has this type by the extension's contract; its
    // result's layout is checked before the module is used.
    let Ok(f) = (unsafe {
        lib.get::<extern "C" fn() -> ExtEntry<BackendOptionsV1>>(OPTIONS_SYMBOL.as_bytes())
    }) else {
        return Vec::new();
    };
    match check_entry(OPTIONS_SYMBOL, &f()) {
        Ok(m) => (m.schema)().into_iter().collect(),
        Err(e) => {
            tracing::warn!(path = %path.display(), "{e}");
            Vec::new()
        }
    }
}

/// A short reason for an abi_stable error; the full text goes to debug logs.
fn library_error(path: &Path, e: LibraryError) -> String {
    tracing::debug!(path = %path.display(), "abi_stable refused the plugin:\n{e}");
    match e {
        LibraryError::AbiInstability(_) => format!(
            "incompatible plugin interface: its `{}` root module layout differs from this host's \
             (built against another backplane-abi; layout diff at debug level: BACKPLANE_LOG=debug)",
            PluginModRef::NAME
        ),
        LibraryError::OpenError { err, .. } => dlopen_reason(path, &*err),
        LibraryError::InvalidAbiHeader(found) => format!(
            "incompatible abi_stable library header: the file says abi_stable {}.{}, this host expects {}.{} \
             (built with another abi_stable)",
            found.abi_major,
            found.abi_minor,
            abi_stable::library::AbiHeader::VALUE.abi_major,
            abi_stable::library::AbiHeader::VALUE.abi_minor
        ),
        LibraryError::IncompatibleVersionNumber { expected_version, actual_version, .. } => format!(
            "built against backplane-abi {actual_version}, incompatible with this host's {expected_version}"
        ),
        LibraryError::GetSymbolError { .. } => {
            "not an abi_stable plugin: no root module (was it built with backplane_abi::export_plugin!?)".to_string()
        }
        LibraryError::RootModule { err, .. } => short_reason(&format!("root module failed: {err}")),
        other => short_reason(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reason_is_one_bounded_line() {
        let long = (0..400)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let r = short_reason(&long);
        assert_eq!(r.lines().count(), MAX_REASON_LINES);
        assert!(r.starts_with("line 0; line 1; line 2"), "{r}");
        assert!(r.ends_with("BACKPLANE_LOG=debug)"), "{r}");
        assert!(r.chars().count() < MAX_REASON_CHARS + 120);
        assert_eq!(short_reason("one"), "one");
        assert_eq!(short_reason("a\u{1b}b"), "a\\u{1b}b");
    }

    #[test]
    fn dlopen_reason_keeps_the_system_message() {
        let dir = std::env::temp_dir().join(format!("backplane-dlopen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("libbackplane_empty.so");
        std::fs::write(&empty, b"").unwrap();
        let r = preflight(&empty).unwrap_err();
        assert!(
            r.starts_with("not a loadable library: dlopen failed: "),
            "{r}"
        );
        assert!(r.contains("too short") || r.contains("invalid ELF"), "{r}");
        assert!(!r.contains(&empty.display().to_string()), "{r}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
