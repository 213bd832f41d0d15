//! External vectors: a manifest written here runs through the CPU backend.

use std::path::Path;

use backplane_conformance::report::run_vectors;
use backplane_conformance::{CpuTarget, Status, Target};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn npy_f32(shape: &[usize], v: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(f32_bytes(v));
    out
}

fn write_case(dir: &Path, expected: &[f32]) {
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [10.0f32, 20.0, 30.0];
    std::fs::write(dir.join("a.npy"), npy_f32(&[2, 3], &a)).unwrap();
    std::fs::write(dir.join("b.bin"), f32_bytes(&b)).unwrap();
    std::fs::write(dir.join("out.bin"), f32_bytes(expected)).unwrap();
    let scale = r#"{"name":"scale","op":"SCALE","op_params":[2.0, 0.5],
        "inputs":[{"dtype":"f32","ne":[3,2],"file":"a.npy"}],
        "output":{"dtype":"f32","ne":[3,2],"file":"scaled.bin"}}"#;
    let scaled: Vec<f32> = a.iter().map(|x| x * 2.0 + 0.5).collect();
    std::fs::write(dir.join("scaled.bin"), f32_bytes(&scaled)).unwrap();
    let manifest = format!(
        r#"{{"cases":[
        {{"name":"add_broadcast","op":"ADD",
          "inputs":[{{"dtype":"f32","ne":[3,2],"file":"a.npy"}},{{"dtype":"f32","ne":[3],"file":"b.bin"}}],
          "output":{{"dtype":"f32","ne":[3,2],"file":"out.bin"}}}},
        {scale},
        {{"name":"bad_shape","op":"MUL_MAT",
          "inputs":[{{"dtype":"f32","ne":[3,2],"file":"a.npy"}},{{"dtype":"f32","ne":[3],"file":"b.bin"}}],
          "output":{{"dtype":"f32","ne":[5],"file":"out.bin"}}}}
        ]}}"#
    );
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("backplane-vectors-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn matching_vectors_pass_and_bad_ones_explain_themselves() {
    let dir = temp_dir("ok");
    write_case(&dir, &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let mut targets: Vec<Box<dyn Target>> = vec![Box::new(CpuTarget::new())];
    let results = run_vectors(&dir, &mut targets).unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].status, Status::Pass, "{:?}", results[0].reason);
    assert_eq!(results[1].status, Status::Pass, "{:?}", results[1].reason);
    assert_eq!(results[2].status, Status::Fail);
    assert!(
        results[2].reason.as_deref().unwrap().contains("MUL_MAT"),
        "{:?}",
        results[2].reason
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn wrong_expected_output_fails() {
    let dir = temp_dir("bad");
    write_case(&dir, &[11.0, 22.0, 33.0, 14.0, 25.0, 99.0]);
    let mut targets: Vec<Box<dyn Target>> = vec![Box::new(CpuTarget::new())];
    let results = run_vectors(&dir, &mut targets).unwrap();
    assert_eq!(results[0].status, Status::Fail);
    assert!(results[0].reason.as_deref().unwrap().starts_with("NMSE"));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn missing_manifest_is_an_error_naming_the_file() {
    let dir = temp_dir("none");
    let mut targets: Vec<Box<dyn Target>> = vec![Box::new(CpuTarget::new())];
    let err = run_vectors(&dir, &mut targets).err().unwrap();
    assert!(err.contains("manifest.json"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}
