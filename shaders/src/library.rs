//! The shader library: a [`PipelineKey`] names a shader file and how to
//! specialise it; [`specialise`] turns it into WGSL plus the values of its
//! pipeline-overridable constants.
//!
//! Defines every shader gets from its key:
//! - `WG_SIZE`: the workgroup size (x);
//! - for each typed slot `S` (e.g. `SRC0`, `DST`): `S_TYPE` = the WGSL
//!   storage element type (`f32`, `f16`, `i32`, `u32`; quantized blocks are
//!   read as `u32` words) and the flag `S_<T>` (e.g. `SRC0_F16`, `SRC0_Q4_0`);
//! - `OP_<NAME>` for the key's op variant, `INPLACE`, `VEC4`, `PATH_<NAME>`;
//! - `enable f16;` (and the cooperative-matrix extension for the
//!   `coopmat` path) is prepended when any slot is f16 or the key asks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::preprocess::{PreprocessError, Preprocessor};
use crate::sources;

/// How a kernel is specialised; equal keys give equal source, so a device
/// caches one pipeline per key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PipelineKey {
    /// Shader file under `wgsl/` without `.wgsl` (e.g. `"binary"`).
    pub shader: &'static str,
    /// Op variant within the file (`"add"`), defined as `OP_ADD`; may be "".
    pub variant: &'static str,
    /// Typed slots: (slot, type name) such as ("SRC0", "f16").
    pub types: Vec<(&'static str, &'static str)>,
    /// The destination is one of the sources (one binding fewer).
    pub inplace: bool,
    /// Elements are processed four at a time.
    pub vec4: bool,
    /// Workgroup size (x dimension).
    pub workgroup_size: u32,
    /// Algorithm path (`""`, `"matvec"`, `"tiled"`, `"coopmat"`, `"subgroup"`).
    pub path: &'static str,
    /// Further defines (name, value); value "" defines a flag.
    pub defines: Vec<(&'static str, String)>,
    /// Pipeline-overridable constants (`override NAME: T = ...;` in WGSL).
    pub constants: Vec<(&'static str, i64)>,
}

impl PipelineKey {
    /// A key for `shader` with variant `variant`, no types and workgroup size 64.
    pub fn new(shader: &'static str, variant: &'static str) -> PipelineKey {
        PipelineKey {
            shader,
            variant,
            types: Vec::new(),
            inplace: false,
            vec4: false,
            workgroup_size: 64,
            path: "",
            defines: Vec::new(),
            constants: Vec::new(),
        }
    }

    /// Adds a typed slot.
    pub fn ty(mut self, slot: &'static str, type_name: &'static str) -> PipelineKey {
        self.types.push((slot, type_name));
        self
    }

    /// Sets the workgroup size.
    pub fn wg(mut self, size: u32) -> PipelineKey {
        self.workgroup_size = size;
        self
    }

    /// Adds a define.
    pub fn define(mut self, name: &'static str, value: impl Into<String>) -> PipelineKey {
        self.defines.push((name, value.into()));
        self
    }

    /// Adds a pipeline-overridable constant.
    pub fn constant(mut self, name: &'static str, value: i64) -> PipelineKey {
        self.constants.push((name, value));
        self
    }

    /// A short label for logs and profiles: `binary.add[f32,f16]inplace`.
    pub fn label(&self) -> String {
        let mut s = self.shader.to_string();
        if !self.variant.is_empty() {
            s.push('.');
            s.push_str(self.variant);
        }
        if !self.types.is_empty() {
            let t: Vec<&str> = self.types.iter().map(|(_, t)| *t).collect();
            s.push_str(&format!("[{}]", t.join(",")));
        }
        if !self.path.is_empty() {
            s.push('/');
            s.push_str(self.path);
        }
        if self.inplace {
            s.push_str(" inplace");
        }
        if self.vec4 {
            s.push_str(" vec4");
        }
        s
    }
}

impl fmt::Display for PipelineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Specialised source of one pipeline.
#[derive(Clone, Debug)]
pub struct Shader {
    /// WGSL after preprocessing.
    pub source: String,
    /// Entry point.
    pub entry: &'static str,
    /// Override constants for pipeline creation.
    pub constants: Vec<(String, f64)>,
    /// Files of this kernel (itself or an include) read from the
    /// [`SHADER_DIR_ENV`] directory rather than the binary, in the order
    /// first read; empty for a kernel wholly built in. Nothing vouches for
    /// the indexing of such a kernel, so it must never run unchecked.
    pub outside: Vec<String>,
}

/// The WGSL storage element type of a type name, and whether it is a block
/// format read as `u32` words.
pub fn storage_type(type_name: &str) -> &'static str {
    match type_name {
        "f32" => "f32",
        "f16" => "f16",
        "i32" => "i32",
        "u32" => "u32",
        _ => "u32",
    }
}

/// Environment variable naming a directory whose `<name>.wgsl` files
/// replace the embedded ones of the same name (to try a shader change
/// without rebuilding the plugin); files it lacks stay embedded. Every
/// kernel built from such a file is reported in [`Shader::outside`], and the
/// WebGPU backend always compiles those with runtime checks on.
pub const SHADER_DIR_ENV: &str = "BACKPLANE_SHADER_DIR";

/// Where shader files come from: the embedded set, with the `.wgsl` files
/// of an outside directory replacing those of the same name. Each file is
/// read at most once per `ShaderFiles` (pipelines are cached, so a file
/// changed later would not apply anyway); the texts are kept for the
/// life of the process.
pub struct ShaderFiles {
    /// The outside directory, if any.
    dir: Option<PathBuf>,
    /// Per name, the outside file's text, or None when the directory lacks it.
    read: Mutex<HashMap<String, Option<&'static str>>>,
}

impl ShaderFiles {
    /// Only the embedded files.
    pub fn embedded_only() -> ShaderFiles {
        ShaderFiles::with_dir(None)
    }

    /// The embedded files, replaced by those `dir` holds.
    pub fn with_dir(dir: Option<PathBuf>) -> ShaderFiles {
        ShaderFiles {
            dir,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// The process's files: replaced from [`SHADER_DIR_ENV`] when it is set
    /// (read once, and said on stderr).
    pub fn from_env() -> &'static ShaderFiles {
        static FILES: OnceLock<ShaderFiles> = OnceLock::new();
        FILES.get_or_init(|| {
            let dir = std::env::var_os(SHADER_DIR_ENV).map(PathBuf::from);
            if let Some(dir) = &dir {
                eprintln!(
                    "backplane-shaders: {SHADER_DIR_ENV}={}: its .wgsl files replace the built-in ones of the same name (kernels built from them always run with runtime checks)",
                    dir.display()
                );
            }
            ShaderFiles::with_dir(dir)
        })
    }

    /// The file `name` (relative to `wgsl/`, no extension) and whether it
    /// came from the outside directory.
    pub fn get(&self, name: &str) -> Option<(&'static str, Origin)> {
        if let Some(text) = self.outside(name) {
            return Some((text, Origin::Outside));
        }
        embedded(name).map(|t| (t, Origin::Embedded))
    }

    /// The outside directory's replacement of `name`, read on first use.
    fn outside(&self, name: &str) -> Option<&'static str> {
        let dir = self.dir.as_ref()?;
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        *read
            .entry(name.to_string())
            .or_insert_with(|| read_override(dir, name).map(|t| &*Box::leak(t.into_boxed_str())))
    }

    /// Builds the WGSL for `key` from these files.
    pub fn specialise(&self, key: &PipelineKey) -> Result<Shader, PreprocessError> {
        let outside = RefCell::new(Vec::<String>::new());
        let mut shader = specialise_with(key, &|n: &str| {
            let (text, origin) = self.get(n)?;
            if origin == Origin::Outside {
                let mut o = outside.borrow_mut();
                if !o.iter().any(|seen| seen == n) {
                    o.push(n.to_string());
                }
            }
            Some(text)
        })?;
        shader.outside = outside.into_inner();
        Ok(shader)
    }
}

/// Where a shader file's text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled into the binary from `wgsl/`.
    Embedded,
    /// Read at run time from the [`SHADER_DIR_ENV`] directory.
    Outside,
}

/// Looks up a shader file by name (relative to `wgsl/`, no extension): from
/// the [`SHADER_DIR_ENV`] directory when it is set and holds the file,
/// else the embedded copy.
pub fn file(name: &str) -> Option<&'static str> {
    ShaderFiles::from_env().get(name).map(|(text, _)| text)
}

/// The embedded shader file `name`.
pub fn embedded(name: &str) -> Option<&'static str> {
    sources::SOURCES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// `dir/<name>.wgsl` when it exists and is readable. Names are the
/// library's own (no `..`), so the path stays inside `dir`.
fn read_override(dir: &Path, name: &str) -> Option<String> {
    if name.split('/').any(|part| part == ".." || part.is_empty()) {
        return None;
    }
    let path = dir.join(format!("{name}.wgsl"));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            eprintln!("backplane-shaders: {name} from {}", path.display());
            Some(text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            eprintln!(
                "backplane-shaders: {} unreadable ({e}); using the built-in {name}",
                path.display()
            );
            None
        }
    }
}

/// Whether WGSL code (outside `//` comments) names the `f16` type, as a
/// whole word or in a vector alias such as `vec4h`.
fn uses_f16(wgsl: &str) -> bool {
    wgsl.lines().any(|line| {
        let code = line.split("//").next().unwrap_or("");
        code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == "f16" || matches!(w, "vec2h" | "vec3h" | "vec4h"))
    })
}

/// Builds the WGSL for `key` from the process's files (see
/// [`ShaderFiles::from_env`]).
pub fn specialise(key: &PipelineKey) -> Result<Shader, PreprocessError> {
    ShaderFiles::from_env().specialise(key)
}

/// Builds the WGSL for `key`, finding files through `lookup`.
fn specialise_with<'a>(
    key: &PipelineKey,
    lookup: &'a dyn Fn(&str) -> Option<&'a str>,
) -> Result<Shader, PreprocessError> {
    let mut p = Preprocessor::new(lookup);
    p.define("WG_SIZE", &key.workgroup_size.to_string());
    let mut f16 = false;
    for (slot, ty) in &key.types {
        f16 |= *ty == "f16";
        p.define(&format!("{slot}_TYPE"), storage_type(ty));
        p.define(&format!("{slot}_{}", ty.to_ascii_uppercase()), "");
    }
    if !key.variant.is_empty() {
        p.define(&format!("OP_{}", key.variant.to_ascii_uppercase()), "");
    }
    if key.inplace {
        p.define("INPLACE", "");
    }
    if key.vec4 {
        p.define("VEC4", "");
    }
    if !key.path.is_empty() {
        p.define(&format!("PATH_{}", key.path.to_ascii_uppercase()), "");
    }
    for (name, value) in &key.defines {
        f16 |= *name == "F16";
        p.define(name, value);
    }
    let body = p.run(key.shader)?;
    let mut source = String::new();
    if f16 || uses_f16(&body) {
        source.push_str("enable f16;\n");
    }
    if key.path == "coopmat" {
        source.push_str("enable wgpu_cooperative_matrix;\n");
    }
    source.push_str(&body);
    Ok(Shader {
        source,
        entry: "main",
        constants: key
            .constants
            .iter()
            .map(|(n, v)| (n.to_string(), *v as f64))
            .collect(),
        outside: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::Preprocessor;

    /// A fresh directory for one test.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "backplane-shader-dir-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        dir
    }

    #[test]
    fn a_shader_dir_file_replaces_only_its_own_name() {
        let dir = scratch("names");
        std::fs::write(dir.join("binary.wgsl"), "// replaced\n").unwrap();
        std::fs::write(dir.join("sub/x.wgsl"), "// nested\n").unwrap();
        assert_eq!(
            read_override(&dir, "binary").as_deref(),
            Some("// replaced\n")
        );
        assert_eq!(read_override(&dir, "sub/x").as_deref(), Some("// nested\n"));
        // A name the directory lacks falls back to the embedded file.
        assert_eq!(read_override(&dir, "unary"), None);
        let files = ShaderFiles::with_dir(Some(dir.clone()));
        assert_eq!(
            files.get("binary"),
            Some(("// replaced\n", Origin::Outside))
        );
        assert_eq!(files.get("unary").map(|(_, o)| o), Some(Origin::Embedded));
        // Names cannot climb out of the directory.
        assert_eq!(read_override(&dir.join("sub"), "../binary"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kernel_from_the_shader_dir_is_reported_as_outside() {
        let dir = scratch("kernel");
        let key = PipelineKey::new("binary", "add")
            .ty("SRC0", "f32")
            .ty("SRC1", "f32")
            .ty("DST", "f32");
        // Built in: nothing from outside.
        let built_in = ShaderFiles::embedded_only().specialise(&key).unwrap();
        assert!(built_in.outside.is_empty(), "{:?}", built_in.outside);
        // The kernel file itself replaced, with the same text.
        std::fs::write(dir.join("binary.wgsl"), embedded("binary").unwrap()).unwrap();
        let replaced = ShaderFiles::with_dir(Some(dir.clone()))
            .specialise(&key)
            .unwrap();
        assert_eq!(replaced.outside, ["binary"]);
        assert_eq!(replaced.source, built_in.source);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kernel_whose_include_comes_from_the_shader_dir_is_reported_as_outside() {
        let dir = scratch("include");
        std::fs::create_dir_all(dir.join("common")).unwrap();
        std::fs::write(
            dir.join("common/index.wgsl"),
            embedded("common/index").unwrap(),
        )
        .unwrap();
        let key = PipelineKey::new("binary", "mul")
            .ty("SRC0", "f32")
            .ty("SRC1", "f32")
            .ty("DST", "f32");
        let s = ShaderFiles::with_dir(Some(dir.clone()))
            .specialise(&key)
            .unwrap();
        assert_eq!(s.outside, ["common/index"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_shader_file_preprocesses() {
        for (name, _) in sources::SOURCES {
            let lookup = |n: &str| file(n);
            // Without a key's defines a file may stop at its own `#error`
            // (a required define missing); anything else is a real fault.
            if let Err(e) = Preprocessor::new(&lookup).run(name) {
                assert!(e.message.starts_with("#error"), "{e}");
            }
        }
    }

    #[test]
    fn key_defines_reach_the_source() {
        let key = PipelineKey::new("binary", "add")
            .ty("SRC0", "f16")
            .ty("SRC1", "f32")
            .ty("DST", "f16")
            .wg(128);
        let s = specialise(&key).unwrap();
        assert!(s.source.starts_with("enable f16;"));
        assert!(s.source.contains("@workgroup_size(128)"));
        assert!(s.source.contains("array<f16>") && s.source.contains("return a + b;"));
        assert!(!s.source.contains("return a - b;"));
        assert_eq!(key.label(), "binary.add[f16,f32,f16]");
    }

    #[test]
    fn binary_shader_is_valid_wgsl() {
        for (t, inplace) in [("f32", false), ("f16", true)] {
            let mut key = PipelineKey::new("binary", "mul")
                .ty("SRC0", t)
                .ty("SRC1", "f32")
                .ty("DST", t);
            key.inplace = inplace;
            let src = specialise(&key).unwrap().source;
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::SHADER_FLOAT16,
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        }
    }
}
