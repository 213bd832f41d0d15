//! What `quantize_file` does around the bytes: refusals, clean failures,
//! metadata, progress, determinism across thread counts.

mod support;

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use backplane_gguf::{DType, Gguf, GgufWriter, Value};
use backplane_quantize::{FileType, QuantizeError, QuantizeParams, quantize_file};

/// A fresh, empty scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("quantize-behaviour")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn tied_model(dir: &Path) -> PathBuf {
    let path = dir.join("in.gguf");
    support::write_model(support::VARIANTS[1], &path);
    path
}

fn quantize(input: &Path, output: &Path, ftype: FileType) -> Result<(), QuantizeError> {
    let params = QuantizeParams {
        ftype,
        threads: 2,
        ..Default::default()
    };
    quantize_file(input, output, &params, &mut |_| {}).map(|_| ())
}

/// The files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn quantized_input_is_refused_unless_requantize_is_on() {
    let dir = scratch("requantize");
    let input = tied_model(&dir);
    let q8 = dir.join("q8.gguf");
    quantize(&input, &q8, FileType::Q8_0).expect("f16 -> q8_0");
    let q4 = dir.join("q4.gguf");
    let err = quantize(&q8, &q4, FileType::Q4_0).expect_err("q8_0 -> q4_0 without requantize");
    assert!(
        // The first tensor in llama.cpp's order; tied, it would become q6_K.
        matches!(&err, QuantizeError::AlreadyQuantized { tensor, from: DType::Q8_0, to: DType::Q6_K }
            if tensor == "token_embd.weight"),
        "{err}"
    );
    assert!(err.to_string().contains("already quantized"), "{err}");
    assert_eq!(files_in(&dir), ["in.gguf", "q8.gguf"]);

    let params = QuantizeParams {
        ftype: FileType::Q4_0,
        requantize: true,
        ..Default::default()
    };
    quantize_file(&q8, &q4, &params, &mut |_| {}).expect("requantize allowed");
    let out = Gguf::open(&q4).expect("open");
    let q = out.tensor("blk.1.attn_q.weight").expect("attn_q");
    assert_eq!(q.dtype, DType::Q4_0);
}

#[test]
fn tensors_already_of_the_target_type_are_copied() {
    let dir = scratch("copy");
    let input = tied_model(&dir);
    let once = dir.join("once.gguf");
    let twice = dir.join("twice.gguf");
    quantize(&input, &once, FileType::Q8_0).expect("f16 -> q8_0");
    quantize(&once, &twice, FileType::Q8_0).expect("q8_0 -> q8_0 copies");
    let (a, b) = (
        Gguf::open(&once).expect("a"),
        Gguf::open(&twice).expect("b"),
    );
    assert_eq!(a.tensors(), b.tensors());
    for t in a.tensors() {
        assert_eq!(a.tensor_data(t), b.tensor_data(t), "{}", t.name);
    }
}

/// A model whose second tensor holds an infinity, which quantizes to an
/// infinite scale that llama.cpp's validation rejects.
fn model_with_infinity(path: &Path) {
    let mut w = GgufWriter::new();
    w.set("general.architecture", Value::String("llama".into()));
    w.set("llama.block_count", Value::U32(1));
    w.add_tensor("blk.0.attn_q.weight", DType::F32, &[64, 4])
        .expect("add");
    w.add_tensor("blk.0.attn_v.weight", DType::F32, &[64, 4])
        .expect("add");
    let fine: Vec<u8> = (0..256)
        .flat_map(|i| (i as f32 / 256.0).to_le_bytes())
        .collect();
    let mut bad = fine.clone();
    bad[4 * 70..4 * 71].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let mut s = w
        .begin(BufWriter::new(File::create(path).expect("create")))
        .expect("begin");
    s.write_tensor("blk.0.attn_q.weight", &fine).expect("q");
    s.write_tensor("blk.0.attn_v.weight", &bad).expect("v");
    s.finish().expect("finish");
}

#[test]
fn a_failure_midway_leaves_no_temp_file_and_keeps_the_old_output() {
    let dir = scratch("midway");
    let input = dir.join("in.gguf");
    model_with_infinity(&input);
    let output = dir.join("out.gguf");
    std::fs::write(&output, b"previous model").expect("old output");
    let err = quantize(&input, &output, FileType::Q8_0).expect_err("infinite weight");
    assert!(
        matches!(&err, QuantizeError::Validation { tensor, what } if tensor == "blk.0.attn_v.weight" && what.contains("row 1")),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&output).expect("old output"),
        b"previous model"
    );
    assert_eq!(files_in(&dir), ["in.gguf", "out.gguf"]);
}

#[test]
fn an_unwritable_output_names_the_path() {
    let dir = scratch("unwritable");
    let input = tied_model(&dir);
    let output = dir.join("missing-dir").join("out.gguf");
    let err = quantize(&input, &output, FileType::Q8_0).expect_err("no such directory");
    let text = err.to_string();
    assert!(matches!(err, QuantizeError::Write { .. }), "{text}");
    assert!(text.contains(&output.display().to_string()), "{text}");
    assert_eq!(files_in(&dir), ["in.gguf"]);
}

#[test]
fn an_unreadable_input_names_the_path() {
    let dir = scratch("unreadable");
    let input = dir.join("not-a-model.gguf");
    std::fs::write(&input, b"GGML but not really").expect("write");
    let err = quantize(&input, &dir.join("out.gguf"), FileType::Q8_0).expect_err("bad input");
    assert!(matches!(err, QuantizeError::Read { .. }), "{err}");
    assert!(err.to_string().contains("not-a-model.gguf"), "{err}");
}

#[test]
fn metadata_is_copied_with_the_file_type_and_quantization_version_last() {
    let dir = scratch("metadata");
    let input = tied_model(&dir);
    let output = dir.join("out.gguf");
    quantize(&input, &output, FileType::Q4_K_M).expect("quantize");
    let (inp, out) = (
        Gguf::open(&input).expect("in"),
        Gguf::open(&output).expect("out"),
    );
    let keys = |g: &Gguf| -> Vec<String> { g.metadata().iter().map(|(k, _)| k.clone()).collect() };
    let mut expected: Vec<String> = keys(&inp)
        .into_iter()
        .filter(|k| k != "general.file_type")
        .collect();
    expected.push("general.quantization_version".into());
    expected.push("general.file_type".into());
    assert_eq!(keys(&out), expected);
    assert_eq!(out.get_u32("general.file_type").expect("file type"), 15);
    assert_eq!(
        out.get_u32("general.quantization_version")
            .expect("version"),
        2
    );
    assert_eq!(
        out.get_str("general.name").ok(),
        inp.get_str("general.name").ok()
    );
}

#[test]
fn progress_reports_every_tensor_in_output_order_with_its_bytes() {
    let dir = scratch("progress");
    let input = tied_model(&dir);
    let output = dir.join("out.gguf");
    let mut seen = Vec::new();
    let params = QuantizeParams {
        ftype: FileType::Q6_K,
        ..Default::default()
    };
    let summary = quantize_file(&input, &output, &params, &mut |p| {
        seen.push((p.index, p.count, p.name.to_string(), p.from, p.to, p.bytes));
    })
    .expect("quantize");
    let out = Gguf::open(&output).expect("out");
    assert_eq!(seen.len(), out.tensors().len());
    assert_eq!(summary.tensors, seen.len());
    for (i, (t, s)) in out.tensors().iter().zip(&seen).enumerate() {
        assert_eq!((s.0, s.1), (i, seen.len()));
        assert_eq!(
            (s.2.as_str(), s.4, s.5),
            (t.name.as_str(), t.dtype, t.size_bytes)
        );
    }
    let converted = seen.iter().filter(|s| s.3 != s.4).count();
    assert_eq!(summary.quantized, converted);
    assert!(converted > 0 && converted < seen.len());
    assert_eq!(
        summary.bytes_out,
        std::fs::metadata(&output).expect("size").len()
    );
    assert_eq!(
        summary.bytes_in,
        std::fs::metadata(&input).expect("size").len()
    );
}

#[test]
fn the_thread_count_does_not_change_the_bytes() {
    let dir = scratch("threads");
    let input = tied_model(&dir);
    let mut outputs = Vec::new();
    for threads in [1, 2, 3] {
        let output = dir.join(format!("out-{threads}.gguf"));
        let params = QuantizeParams {
            ftype: FileType::Q4_K_M,
            threads,
            ..Default::default()
        };
        quantize_file(&input, &output, &params, &mut |_| {}).expect("quantize");
        outputs.push(std::fs::read(&output).expect("read"));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);
}

#[test]
fn default_parameters_write_q8_0() {
    let dir = scratch("default");
    let input = tied_model(&dir);
    let output = dir.join("out.gguf");
    quantize_file(&input, &output, &QuantizeParams::default(), &mut |_| {}).expect("quantize");
    let out = Gguf::open(&output).expect("out");
    assert_eq!(out.get_u32("general.file_type").expect("file type"), 7);
    assert_eq!(
        out.tensor("blk.0.ffn_up.weight").expect("ffn_up").dtype,
        DType::Q8_0
    );
    assert_eq!(
        out.tensor("blk.0.ffn_norm.weight").expect("norm").dtype,
        DType::F32
    );
}
