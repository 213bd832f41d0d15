//! A server lost under one long-lived scheduler: `kill -9` mid-run, then
//! later graphs on the local CPU (or, strict, an error naming the server),
//! weights left on the dead server named in the error, and the server used
//! again once it is back on its port. Every wait is bounded.

use std::time::{Duration, Instant};

use backplane::examples::weights;
use backplane::sched::{SchedOptions, Scheduler};
use backplane::{Graph, HostTensors};
use backplane_tests::nmse;

use super::{Serve, cpu, env_lock, filled, layers, load, remote_devices, remote_plugin_dir};
use super::{run_layers, set_remote_env};

/// A scheduler over `devices` (the CPU last) and [`layers`] with its
/// weights in the CPU's memory: the ops reading them go to the first
/// device, which copies the weights in at every run (nothing of the graph
/// lives on that device between runs).
fn with_local_weights(
    devices: Vec<backplane::registry::Device>,
    strict: bool,
    host: &HostTensors,
) -> (Scheduler, Graph) {
    let last = devices.len() - 1;
    let mut s = Scheduler::new(devices, options(strict)).unwrap();
    let mut g = layers();
    let w = weights(&g);
    s.place_weights(&mut g, last, &w).unwrap();
    for &t in &w {
        s.upload(&g, t, host.bytes(t)).unwrap();
    }
    (s, g)
}

/// One run of `g` on `s` with every leaf not placed given as an input.
/// Returns the output and the number of nodes on each device.
fn run_routed(
    s: &mut Scheduler,
    g: &Graph,
    host: &HostTensors,
) -> Result<(Vec<f32>, Vec<usize>), String> {
    let inputs: Vec<_> = g
        .ids()
        .filter(|&t| {
            let d = g.desc(t);
            d.op().is_ok_and(|o| o == backplane::Op::None) && d.buffer == 0
        })
        .map(|t| (t, host.bytes(t)))
        .collect();
    let r = g.outputs()[0];
    let mut out = vec![0u8; g.desc(r).nbytes() as usize];
    let plan = s
        .run(g, &inputs, &mut [(r, &mut out)])
        .map_err(|e| e.to_string())?;
    let mut per_device = vec![0usize; s.devices().len()];
    for node in g.compute_nodes() {
        per_device[plan.assignment.backend[node.index()]] += 1;
    }
    Ok((backplane_tests::bytes_f32(&out), per_device))
}

/// Scheduler options under which the remote device takes the ops that
/// read weights in host memory, at any batch.
fn options(strict: bool) -> SchedOptions {
    SchedOptions {
        strict,
        offload_min_batch: Some(1),
        ..SchedOptions::default()
    }
}

/// Runs until a run fails (at most 60 s): the server is killed meanwhile.
fn run_until_failure(s: &mut Scheduler, g: &Graph, host: &HostTensors, want: &[f32]) -> String {
    let t0 = Instant::now();
    loop {
        match run_routed(s, g, host) {
            Ok((got, _)) => assert!(nmse(&got, want) < 1e-10),
            Err(e) => return e,
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no run failed within 60 s of the kill"
        );
    }
}

/// Kills `server` (SIGKILL) from another thread after 300 ms.
fn kill_soon(mut server: Serve) -> std::thread::JoinHandle<Serve> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        server.kill9();
        server
    })
}

#[test]
fn after_kill_9_of_its_server_later_graphs_run_on_the_local_cpu() {
    let _env = env_lock();
    let server = Serve::start();
    set_remote_env(&server.address, "", 10_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let host = filled(&layers());
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    let (mut s, g) = with_local_weights(vec![remote[0].clone(), cpu(&reg)], false, &host);
    let (got, per_device) = run_routed(&mut s, &g, &host).unwrap();
    assert!(nmse(&got, &want) < 1e-10);
    assert_eq!(per_device[1], 0, "all nodes on the server: {per_device:?}");

    let killer = kill_soon(server);
    let err = run_until_failure(&mut s, &g, &host, &want);
    let server = killer.join().unwrap();
    eprintln!("the run during the kill: {err}");
    assert!(err.contains(&server.address), "names the server: {err}");
    assert!(err.contains("of split"), "names the split: {err}");

    // The host goes on, on the CPU.
    let t0 = Instant::now();
    let (got, per_device) = run_routed(&mut s, &g, &host).unwrap();
    assert!(nmse(&got, &want) < 1e-10);
    assert_eq!(
        per_device[0], 0,
        "nothing on the dead server: {per_device:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the fallback run took {:?}",
        t0.elapsed()
    );
    let why = s.lost(0).expect("the remote device is out of service");
    assert!(why.contains(&server.address), "{why}");
}

#[test]
fn strict_mode_after_kill_9_is_an_error_naming_the_server() {
    let _env = env_lock();
    let server = Serve::start();
    set_remote_env(&server.address, "", 10_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let host = filled(&layers());
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    let (mut s, g) = with_local_weights(vec![remote[0].clone(), cpu(&reg)], true, &host);
    run_routed(&mut s, &g, &host).unwrap();

    let killer = kill_soon(server);
    let err = run_until_failure(&mut s, &g, &host, &want);
    let server = killer.join().unwrap();
    assert!(
        err.contains(&server.address) && err.contains("of split"),
        "names the server and the split: {err}"
    );
    for _ in 0..3 {
        let err = run_routed(&mut s, &g, &host).unwrap_err();
        eprintln!("strict, after the kill: {err}");
        assert!(err.contains("strict mode"), "{err}");
        assert!(err.contains(&server.address), "names the server: {err}");
    }
}

#[test]
fn a_server_restarted_on_its_port_is_used_again_and_lost_weights_are_named() {
    let _env = env_lock();
    let server = Serve::start();
    let address = server.address.clone();
    set_remote_env(&address, "", 10_000);
    let reg = load(&remote_plugin_dir());
    let remote = remote_devices(&reg);
    let host = filled(&layers());
    let want = run_layers(vec![cpu(&reg)], &host).unwrap();
    let devices = vec![remote[0].clone(), cpu(&reg)];
    let (mut s, g) = with_local_weights(devices.clone(), false, &host);
    let (_, per_device) = run_routed(&mut s, &g, &host).unwrap();
    assert_eq!(per_device[1], 0, "all nodes on the server: {per_device:?}");
    // A second scheduler with the weights placed on the server.
    let mut placed = Scheduler::new(devices, SchedOptions::default()).unwrap();
    let mut gw = layers();
    let w = weights(&gw);
    placed.place_weights(&mut gw, 0, &w).unwrap();
    for &t in &w {
        placed.upload(&gw, t, host.bytes(t)).unwrap();
    }
    let run_placed = |s: &mut Scheduler| -> Result<Vec<f32>, String> {
        let inputs: Vec<_> = gw
            .ids()
            .filter(|&t| gw.desc(t).op().is_ok_and(|o| o == backplane::Op::None) && !w.contains(&t))
            .map(|t| (t, host.bytes(t)))
            .collect();
        let r = gw.outputs()[0];
        let mut out = vec![0u8; gw.desc(r).nbytes() as usize];
        s.run(&gw, &inputs, &mut [(r, &mut out)])
            .map_err(|e| e.to_string())?;
        Ok(backplane_tests::bytes_f32(&out))
    };
    assert!(nmse(&run_placed(&mut placed).unwrap(), &want) < 1e-10);

    let killer = kill_soon(server);
    run_until_failure(&mut s, &g, &host, &want);
    drop(killer.join().unwrap());
    let (_, per_device) = run_routed(&mut s, &g, &host).unwrap();
    assert_eq!(per_device[0], 0, "{per_device:?}");
    // Weights on the dead server: errors naming it, never a result.
    for _ in 0..2 {
        let err = run_placed(&mut placed).unwrap_err();
        eprintln!("weights on the dead server: {err}");
        assert!(err.contains(&address), "names the server: {err}");
    }

    let _again = Serve::start_at(&address);
    // Reconnected (after the client's backoff) and used again.
    let t0 = Instant::now();
    loop {
        let (got, per_device) = run_routed(&mut s, &g, &host).unwrap();
        assert!(nmse(&got, &want) < 1e-10);
        if per_device[1] == 0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "the restarted server was not used again within 40 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.lost(0).is_none());
    // The weights that were on the old server are named as lost.
    let t0 = Instant::now();
    let err = loop {
        let err = run_placed(&mut placed).unwrap_err();
        if err.contains("lost with the server's session") || t0.elapsed() > Duration::from_secs(40)
        {
            break err;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("weights of the old session: {err}");
    assert!(
        err.contains("lost with the server's session") && err.contains(&address),
        "{err}"
    );
}
