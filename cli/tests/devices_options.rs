//! `backplane devices --options` lists each backend's options (type,
//! default, meaning, environment variable), as text and in `--json`: the
//! built-in CPU backend's and those the WebGPU plugin (from
//! `target/plugins`, built by `cargo xtask plugins`) reports through its
//! options extension.

use std::path::PathBuf;
use std::process::Command;

fn plugin_dir() -> PathBuf {
    std::env::var_os("BACKPLANE_TEST_PLUGIN_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins"),
        PathBuf::from,
    )
}

/// `backplane devices --options [extra]` searching only the plugin dir
/// (and no probe cache of an earlier build).
fn devices(extra: &[&str]) -> String {
    let dir = plugin_dir();
    let webgpu = dir.join("libbackplane_webgpu.so");
    assert!(
        webgpu.is_file(),
        "{} is missing: run `cargo xtask plugins`",
        webgpu.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_backplane"))
        .args(["devices", "--options", "--plugin-dir"])
        .arg(&dir)
        .args(extra)
        .env("BACKPLANE_PROBE", "off")
        .env_remove("BACKPLANE_REMOTE")
        .output()
        .expect("running backplane");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn text_lists_cpu_and_webgpu_options_with_type_default_and_variable() {
    let text = devices(&[]);
    assert!(
        text.contains("  options (--backend-option cpu.KEY=VALUE):"),
        "{text}"
    );
    assert!(
        text.contains("    threads  integer 1..=4096  default backend decides  worker threads"),
        "{text}"
    );
    assert!(
        text.contains("  options (--backend-option webgpu.KEY=VALUE):"),
        "{text}"
    );
    assert!(
        text.contains("    matmul_path  one of: matvec, matvec-wg, tiled, tiled8, coopmat, coopmat-emulated  default backend decides"),
        "{text}"
    );
    assert!(
        text.contains("    flash_attn_pack  bool  default on  cooperative-matrix flash attention packs query heads sharing K/V  (env BACKPLANE_WEBGPU_FLASH_ATTN_PACK)"),
        "{text}"
    );
}

#[test]
fn json_lists_each_backends_options() {
    let json: serde_json::Value = serde_json::from_str(&devices(&["--json"])).expect("valid JSON");
    let backends = json["backends"].as_array().expect("backends");
    let options = |name: &str| {
        backends
            .iter()
            .find(|b| b["backend"] == name)
            .unwrap_or_else(|| panic!("no {name} backend in {json}"))["options"]
            .as_array()
            .expect("options listed")
            .clone()
    };
    let cpu = options("cpu");
    assert_eq!(cpu.len(), 1);
    assert_eq!(cpu[0]["name"], "threads");
    assert_eq!(cpu[0]["type"], "integer 1..=4096");
    let webgpu = options("webgpu");
    let trace = webgpu
        .iter()
        .find(|o| o["name"] == "matmul_trace")
        .expect("matmul_trace listed");
    assert_eq!(trace["type"], "bool");
    assert_eq!(trace["default"], "off");
    assert_eq!(trace["env"], "BACKPLANE_WEBGPU_MATMUL_TRACE");
}
