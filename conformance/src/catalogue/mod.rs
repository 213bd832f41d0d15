//! The case catalogue: for every op, the types and shapes real models use
//! plus edge cases (non-contiguous sources, broadcasting, sizes off block
//! and workgroup multiples, single elements, long rows, in-place forms and
//! every op-param variant), and test-backend-ops' parameter grids for
//! every op ggml has too, mirrored loop for loop ([`Catalogue::grid`];
//! docs/conformance.md compares the counts).
//!
//! One file per op family, named as the op contract's families are
//! (`backplane_abi::contract`): each adds its hand-picked cases, then the
//! grids mirrored from test-backend-ops, in a fixed order.
//!
//! NMSE bounds default to [`NMSE_DEFAULT`]; each looser bound is a named
//! constant saying why.

mod attention;
mod binary;
mod conv;
mod layout;
mod matmul;
mod norm;
mod reduce;
mod rope;
mod softmax;
mod ssm;
mod unary;

use std::collections::HashSet;

use backplane::{DType, GraphError, Op, TensorId};

use crate::case::{BuildFn, Case, CaseBuilder, Work};

/// Index outputs (ARGMAX, ARGSORT, TOP_K) must match exactly.
pub const EXACT: f64 = 0.0;
/// Default NMSE bound: float kernels that compute what the reference does.
pub const NMSE_DEFAULT: f64 = 1e-7;
/// Outputs stored as f16 or bf16: a backend computing in f32 may round a
/// few elements to the neighbouring representable value.
pub const NMSE_HALF_OUT: f64 = 1e-6;
/// MUL_MAT/MUL_MAT_ID: backends quantize activations to q8 (or round them
/// to f16) before the dot products, as ggml does; ggml's own bound.
pub const NMSE_MATMUL: f64 = 5e-4;
/// FLASH_ATTN_EXT: K/V in f16 or quantized and activations rounded to the
/// K/V type before the dot products, as ggml does; ggml's own bound.
pub const NMSE_ATTN: f64 = 5e-4;

/// Collects cases.
#[derive(Default)]
pub struct Catalogue {
    cases: Vec<Case>,
    names: HashSet<String>,
    in_grid: bool,
    ops_with_grid: HashSet<Op>,
}

impl Catalogue {
    /// Every case of every op.
    pub fn all() -> Vec<Case> {
        let mut c = Catalogue::default();
        binary::add(&mut c);
        unary::add(&mut c);
        reduce::add(&mut c);
        layout::add(&mut c);
        matmul::add(&mut c);
        norm::add(&mut c);
        softmax::add(&mut c);
        rope::add(&mut c);
        attention::add(&mut c);
        conv::add(&mut c);
        ssm::add(&mut c);
        c.cases
    }

    /// Runs `add` with every case it pushes marked as part of a grid
    /// mirrored from test-backend-ops ([`Case::grid`]).
    pub fn grid(&mut self, add: fn(&mut Catalogue)) {
        self.in_grid = true;
        add(self);
        self.in_grid = false;
    }

    /// Adds a memory-bound case.
    pub fn push(
        &mut self,
        op: Op,
        name: String,
        nmse: f64,
        build: impl Fn(&mut CaseBuilder) -> Result<TensorId, GraphError> + Send + Sync + 'static,
    ) {
        self.push_work(op, name, nmse, Work::Bytes, build);
    }

    /// Adds a case with an explicit work measure.
    pub fn push_work(
        &mut self,
        op: Op,
        name: String,
        nmse: f64,
        work: Work,
        build: impl Fn(&mut CaseBuilder) -> Result<TensorId, GraphError> + Send + Sync + 'static,
    ) {
        // Parameter sweeps collapse on degenerate shapes (a 1x1x1x1
        // tensor broadcast four ways is one case): keep the first.
        if self.names.insert(name.clone()) {
            let build: BuildFn = Box::new(build);
            let mut case = Case::new(op, name, nmse, work, build);
            case.grid = self.in_grid;
            case.grid_first = self.in_grid && self.ops_with_grid.insert(op);
            self.cases.push(case);
        }
    }

    /// Adds a case that only `perf` runs (too large for the reference).
    pub fn push_perf(
        &mut self,
        op: Op,
        name: String,
        work: Work,
        build: impl Fn(&mut CaseBuilder) -> Result<TensorId, GraphError> + Send + Sync + 'static,
    ) {
        let build: BuildFn = Box::new(build);
        self.cases
            .push(Case::new(op, name, f64::INFINITY, work, build).perf_only());
    }
}

/// NMSE bound for an op whose output has type `dt`.
pub(crate) fn bound_for(dt: DType) -> f64 {
    if matches!(dt, DType::F16 | DType::BF16) {
        NMSE_HALF_OUT
    } else {
        NMSE_DEFAULT
    }
}

/// `[a, b, c, d]` as `a,b,c,d` for case names.
pub(crate) fn dims(ne: &[i64]) -> String {
    ne.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Permutations used for non-contiguous sources.
pub(crate) const PERMS: [[usize; 4]; 3] = [[0, 1, 2, 3], [0, 2, 1, 3], [1, 0, 2, 3]];
