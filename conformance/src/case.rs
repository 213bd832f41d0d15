//! A conformance case: a small graph ending in the op under test, with a
//! recipe for filling its leaves.

use backplane::{DType, Graph, GraphError, Op, TensorId};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How a leaf is filled before the case runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Uniform random values in `[lo, hi)`.
    Uniform(f32, f32),
    /// Random integers in `[0, n)` (row indices, positions).
    Index(i64),
    /// A random permutation of distinct values per row (no ties for sorts).
    Distinct,
    /// Distinct random integers in `[0, n)` along each row (scatter indices).
    DistinctIndex(i64),
    /// An attention mask: uniform in [-1, 1) with about a quarter -inf,
    /// never a whole row of -inf.
    Mask,
}

/// Builds the graph of one case.
pub struct CaseBuilder {
    /// The graph being built.
    pub g: Graph,
    /// How each leaf is filled.
    pub fills: Vec<(TensorId, Fill)>,
}

impl CaseBuilder {
    fn new() -> CaseBuilder {
        CaseBuilder {
            g: Graph::new(),
            fills: Vec::new(),
        }
    }

    /// A leaf filled uniformly in [-1, 1).
    pub fn input(&mut self, dt: DType, ne: &[i64]) -> Result<TensorId, GraphError> {
        self.input_with(dt, ne, Fill::Uniform(-1.0, 1.0))
    }

    /// A leaf with an explicit fill.
    pub fn input_with(
        &mut self,
        dt: DType,
        ne: &[i64],
        fill: Fill,
    ) -> Result<TensorId, GraphError> {
        let name = format!("in{}", self.fills.len());
        let t = self.g.input(&name, dt, ne)?;
        self.fills.push((t, fill));
        Ok(t)
    }

    /// A leaf of logical shape `ne` laid out permuted by `perm` (as
    /// test-backend-ops does): a non-contiguous view unless `perm` is the
    /// identity.
    pub fn permuted(
        &mut self,
        dt: DType,
        ne: [i64; 4],
        perm: [usize; 4],
        fill: Fill,
    ) -> Result<TensorId, GraphError> {
        if perm == [0, 1, 2, 3] {
            return self.input_with(dt, &ne, fill);
        }
        let stored = [ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]];
        let t = self.input_with(dt, &stored, fill)?;
        self.g.permute(t, perm)
    }

    /// A leaf of logical shape `ne` as test-backend-ops builds its views: a
    /// tensor `grow[i]` times larger in each dim, viewed at offset 0 with
    /// that tensor's strides (so rows and planes lie apart), then permuted
    /// by `perm` as [`CaseBuilder::permuted`] does.
    pub fn strided(
        &mut self,
        dt: DType,
        ne: [i64; 4],
        grow: [i64; 4],
        perm: [usize; 4],
        fill: Fill,
    ) -> Result<TensorId, GraphError> {
        let stored = [ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]];
        let big = [
            stored[0] * grow[0],
            stored[1] * grow[1],
            stored[2] * grow[2],
            stored[3] * grow[3],
        ];
        let mut t = self.input_with(dt, &big, fill)?;
        if grow != [1; 4] {
            let nb = self.g.desc(t).nb;
            t = self.g.view(t, &stored, &[nb[1], nb[2], nb[3]], 0)?;
        }
        if perm == [0, 1, 2, 3] {
            Ok(t)
        } else {
            self.g.permute(t, perm)
        }
    }
}

/// The sampled tier runs one grid case in this many.
pub const GRID_SAMPLE: u64 = 8;

/// Recipe for one case's graph: returns the node under test.
pub type BuildFn = Box<dyn Fn(&mut CaseBuilder) -> Result<TensorId, GraphError> + Send + Sync>;

/// One conformance case.
pub struct Case {
    /// The op under test.
    pub op: Op,
    /// Unique name: op and its parameters, as `MUL_MAT(type_a=q4_0,m=16,...)`.
    pub name: String,
    /// Largest normalised mean squared error accepted.
    pub nmse_max: f64,
    /// Work per run for perf mode: flops (for compute-bound ops) or bytes.
    pub work: Work,
    /// Too large to check against the reference in `test` mode; timed by
    /// `perf` only.
    pub perf_only: bool,
    /// Part of a grid mirrored from test-backend-ops (rather than the
    /// hand-picked catalogue); the sampled tier runs one in
    /// [`GRID_SAMPLE`] of these.
    pub grid: bool,
    /// The first grid case of its op (always in the sampled tier).
    pub grid_first: bool,
    build: BuildFn,
}

/// What perf mode reports for a case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    /// Floating point operations per run (reported as GFLOPS).
    Flops(f64),
    /// Bytes moved per run, computed from the graph (reported as GB/s).
    Bytes,
}

/// A built case, ready to fill and run.
pub struct BuiltCase {
    /// The graph.
    pub graph: Graph,
    /// The node under test (marked as output).
    pub out: TensorId,
    /// Fills of the leaves.
    pub fills: Vec<(TensorId, Fill)>,
}

impl Case {
    /// A case from its recipe.
    pub fn new(op: Op, name: String, nmse_max: f64, work: Work, build: BuildFn) -> Case {
        Case {
            op,
            name,
            nmse_max,
            work,
            perf_only: false,
            grid: false,
            grid_first: false,
            build,
        }
    }

    /// Marks the case as timed by `perf` only.
    pub fn perf_only(mut self) -> Case {
        self.perf_only = true;
        self
    }

    /// Whether the sampled tier runs this case: every hand-picked case, the
    /// first grid case of each op, and the grid cases whose seed (a hash of
    /// the name) is 0 mod [`GRID_SAMPLE`], a fixed spread over each grid.
    pub fn in_sample(&self) -> bool {
        !self.grid || self.grid_first || self.seed().is_multiple_of(GRID_SAMPLE)
    }

    /// Builds the graph.
    pub fn build(&self) -> Result<BuiltCase, GraphError> {
        let mut b = CaseBuilder::new();
        let out = (self.build)(&mut b)?;
        b.g.mark_output(out)?;
        Ok(BuiltCase {
            graph: b.g,
            out,
            fills: b.fills,
        })
    }

    /// The seed of this case's data: a hash of its name, so data depends on
    /// nothing but the case.
    pub fn seed(&self) -> u64 {
        self.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
        })
    }
}

impl BuiltCase {
    /// Bytes moved by the node under test: its sources' and its own spans.
    pub fn bytes_moved(&self) -> f64 {
        let d = self.graph.desc(self.out);
        let srcs: u64 = self
            .graph
            .sources(self.out)
            .map(|s| self.graph.desc(s).nbytes())
            .sum();
        (srcs + d.nbytes()) as f64
    }

    /// Contiguous bytes for every leaf, generated from `seed`.
    pub fn leaf_data(&self, seed: u64) -> Vec<(TensorId, Vec<u8>)> {
        let mut rng = StdRng::seed_from_u64(seed);
        self.fills
            .iter()
            .map(|&(t, fill)| (t, fill_bytes(&self.graph, t, fill, &mut rng)))
            .collect()
    }
}

fn fill_bytes(g: &Graph, t: TensorId, fill: Fill, rng: &mut StdRng) -> Vec<u8> {
    let d = g.desc(t);
    let dt = g.dtype(t);
    let n = d.nelements() as usize;
    let ne0 = d.ne[0] as usize;
    let values: Vec<f64> = match fill {
        Fill::Uniform(lo, hi) => (0..n).map(|_| rng.random_range(lo..hi) as f64).collect(),
        Fill::Index(max) => (0..n)
            .map(|_| rng.random_range(0..max.max(1)) as f64)
            .collect(),
        Fill::Distinct => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n / ne0 {
                let mut row: Vec<f64> = (0..ne0)
                    .map(|i| (i as f64 - ne0 as f64 / 2.0) / ne0 as f64)
                    .collect();
                for i in (1..row.len()).rev() {
                    row.swap(i, rng.random_range(0..=i));
                }
                v.extend(row);
            }
            v
        }
        Fill::DistinctIndex(max) => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n / ne0 {
                let mut pool: Vec<i64> = (0..max).collect();
                for i in 0..ne0.min(pool.len()) {
                    let j = rng.random_range(i..pool.len());
                    pool.swap(i, j);
                    v.push(pool[i] as f64);
                }
            }
            v
        }
        Fill::Mask => {
            let mut v: Vec<f64> = (0..n)
                .map(|_| {
                    if rng.random_bool(0.25) {
                        f64::NEG_INFINITY
                    } else {
                        rng.random_range(-1.0..1.0)
                    }
                })
                .collect();
            for row in v.chunks_mut(ne0) {
                if row.iter().all(|x| x.is_infinite()) {
                    row[0] = 0.0;
                }
            }
            v
        }
    };
    encode(dt, ne0, &values)
}

/// Encodes values (row-major, rows of `ne0`) as contiguous bytes of `dt`.
pub fn encode(dt: DType, ne0: usize, values: &[f64]) -> Vec<u8> {
    if dt.is_integer() {
        let mut out = Vec::with_capacity(values.len() * dt.type_size());
        for &v in values {
            let i = v as i64;
            match dt {
                DType::I8 => out.extend((i as i8).to_le_bytes()),
                DType::I16 => out.extend((i as i16).to_le_bytes()),
                DType::I32 => out.extend((i as i32).to_le_bytes()),
                _ => out.extend(i.to_le_bytes()),
            }
        }
        return out;
    }
    if dt == DType::F16 {
        return values
            .iter()
            .flat_map(|&v| f16::from_f64(v).to_le_bytes())
            .collect();
    }
    let f: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let row_bytes = dt.row_size(ne0).expect("whole blocks");
    let mut out = vec![0u8; row_bytes * (values.len() / ne0)];
    for (src, dst) in f.chunks(ne0).zip(out.chunks_mut(row_bytes)) {
        backplane::quant::quantize_row(dt, src, dst).expect("row sizes match");
    }
    out
}
