//! Byte identity with llama.cpp: the reference models, quantized by this
//! crate, must give exactly the tensors (names, order, types, shapes, bytes)
//! and metadata keys that llama.cpp's `llama_model_quantize` gave for them.
//! The references in `tests/ref/` come from `scripts/llama_quantize.py --refs`.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use backplane_gguf::Gguf;
use backplane_quantize::{FileType, QuantizeParams, quantize_file};
use serde_json::Value as Json;

/// The types the issue requires byte identity for.
const REQUIRED: [&str; 8] = [
    "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q6_K", "Q4_K_M", "Q5_K_M",
];

fn ref_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ref")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quantize-reference");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// The description `scripts/llama_quantize.py` records, made from our output.
fn describe(path: &Path) -> Json {
    let model = Gguf::open(path).expect("our output parses");
    let tensors: Vec<Json> = model
        .tensors()
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "type": t.dtype.name(),
                "ne": t.shape(),
                "sha256": support::sha256_hex(model.tensor_data(t)),
            })
        })
        .collect();
    let keys: Vec<&str> = model.metadata().iter().map(|(k, _)| k.as_str()).collect();
    serde_json::json!({
        "gguf_version": model.version(),
        "metadata_keys": keys,
        "file_type": model.get("general.file_type").and_then(|v| v.as_u64()),
        "quantization_version": model.get("general.quantization_version").and_then(|v| v.as_u64()),
        "tensors": tensors,
    })
}

/// Every difference between llama.cpp's description and ours, as lines.
fn differences(label: &str, expected: &Json, actual: &Json) -> Vec<String> {
    let mut out = Vec::new();
    for field in [
        "gguf_version",
        "metadata_keys",
        "file_type",
        "quantization_version",
    ] {
        if expected[field] != actual[field] {
            out.push(format!(
                "{label}: {field}: llama.cpp {} vs ours {}",
                expected[field], actual[field]
            ));
        }
    }
    let empty = Vec::new();
    let theirs = expected["tensors"].as_array().unwrap_or(&empty);
    let ours = actual["tensors"].as_array().unwrap_or(&empty);
    if theirs.len() != ours.len() {
        out.push(format!(
            "{label}: {} tensors in llama.cpp's output, {} in ours",
            theirs.len(),
            ours.len()
        ));
    }
    for (i, (t, o)) in theirs.iter().zip(ours).enumerate() {
        if t != o {
            out.push(format!("{label}: tensor[{i}]: llama.cpp {t} vs ours {o}"));
        }
    }
    out
}

fn references() -> BTreeMap<String, Json> {
    let mut refs = BTreeMap::new();
    for entry in std::fs::read_dir(ref_dir()).expect("tests/ref exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("read a reference");
            let json: Json = serde_json::from_str(&text).expect("reference is JSON");
            let name = json["type"]
                .as_str()
                .expect("reference names its type")
                .to_string();
            refs.insert(name, json);
        }
    }
    refs
}

#[test]
fn references_cover_every_type_the_issue_lists() {
    let refs = references();
    for name in REQUIRED {
        assert!(
            refs.contains_key(name),
            "no reference for {name} in {}",
            ref_dir().display()
        );
    }
}

#[test]
fn every_tensor_matches_llama_cpp_byte_for_byte() {
    let refs = references();
    assert!(!refs.is_empty(), "no references in {}", ref_dir().display());
    let mut problems = Vec::new();
    let mut checked = 0;
    for variant in support::VARIANTS {
        let input = scratch(&format!("ref-{}.gguf", variant.name));
        support::write_model(variant, &input);
        let input_sha = support::sha256_hex(&std::fs::read(&input).expect("read the input"));
        for (type_name, reference) in &refs {
            let expected = &reference["models"][variant.name];
            let label = format!("{type_name}/{}", variant.name);
            if expected["input_sha256"].as_str() != Some(input_sha.as_str()) {
                problems.push(format!(
                    "{label}: the generated input ({input_sha}) is not the one the reference was made from \
                     ({}): regenerate with scripts/llama_quantize.py --refs",
                    expected["input_sha256"]
                ));
                continue;
            }
            let ftype: FileType = type_name.parse().expect("reference type parses");
            assert_eq!(
                reference["ftype"].as_u64(),
                Some(u64::from(ftype.code())),
                "{label}: ftype code"
            );
            let output = scratch(&format!("ref-{}-{type_name}.gguf", variant.name));
            let params = QuantizeParams {
                ftype,
                threads: 2,
                ..Default::default()
            };
            quantize_file(&input, &output, &params, &mut |_| {}).expect("quantize");
            problems.extend(differences(&label, expected, &describe(&output)));
            checked += expected["tensors"].as_array().map_or(0, Vec::len);
        }
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(checked > 0, "no tensors compared");
}
