"""Same-run baselines for `conformance perf` on an NVIDIA GPU: cuBLAS
(through PyTorch) for the MUL_MAT perf shapes and PyTorch's
scaled_dot_product_attention for the FLASH_ATTN_EXT prefill shape.
Prints one line per case in TFLOP/s. Needs torch with CUDA."""
import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def bench(fn, flops, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    times.sort()
    return flops / times[len(times) // 2] / 1e12


m, k = 4096, 14336
for dtype, name in [(torch.float32, "f32"), (torch.float16, "f16")]:
    for n in [1, 512]:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        t = bench(lambda: a @ b, 2.0 * m * n * k)
        print(f"torch cuBLAS MUL_MAT {name} m={m} n={n} k={k}: {t:.2f} TFLOP/s")

d, n_kv, n_q, h = 256, 20000, 512, 8
q = torch.randn(1, h, n_q, d, device="cuda", dtype=torch.float16)
kk = torch.randn(1, h, n_kv, d, device="cuda", dtype=torch.float16)
v = torch.randn(1, h, n_kv, d, device="cuda", dtype=torch.float16)
mask = torch.zeros(n_q, n_kv, device="cuda", dtype=torch.float16)
flops = 2.0 * n_q * n_kv * h * 2 * d
t = bench(lambda: F.scaled_dot_product_attention(q, kk, v, attn_mask=mask, scale=1 / 16), flops, reps=10)
print(f"torch SDPA FLASH_ATTN_EXT d={d} q={n_q} kv={n_kv} heads={h} f16 mask: {t:.2f} TFLOP/s")
t = bench(lambda: F.scaled_dot_product_attention(q, kk, v, scale=1 / 16), flops, reps=10)
print(f"torch SDPA FLASH_ATTN_EXT d={d} q={n_q} kv={n_kv} heads={h} f16 no mask: {t:.2f} TFLOP/s")
