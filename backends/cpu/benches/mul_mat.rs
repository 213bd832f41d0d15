//! MUL_MAT throughput on the CPU backend: a 4096 x 14336 weight matrix
//! (M = 4096 rows of K = 14336) times n f32 activation columns, the shapes
//! of ggml's `test-backend-ops perf` figures for a Llama-3-8B FFN.
//!
//! Throughput is reported as elements = 2 * M * N * K flops, so criterion's
//! "Gelem/s" reads as GFLOPS. Run with
//! `cargo bench -p backplane-cpu --bench mul_mat`.
//!
//! Environment knobs: `MUL_MAT_CASES=q4_0_n1,f32_n512` picks cases;
//! `MUL_MAT_CPUTIME=1` prints GFLOPS by wall and by process CPU time
//! instead of running criterion (for a machine shared with other jobs);
//! `MUL_MAT_MICRO=1` times single kernel tiles on cache-resident rows;
//! `MUL_MAT_M` / `MUL_MAT_THREADS` override the row count / thread count,
//! `MUL_MAT_N` the column count of the `_n512` cases.

use std::hint::black_box;
use std::time::Duration;

use backplane_abi::{DType, Op, TensorDesc};
use backplane_cpu::{CpuBackend, CpuConfig};
use backplane_quant::quantize_row;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const M_DEFAULT: i64 = 4096;
const K: i64 = 14336;

/// Weight rows: 4096, or `MUL_MAT_M` (for cache-resident experiments).
fn rows_m() -> i64 {
    std::env::var("MUL_MAT_M")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(M_DEFAULT)
}

/// Zeroed, 64-byte aligned bytes.
fn aligned(n: usize) -> Vec<u64> {
    vec![0u64; n.div_ceil(8) + 8]
}

fn ptr(v: &mut [u64]) -> *mut u8 {
    let p = v.as_mut_ptr().cast::<u8>();
    p.wrapping_add(p.align_offset(64))
}

/// Cheap deterministic values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn bench_case(c: &mut Criterion, cpu: &CpuBackend, ta: DType, n: i64) {
    let m = rows_m();
    let a = TensorDesc::new(ta, [K, m, 1, 1]);
    let b = TensorDesc::new(DType::F32, [K, n, 1, 1]);
    let mut d = TensorDesc::new(DType::F32, [m, n, 1, 1]);
    d.op = Op::MulMat.code();
    d.src[0] = 0;
    d.src[1] = 1;
    let graph = [a, b, d];

    // Weights: 16 distinct quantized rows repeated over all m rows.
    let row = ta.row_size(K as usize).expect("whole blocks");
    let mut a_mem = aligned(row * m as usize);
    let a_ptr = ptr(&mut a_mem);
    let mut distinct = vec![0u8; row * 16];
    for r in 0..16 {
        quantize_row(
            ta,
            &values(r as u64, K as usize),
            &mut distinct[r * row..][..row],
        )
        .expect("quantize");
    }
    for r in 0..m as usize {
        // SAFETY: a_mem holds m rows after the alignment offset.
        unsafe {
            std::ptr::copy_nonoverlapping(
                distinct[(r % 16) * row..].as_ptr(),
                a_ptr.add(r * row),
                row,
            )
        };
    }
    let mut b_mem = aligned(4 * (K * n) as usize);
    let b_ptr = ptr(&mut b_mem);
    let bv = values(99, (K * n) as usize);
    // SAFETY: b_mem holds K * n floats after the alignment offset.
    unsafe { std::ptr::copy_nonoverlapping(bv.as_ptr(), b_ptr.cast::<f32>(), bv.len()) };
    let mut d_mem = aligned(4 * (m * n) as usize);
    let data = [a_ptr, b_ptr, ptr(&mut d_mem)];

    if std::env::var_os("MUL_MAT_CPUTIME").is_some() {
        cpu_time_run(cpu, ta, n, &graph, &data);
        return;
    }
    let mut group = c.benchmark_group("mul_mat");
    group.throughput(Throughput::Elements((2 * m * n * K) as u64));
    if n > 1 {
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(4));
    } else {
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
    }
    group.bench_function(format!("{ta}_m{m}_k{K}_n{n}"), |bench| {
        bench.iter(|| {
            // SAFETY: every pointer covers its tensor, and nothing else uses them.
            unsafe { cpu.compute(black_box(&graph), &data).expect("mul_mat runs") }
        })
    });
    group.finish();
}

/// Process CPU seconds: the run times of all its threads from
/// /proc/self/task/*/schedstat (nanoseconds, exact), if readable.
fn cpu_seconds() -> Option<f64> {
    let mut ns = 0u64;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
        ns += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 * 1e-9)
}

/// With `MUL_MAT_CPUTIME` set: runs the case for about three seconds and
/// prints GFLOPS by wall time and by CPU time times the thread count (what
/// the threads would reach with the cores to themselves, useful when other
/// jobs share the machine).
fn cpu_time_run(cpu: &CpuBackend, ta: DType, n: i64, graph: &[TensorDesc], data: &[*mut u8]) {
    let flops = (2 * graph[0].ne[1] * n * K) as f64;
    // SAFETY: every pointer covers its tensor, and nothing else uses them.
    let once = || unsafe { cpu.compute(black_box(graph), data).expect("mul_mat runs") };
    once();
    let (t0, c0) = (std::time::Instant::now(), cpu_seconds().unwrap_or(0.0));
    let mut iters = 0;
    while t0.elapsed().as_secs_f64() < 3.0 {
        once();
        iters += 1;
    }
    let (wall, cpu_s) = (
        t0.elapsed().as_secs_f64(),
        cpu_seconds().unwrap_or(0.0) - c0,
    );
    let gf = flops * iters as f64 / 1e9;
    println!(
        "{ta:>5} n={n:<4} {:8.2} GFLOPS wall, {:8.2} GFLOPS per {} dedicated threads ({iters} iters)",
        gf / wall,
        gf / cpu_s.max(1e-9) * cpu.n_threads() as f64,
        cpu.n_threads()
    );
}

/// Nanoseconds this thread has run on a CPU, from /proc/thread-self/schedstat.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// With `MUL_MAT_MICRO` set: times one kernel tile on cache-resident rows
/// (K = 2048) and prints on-CPU nanoseconds per weight row and 256 weights.
fn micro() {
    use backplane_cpu::simd;
    let k = 2048usize;
    for ta in [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4_K,
        DType::Q6_K,
    ] {
        let kern = simd::kernels().mat(ta).expect("kernel");
        let vt = backplane_quant::vec_dot_type(ta);
        let (ra, rb) = (
            ta.row_size(k).expect("blocks"),
            vt.row_size(k).expect("blocks"),
        );
        let mut a = vec![0u8; ra * 8];
        let mut b = vec![0u8; rb * 8];
        for r in 0..8 {
            quantize_row(ta, &values(r as u64, k), &mut a[r * ra..][..ra]).expect("quantize");
            quantize_row(vt, &values(r as u64 + 50, k), &mut b[r * rb..][..rb]).expect("quantize");
        }
        for (mr, nr) in [(1, 1), (kern.mr_vec, 1), (kern.mr, kern.nr)] {
            let mut out = vec![0.0f32; 64];
            let bp: Vec<*const u8> = (0..nr).map(|j| b[j * rb..].as_ptr()).collect();
            let cp: Vec<*mut f32> = (0..nr).map(|j| out[j * 8..].as_mut_ptr()).collect();
            // Batches until 0.3 s have passed, long enough for the
            // scheduler's per-tick run-time accounting.
            let mut iters = 0;
            let (t0, c0) = (std::time::Instant::now(), thread_cpu_ns());
            while t0.elapsed().as_secs_f64() < 0.3 {
                for _ in 0..1000 {
                    // SAFETY: rows cover k values, outputs 8 floats per column.
                    unsafe { (kern.tile)(k, black_box(a.as_ptr()), ra, mr, &bp, &cp, false) };
                }
                iters += 1000;
            }
            // On-CPU time when the kernel reports it (other jobs share the
            // machine), else wall time.
            let spent = match (c0, thread_cpu_ns()) {
                (Some(c0), Some(c1)) => (c1 - c0) as f64,
                _ => t0.elapsed().as_nanos() as f64,
            };
            let ns = spent / (iters * mr * nr * k / 256) as f64;
            println!(
                "{ta:>5} tile {mr}x{nr}: {ns:6.2} ns per row-column pair per 256 weights ({:.1} GFLOPS)",
                512.0 / ns
            );
        }
        if let Some(g) = kern.gemm {
            micro_panel(ta, &g, k.min(g.kc));
        }
    }
}

/// Times the packed GEMM's micro-kernel on one packed group of `g.mr`
/// rows and `g.nr` columns, `kc` long (L1/L2-resident), and the packing.
fn micro_panel(ta: DType, g: &backplane_cpu::simd::Gemm, kc: usize) {
    let (ra, rb) = (
        ta.row_size(kc).expect("blocks"),
        g.vt.row_size(kc).expect("blocks"),
    );
    let mut a = vec![0u8; ra * g.mr];
    for r in 0..g.mr {
        quantize_row(ta, &values(r as u64, kc), &mut a[r * ra..][..ra]).expect("quantize");
    }
    let mut b = vec![0u8; rb * g.nr];
    let mut s = vec![0.0f32; 2 * kc / g.vt.block_size() * g.nr];
    let nblk = kc / g.vt.block_size();
    for j in 0..g.nr {
        quantize_row(g.vt, &values(j as u64 + 50, kc), &mut b[j * rb..][..rb]).expect("quantize");
        if g.b_scales {
            backplane_cpu::simd::block_scales(
                &b[j * rb..][..rb],
                &mut s[j * 2 * nblk..][..2 * nblk],
            );
        }
    }
    let mut packed = vec![0u64; (kc * g.group_bytes).div_ceil(8)];
    let dst = packed.as_mut_ptr().cast::<u8>();
    let time = |f: &mut dyn FnMut()| {
        let mut iters = 0usize;
        let (t0, c0) = (std::time::Instant::now(), thread_cpu_ns());
        while t0.elapsed().as_secs_f64() < 0.3 {
            for _ in 0..100 {
                f();
            }
            iters += 100;
        }
        let spent = match (c0, thread_cpu_ns()) {
            (Some(c0), Some(c1)) => (c1 - c0) as f64,
            _ => t0.elapsed().as_nanos() as f64,
        };
        spent / iters as f64
    };
    // SAFETY: a holds g.mr rows of kc elements, dst one packed group.
    let pack_ns = time(&mut || unsafe { (g.pack)(black_box(a.as_ptr()), ra, g.mr, 0, kc, dst) });
    let mut out = vec![0.0f32; g.mr * g.nr];
    let mut b_pack = vec![0.0f32; kc * g.nr];
    if g.b_packed {
        let cols: Vec<*const f32> = (0..g.nr).map(|j| b[j * rb..].as_ptr().cast()).collect();
        // SAFETY: every column holds kc f32 values, b_pack kc * nr floats.
        unsafe { backplane_cpu::simd::pack_columns(&cols, 0, kc, b_pack.as_mut_ptr()) };
    }
    let bp: Vec<*const u8> = (0..g.nr)
        .map(|j| {
            if g.b_packed {
                b_pack.as_ptr().cast()
            } else {
                b[j * rb..].as_ptr()
            }
        })
        .collect();
    let sp: Vec<*const f32> = (0..g.nr).map(|j| s[j * 2 * nblk..].as_ptr()).collect();
    let cp: Vec<*mut f32> = (0..g.nr).map(|j| out[j * g.mr..].as_mut_ptr()).collect();
    // SAFETY: the packed group holds kc elements of g.mr rows, every column
    // kc elements (and their scale pairs), every output g.mr floats.
    let ns = time(&mut || unsafe { (g.panel)(kc, black_box(dst), &bp, &sp, &cp, g.mr, false) });
    let flops = (2 * g.mr * g.nr * kc) as f64;
    // The same with the driver's block of `g.mc` rows (L2-resident groups).
    let groups = g.mc / g.mr;
    let mut block = vec![0u64; (groups * kc * g.group_bytes).div_ceil(8)];
    let bl = block.as_mut_ptr().cast::<u8>();
    for i in 0..groups {
        // SAFETY: each group slot holds kc * group_bytes bytes.
        unsafe { (g.pack)(a.as_ptr(), ra, g.mr, 0, kc, bl.add(i * kc * g.group_bytes)) };
    }
    let ns_l2 = time(&mut || {
        for i in 0..groups {
            // SAFETY: as below, for each group of the block.
            unsafe {
                (g.panel)(
                    kc,
                    black_box(bl.add(i * kc * g.group_bytes)),
                    &bp,
                    &sp,
                    &cp,
                    g.mr,
                    false,
                )
            }
        }
    }) / groups as f64;
    println!(
        "{ta:>5} panel over a {}-row block: {:.1} GFLOPS",
        g.mc,
        flops / ns_l2
    );
    println!(
        "{ta:>5} panel {}x{} kc={kc}: {:.1} GFLOPS; pack {:.2} ns per weight",
        g.mr,
        g.nr,
        flops / ns,
        pack_ns / (g.mr * kc) as f64
    );
}

fn mul_mat(c: &mut Criterion) {
    if std::env::var_os("MUL_MAT_MICRO").is_some() {
        micro();
        return;
    }
    let threads = std::env::var("MUL_MAT_THREADS")
        .ok()
        .and_then(|v| v.parse().ok());
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cpu = CpuBackend::new(CpuConfig {
        n_threads: Some(threads),
    });
    let only = std::env::var("MUL_MAT_CASES").unwrap_or_default();
    // `MUL_MAT_N` replaces the 512-column case's column count.
    let wide = std::env::var("MUL_MAT_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    for n in [1, wide] {
        for ta in [
            DType::F32,
            DType::F16,
            DType::Q4_0,
            DType::Q8_0,
            DType::Q4_K,
        ] {
            let name = format!("{ta}_n{}", if n == 1 { 1 } else { 512 });
            if only.is_empty() || only.split(',').any(|s| s == name) {
                bench_case(c, &cpu, ta, n);
            }
        }
    }
}

criterion_group!(benches, mul_mat);
criterion_main!(benches);
