#!/usr/bin/env python3
"""A few training steps of a small model under DistributedDataParallel with
the NCCL backend, for the GPU check: its kernels, copies and NCCL calls (and
their NVTX ranges) are what `clusterscope profile` records from a PyTorch
program. Needs only PyTorch with CUDA; no data, no downloads.

    torchrun --standalone --nproc_per_node 1 scripts/gpu/torch_ddp_smoke.py
    clusterscope profile --out run.db -- torchrun --standalone --nproc_per_node 2 \\
        scripts/gpu/torch_ddp_smoke.py --steps 30

One process per GPU (NCCL refuses two ranks on one GPU). With one rank NCCL
reduces without launching a kernel, so NCCL kernels appear from two GPUs on.
Rank 0 prints the loss now and then and, at the end, the mean step time after
the first five steps; every rank checks one all-reduce of a known value.
"""

import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument(
        "--profile-steps",
        default="",
        help="FIRST:LAST: call cudaProfilerStart before step FIRST and cudaProfilerStop after "
        "step LAST (as Megatron-LM's --profile does), for clusterscope profile --capture-range "
        "cudaProfilerApi",
    )
    args = parser.parse_args()
    profile_first = profile_last = -1
    if args.profile_steps:
        try:
            profile_first, profile_last = (int(v) for v in args.profile_steps.split(":"))
        except ValueError:
            profile_first = -1
        if profile_first < 0 or profile_last < profile_first:
            print("torch_ddp_smoke: --profile-steps must be FIRST:LAST, 0 <= FIRST <= LAST",
                  file=sys.stderr)
            return 2
    if args.steps < 1 or args.hidden < 8 or args.batch < 1:
        print("torch_ddp_smoke: --steps, --hidden and --batch must be positive", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    if not torch.cuda.is_available():
        print("torch_ddp_smoke: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    if "RANK" not in os.environ:
        print("torch_ddp_smoke: run it under torchrun (RANK is not set)", file=sys.stderr)
        return 2
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same initial weights on every rank
    h = args.hidden
    model = torch.nn.Sequential(
        torch.nn.Linear(h, 4 * h),
        torch.nn.GELU(),
        torch.nn.Linear(4 * h, h),
        torch.nn.LayerNorm(h),
        torch.nn.Linear(h, h),
    ).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=4)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(1234 + rank)
    x = torch.randn(args.batch, h, device=device, generator=generator)
    target = torch.randn(args.batch, h, device=device, generator=generator)
    use_bf16 = args.dtype == "bfloat16"

    times = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        if step == profile_first:
            torch.cuda.profiler.start()
        start = time.perf_counter()
        torch.cuda.nvtx.range_push(f"step {step}")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            loss = F.mse_loss(ddp(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if step == profile_last:
            torch.cuda.profiler.stop()
        if rank == 0 and (step == 0 or (step + 1) % 5 == 0):
            print(f"step {step + 1}/{args.steps} loss {loss.item():.5f}", flush=True)

    # One all-reduce of a known size and value: 2 MiB of bf16 ones.
    ones = torch.ones(1 << 20, device=device, dtype=torch.bfloat16)
    dist.all_reduce(ones)
    torch.cuda.synchronize()
    ok = bool((ones == world).all().item())
    dist.barrier()
    dist.destroy_process_group()
    measured = times[5:] if len(times) > 5 else times
    if rank == 0:
        print(f"mean step time {1e3 * sum(measured) / len(measured):.3f} ms over {len(measured)} steps")
    print(f"rank {rank} of {world}: all-reduce {'ok' if ok else 'WRONG'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
