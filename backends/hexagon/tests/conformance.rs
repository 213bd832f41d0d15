//! Every conformance case of the ops the backend implements, on the
//! emulated DSP in process and over FastRPC on the libcdsprpc.so test double
//! (the DSP platform layer with its HVX worker threads): each must either
//! pass against the reference kernels or be refused by supports_op (and a
//! refused case names why).

mod common;

use backplane::Op;
use backplane_conformance::{Catalogue, Status, test_case};

const OPS: [Op; 13] = [
    Op::MulMat,
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Scale,
    Op::RmsNorm,
    Op::SoftMax,
    Op::Rope,
    Op::Glu,
    Op::GetRows,
    Op::Cpy,
    Op::Cont,
];

#[test]
fn every_claimed_case_passes_on_the_emulated_dsp() {
    run_all(common::HexagonTarget::new(), "emulated");
}

#[cfg(target_os = "linux")]
#[test]
fn every_claimed_case_passes_over_fastrpc_with_parallel_hvx_threads() {
    run_all(
        common::HexagonTarget::over(common::fastrpc_device("emu_hvx=4")),
        "fastrpc",
    );
}

fn run_all(mut target: common::HexagonTarget, how: &str) {
    let (mut pass, mut refused, mut failed) = (0, 0, Vec::new());
    for case in Catalogue::all()
        .iter()
        .filter(|c| OPS.contains(&c.op) && c.nmse_max.is_finite())
    {
        let r = test_case(case, &mut target);
        match r.status {
            Status::Pass => pass += 1,
            Status::Unsupported => {
                assert!(
                    r.reason.as_deref().is_some_and(|s| !s.is_empty()),
                    "{}: refused without a reason",
                    r.case
                );
                refused += 1;
                if std::env::var_os("HEXAGON_SHOW_REFUSED").is_some() {
                    println!("refused {}: {}", r.case, r.reason.unwrap_or_default());
                }
            }
            Status::Fail => failed.push(format!("{}: {}", r.case, r.reason.unwrap_or_default())),
        }
    }
    println!(
        "hexagon {how}: {pass} passed, {refused} refused, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(pass > 500, "only {pass} cases ran");
}
