//! Helpers shared by the integration tests.

use std::path::PathBuf;

use backplane_gguf::Gguf;
use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};

/// A path under the test target's temporary directory.
pub fn tmp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("testmodel");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The tiny preset of `arch` in `dtype`.
pub fn tiny(arch: Arch, dtype: FileType, seed: u64) -> ModelSpec {
    ModelSpec {
        seed,
        ..ModelSpec::tiny(arch, dtype)
    }
}

/// Writes `spec` under a name unique to the calling test and opens it.
/// The file is unlinked once open (the mapping keeps its bytes), so a test
/// run leaves no model files behind: the qwen3 presets are 300 MB each.
pub fn write_and_open(spec: &ModelSpec, test: &str) -> Gguf {
    let path = tmp_path(&format!("{test}-{}", spec.file_name()));
    write_model(spec, &path).unwrap();
    let file = Gguf::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}
