//! Every way a file can be wrong gives an error that names the field and
//! its byte offset (hand-built bytes, so the offsets are known).

mod common;

use backplane_gguf::{DType, Gguf, GgufError};
use common::Raw;

fn invalid(bytes: Vec<u8>) -> (String, u64, String) {
    match Gguf::from_bytes(bytes) {
        Err(GgufError::Invalid {
            field,
            offset,
            reason,
        }) => (field, offset, reason),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

fn truncated(bytes: Vec<u8>) -> (String, u64, u64, u64) {
    match Gguf::from_bytes(bytes) {
        Err(GgufError::Truncated {
            field,
            offset,
            need,
            file_size,
        }) => (field, offset, need, file_size),
        other => panic!("expected Truncated, got {other:?}"),
    }
}

/// One f32 tensor `w` of shape [4, 2] (32 bytes of data).
fn one_tensor_file(version: u32) -> Vec<u8> {
    let mut raw = Raw::header(version, 1, 1);
    raw.kv_str("general.architecture", "llama")
        .tensor("w", &[4, 2], 0, 0)
        .pad(32);
    for i in 0..8 {
        raw.bytes(&(i as f32).to_le_bytes());
    }
    raw.done()
}

#[test]
fn version_2_file_reads_like_version_3() {
    let file = Gguf::from_bytes(one_tensor_file(2)).unwrap();
    assert_eq!(file.version(), 2);
    assert_eq!(file.get_str("general.architecture").unwrap(), "llama");
    let w = file.tensor("w").unwrap();
    assert_eq!(
        (w.dtype, w.n_dims, w.ne, w.offset, w.size_bytes),
        (DType::F32, 2, [4, 2, 1, 1], 0, 32)
    );
    assert_eq!(file.data_offset() % 32, 0);
    let data = file.tensor_data(w);
    assert_eq!(data.len(), 32);
    assert_eq!(&data[4..8], &1f32.to_le_bytes());
    assert_eq!(&data[28..32], &7f32.to_le_bytes());
}

#[test]
fn version_1_is_refused_with_a_clear_error() {
    let (field, offset, reason) = invalid(Raw::header(1, 0, 0).done());
    assert_eq!((field.as_str(), offset), ("version", 4));
    assert!(reason.contains("version 1 is not supported"), "{reason}");
}

#[test]
fn byte_swapped_version_is_called_big_endian() {
    let (field, offset, reason) = invalid(Raw::header(3u32.swap_bytes(), 0, 0).done());
    assert_eq!((field.as_str(), offset), ("version", 4));
    assert!(reason.contains("big-endian"), "{reason}");
}

#[test]
fn unknown_version_is_refused() {
    let (field, _, reason) = invalid(Raw::header(4, 0, 0).done());
    assert_eq!(field, "version");
    assert!(reason.contains("unsupported GGUF version 4"), "{reason}");
}

#[test]
fn wrong_magic_is_named() {
    let mut bytes = Raw::header(3, 0, 0).done();
    bytes[..4].copy_from_slice(b"GGML");
    let (field, offset, reason) = invalid(bytes);
    assert_eq!((field.as_str(), offset), ("magic", 0));
    assert!(reason.contains("GGML"), "{reason}");
}

#[test]
fn empty_input_is_truncated_at_the_magic() {
    assert_eq!(truncated(Vec::new()), ("magic".into(), 0, 4, 0));
}

#[test]
fn truncated_header_names_the_field_and_offset() {
    let mut raw = Raw::default();
    raw.bytes(b"GGUF").u32(3).u32(0);
    assert_eq!(truncated(raw.done()), ("tensor_count".into(), 8, 8, 12));
    let mut bytes = Raw::header(3, 0, 0).done();
    bytes.truncate(20);
    assert_eq!(truncated(bytes), ("kv_count".into(), 16, 8, 20));
}

#[test]
fn open_names_the_path_on_io_errors() {
    let path = std::env::temp_dir().join("backplane-gguf-test-does-not-exist.gguf");
    let err = Gguf::open(&path).unwrap_err();
    assert!(
        matches!(&err, GgufError::Io { path: p, .. } if *p == path),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("backplane-gguf-test-does-not-exist.gguf"),
        "{err}"
    );
}

#[test]
fn open_of_a_directory_is_an_io_error_naming_it() {
    let dir = std::env::temp_dir();
    let err = Gguf::open(&dir).unwrap_err();
    assert!(
        matches!(&err, GgufError::Io { path, .. } if *path == dir),
        "{err:?}"
    );
}

#[test]
fn open_of_an_empty_file_reports_truncation() {
    let path =
        std::env::temp_dir().join(format!("backplane-gguf-empty-{}.gguf", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let result = Gguf::open(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(result, Err(GgufError::Truncated { ref field, offset: 0, .. }) if field == "magic"),
        "{result:?}"
    );
}

#[test]
fn huge_kv_count_is_refused_before_allocating() {
    let (field, offset, reason) = invalid(Raw::header(3, 0, u64::MAX).done());
    assert_eq!((field.as_str(), offset), ("kv_count", 16));
    assert!(reason.contains("only 0 remain"), "{reason}");
}

#[test]
fn huge_tensor_count_is_refused_before_allocating() {
    let (field, offset, reason) = invalid(Raw::header(3, 1 << 40, 0).done());
    assert_eq!((field.as_str(), offset), ("tensor_count", 8));
    assert!(reason.contains("tensor entries"), "{reason}");
}

#[test]
fn huge_string_length_is_truncation_not_allocation() {
    let mut raw = Raw::header(3, 0, 1);
    raw.u64(u64::MAX).zeros(16);
    assert_eq!(
        truncated(raw.done()),
        ("kv[0].key".into(), 32, u64::MAX, 48)
    );
}

#[test]
fn huge_array_count_is_bounded_by_the_bytes_left() {
    let mut raw = Raw::header(3, 0, 1);
    raw.str("a").u32(9).u32(4).u64(1 << 60).zeros(8);
    let (field, offset, need, file_size) = truncated(raw.done());
    assert!(field.starts_with("kv[0] 'a'"), "{field}");
    assert_eq!((offset, need, file_size), (49, 4 << 60, 57));
}

#[test]
fn non_utf8_array_element_names_key_element_and_offset() {
    let mut raw = Raw::header(3, 0, 1);
    raw.str("tokenizer.ggml.tokens")
        .u32(9)
        .u32(8)
        .u64(3)
        .str("ok");
    let bad_at = raw.len() + 8;
    raw.u64(2).bytes(&[0xff, 0xfe]).str("fine");
    let (field, offset, reason) = invalid(raw.done());
    assert_eq!(field, "kv[0] 'tokenizer.ggml.tokens' value[1]");
    assert_eq!(offset, bad_at);
    assert!(reason.contains("UTF-8"), "{reason}");
}

#[test]
fn non_utf8_key_is_refused() {
    let mut raw = Raw::header(3, 0, 1);
    raw.u64(1).u8(0x80).u32(4).u32(0);
    let (field, offset, _) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("kv[0].key", 32));
}

#[test]
fn unknown_value_type_names_the_key() {
    let mut raw = Raw::header(3, 0, 1);
    raw.str("a").u32(13).u32(0);
    let (field, offset, reason) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("kv[0] 'a' type", 33));
    assert!(reason.contains("13"), "{reason}");
}

#[test]
fn unknown_array_element_type_names_the_key() {
    let mut raw = Raw::header(3, 0, 1);
    raw.str("a").u32(9).u32(99).u64(0);
    let (field, offset, _) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("kv[0] 'a' element type", 37));
}

#[test]
fn arrays_nested_deeper_than_eight_levels_are_refused() {
    let nested = |levels: u32| {
        let mut raw = Raw::header(3, 0, 1);
        raw.str("deep").u32(9);
        for _ in 1..levels {
            raw.u32(9).u64(1);
        }
        raw.u32(4).u64(1).u32(7);
        raw.done()
    };
    let file = Gguf::from_bytes(nested(8)).unwrap();
    assert_eq!(file.get_array("deep").unwrap().len(), 1);
    let (field, offset, reason) = invalid(nested(9));
    assert_eq!(
        field,
        "kv[0] 'deep' value[0][0][0][0][0][0][0] element type"
    );
    assert_eq!(offset, 24 + 12 + 4 + 7 * 12);
    assert!(reason.contains("deeper than 8"), "{reason}");
}

#[test]
fn duplicate_key_is_refused() {
    let mut raw = Raw::header(3, 0, 2);
    raw.kv_u32("a", 1);
    let second = raw.len();
    raw.kv_u32("a", 2);
    let (field, offset, reason) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("kv[1] 'a'", second));
    assert!(
        reason.contains("duplicate key (first defined by kv[0])"),
        "{reason}"
    );
}

#[test]
fn empty_key_is_refused() {
    let mut raw = Raw::header(3, 0, 1);
    raw.kv_u32("", 1);
    let (field, offset, _) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("kv[0].key", 24));
}

#[test]
fn alignment_must_be_a_u32_power_of_two() {
    for bad in [0u32, 48] {
        let mut raw = Raw::header(3, 0, 1);
        raw.kv_u32("general.alignment", bad);
        let (field, offset, reason) = invalid(raw.done());
        assert_eq!(
            (field.as_str(), offset),
            ("kv[0] 'general.alignment'", 24 + 8 + 17 + 4)
        );
        assert!(reason.contains("power of two"), "{reason}");
    }
    let mut raw = Raw::header(3, 0, 1);
    raw.str("general.alignment").u32(10).u64(64);
    let (_, _, reason) = invalid(raw.done());
    assert!(reason.contains("must be a u32, found u64"), "{reason}");
}

#[test]
fn custom_alignment_places_the_data_section() {
    let mut raw = Raw::header(3, 1, 1);
    raw.kv_u32("general.alignment", 64)
        .tensor("w", &[2], 0, 0)
        .pad(64)
        .zeros(64);
    let file = Gguf::from_bytes(raw.done()).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_offset(), 128);
}

/// A file whose only tensor entry is written by `tensor`; returns the bytes
/// and the offset where the entry starts.
fn with_tensor(tensor: impl FnOnce(&mut Raw)) -> (Vec<u8>, u64) {
    let mut raw = Raw::header(3, 1, 0);
    let at = raw.len();
    tensor(&mut raw);
    raw.pad(32).zeros(4096);
    (raw.done(), at)
}

#[test]
fn tensor_dimension_count_must_be_one_to_four() {
    for n_dims in [0u32, 5] {
        let (bytes, at) = with_tensor(|r| {
            r.str("w").u32(n_dims);
        });
        let (field, offset, reason) = invalid(bytes);
        assert_eq!((field.as_str(), offset), ("tensor[0] 'w' n_dims", at + 9));
        assert!(reason.contains("must be 1..=4"), "{reason}");
    }
}

#[test]
fn negative_or_zero_dims_are_refused() {
    for bad in [0i64, -3] {
        let (bytes, at) = with_tensor(|r| {
            r.tensor("w", &[4, bad], 0, 0);
        });
        let (field, offset, reason) = invalid(bytes);
        assert_eq!(
            (field.as_str(), offset),
            ("tensor[0] 'w' ne[1]", at + 9 + 4 + 8)
        );
        assert!(reason.contains(&format!("dimension is {bad}")), "{reason}");
    }
}

#[test]
fn element_count_overflow_is_refused() {
    let (bytes, at) = with_tensor(|r| {
        r.tensor("w", &[1 << 40, 1 << 30], 0, 0);
    });
    let (field, offset, reason) = invalid(bytes);
    assert_eq!((field.as_str(), offset), ("tensor[0] 'w' ne", at + 13));
    assert!(reason.contains("overflows i64"), "{reason}");
}

#[test]
fn byte_size_overflow_is_refused() {
    let (bytes, _) = with_tensor(|r| {
        r.tensor("w", &[1 << 31, 1 << 31], 27, 0);
    });
    let (field, _, reason) = invalid(bytes);
    assert_eq!(field, "tensor[0] 'w' ne[0]");
    assert!(reason.contains("overflows u64"), "{reason}");
}

#[test]
fn row_byte_size_overflow_is_refused() {
    let (bytes, _) = with_tensor(|r| {
        r.tensor("w", &[1 << 62], 0, 0);
    });
    let (field, _, reason) = invalid(bytes);
    assert_eq!(field, "tensor[0] 'w' ne[0]");
    assert!(reason.contains("overflows u64"), "{reason}");
}

#[test]
fn unknown_tensor_type_names_tensor_and_code() {
    let (bytes, at) = with_tensor(|r| {
        r.tensor("blk.0.ffn_up.weight", &[256], 16, 0);
    });
    let (field, offset, reason) = invalid(bytes);
    assert_eq!(field, "tensor[0] 'blk.0.ffn_up.weight' type");
    assert_eq!(offset, at + 8 + 19 + 4 + 8);
    assert!(
        reason.contains("code 16") && reason.contains("iq2_xxs"),
        "{reason}"
    );
}

#[test]
fn rows_must_be_whole_blocks() {
    let (bytes, _) = with_tensor(|r| {
        r.tensor("w", &[33, 2], DType::Q4_0.code(), 0);
    });
    let (field, _, reason) = invalid(bytes);
    assert_eq!(field, "tensor[0] 'w' ne[0]");
    assert!(
        reason.contains("not a whole number of q4_0 blocks"),
        "{reason}"
    );
}

#[test]
fn misaligned_tensor_offset_is_refused() {
    let (bytes, at) = with_tensor(|r| {
        r.tensor("w", &[4], 0, 4);
    });
    let (field, offset, reason) = invalid(bytes);
    assert_eq!(
        (field.as_str(), offset),
        ("tensor[0] 'w' offset", at + 9 + 4 + 8 + 4)
    );
    assert!(
        reason.contains("not a multiple of the alignment 32"),
        "{reason}"
    );
}

#[test]
fn tensor_data_past_the_end_of_file_is_refused() {
    let mut raw = Raw::header(3, 1, 0);
    raw.tensor("w", &[64], 0, 0).pad(32).zeros(255);
    let bytes = raw.done();
    let size = bytes.len() as u64;
    let (field, offset, need, file_size) = truncated(bytes);
    assert_eq!(field, "tensor[0] 'w' data");
    assert_eq!((offset, need, file_size), (64, 256, size));
}

#[test]
fn huge_tensor_offset_does_not_overflow() {
    let (bytes, _) = with_tensor(|r| {
        r.tensor("w", &[4], 0, u64::MAX - 31);
    });
    let (field, _, need, _) = truncated(bytes);
    assert_eq!((field.as_str(), need), ("tensor[0] 'w' data", 16));
}

#[test]
fn overlapping_tensors_are_refused() {
    let mut raw = Raw::header(3, 2, 0);
    raw.tensor("a", &[16], 0, 0);
    let b_offset_field = raw.len() + 9 + 4 + 8 + 4;
    raw.tensor("b", &[8], 0, 32).pad(32).zeros(128);
    let (field, offset, reason) = invalid(raw.done());
    assert_eq!(
        (field.as_str(), offset),
        ("tensor[1] 'b' offset", b_offset_field)
    );
    assert!(
        reason.contains("overlaps tensor[0] 'a' data [0, 64)"),
        "{reason}"
    );
}

#[test]
fn tensors_out_of_order_and_with_gaps_are_accepted() {
    let mut raw = Raw::header(3, 2, 0);
    raw.tensor("late", &[8], 0, 96)
        .tensor("early", &[8], 0, 0)
        .pad(32);
    let data_offset = raw.len() as usize;
    raw.zeros(128);
    let mut bytes = raw.done();
    bytes[data_offset + 96] = 7;
    let file = Gguf::from_bytes(bytes).unwrap();
    let late = file.tensor("late").unwrap();
    assert_eq!(file.tensor_data(late)[0], 7);
    assert_eq!(file.tensor_data(file.tensor("early").unwrap()), &[0u8; 32]);
}

#[test]
fn duplicate_tensor_name_is_refused() {
    let mut raw = Raw::header(3, 2, 0);
    raw.tensor("w", &[8], 0, 0);
    let second = raw.len();
    raw.tensor("w", &[8], 0, 32).pad(32).zeros(64);
    let (field, offset, reason) = invalid(raw.done());
    assert_eq!((field.as_str(), offset), ("tensor[1] 'w'", second));
    assert!(reason.contains("first used by tensor[0]"), "{reason}");
}

#[test]
fn tensor_names_longer_than_ggml_allows_are_refused() {
    let long = "x".repeat(64);
    let (bytes, at) = with_tensor(|r| {
        r.tensor(&long, &[8], 0, 0);
    });
    let (field, offset, reason) = invalid(bytes);
    assert_eq!((field.as_str(), offset), ("tensor[0].name", at));
    assert!(reason.contains("at most 63"), "{reason}");
}

#[test]
fn truncated_tensor_table_names_the_tensor_and_dimension() {
    let name = "blk.0.attn_output.weight.with.a.longer.name";
    let mut raw = Raw::header(3, 1, 0);
    raw.str(name).u32(2).i64(4).bytes(&[0; 3]);
    let bytes = raw.done();
    let len = bytes.len() as u64;
    let (field, offset, need, file_size) = truncated(bytes);
    assert_eq!(field, format!("tensor[0] '{name}' ne[1]"));
    assert_eq!((offset, need, file_size), (len - 3, 8, len));
}

#[test]
fn missing_padding_before_the_data_section_is_truncation() {
    let mut raw = Raw::header(3, 1, 0);
    raw.tensor("w", &[1], 0, 0);
    let end = raw.len();
    let (field, offset, need, _) = truncated(raw.done());
    assert_eq!(
        (field.as_str(), offset, need),
        ("padding before the tensor data", end, 64 - end)
    );
}

#[test]
fn errors_print_field_offset_and_reason() {
    let err = Gguf::from_bytes(Raw::header(1, 0, 0).done()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "version at byte 4: GGUF version 1 is not supported (only 2 and 3)"
    );
    let err = Gguf::from_bytes(b"GGUF".to_vec()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "truncated: version at byte 4 needs 4 bytes, file has 4"
    );
}
