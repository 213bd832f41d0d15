//! The scheduler's `supports_op` questions about a graph reach the server
//! in a few batched round trips, not one per op signature.

use backplane::sched::{SchedOptions, Scheduler};
use backplane_tests::{cpu_plugin, scratch_dir};

use super::set_remote_env;
use super::{Serve, cpu, env_lock, layers, load, remote_devices, remote_plugin_dir};

/// The node counts of the `supports_op` calls in a server's debug log.
fn questions_in_log(text: &str) -> Vec<usize> {
    text.lines()
        .filter(|l| l.contains("supports_op"))
        .filter_map(|l| {
            let rest = &l[l.find("nodes=")? + "nodes=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

#[test]
fn planning_a_graph_asks_the_server_about_its_nodes_in_a_few_round_trips() {
    let _env = env_lock();
    let log = scratch_dir("remote-questions-log").join("serve.err");
    let server = Serve::start_configured(
        &cpu_plugin(),
        &[("BACKPLANE_LOG", "debug".as_ref())],
        Some(&log),
    );
    set_remote_env(&server.address, "", 20_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let mut s =
        Scheduler::new(vec![remote[0].clone(), cpu(&reg)], SchedOptions::default()).unwrap();
    let mut g = layers();
    let w = backplane::examples::weights(&g);
    s.place_weights(&mut g, 0, &w).unwrap();
    let plan = s.explain(&g).unwrap();
    assert!(plan.nodes_per_backend[0] > 0, "{plan}");
    let calls = questions_in_log(&std::fs::read_to_string(&log).unwrap());
    let asked: usize = calls.iter().sum();
    eprintln!(
        "{} supports_op calls for {} signatures of a {}-node graph",
        calls.len(),
        asked,
        g.compute_nodes().count()
    );
    assert!(asked >= 10, "only {asked} signatures asked: {calls:?}");
    assert!(calls.len() <= 3, "{} round trips: {calls:?}", calls.len());
}
