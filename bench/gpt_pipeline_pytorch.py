#!/usr/bin/env python3
"""PyTorch side of bench_train_gpt: train_gpt's GPT (the model of gpt_step_pytorch.py, AdamW,
cross entropy on random character ids) cut at its blocks into the same stages and trained under
torch.distributed.pipelining on CPU: gloo, one process per rank (started here with
torch.multiprocessing), one thread each. Stage 0 holds the embeddings, the last stage ln_f and the
head; the head's weight is its own tensor (PyTorch's pipelining has no weight tied across stages),
which costs the same computation. Prints one JSON line with tokens per second, timed on the rank
hosting the last stage from a barrier after the warm-up steps to the end of the last step."""
import argparse
import datetime
import json
import math
import os
import socket
import sys
import time

# One thread everywhere, set before torch loads its libraries (children inherit it).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

parser = argparse.ArgumentParser()
parser.add_argument("--schedule", default="ZBVZeroBubble", help="1F1B, GPipe or ZBVZeroBubble")
parser.add_argument("--stages", type=int, default=4)
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--width", type=int, default=128)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--context", type=int, default=64)
parser.add_argument("--vocab", type=int, default=96)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--microbatches", type=int, default=8)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--warmup", type=int, default=3)
args = parser.parse_args()

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleZBVZeroBubble)
except ImportError as e:
    print(json.dumps({"error": "PyTorch (with torch.distributed.pipelining) is missing: " + str(e),
                      "install": "pip install torch"}, separators=(",", ":")))
    sys.exit(3)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Stage(nn.Module):
    """Blocks [first, last) of the GPT, with the embeddings on stage 0 and the head on the last."""

    def __init__(self, index, count):
        super().__init__()
        first, last = index * args.layers // count, (index + 1) * args.layers // count
        self.is_first, self.is_last = index == 0, index == count - 1
        if self.is_first:
            self.wte = nn.Embedding(args.vocab, args.width)
            self.wpe = nn.Embedding(args.context, args.width)
        self.blocks = nn.ModuleList([Block(args.width, args.heads) for _ in range(first, last)])
        if self.is_last:
            self.ln_f = nn.LayerNorm(args.width)
            self.lm_head = nn.Linear(args.width, args.vocab, bias=False)
        for name, p in self.named_parameters():  # GPT-2 initialisation, as GPTImpl
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * args.layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, x):
        if self.is_first:
            x = self.wte(x) + self.wpe(torch.arange(x.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x)) if self.is_last else x


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))


def rank_main(rank, world, port, results):
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        v_shape = args.schedule == "ZBVZeroBubble"
        stage_ids = [rank, args.stages - 1 - rank] if v_shape else [rank]
        torch.manual_seed(0)
        cpu = torch.device("cpu")
        stages = [PipelineStage(Stage(s, args.stages), s, args.stages, cpu) for s in stage_ids]
        mb = args.microbatches
        if v_shape:
            schedule = ScheduleZBVZeroBubble(stages, mb, loss_fn=lm_loss)
        elif args.schedule == "GPipe":
            schedule = ScheduleGPipe(stages[0], mb, loss_fn=lm_loss)
        else:
            schedule = Schedule1F1B(stages[0], mb, loss_fn=lm_loss)
        params = [p for stage in stages for p in stage.submod.parameters()]
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
        gen = torch.Generator().manual_seed(7)
        x = torch.randint(0, args.vocab, (args.batch, args.context), generator=gen)
        y = torch.randint(0, args.vocab, (args.batch, args.context), generator=gen)
        hosts_first, hosts_last = 0 in stage_ids, args.stages - 1 in stage_ids
        losses = []

        def step():
            losses.clear()
            feed = (x,) if hosts_first else ()
            if hosts_last:
                schedule.step(*feed, target=y, losses=losses)
            else:
                schedule.step(*feed)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad()

        for _ in range(args.warmup):
            step()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        seconds = time.perf_counter() - start
        if hosts_last:
            loss = sum(float(l.detach()) for l in losses) / len(losses)
            results.put({"seconds": seconds, "loss": loss})
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # spawned ranks import this file too
    world = args.stages // 2 if args.schedule == "ZBVZeroBubble" else args.stages
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(rank_main, args=(world, port, results), nprocs=world, join=True,
                       start_method="spawn")
    result = results.get()
    result.update({"side": "pytorch", "torch": torch.__version__, "schedule": args.schedule,
                   "processes": world, "stages": args.stages,
                   "tokens_per_s": args.batch * args.context * args.steps / result["seconds"]})
    print(json.dumps(result, separators=(",", ":")), flush=True)
