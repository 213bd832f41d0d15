//! Ops: what the device accepts ([`supports`], with reasons) and how each
//! node is run ([`Exec::run`]), one module per op family, next to its
//! kernel source in `kernels/`.

mod attention;
mod copy;
mod elementwise;
mod matmul;
mod norm;

use std::sync::Arc;

use backplane_abi::contract;
use backplane_abi::support::not_implemented;
pub(crate) use backplane_abi::support::{dtype, sources, want_type};
use backplane_abi::{DType, Op, TensorDesc};

use crate::context::{Ctx, Scratch};
use crate::kernels::{self, Args, Source};
use crate::options::Settings;
use crate::policy::Toggles;
use crate::runtime::{DeviceInfo, Kernel};

/// The backend's name in refusals ([`refused`]).
const BACKEND: &str = "SYCL";

/// The refusal of `what` (an op, or what of one) this backend has no
/// kernel for, in the wording every backend shares.
pub(crate) fn refused(what: impl std::fmt::Display) -> String {
    not_implemented(BACKEND, what)
}

/// Work-group size of the 1-D element-wise launches.
pub const WG: usize = 256;

/// Plain float types the element-wise kernels read and write.
pub(crate) const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Whether `graph[node]` can run on the device, with the reason when not.
pub fn supports(
    graph: &[TensorDesc],
    node: usize,
    info: &DeviceInfo,
    toggles: Toggles,
) -> Result<(), String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the graph ({} tensors)", graph.len()))?;
    let op = d.op().map_err(|e| e.to_string())?;
    let src = sources(graph, d)?;
    // The op's own rules (types, shapes, parameters); the family checks
    // below add only what this device implements.
    contract::check(op, d, &src).map_err(|r| r.to_string())?;
    if d.nbytes() > info.max_alloc_bytes {
        return Err(format!(
            "{} bytes > max allocation {} bytes",
            d.nbytes(),
            info.max_alloc_bytes
        ));
    }
    match op {
        Op::None | Op::View | Op::Reshape | Op::Permute | Op::Transpose => Ok(()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise::supports_binary(d, &src),
        Op::Unary
        | Op::Sqr
        | Op::Sqrt
        | Op::Log
        | Op::Sin
        | Op::Cos
        | Op::Scale
        | Op::Clamp
        | Op::Fill => elementwise::supports_unary(op, d, &src),
        Op::Glu => elementwise::supports_glu(d, &src),
        Op::Cpy | Op::Cont => copy::supports_cpy(d, &src),
        Op::GetRows => copy::supports_get_rows(d, &src),
        Op::SetRows => copy::supports_set_rows(d, &src),
        Op::Norm | Op::RmsNorm | Op::L2Norm => norm::supports_norm(d, &src),
        Op::SoftMax => norm::supports_soft_max(d, &src),
        Op::Rope => norm::supports_rope(d, &src),
        Op::MulMat => matmul::supports(&src, info, toggles),
        Op::FlashAttnExt => attention::supports(d, &src),
        other => Err(refused(other)),
    }
}

/// Whether `graph[node]` runs with its weights (`src[0]`) in the reordered
/// layout ([`crate::reorder`]): a MUL_MAT or GET_ROWS the device supports
/// on a weight the layout holds; otherwise why not.
pub fn runs_reordered(
    graph: &[TensorDesc],
    node: usize,
    info: &DeviceInfo,
    toggles: Toggles,
) -> Result<(), String> {
    let d = graph
        .get(node)
        .ok_or_else(|| format!("node {node} is not in the graph ({} tensors)", graph.len()))?;
    let op = d.op().map_err(|e| e.to_string())?;
    if !matches!(op, Op::MulMat | Op::GetRows) {
        return Err(format!(
            "{op} cannot read weights in the reordered layout (only MUL_MAT and GET_ROWS)"
        ));
    }
    let w = d
        .src(0)
        .and_then(|s| graph.get(s))
        .ok_or_else(|| format!("{op} without its weights"))?;
    let r = crate::reorder::Reorder::for_tensor(w)?;
    // Only where the policy runs a single column of these weights
    // reordered (not where it prefers DMMV: the A770 with q4_0, or
    // prioritize_dmmv), so storing them reordered saves the reorder.
    let column = crate::policy::MulMatShape::dense(r.dtype, w.ne[0], w.ne[1], 1);
    if crate::policy::choose(&info.arch, toggles, &column)
        != Ok(crate::policy::MulMatPath::MmvqReordered)
    {
        return Err(format!(
            "the MUL_MAT policy does not read {} weights reordered on this device",
            r.dtype
        ));
    }
    supports(graph, node, info, toggles)
}

/// Everything a node needs to run.
pub struct Exec<'a> {
    /// The device context.
    pub ctx: &'a Ctx,
    /// The stream's options.
    pub settings: &'a Settings,
    /// The stream's scratch memory.
    pub scratch: &'a Scratch,
    /// The graph.
    pub graph: &'a [TensorDesc],
    /// Device address of each tensor (null when unallocated).
    pub ptrs: &'a [*mut u8],
    /// Whether each tensor lies in a buffer of the reordered layout.
    pub reordered: &'a [bool],
}

impl Exec<'_> {
    /// Runs node `i`.
    pub fn run(&self, i: usize) -> Result<(), String> {
        let d = &self.graph[i];
        let op = d.op().map_err(|e| e.to_string())?;
        self.check_reordered_reads(i, op)?;
        match op {
            Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise::binary(self, i, op),
            Op::Unary
            | Op::Sqr
            | Op::Sqrt
            | Op::Log
            | Op::Sin
            | Op::Cos
            | Op::Scale
            | Op::Clamp
            | Op::Fill => elementwise::unary(self, i, op),
            Op::Glu => elementwise::glu(self, i),
            Op::Cpy | Op::Cont => copy::cpy(self, i),
            Op::GetRows => copy::get_rows(self, i),
            Op::SetRows => copy::set_rows(self, i),
            Op::Norm | Op::RmsNorm | Op::L2Norm => norm::norm(self, i, op),
            Op::SoftMax => norm::soft_max(self, i),
            Op::Rope => norm::rope(self, i),
            Op::MulMat => matmul::mul_mat(self, i),
            Op::FlashAttnExt => attention::flash_attn_ext(self, i),
            other => Err(refused(other)),
        }
    }

    /// Refuses node `i` when it reads a tensor in the reordered layout
    /// other than as the weights of a MUL_MAT or GET_ROWS the layout holds.
    fn check_reordered_reads(&self, i: usize, op: Op) -> Result<(), String> {
        for (k, s) in (0..4).filter_map(|k| Some((k, self.graph[i].src(k)?))) {
            if !self.reordered.get(s).copied().unwrap_or(false) {
                continue;
            }
            let why = if k == 0 && matches!(op, Op::MulMat | Op::GetRows) {
                match crate::reorder::Reorder::for_tensor(&self.graph[s]) {
                    Ok(_) => continue,
                    Err(e) => e,
                }
            } else {
                "only the weights of MUL_MAT and GET_ROWS are read in it".to_string()
            };
            return Err(format!(
                "source {k} (tensor {s}) is in the reordered layout of {}: {why}",
                self.ctx.reorder_name()
            ));
        }
        Ok(())
    }

    /// Whether node `i`'s weights (`src[0]`) are in the reordered layout.
    pub(crate) fn weights_reordered(&self, i: usize) -> bool {
        self.graph[i]
            .src(0)
            .is_some_and(|s| self.reordered.get(s).copied().unwrap_or(false))
    }

    /// Descriptor of node `i`'s source `k`.
    pub(crate) fn src(&self, i: usize, k: usize) -> Option<&TensorDesc> {
        self.graph[i].src(k).map(|s| &self.graph[s])
    }

    /// Standard arguments of node `i`.
    pub(crate) fn args(&self, i: usize) -> Args {
        let srcs: Vec<Option<&TensorDesc>> = (0..4).map(|k| self.src(i, k)).collect();
        Args::new(&self.graph[i], &srcs)
    }

    /// Device address of tensor `t`.
    pub(crate) fn ptr(&self, t: usize) -> Result<*mut u8, String> {
        let p = self.ptrs[t];
        if p.is_null() {
            Err(format!("tensor {t} is not allocated"))
        } else {
            Ok(p)
        }
    }

    /// Launch pointers of node `i`: dst and its first four sources.
    pub(crate) fn node_ptrs(&self, i: usize) -> Result<kernels::Ptrs, String> {
        let dst = self.ptr(i)?;
        let mut p = [dst; 5];
        for k in 0..4 {
            if let Some(s) = self.graph[i].src(k) {
                p[k + 1] = self.ptr(s)?;
            }
        }
        Ok(p)
    }

    /// The kernel `name` of `source`.
    pub(crate) fn kernel(&self, source: Source, name: &'static str) -> Result<Arc<Kernel>, String> {
        self.ctx.library.kernel(&self.ctx.queue, source, name)
    }

    /// Queues `name` with explicit ranges.
    pub(crate) fn launch(
        &self,
        source: Source,
        name: &'static str,
        global: [usize; 3],
        local: [usize; 3],
        ptrs: kernels::Ptrs,
        args: &Args,
    ) -> Result<(), String> {
        let k = self.kernel(source, name)?;
        // SAFETY: every pointer is a checked device address of a tensor of
        // this graph (or scratch memory of this stream) and the kernels stay
        // inside the shapes and strides in `args`.
        unsafe { kernels::launch(&self.ctx.queue, &k, global, local, ptrs, args) }
    }

    /// Queues `name` over `n` work-items (1-D), for node `i`.
    pub(crate) fn launch_1d(
        &self,
        source: Source,
        name: &'static str,
        i: usize,
        n: usize,
        args: &Args,
    ) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        let (g, l) = kernels::range_1d(n, WG);
        self.launch(source, name, g, l, self.node_ptrs(i)?, args)
    }

    /// Queues `name` over `n` work-items (1-D) with explicit pointers.
    pub(crate) fn launch_ptrs(
        &self,
        source: Source,
        name: &'static str,
        n: usize,
        ptrs: kernels::Ptrs,
        args: &Args,
    ) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        let (g, l) = kernels::range_1d(n, WG);
        self.launch(source, name, g, l, ptrs, args)
    }

    /// Reads `len` bytes of device memory (waits for queued work first).
    pub(crate) fn read(&self, p: *const u8, len: usize) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; len];
        self.ctx.queue.wait()?;
        // SAFETY: `p` is a device address covering `len` bytes; the host
        // vector outlives the blocking copy.
        unsafe { self.ctx.queue.memcpy(out.as_mut_ptr(), p, len, true) }?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Architecture;
    use crate::runtime::DeviceKind;

    fn device(arch: &str) -> DeviceInfo {
        DeviceInfo {
            index: 0,
            name: arch.into(),
            vendor: "test".into(),
            driver_version: "0".into(),
            backend: "test".into(),
            platform: "test".into(),
            arch: Architecture::from_name(arch),
            kind: DeviceKind::Gpu,
            device_id: 0,
            compute_units: 1,
            sub_group_sizes: vec![16],
            max_work_group_size: 1024,
            global_mem_bytes: 1 << 30,
            free_mem_bytes: 0,
            local_mem_bytes: 64 << 10,
            max_alloc_bytes: 1 << 30,
            can_compile_sycl: true,
        }
    }

    /// Weights of `t` [64, 16], a column, and `op` reading the weights
    /// (MUL_MAT with the column, or CONT).
    fn graph(t: DType, op: Op) -> Vec<TensorDesc> {
        let w = TensorDesc::new(t, [64, 16, 1, 1]);
        let x = TensorDesc::new(DType::F32, [64, 1, 1, 1]);
        let mut n = match op {
            Op::MulMat => TensorDesc::new(DType::F32, [16, 1, 1, 1]),
            _ => TensorDesc::new(t, [64, 16, 1, 1]),
        };
        n.op = op.code();
        n.src[0] = 0;
        if op == Op::MulMat {
            n.src[1] = 1;
        }
        vec![w, x, n]
    }

    #[test]
    fn weights_are_stored_reordered_only_where_the_policy_reads_them_so() {
        let (b580, a770) = (device("intel_gpu_bmg_g21"), device("intel_gpu_acm_g10"));
        let on = Toggles::default();
        for t in [DType::Q4_0, DType::Q8_0] {
            assert_eq!(runs_reordered(&graph(t, Op::MulMat), 2, &b580, on), Ok(()));
        }
        // The A770 runs q4_0 columns by DMMV, q8_0 reordered.
        let e = runs_reordered(&graph(DType::Q4_0, Op::MulMat), 2, &a770, on).unwrap_err();
        assert!(e.contains("policy"), "{e}");
        assert_eq!(
            runs_reordered(&graph(DType::Q8_0, Op::MulMat), 2, &a770, on),
            Ok(())
        );
        let prio = Toggles {
            prioritize_dmmv: true,
            ..on
        };
        assert!(runs_reordered(&graph(DType::Q4_0, Op::MulMat), 2, &b580, prio).is_err());
        // A CPU device only with enable_reorder.
        let cpu = device("x86_64");
        assert!(runs_reordered(&graph(DType::Q4_0, Op::MulMat), 2, &cpu, on).is_err());
        let forced = Toggles {
            force_reorder: true,
            ..on
        };
        assert_eq!(
            runs_reordered(&graph(DType::Q4_0, Op::MulMat), 2, &cpu, forced),
            Ok(())
        );
    }

    #[test]
    fn other_readers_and_types_are_not_stored_reordered() {
        let b580 = device("intel_gpu_bmg_g21");
        let e = runs_reordered(&graph(DType::Q4_0, Op::Cont), 2, &b580, Toggles::default())
            .unwrap_err();
        assert!(e.contains("only MUL_MAT and GET_ROWS"), "{e}");
        let e = runs_reordered(
            &graph(DType::Q4_K, Op::MulMat),
            2,
            &b580,
            Toggles::default(),
        )
        .unwrap_err();
        assert!(e.contains("reordered layout"), "{e}");
    }
}
