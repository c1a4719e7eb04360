#!/usr/bin/env python3
"""PyTorch side of bench_pipeline_vs_pytorch: the MLP job of bench/mlp_pipeline_job.h (blocks of
Linear(width, width) + ReLU, SGD, MSE loss) under torch.distributed.pipelining in two processes of
one thread each (gloo, started here with torch.multiprocessing), or in this one process on one
thread without a pipeline (--schedule 1proc: the microbatches' forward and backward one after
another, accumulating gradients). Prints one JSON line with samples per second, timed as the
tensorplay side times it: on the rank hosting the last stage, from a barrier after the warm-up
steps to the end of the last step."""
import argparse
import datetime
import json
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
parser.add_argument("--schedule", default="1F1B", help="1F1B, ZBVZeroBubble or 1proc")
parser.add_argument("--width", type=int, default=1024)
parser.add_argument("--blocks", type=int, default=8)
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--microbatches", type=int, default=8)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleZBVZeroBubble
except ImportError as e:
    print(json.dumps({"error": "PyTorch (with torch.distributed.pipelining) is missing: " + str(e),
                      "install": "pip install torch"}, separators=(",", ":")))
    sys.exit(3)

WORLD = 2


def set_one_thread():
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def make_blocks():
    """The whole model's blocks, initialised the same in every process."""
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU())
            for _ in range(args.blocks)]


def make_data():
    gen = torch.Generator().manual_seed(7)
    return (torch.randn(args.batch, args.width, generator=gen),
            torch.randn(args.batch, args.width, generator=gen))


def timed(step, barrier=lambda: None):
    """Seconds for args.steps calls of step after args.warmup untimed ones and a barrier."""
    for _ in range(args.warmup):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    return time.perf_counter() - start


def one_process():
    set_one_thread()
    model = nn.Sequential(*make_blocks())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    x, y = make_data()
    n = args.microbatches

    def step():
        for xs, ys in zip(x.chunk(n), y.chunk(n)):
            (F.mse_loss(model(xs), ys) / n).backward()
        opt.step()
        opt.zero_grad()

    return {"seconds": timed(step)}


def pipeline_rank(rank, port, results):
    set_one_thread()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    try:
        blocks = make_blocks()
        if args.schedule == "1F1B":
            num_stages, stage_ids = WORLD, [rank]
        elif args.schedule == "ZBVZeroBubble":
            num_stages, stage_ids = 2 * WORLD, [rank, 2 * WORLD - 1 - rank]  # V placement
        else:
            raise ValueError("unknown schedule " + args.schedule)
        per_stage = args.blocks // num_stages
        cpu = torch.device("cpu")
        stages = [PipelineStage(nn.Sequential(*blocks[s * per_stage:(s + 1) * per_stage]), s,
                                num_stages, cpu) for s in stage_ids]
        if args.schedule == "1F1B":
            schedule = Schedule1F1B(stages[0], args.microbatches, loss_fn=F.mse_loss)
        else:
            schedule = ScheduleZBVZeroBubble(stages, args.microbatches, loss_fn=F.mse_loss)
        params = [p for stage in stages for p in stage.submod.parameters()]
        opt = torch.optim.SGD(params, lr=args.lr)
        hosts_first = 0 in stage_ids
        hosts_last = num_stages - 1 in stage_ids
        x, y = make_data()
        losses = []

        def step():
            losses.clear()
            feed = (x,) if hosts_first else ()
            if hosts_last:
                schedule.step(*feed, target=y, losses=losses)
            else:
                schedule.step(*feed)
            opt.step()
            opt.zero_grad()

        seconds = timed(step, dist.barrier)
        if hosts_last:
            loss = sum(float(l.detach()) for l in losses) / len(losses)
            results.put({"seconds": seconds, "loss": loss})
    finally:
        dist.destroy_process_group()


def two_processes():
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(pipeline_rank, args=(port, results), nprocs=WORLD, join=True,
                       start_method="spawn")
    return results.get()


if __name__ == "__main__":  # spawned ranks import this file too
    result = one_process() if args.schedule == "1proc" else two_processes()
    result.update({"side": "pytorch", "torch": torch.__version__, "schedule": args.schedule,
                   "samples_per_s": args.batch * args.steps / result["seconds"],
                   "width": args.width, "microbatches": args.microbatches})
    print(json.dumps(result, separators=(",", ":")), flush=True)
