#!/usr/bin/env python3
"""Measures what a GPU's kernels reach against its datasheet, for the
"efficiency" block of a GPU preset (resources/presets/gpus.json):

  gemm_max          fraction of the dense bf16 peak large GEMMs reach
  gemm_half_gflop   GEMM work at which half of gemm_max is reached
  memory_max        fraction of the memory bandwidth a streaming copy reaches
  kernel_launch_us  GPU time of one tiny kernel inside a CUDA graph

It also times transformer-shaped GEMMs (Megatron layers of the models in
tests/data/validation/published-runs.md), fused causal attention, and reads
the SM clock under load. Needs PyTorch with CUDA. Prints one JSON document;
with --out FILE writes it there too.

Usage: python3 bench/calibrate_gpu.py --peak-bf16-tflops 989.4 --bandwidth-gb-s 4800
"""

import argparse
import json
import subprocess
import sys
import threading
import time

try:
    import torch
except ImportError as error:  # a machine without PyTorch: nothing to measure
    torch = None
    TORCH_MISSING = str(error)


def time_cuda(fn, warmup=3, reps=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def gemm_tflops(m, n, k, dtype=None):
    dtype = dtype or torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    seconds = time_cuda(lambda: torch.matmul(a, b))
    return 2.0 * m * n * k / seconds / 1e12, seconds


def sample_clocks(stop, samples):
    while not stop.is_set():
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.draw",
                 "--format=csv,noheader,nounits", "-i", "0"],
                capture_output=True, text=True, timeout=5).stdout.strip()
            samples.append(out)
        except Exception as error:  # nvidia-smi missing: no clock figures
            samples.append(f"error: {error}")
            return
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak-bf16-tflops", type=float, required=True)
    parser.add_argument("--bandwidth-gb-s", type=float, required=True)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.peak_bf16_tflops <= 0 or args.bandwidth_gb_s <= 0:
        parser.error("--peak-bf16-tflops and --bandwidth-gb-s must be above 0")
    # Without a CUDA GPU there is nothing to calibrate: say why and stop
    # (exit 1), rather than a traceback from the first CUDA call.
    if torch is None:
        sys.exit(f"calibrate_gpu.py: needs PyTorch with CUDA ({TORCH_MISSING}): nothing measured")
    if not torch.cuda.is_available():
        sys.exit(f"calibrate_gpu.py: PyTorch {torch.__version__} sees no CUDA GPU: nothing measured")
    peak = args.peak_bf16_tflops
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cuda": torch.version.cuda, "peak_bf16_tflops": peak}

    # Square GEMMs: the size curve.
    square = []
    for size in [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]:
        tf, s = gemm_tflops(size, size, size)
        square.append({"m": size, "n": size, "k": size, "gflop": 2 * size**3 / 1e9,
                       "tflops": tf, "fraction": tf / peak, "seconds": s})
    result["square_gemms"] = square

    # Megatron layer GEMMs, tensor-parallel degree 8 (forward shapes: tokens x out x in).
    shapes = {
        "22B b4 qkv": (8192, 2304, 6144), "22B b4 proj": (8192, 6144, 768),
        "22B b4 fc1": (8192, 3072, 6144), "22B b4 fc2": (8192, 6144, 3072),
        "175B b1 qkv": (2048, 4608, 12288), "175B b1 proj": (2048, 12288, 1536),
        "175B b1 fc1": (2048, 6144, 12288), "175B b1 fc2": (2048, 12288, 6144),
        "530B b1 qkv": (2048, 7680, 20480), "530B b1 proj": (2048, 20480, 2560),
        "530B b1 fc1": (2048, 10240, 20480), "530B b1 fc2": (2048, 20480, 10240),
        "1T b1 qkv": (2048, 9600, 25600), "1T b1 proj": (2048, 25600, 3200),
        "1T b1 fc1": (2048, 12800, 25600), "1T b1 fc2": (2048, 25600, 12800),
        "1T wgrad fc1": (25600, 12800, 2048), "22B wgrad fc1": (6144, 3072, 8192),
        "gpt2-small qkv": (1024, 2304, 768), "gpt2-small fc1": (1024, 3072, 768),
        "llama3-8b b1 fc1 tp1": (8192, 28672, 4096), "llama3-8b b1 qkv tp1": (8192, 6144, 4096),
    }
    layer = []
    for name, (m, n, k) in shapes.items():
        tf, s = gemm_tflops(m, n, k)
        layer.append({"name": name, "m": m, "n": n, "k": k, "gflop": 2 * m * n * k / 1e9,
                      "tflops": tf, "fraction": tf / peak, "seconds": s})
    result["layer_gemms"] = layer

    # Sustained clock while GEMMs run for a few seconds.
    samples = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_clocks, args=(stop, samples))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    sampler.start()
    t0 = time.time()
    reps = 0
    while time.time() - t0 < 6:
        for _ in range(50):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        reps += 50
    elapsed = time.time() - t0
    stop.set()
    sampler.join()
    result["sustained_gemm"] = {"tflops": 2 * 8192**3 * reps / elapsed / 1e12,
                                "clock_samples": samples}

    # Memory: a device-to-device copy reads and writes each byte.
    n = 1 << 30  # 1 Gi elements of bf16 = 2 GiB
    x = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    s = time_cuda(lambda: y.copy_(x))
    copy_rate = 2 * x.numel() * x.element_size() / s
    s = time_cuda(lambda: torch.add(x, x, out=y))
    add_rate = 3 * x.numel() * x.element_size() / s  # two reads (same tensor), one write
    result["memory"] = {"copy_bytes_per_s": copy_rate, "copy_fraction": copy_rate / (args.bandwidth_gb_s * 1e9),
                        "add_bytes_per_s": add_rate, "add_fraction": add_rate / (args.bandwidth_gb_s * 1e9)}
    del x, y

    # Kernel cost: 1000 tiny kernels replayed from a CUDA graph (no Python in between).
    tiny = torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            tiny.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(1000):
            tiny.add_(1)
    s = time_cuda(graph.replay, warmup=2, reps=5)
    eager = time_cuda(lambda: tiny.add_(1), warmup=10, reps=200)
    result["kernel"] = {"graph_us_per_kernel": s / 1000 * 1e6, "eager_us_per_kernel": eager * 1e6}

    # Fused causal attention (PyTorch's flash path), forward and forward+backward.
    attention = []
    for (batch, heads, seq, dim) in [(1, 32, 4096, 128), (4, 8, 2048, 128), (1, 12, 2048, 128), (2, 32, 8192, 128)]:
        q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True)
        v = torch.randn_like(q, requires_grad=True)
        fwd = time_cuda(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        grad = torch.randn_like(out)

        def both():
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.backward(grad)
        fb = time_cuda(both)
        useful = 4 * batch * heads * seq * seq * dim / 2  # causal: half of QK^T and AV
        attention.append({"batch": batch, "heads": heads, "seq": seq, "dim": dim,
                          "forward_tflops": useful / fwd / 1e12,
                          "forward_backward_tflops": 3.5 * useful / fb / 1e12,
                          "forward_fraction": useful / fwd / 1e12 / peak})
    result["causal_attention"] = attention

    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
