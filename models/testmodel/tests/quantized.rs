//! Quantized tiny models: llama.cpp's per-tensor type choices, metadata, and
//! bytes that are the f32 model quantized.

mod common;

use backplane_gguf::{DType, Gguf};
use backplane_quant::quantize_row;
use backplane_testmodel::{
    Arch, FileType, Preset, Shape, default_vocab_dir, metadata, tokenizer_keys, write_model,
};
use common::{tiny, tmp_path, write_and_open};

/// The type llama.cpp's quantizer gives each tensor of a tiny model (2
/// layers, rows of 256 or 512), derived by hand from `llama-quant.cpp`:
/// 1-D tensors stay f32; the output layer (the embeddings when tied) gets
/// q6_K unless the type is q8_0; q4_K_M gives attn_v and ffn_down of the
/// last layer q6_K (its `use_more_bits` is true for layer 1 of 2 only).
fn llama_cpp_type(dtype: FileType, tied: bool, name: &str, n_dims: u32) -> DType {
    if n_dims == 1 {
        return DType::F32;
    }
    let base = match dtype {
        FileType::Q8_0 => DType::Q8_0,
        FileType::Q4_0 => DType::Q4_0,
        FileType::Q4_K_M => DType::Q4_K,
        other => panic!("no hand-derived rule for {other}"),
    };
    let is_output = name == "output.weight" || (tied && name == "token_embd.weight");
    if is_output {
        return if base == DType::Q8_0 {
            DType::Q8_0
        } else {
            DType::Q6_K
        };
    }
    let more_bits = name == "blk.1.attn_v.weight" || name == "blk.1.ffn_down.weight";
    if dtype == FileType::Q4_K_M && more_bits {
        return DType::Q6_K;
    }
    base
}

#[test]
fn quantized_models_get_llama_cpp_type_for_every_tensor() {
    for arch in Arch::ALL {
        let tied = Shape::of(arch, Preset::Tiny).tied_embeddings;
        for dtype in [FileType::Q8_0, FileType::Q4_0, FileType::Q4_K_M] {
            let file = write_and_open(&tiny(arch, dtype, 0), "mix");
            for t in file.tensors() {
                let want = llama_cpp_type(dtype, tied, &t.name, t.n_dims);
                assert_eq!(t.dtype, want, "{arch} {dtype} {}", t.name);
            }
        }
    }
}

#[test]
fn quantized_metadata_is_the_float_metadata_with_the_file_type_at_the_end() {
    for arch in Arch::ALL {
        let spec = tiny(arch, FileType::Q4_K_M, 0);
        let file = write_and_open(&spec, "meta");
        let shape = Shape::of(arch, Preset::Tiny);
        let tokenizer = tokenizer_keys(&default_vocab_dir(), shape.vocab).unwrap();
        assert_eq!(file.metadata(), &metadata(&spec, &shape, tokenizer)[..]);
        assert_eq!(file.get_u32("general.file_type").unwrap(), 15);
        assert_eq!(file.get_u32("general.quantization_version").unwrap(), 2);
        assert_eq!(file.get_str("general.name").unwrap(), spec.general_name());
    }
}

#[test]
fn q8_0_tensors_are_the_f32_model_quantized() {
    let exact = write_and_open(&tiny(Arch::Qwen2, FileType::F32, 9), "q8-src");
    let quant = write_and_open(&tiny(Arch::Qwen2, FileType::Q8_0, 9), "q8");
    assert_eq!(exact.tensors().len(), quant.tensors().len());
    for t in quant.tensors() {
        let source = exact.tensor(&t.name).unwrap();
        let data = exact.tensor_data(source);
        if t.dtype == DType::F32 {
            assert_eq!(quant.tensor_data(t), data, "{}", t.name);
            continue;
        }
        let values: Vec<f32> = data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let mut expected = vec![0u8; t.size_bytes as usize];
        let row_bytes = DType::Q8_0.row_size(t.ne[0] as usize).unwrap();
        for (row, out) in values
            .chunks_exact(t.ne[0] as usize)
            .zip(expected.chunks_exact_mut(row_bytes))
        {
            quantize_row(DType::Q8_0, row, out).unwrap();
        }
        assert!(quant.tensor_data(t) == &expected[..], "{}", t.name);
    }
}

#[test]
fn quantized_writes_are_deterministic_and_leave_no_temporary_files() {
    let spec = tiny(Arch::Llama, FileType::Q4_K_M, 3);
    let dir = tmp_path("q-determinism");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.gguf"), dir.join("b.gguf"));
    write_model(&spec, &a).unwrap();
    write_model(&spec, &b).unwrap();
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(names, ["a.gguf", "b.gguf"]);
}

#[test]
fn every_file_type_writes_a_file_the_reader_accepts() {
    for dtype in FileType::ALL {
        let spec = tiny(Arch::Llama, dtype, 0);
        let path = tmp_path(&format!("all-{}", spec.file_name()));
        write_model(&spec, &path).unwrap();
        let file = Gguf::open(&path).unwrap();
        assert_eq!(file.get_u32("general.file_type").unwrap(), dtype.code());
        assert_eq!(file.tensors().len(), 21, "{dtype}");
        for t in file.tensors() {
            if t.n_dims == 1 {
                assert_eq!(t.dtype, DType::F32, "{dtype} {}", t.name);
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}
