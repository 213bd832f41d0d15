//! Generates the gRPC messages and services from `proto/backplane.proto`
//! with a vendored `protoc`, so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: the build script has one thread, so nothing reads the
    // environment while it changes; prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/backplane.proto");
    tonic_prost_build::configure().compile_protos(&["proto/backplane.proto"], &["proto"])?;
    Ok(())
}
