//! The runner must catch what it exists to catch: wrong values, NaNs,
//! out-of-bounds writes, refusals, and bad external vectors.

use backplane::{Graph, Op, TensorId};
use backplane_conformance::guarded::GuardedHost;
use backplane_conformance::{Catalogue, CpuTarget, Status, Target, compare, test_case};

/// How a [`Faulty`] target misbehaves.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    WrongValue,
    WriteAfterEnd,
    WriteBeforeStart,
    Refuse,
    Panic,
}

/// A target that runs the reference kernels on guarded memory, then
/// injects one fault.
struct Faulty {
    fault: Fault,
    loaded: Option<(Graph, GuardedHost, TensorId)>,
}

impl Faulty {
    fn new(fault: Fault) -> Faulty {
        Faulty {
            fault,
            loaded: None,
        }
    }
}

impl Target for Faulty {
    fn name(&self) -> String {
        "faulty".into()
    }

    fn supports(&self, _: &Graph, _: TensorId) -> Result<(), String> {
        if self.fault == Fault::Refuse {
            Err("type q9_9 not implemented".into())
        } else {
            Ok(())
        }
    }

    fn load(&mut self, graph: &Graph, leaves: &[(TensorId, Vec<u8>)]) -> Result<(), String> {
        let out = graph.outputs()[0];
        self.loaded = Some((graph.clone(), GuardedHost::new(graph, leaves)?, out));
        Ok(())
    }

    fn compute(&mut self) -> Result<(), String> {
        let (graph, host, out) = self.loaded.as_mut().ok_or("not loaded")?;
        let ptrs = host.pointers();
        // SAFETY: the guarded host covers every tensor of the graph.
        unsafe { backplane_reference::compute_raw(graph.tensors(), &ptrs) }
            .map_err(|e| e.to_string())?;
        let p = ptrs[out.index()];
        let n = graph.desc(*out).nbytes() as usize;
        // SAFETY: the guards are 256 bytes on either side of every tensor, so
        // one byte past either end is still inside the allocation.
        unsafe {
            match self.fault {
                Fault::WrongValue => *p.cast::<f32>() += 1.0,
                Fault::WriteAfterEnd => *p.add(n) = 0,
                Fault::WriteBeforeStart => *p.sub(1) = 0,
                Fault::Panic => panic!("kernel exploded"),
                Fault::None | Fault::Refuse => {}
            }
        }
        Ok(())
    }

    fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String> {
        let (graph, host, _) = self.loaded.as_ref().ok_or("not loaded")?;
        Ok(host.read(graph, t))
    }

    fn guard_violations(&mut self) -> Vec<String> {
        self.loaded
            .as_ref()
            .map(|(g, h, _)| h.violations(g))
            .unwrap_or_default()
    }
}

fn first_case(op: Op) -> backplane_conformance::Case {
    Catalogue::all()
        .into_iter()
        .find(|c| c.op == op && c.name.contains("ne=[10,5,4,3]"))
        .expect("a case")
}

#[test]
fn faithful_target_passes() {
    let r = test_case(&first_case(Op::Add), &mut Faulty::new(Fault::None));
    assert_eq!(r.status, Status::Pass, "{:?}", r.reason);
    assert_eq!(r.nmse, Some(0.0));
}

#[test]
fn wrong_value_fails_with_nmse() {
    let r = test_case(&first_case(Op::Add), &mut Faulty::new(Fault::WrongValue));
    assert_eq!(r.status, Status::Fail);
    assert!(r.reason.unwrap().starts_with("NMSE"));
}

#[test]
fn write_past_either_end_of_output_is_caught() {
    for fault in [Fault::WriteAfterEnd, Fault::WriteBeforeStart] {
        let r = test_case(&first_case(Op::Mul), &mut Faulty::new(fault));
        assert_eq!(r.status, Status::Fail);
        assert!(r.reason.unwrap().contains("out-of-bounds write"));
    }
}

#[test]
fn refusal_is_unsupported_with_reason() {
    let r = test_case(&first_case(Op::Sub), &mut Faulty::new(Fault::Refuse));
    assert_eq!(r.status, Status::Unsupported);
    assert_eq!(r.reason.as_deref(), Some("type q9_9 not implemented"));
}

#[test]
fn panicking_target_fails_without_taking_the_run_down() {
    let r = test_case(&first_case(Op::Div), &mut Faulty::new(Fault::Panic));
    assert_eq!(r.status, Status::Fail);
    assert!(r.reason.unwrap().contains("kernel exploded"));
}

#[test]
fn nan_and_inf_must_match_exactly() {
    assert!(compare(&[1.0, f32::NAN], &[1.0, f32::NAN]).is_ok());
    assert!(compare(&[1.0, f32::INFINITY], &[1.0, f32::INFINITY]).is_ok());
    assert!(
        compare(&[1.0, 2.0], &[1.0, f32::NAN])
            .unwrap_err()
            .contains("element 1")
    );
    assert!(compare(&[f32::NEG_INFINITY], &[f32::INFINITY]).is_err());
    assert!(compare(&[1.0], &[1.0, 2.0]).is_err());
    let nmse = compare(&[3.0, 4.0], &[3.0, 4.5]).unwrap();
    assert!((nmse - 0.25 / 25.0).abs() < 1e-12);
}

#[test]
fn unwritten_output_elements_fail() {
    // The CPU target's memory starts as NaN: a kernel that skipped an
    // element would fail; here we check the fill itself through a no-op target.
    struct Lazy(Option<(Graph, GuardedHost)>);
    impl Target for Lazy {
        fn name(&self) -> String {
            "lazy".into()
        }
        fn supports(&self, _: &Graph, _: TensorId) -> Result<(), String> {
            Ok(())
        }
        fn load(&mut self, g: &Graph, l: &[(TensorId, Vec<u8>)]) -> Result<(), String> {
            self.0 = Some((g.clone(), GuardedHost::new(g, l)?));
            Ok(())
        }
        fn compute(&mut self) -> Result<(), String> {
            Ok(())
        }
        fn read_f32(&mut self, t: TensorId) -> Result<Vec<f32>, String> {
            let (g, h) = self.0.as_ref().unwrap();
            Ok(h.read(g, t))
        }
        fn guard_violations(&mut self) -> Vec<String> {
            Vec::new()
        }
    }
    let r = test_case(&first_case(Op::Add), &mut Lazy(None));
    assert_eq!(r.status, Status::Fail);
    assert!(r.reason.unwrap().contains("got NaN"));
}

#[test]
fn every_op_has_cases() {
    let cases = Catalogue::all();
    for &op in Op::ALL {
        if op == Op::None || op.is_view() {
            continue;
        }
        assert!(cases.iter().any(|c| c.op == op), "no case for {op}");
    }
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "case names must be unique");
}

#[test]
fn cases_build_and_are_deterministic() {
    let cases = Catalogue::all();
    for c in cases.iter().filter(|c| !c.perf_only).step_by(7) {
        let b = c.build().unwrap_or_else(|e| panic!("{}: {e}", c.name));
        // Generating the data of the largest leaves twice is slow in a
        // debug build; every size of generator runs below 1 MiB too.
        let bytes: u64 = b.fills.iter().map(|&(t, _)| b.graph.desc(t).nbytes()).sum();
        if bytes < 1 << 20 {
            assert_eq!(b.leaf_data(c.seed()), b.leaf_data(c.seed()), "{}", c.name);
        }
    }
}

#[test]
fn cpu_target_passes_a_sample() {
    let mut cpu = CpuTarget::new();
    // Debug builds run the f64 reference ~30x slower: leave out the big
    // compute-bound cases (the release runner checks them all).
    let small = |c: &&backplane_conformance::Case| match c.work {
        backplane_conformance::Work::Flops(f) => f < 2e7,
        backplane_conformance::Work::Bytes => true,
    };
    for c in Catalogue::all()
        .iter()
        .filter(|c| !c.perf_only)
        .filter(small)
        .step_by(53)
    {
        let r = test_case(c, &mut cpu);
        assert_ne!(r.status, Status::Fail, "{}: {:?}", c.name, r.reason);
    }
}

#[test]
fn sampled_tier_keeps_every_hand_picked_case_and_part_of_each_grid() {
    let cases = Catalogue::all();
    assert!(
        cases.iter().filter(|c| !c.grid).all(|c| c.in_sample()),
        "hand-picked cases are never sampled out"
    );
    for &op in Op::ALL {
        let grid: Vec<_> = cases.iter().filter(|c| c.op == op && c.grid).collect();
        if grid.len() < 2 * backplane_conformance::case::GRID_SAMPLE as usize {
            continue;
        }
        let kept = grid.iter().filter(|c| c.in_sample()).count();
        assert!(
            kept > 0 && kept < grid.len(),
            "{op}: {kept} of {} grid cases sampled",
            grid.len()
        );
    }
}

#[test]
fn test_backend_ops_grids_reach_ggml_case_counts() {
    // The cases ggml's CPU backend runs for the same ops (llama.cpp
    // 0c1e5709; MUL_MAT_ID its distinct cases), or 4227c9be's where
    // backplane lacks the forms the later version adds (docs/conformance.md).
    let cases = Catalogue::all();
    for (op, ggml) in [
        (Op::FlashAttnExt, 5308),
        (Op::Conv2d, 2030),
        (Op::MulMat, 1329),
        (Op::MulMatId, 929),
        (Op::Cpy, 493),
        (Op::Rope, 470),
        (Op::TopK, 359),
        (Op::Unary, 280),
        (Op::SoftMax, 214),
        (Op::Glu, 196),
        (Op::Add, 141),
        (Op::Sub, 141),
        (Op::Mul, 141),
        (Op::Div, 141),
        (Op::Argsort, 98),
        (Op::Im2col, 92),
        (Op::Cont, 78),
        (Op::Norm, 60),
        (Op::RmsNorm, 51),
        (Op::SsmConv, 45),
        (Op::L2Norm, 30),
        (Op::Repeat, 18),
        (Op::Cumsum, 15),
        (Op::SsmScan, 15),
        (Op::SumRows, 10),
        (Op::Sum, 8),
        (Op::Argmax, 7),
        (Op::Fill, 4),
        (Op::SetRows, 217),
        (Op::GetRows, 97),
        (Op::Concat, 32),
        (Op::Pad, 1),
    ] {
        let n = cases.iter().filter(|c| c.op == op && !c.perf_only).count();
        assert!(n >= ggml, "{op}: {n} cases, ggml has {ggml}");
    }
}
