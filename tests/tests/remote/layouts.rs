//! A server CPU's repacked weight layout through the remote plugin: the
//! remote device offers it as an extra buffer type, the model loader puts
//! the server's weights there, and the logits equal the local run (the
//! same repacked kernels on both sides).

use backplane_testmodel::{Arch, FileType, ModelSpec, write_model};
use backplane_tests::scratch_dir;

use super::{
    Serve, best_cpu_plugin, env_lock, load, remote_devices, remote_plugin_dir, set_remote_env,
    split_model_matches_local,
};

/// The layouts of the first remote device, by the plugin's names.
fn remote_layouts() -> Vec<String> {
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    remote[0]
        .extra_buffer_types()
        .iter()
        .map(|b| b.name())
        .collect()
}

#[test]
fn tiny_q4_0_model_with_repacked_weights_on_the_server_gives_the_local_logits() {
    let _env = env_lock();
    let dir = scratch_dir("remote-layouts-model");
    let spec = ModelSpec::tiny(Arch::Llama, FileType::Q4_0);
    let path = dir.join(spec.file_name());
    write_model(&spec, &path).unwrap();
    let log = scratch_dir("remote-layouts-log").join("serve.err");
    // With a model store: the weights the server holds are filled from its
    // own copy, through the layout's conversion.
    let server = Serve::start_configured(
        &best_cpu_plugin(),
        &[
            ("BACKPLANE_LOG", "debug".as_ref()),
            ("BACKPLANE_SERVE_MODELS", dir.as_os_str()),
        ],
        Some(&log),
    );
    set_remote_env(&server.address, "", 60_000);
    let layouts = remote_layouts();
    if !layouts.iter().any(|n| n.ends_with(":cpu_repack")) {
        eprintln!("the server's CPU offers no repacked layout ({layouts:?}); skipped");
        return;
    }
    assert_eq!(layouts, ["remote-r0-cpu-cpu:cpu_repack"]);
    split_model_matches_local(&path, 64, &(1..12).collect::<Vec<_>>(), &[5, 9]);
    let text = std::fs::read_to_string(&log).unwrap();
    let repacked = text
        .lines()
        .filter(|l| l.contains("alloc") && l.contains("buffer_type=cpu_repack"))
        .count();
    assert!(
        repacked >= 1,
        "no weights allocated in cpu_repack on the server:\n{text}"
    );
    // The questions about ops reading the layout went in one batch.
    let layout_questions = text
        .lines()
        .filter(|l| l.contains("supports_op") && l.contains("buffer_type=cpu_repack"))
        .count();
    assert!(
        (1..=2).contains(&layout_questions),
        "{layout_questions} calls asking about cpu_repack:\n{text}"
    );
    let filled = text.matches("filled from the model store").count();
    assert!(
        filled >= 4,
        "only {filled} tensors came from the server's copy:\n{text}"
    );
}
