#!/usr/bin/python3
"""The CPU engine against the peer a user would pick instead: PyTorch on the
CPU (Debian's python3-torch), training the same GPT shape on the same batches
from the same initial weights, on one rank and on two ranks
(DistributedDataParallel with the gloo backend against the engine's data
parallelism over MPI).

Prints tokens per second of both and their ratio (target: engine / PyTorch
>= 1.0), and the loss after the same steps.

The engine's initial weights are exported with `clusterscope-worker --steps 0
--dump-weights`; the batches are drawn as the worker's Sampler draws them
(profiler/worker/corpus.cpp) from the same built-in corpus. Both sides use
the same threads per rank (cores / ranks) and the same AdamW settings.

Usage: /usr/bin/python3 bench/cpu_engine_vs_pytorch.py --worker build/bin/clusterscope-worker
"""

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as error:  # the peer is missing: nothing to compare against
    sys.exit(f"cpu_engine_vs_pytorch.py: needs PyTorch (apt-get install python3-torch): {error}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = [os.path.join(ROOT, "resources", "corpus", f) for f in ("seed-article-1.txt", "seed-article-2.txt")]
MASK64 = (1 << 64) - 1


def read_weights(path):
    """The worker's --dump-weights file (profiler/worker/weights_file.cpp)."""
    data = open(path, "rb").read()
    if data[:4] != b"CSW1":
        raise SystemExit(f"{path}: not a weights file")
    (count,) = struct.unpack_from("<I", data, 4)
    offset = 8
    weights = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        name = data[offset:offset + length].decode()
        offset += length
        (numel,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        weights[name] = torch.frombuffer(bytearray(data[offset:offset + 4 * numel]), dtype=torch.float32)
        offset += 4 * numel
    return weights


def sample_batch(text, seq, seed, step, first, count):
    """The worker's Sampler::fill: sample i of a step starts at a position that
    depends only on (seed, step, i)."""
    span = len(text) - seq - 1
    tokens, targets = [], []
    for i in range(count):
        x = (seed ^ (step << 32) ^ (first + i)) & MASK64
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
        x ^= x >> 31
        start = x % span
        tokens.append(list(text[start:start + seq]))
        targets.append(list(text[start + 1:start + seq + 1]))
    return torch.tensor(tokens, dtype=torch.long), torch.tensor(targets, dtype=torch.long)


class Block(nn.Module):
    def __init__(self, c, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(c, eps=1e-5)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c, eps=1e-5)
        self.fc = nn.Linear(c, ffn)
        self.fcproj = nn.Linear(ffn, c)

    def forward(self, x):
        b, t, c = x.shape
        hs = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, hs).transpose(1, 2)
        k = k.view(b, t, self.heads, hs).transpose(1, 2)
        v = v.view(b, t, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """The worker's model (profiler/worker/gpt_model.h): learned positions,
    pre-layer norms, GELU (tanh) MLP, final norm, untied LM head without bias."""

    def __init__(self, vocab, seq, layers, c, heads, ffn):
        super().__init__()
        self.wte = nn.Parameter(torch.zeros(vocab, c))
        self.wpe = nn.Parameter(torch.zeros(seq, c))
        self.blocks = nn.ModuleList(Block(c, heads, ffn) for _ in range(layers))
        self.lnf = nn.LayerNorm(c, eps=1e-5)
        self.lm_head = nn.Linear(c, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.wte[tokens] + self.wpe[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    def load_worker_weights(self, w):
        names = {"wte": self.wte, "wpe": self.wpe, "lnf.weight": self.lnf.weight,
                 "lnf.bias": self.lnf.bias, "lm_head.weight": self.lm_head.weight}
        for i, b in enumerate(self.blocks):
            p = f"h{i}."
            names.update({p + "ln1.weight": b.ln1.weight, p + "ln1.bias": b.ln1.bias,
                          p + "attn.qkv.weight": b.qkv.weight, p + "attn.qkv.bias": b.qkv.bias,
                          p + "attn.proj.weight": b.proj.weight, p + "attn.proj.bias": b.proj.bias,
                          p + "ln2.weight": b.ln2.weight, p + "ln2.bias": b.ln2.bias,
                          p + "mlp.fc.weight": b.fc.weight, p + "mlp.fc.bias": b.fc.bias,
                          p + "mlp.proj.weight": b.fcproj.weight, p + "mlp.proj.bias": b.fcproj.bias})
        if set(names) != set(w):
            raise SystemExit(f"weights differ: {sorted(set(names) ^ set(w))}")
        with torch.no_grad():
            for name, param in names.items():
                param.copy_(w[name].view_as(param))


def torch_rank(rank, world, args, weights_path, port, results):
    torch.set_num_threads(max(1, os.cpu_count() // world))
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    text = b"".join(open(f, "rb").read() for f in CORPUS)
    model = GPT(256, args.seq, args.layers, args.hidden, args.heads, 4 * args.hidden)
    model.load_worker_weights(read_weights(weights_path))
    trained = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    per_rank = args.global_batch // world
    losses, seconds = [], []
    for step in range(args.steps):
        tokens, targets = sample_batch(text, args.seq, args.seed, step, rank * per_rank, per_rank)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = trained(tokens, targets)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        seconds.append(time.perf_counter() - start)
        losses.append(float(mean))
    if rank == 0:
        results.put({"losses": losses, "seconds": seconds})
    if world > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(world, args, weights_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=torch_rank, args=(r, world, args, weights_path, port, results))
             for r in range(world)]
    for p in procs:
        p.start()
    out = results.get()
    for p in procs:
        p.join()
    return out


def shape_args(args):
    return ["--layers", str(args.layers), "--hidden", str(args.hidden), "--heads", str(args.heads),
            "--seq", str(args.seq), "--ffn", str(4 * args.hidden), "--seed", str(args.seed),
            "--lr", repr(args.lr)]


def run_engine(world, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-n", str(world), "--bind-to", "none", args.worker] + shape_args(args) + [
        "--dp", str(world), "--micro-batch", str(args.global_batch // world),
        "--global-batch", str(args.global_batch), "--steps", str(args.steps), "--no-trace"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    losses, seconds = [], []
    for line in out.splitlines():
        j = json.loads(line)
        if j.get("event") == "step" and j.get("rank") == 0:
            losses.append(j["loss"])
            seconds.append(j["step_seconds"])
    return {"losses": losses, "seconds": seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    # What would otherwise end in a traceback, said before anything runs.
    if not (os.path.isfile(args.worker) and os.access(args.worker, os.X_OK)):
        ap.error(f"--worker {args.worker}: not an executable file")
    if args.warmup < 0 or args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must be more than --warmup ({args.warmup}): "
                 "the steps after the warm-up are the ones timed")
    for world in args.ranks:
        if world < 1 or args.global_batch % world:
            ap.error(f"--ranks {world}: --global-batch {args.global_batch} must split evenly "
                     "over the ranks")

    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "initial.bin")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        subprocess.run([args.worker] + shape_args(args) + ["--steps", "0", "--dump-weights", weights],
                       env=env, check=True, capture_output=True)
        tokens = args.global_batch * args.seq
        print(f"GPT {args.layers} layers x {args.hidden} hidden, {args.heads} heads, seq {args.seq}, "
              f"global batch {args.global_batch} ({tokens} tokens/step), {args.steps} steps, "
              f"AdamW lr {args.lr}; PyTorch {torch.__version__}, {os.cpu_count()} cores")
        print(f"{'ranks':>5} {'engine tok/s':>13} {'PyTorch tok/s':>14} {'ratio':>6} "
              f"{'engine loss':>12} {'PyTorch loss':>13} {'max |loss diff|':>16}")
        for world in args.ranks:
            # Alternate the two sides twice; each keeps its faster run.
            best = {}
            for _ in range(2):
                for name, fn in (("engine", lambda: run_engine(world, args)),
                                 ("torch", lambda: run_torch(world, args, weights))):
                    r = fn()
                    r["tok_s"] = tokens / statistics.median(r["seconds"][args.warmup:])
                    if name not in best or r["tok_s"] > best[name]["tok_s"]:
                        best[name] = r
            e, t = best["engine"], best["torch"]
            diff = max(abs(a - b) for a, b in zip(e["losses"], t["losses"]))
            print(f"{world:>5} {e['tok_s']:>13.0f} {t['tok_s']:>14.0f} {e['tok_s'] / t['tok_s']:>6.2f} "
                  f"{e['losses'][-1]:>12.5f} {t['losses'][-1]:>13.5f} {diff:>16.2e}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
