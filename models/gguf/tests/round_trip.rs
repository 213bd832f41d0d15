//! Writer -> reader round trips, the writer's checks, and the typed getters.

use backplane_gguf::{Array, DType, Gguf, GgufError, GgufWriter, TensorInfo, Value};

fn every_value() -> Vec<(String, Value)> {
    let values = vec![
        Value::U8(200),
        Value::I8(-100),
        Value::U16(60_000),
        Value::I16(-30_000),
        Value::U32(4_000_000_000),
        Value::I32(-2_000_000_000),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F32(-1.5e-7),
        Value::F64(std::f64::consts::PI),
        Value::Bool(true),
        Value::Bool(false),
        Value::String("héllo ▁world".into()),
        Value::String(String::new()),
        Value::Array(Array::U8(vec![0, 1, 255])),
        Value::Array(Array::I8(vec![-128, 127])),
        Value::Array(Array::U16(vec![1, 65_535])),
        Value::Array(Array::I16(vec![-32_768, 5])),
        Value::Array(Array::U32(vec![7, u32::MAX])),
        Value::Array(Array::I32(vec![-1, 2, -3])),
        Value::Array(Array::U64(vec![u64::MAX, 0])),
        Value::Array(Array::I64(vec![i64::MAX, -9])),
        Value::Array(Array::F32(vec![0.25, f32::INFINITY, -0.0])),
        Value::Array(Array::F64(vec![1e300, -2.5])),
        Value::Array(Array::Bool(vec![true, false, true])),
        Value::Array(Array::String(vec!["a".into(), String::new(), "ü b".into()])),
        Value::Array(Array::F32(Vec::new())),
        Value::Array(Array::Array(vec![
            Array::U32(vec![1, 2]),
            Array::String(vec!["x".into()]),
            Array::Array(vec![Array::Bool(vec![]), Array::I8(vec![3])]),
        ])),
    ];
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("test.value_{i}"), v))
        .collect()
}

#[test]
fn every_value_type_round_trips_in_order() {
    let mut writer = GgufWriter::new();
    for (key, value) in every_value() {
        writer.set(key, value);
    }
    let bytes = writer.begin(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(bytes.len() as u64, writer.file_size().unwrap());
    let file = Gguf::from_bytes(bytes).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.metadata(), every_value().as_slice());
}

/// Deterministic bytes for tensor `i`.
fn pattern(i: usize, len: u64) -> Vec<u8> {
    (0..len).map(|j| (j as usize * 31 + i * 7) as u8).collect()
}

fn write_every_dtype(alignment: Option<u32>) -> (GgufWriter, Vec<u8>) {
    let mut writer = GgufWriter::new();
    writer.set("general.architecture", "test");
    if let Some(a) = alignment {
        writer.set("general.alignment", a);
    }
    for (i, dtype) in DType::ALL.iter().enumerate() {
        let ne0 = dtype.block_size() as i64 * 2;
        let shape: Vec<i64> = [ne0, 3, 2, 1][..1 + i % 4].to_vec();
        writer
            .add_tensor(format!("t.{}", dtype.name()), *dtype, &shape)
            .unwrap();
    }
    let mut stream = writer.begin(Vec::new()).unwrap();
    for (i, t) in writer.tensors().iter().enumerate() {
        stream
            .write_tensor(&t.name, &pattern(i, t.size_bytes))
            .unwrap();
    }
    assert_eq!(stream.written(), DType::ALL.len());
    (writer.clone(), stream.finish().unwrap())
}

#[test]
fn every_dtype_round_trips_with_its_data() {
    for alignment in [None, Some(64), Some(1)] {
        let (writer, bytes) = write_every_dtype(alignment);
        assert_eq!(bytes.len() as u64, writer.file_size().unwrap());
        let file = Gguf::from_bytes(bytes).unwrap();
        let align = u64::from(alignment.unwrap_or(32));
        assert_eq!(file.alignment(), align);
        assert_eq!(file.data_offset() % align, 0);
        assert_eq!(file.tensors(), writer.tensors());
        for (i, (t, dtype)) in file.tensors().iter().zip(DType::ALL).enumerate() {
            assert_eq!(t.dtype, dtype);
            assert_eq!(t.n_dims as usize, 1 + i % 4);
            assert_eq!(t.offset % align, 0, "{}", t.name);
            let rows: i64 = t.ne[1..].iter().product();
            assert_eq!(
                t.size_bytes,
                dtype.row_size(t.ne[0] as usize).unwrap() as u64 * rows as u64
            );
            assert_eq!(file.tensor(&t.name), Some(t));
            assert_eq!(
                file.tensor_data(t),
                pattern(i, t.size_bytes).as_slice(),
                "{}",
                t.name
            );
        }
    }
}

#[test]
fn tensor_data_is_a_slice_of_the_file() {
    let (_, bytes) = write_every_dtype(None);
    let file = Gguf::from_bytes(bytes).unwrap();
    let whole = file.bytes().as_ptr_range();
    for t in file.tensors() {
        let data = file.tensor_data(t);
        assert!(whole.contains(&data.as_ptr()));
        assert_eq!(
            data.as_ptr() as usize - whole.start as usize,
            (file.data_offset() + t.offset) as usize
        );
    }
}

#[test]
fn opened_file_maps_tensor_data_from_disk() {
    let (_, bytes) = write_every_dtype(None);
    let path = std::env::temp_dir().join(format!("backplane-gguf-rt-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let file = Gguf::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(file.path(), Some(path.as_path()));
    assert_eq!(file.file_size(), bytes.len() as u64);
    let t = file.tensor("t.q4_K").unwrap();
    let start = (file.data_offset() + t.offset) as usize;
    assert_eq!(
        file.tensor_data(t),
        &bytes[start..start + t.size_bytes as usize]
    );
}

#[test]
fn file_with_tensors_rewrites_byte_for_byte() {
    let (_, original) = write_every_dtype(Some(128));
    let file = Gguf::from_bytes(original.clone()).unwrap();
    let writer = GgufWriter::from_gguf(&file).unwrap();
    let mut stream = writer.begin(Vec::new()).unwrap();
    for t in file.tensors() {
        stream.write_tensor(&t.name, file.tensor_data(t)).unwrap();
    }
    assert!(stream.finish().unwrap() == original);
}

#[test]
fn set_replaces_in_place_and_remove_deletes() {
    let mut writer = GgufWriter::new();
    writer.set("a", 1u32);
    writer.set("b", "two");
    writer.set("c", true);
    writer.set("a", vec![1.0f32, 2.0]);
    writer.remove("b");
    writer.remove("not-there");
    let keys: Vec<&str> = writer.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "c"]);
    assert_eq!(
        writer.get("a"),
        Some(&Value::Array(Array::F32(vec![1.0, 2.0])))
    );
}

#[test]
fn changing_the_alignment_moves_tensor_offsets() {
    let mut writer = GgufWriter::new();
    writer.add_tensor("a", DType::F32, &[3]).unwrap();
    writer.add_tensor("b", DType::F32, &[3]).unwrap();
    assert_eq!(writer.tensors()[1].offset, 32);
    writer.set("general.alignment", 256u32);
    assert_eq!(writer.tensors()[1].offset, 256);
    writer.remove("general.alignment");
    assert_eq!(writer.tensors()[1].offset, 32);
}

fn write_err(result: Result<impl std::fmt::Debug, GgufError>) -> (String, String) {
    match result {
        Err(GgufError::Write { what, reason }) => (what, reason),
        other => panic!("expected a Write error, got {other:?}"),
    }
}

#[test]
fn add_tensor_checks_shape_type_and_name() {
    let mut w = GgufWriter::new();
    w.add_tensor("ok", DType::Q8_0, &[64, 2]).unwrap();
    let cases: [(&str, DType, &[i64], &str); 8] = [
        ("none", DType::F32, &[], "0 dimensions"),
        ("five", DType::F32, &[1, 1, 1, 1, 1], "5 dimensions"),
        ("zero", DType::F32, &[4, 0], "ne[1] is 0"),
        ("neg", DType::F32, &[-4], "ne[0] is -4"),
        (
            "q",
            DType::Q4_K,
            &[128],
            "not a whole number of q4_K blocks",
        ),
        ("ok", DType::F32, &[4], "already added"),
        ("big", DType::F32, &[1 << 40, 1 << 40], "overflows i64"),
        ("huge", DType::F32, &[1 << 61], "past i64::MAX bytes"),
    ];
    for (name, dtype, ne, expected) in cases {
        let (what, reason) = write_err(w.add_tensor(name, dtype, ne));
        assert_eq!(what, format!("tensor '{name}'"));
        assert!(reason.contains(expected), "{name}: {reason}");
    }
    let (_, reason) = write_err(w.add_tensor("n".repeat(64), DType::F32, &[1]));
    assert!(reason.contains("at most 63"), "{reason}");
    assert_eq!(w.tensors().len(), 1);
}

#[test]
fn tensor_stream_checks_order_size_and_completeness() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", DType::F16, &[4]).unwrap();
    w.add_tensor("b", DType::F16, &[4]).unwrap();
    let mut s = w.begin(Vec::new()).unwrap();
    let (_, reason) = write_err(s.write_tensor("b", &[0; 8]));
    assert!(reason.contains("expected tensor[0] 'a' next"), "{reason}");
    let (what, reason) = write_err(s.write_tensor("a", &[0; 7]));
    assert_eq!(what, "tensor 'a'");
    assert!(
        reason.contains("got 7 bytes") && reason.contains("takes 8"),
        "{reason}"
    );
    s.write_tensor("a", &[1; 8]).unwrap();
    let (_, reason) = write_err(s.finish());
    assert!(reason.contains("tensor[1] 'b' is missing"), "{reason}");

    let mut s = w.begin(Vec::new()).unwrap();
    s.write_tensor("a", &[1; 8]).unwrap();
    s.write_tensor("b", &[2; 8]).unwrap();
    let (_, reason) = write_err(s.write_tensor("c", &[]));
    assert!(
        reason.contains("all 2 tensors are already written"),
        "{reason}"
    );
    let bytes = s.finish().unwrap();
    assert_eq!(bytes.len() % 32, 0);
}

#[test]
fn begin_refuses_an_invalid_alignment_and_too_deep_arrays() {
    let mut w = GgufWriter::new();
    w.set("general.alignment", 48u32);
    let (what, _) = write_err(w.begin(Vec::new()).map(|_| ()));
    assert_eq!(what, "general.alignment");
    w.set("general.alignment", 64u64);
    assert!(w.begin(Vec::new()).is_err());

    let mut deep = Array::U8(vec![1]);
    for _ in 0..8 {
        deep = Array::Array(vec![deep]);
    }
    let mut w = GgufWriter::new();
    w.set("deep", deep);
    let (what, reason) = write_err(w.begin(Vec::new()).map(|_| ()));
    assert_eq!(what, "key 'deep'");
    assert!(reason.contains("deeper than 8"), "{reason}");
}

#[test]
fn io_failures_while_writing_are_reported() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let (what, reason) = write_err(GgufWriter::new().begin(Full).map(|_| ()));
    assert_eq!((what.as_str(), reason.as_str()), ("header", "disk full"));
}

fn getters_file() -> Gguf {
    let mut w = GgufWriter::new();
    w.set("u8", 7u8);
    w.set("neg", -1i32);
    w.set("big", u64::MAX);
    w.set("f64", 0.5f64);
    w.set("name", "x");
    w.set("flag", true);
    w.set("floats", vec![1.0f32]);
    w.set("ints", vec![-1i32, 2]);
    w.set("words", vec!["a", "b"]);
    Gguf::from_bytes(w.begin(Vec::new()).unwrap().finish().unwrap()).unwrap()
}

#[test]
fn typed_getters_convert_integers_that_fit() {
    let f = getters_file();
    assert_eq!(f.get_u32("u8").unwrap(), 7);
    assert_eq!(f.get_u64("u8").unwrap(), 7);
    assert_eq!(f.get_i32("neg").unwrap(), -1);
    assert_eq!(f.get_u64("big").unwrap(), u64::MAX);
    assert_eq!(f.get_f32("f64").unwrap(), 0.5);
    assert_eq!(f.get_str("name").unwrap(), "x");
    assert!(f.get_bool("flag").unwrap());
    assert_eq!(f.get_f32_array("floats").unwrap(), &[1.0]);
    assert_eq!(f.get_i32_array("ints").unwrap(), &[-1, 2]);
    assert_eq!(
        f.get_str_array("words").unwrap(),
        &["a".to_string(), "b".to_string()]
    );
    assert_eq!(f.get_array("ints").unwrap().len(), 2);
    assert_eq!(f.get("u8").and_then(Value::as_u64), Some(7));
    assert_eq!(f.get("neg").and_then(Value::as_u64), None);
}

#[test]
fn typed_getters_name_missing_keys_and_wrong_types() {
    let f = getters_file();
    assert!(matches!(f.get_u32("nope"), Err(GgufError::MissingKey { key }) if key == "nope"));
    let wrong = |r: Result<(), GgufError>| match r {
        Err(GgufError::WrongType {
            key,
            expected,
            found,
        }) => (key, expected, found),
        other => panic!("expected WrongType, got {other:?}"),
    };
    assert_eq!(
        wrong(f.get_str("u8").map(|_| ())),
        ("u8".into(), "string", "u8")
    );
    assert_eq!(
        wrong(f.get_u32("name").map(|_| ())),
        ("name".into(), "u32", "string")
    );
    assert_eq!(
        wrong(f.get_bool("u8").map(|_| ())),
        ("u8".into(), "bool", "u8")
    );
    assert_eq!(
        wrong(f.get_f32("u8").map(|_| ())),
        ("u8".into(), "f32", "u8")
    );
    assert_eq!(
        wrong(f.get_str_array("floats").map(|_| ())),
        ("floats".into(), "array<string>", "array<f32>")
    );
    assert_eq!(
        wrong(f.get_i32_array("words").map(|_| ())),
        ("words".into(), "array<i32>", "array<string>")
    );
    assert_eq!(
        wrong(f.get_f32_array("ints").map(|_| ())),
        ("ints".into(), "array<f32>", "array<i32>")
    );
    assert_eq!(
        wrong(f.get_array("name").map(|_| ())),
        ("name".into(), "array", "string")
    );
    let msg = f.get_str("u8").unwrap_err().to_string();
    assert_eq!(msg, "metadata key 'u8' holds u8, expected string");
}

#[test]
fn integers_that_do_not_fit_name_the_key_and_value() {
    let f = getters_file();
    for (result, expected) in [
        (
            f.get_u32("neg").map(u64::from),
            "i32 value -1 does not fit in u32",
        ),
        (f.get_u64("neg"), "i32 value -1 does not fit in u64"),
        (f.get_u32("big").map(u64::from), "does not fit in u32"),
    ] {
        match result {
            Err(GgufError::Invalid {
                field,
                offset,
                reason,
            }) => {
                assert!(field.starts_with("key '"), "{field}");
                assert!(offset > 24);
                assert!(reason.contains(expected), "{reason}");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
}

#[test]
fn tensor_info_reports_shape_and_elements() {
    let t = TensorInfo {
        name: "w".into(),
        dtype: DType::F32,
        n_dims: 2,
        ne: [3, 5, 1, 1],
        offset: 0,
        size_bytes: 60,
    };
    assert_eq!(t.shape(), &[3, 5]);
    assert_eq!(t.n_elements(), 15);
}

#[test]
fn tensors_can_be_written_in_parts() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", DType::Q8_0, &[32, 3]).unwrap();
    w.add_tensor("b", DType::F32, &[1]).unwrap();
    let mut s = w.begin(Vec::new()).unwrap();
    for row in 0..3u8 {
        s.write_tensor_part("a", &[row; 34]).unwrap();
    }
    let (_, reason) = write_err(s.write_tensor_part("b", &[0; 5]));
    assert!(
        reason.contains("5 bytes after 0 already written exceed its size of 4"),
        "{reason}"
    );
    s.write_tensor_part("b", &[9; 2]).unwrap();
    let (_, reason) = write_err(s.write_tensor("b", &[9; 4]));
    assert!(reason.contains("after 2 already written"), "{reason}");
    s.write_tensor_part("b", &[9; 2]).unwrap();
    let file = Gguf::from_bytes(s.finish().unwrap()).unwrap();
    let a = file.tensor("a").unwrap();
    assert_eq!(&file.tensor_data(a)[34..68], &[1u8; 34]);
    assert_eq!(file.tensor_data(file.tensor("b").unwrap()), &[9u8; 4]);
}

#[test]
fn unfinished_part_is_named_by_finish() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", DType::F32, &[8]).unwrap();
    let mut s = w.begin(Vec::new()).unwrap();
    s.write_tensor_part("a", &[0; 12]).unwrap();
    let (_, reason) = write_err(s.finish());
    assert!(
        reason.contains("tensor[0] 'a' is missing (12 of 32 bytes written)"),
        "{reason}"
    );
}

#[test]
fn version_2_can_be_written() {
    let mut w = GgufWriter::new();
    assert_eq!(w.version(), 3);
    let (what, reason) = write_err(w.set_version(1));
    assert_eq!(what, "header");
    assert!(reason.contains("only 2 and 3"), "{reason}");
    w.set_version(2).unwrap();
    w.set("k", 1u32);
    let bytes = w.begin(Vec::new()).unwrap().finish().unwrap();
    assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
    let file = Gguf::from_bytes(bytes).unwrap();
    assert_eq!((file.version(), file.get_u32("k").unwrap()), (2, 1));
}

#[test]
fn data_section_beyond_i64_max_is_refused() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", DType::I8, &[1 << 62]).unwrap();
    let (what, reason) = write_err(w.add_tensor("b", DType::I8, &[1 << 62]));
    assert_eq!(what, "tensor 'b'");
    assert!(reason.contains("past i64::MAX"), "{reason}");
    assert_eq!(w.data_size(), 1 << 62);
}

#[test]
fn gguf_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Gguf>();
    shared::<GgufWriter>();
}
