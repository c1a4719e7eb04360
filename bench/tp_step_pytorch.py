#!/usr/bin/env python3
"""PyTorch side of bench_tp_vs_pytorch: one training step (forward, mean of squares, backward,
AdamW step) of a stack of GPT blocks split by PyTorch's parallelize_module (ColwiseParallel and
RowwiseParallel, Megatron's split) over 2 CPU processes on gloo, one thread each: bench_tp_step's
model and step. Prints one JSON line: the median step time of the slower rank."""
import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--width", type=int, default=1024)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--time", type=int, default=64)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--warmup", type=int, default=2)
parser.add_argument("--port", type=int, default=29517)
args = parser.parse_args()

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
except ImportError as e:
    print(json.dumps({"error": "PyTorch is missing: " + str(e),
                      "install": "scripts/make_torch_venv.sh"}))
    sys.exit(0)

WORLD = 2


class Attention(nn.Module):
    """The GPT's attention with q, k and v as three projections, so ColwiseParallel gives each
    rank whole heads (tensorplay splits its fused c_attn part by part to the same effect)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)  # local: this rank's heads
        local = q.shape[-1]
        heads = self.heads * local // x.shape[-1]
        q, k, v = (t.view(B, T, heads, local // heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, local))


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def rank_main(rank, queue):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    blocks = nn.Sequential(*[Block(args.width, args.heads) for _ in range(args.layers)])
    plan = {}
    for i in range(args.layers):
        for name in ("q", "k", "v"):
            plan[f"{i}.attn.{name}"] = ColwiseParallel()
        plan[f"{i}.attn.c_proj"] = RowwiseParallel()
        plan[f"{i}.mlp.c_fc"] = ColwiseParallel()
        plan[f"{i}.mlp.c_proj"] = RowwiseParallel()
    parallelize_module(blocks, mesh["tp"], plan)
    opt = torch.optim.AdamW(blocks.parameters(), foreach=False)
    torch.manual_seed(1)
    x = torch.randn(args.batch, args.time, args.width)
    times = []
    for i in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        blocks(x).square().mean().backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    timed = sorted(times[args.warmup:])
    queue.put((rank, timed[len(timed) // 2]))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, queue)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        print(json.dumps({"error": "a PyTorch rank failed"}))
        sys.exit(1)
    results = dict(queue.get() for _ in range(WORLD))
    print(json.dumps({"run": "pytorch_tp2", "torch": torch.__version__,
                      "step_ms": max(results.values()),
                      "rank_step_ms": [results[r] for r in range(WORLD)]}))
