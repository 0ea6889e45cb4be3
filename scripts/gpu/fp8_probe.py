#!/usr/bin/env python3
"""FP8 GEMMs through PyTorch, for the GPU check: torch._scaled_mm with E4M3
inputs, per-tensor scales and a BF16 result, at the square 1024 shape and at
the worker's 8192x2304x768 layer GEMM (tokens x out x in, the shape its
cuBLASLt call names when it turns FP8 down). PyTorch calls its own cuBLASLt,
so this says whether the GPU, driver and a cuBLASLt do FP8 at all, apart from
the engine's path. Each shape is timed beside a BF16 matmul of the same shape
and checked against it.

Prints one JSON object (one line) whatever fails: a shape that fails carries
its error, and so does the whole probe where torch cannot start.

    python3 scripts/gpu/fp8_probe.py > fp8-probe.json
"""

import json
import sys
import time

SHAPES = [(1024, 1024, 1024), (8192, 2304, 768)]  # m (rows of A), n (columns of B), k


def loaded_cublaslt():
    """The libcublasLt this process mapped (PyTorch's wheel, or a toolkit's)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libcublasLt" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def timed(torch, fn, seconds=0.1):
    """Seconds per call of fn, on the GPU's clock, after a warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1e3, 1e-6)
    reps = max(5, min(200, int(seconds / one)))
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def probe_shape(torch, m, n, k):
    out = {"m": m, "n": n, "k": k}
    try:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        fp8 = torch.float8_e4m3fn
        fmax = torch.finfo(fp8).max
        # Per-tensor scales: the tensor's amax onto E4M3's largest value;
        # _scaled_mm takes the inverse (dequantising) scales.
        scale_a = (a.abs().max().float() / fmax).clamp(min=1e-12)
        scale_b = (b.abs().max().float() / fmax).clamp(min=1e-12)
        a8 = (a.float() / scale_a).to(fp8)
        # The second matrix column-major, as _scaled_mm requires: b8 is k x n
        # with strides (1, k).
        b8 = (b.float() / scale_b).to(fp8).t()
        sa, sb = scale_a.reshape(()), scale_b.reshape(())

        def fp8_mm():
            r = torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            return r[0] if isinstance(r, tuple) else r  # PyTorch < 2.4 also returned amax

        def bf16_mm():
            return a @ b.t()

        result = fp8_mm()
        reference = (a8.float() * sa) @ (b8.float() * sb)
        out["relative_error"] = float((result.float() - reference).norm() / reference.norm())
        flops = 2.0 * m * n * k
        seconds = timed(torch, fp8_mm)
        out.update({"ok": True, "seconds": seconds, "tflops": flops / seconds / 1e12})
        bf16_seconds = timed(torch, bf16_mm)
        out.update({"bf16_seconds": bf16_seconds, "bf16_tflops": flops / bf16_seconds / 1e12})
    except Exception as e:  # reported, not fatal: the next shape still runs
        out.update({"ok": False, "error": f"{type(e).__name__}: {e}"[:500]})
    return out


def main():
    report = {"probe": "torch._scaled_mm", "started": time.time()}
    try:
        import torch

        report["torch"] = torch.__version__
        report["torch_cuda"] = torch.version.cuda
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        major, minor = torch.cuda.get_device_capability()
        report["device"] = torch.cuda.get_device_name()
        report["compute_capability"] = f"{major}.{minor}"
        if (major, minor) < (8, 9):
            raise RuntimeError(f"compute capability {major}.{minor}: no FP8 tensor cores (8.9 on)")
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            raise RuntimeError(f"PyTorch {torch.__version__} has no float8_e4m3fn or _scaled_mm")
        report["shapes"] = [probe_shape(torch, m, n, k) for m, n, k in SHAPES]
        report["cublaslt"] = loaded_cublaslt()
        report["ok"] = all(s.get("ok") for s in report["shapes"])
    except Exception as e:
        report["ok"] = False
        report["error"] = f"{type(e).__name__}: {e}"[:500]
    report["seconds"] = time.time() - report.pop("started")
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
