#!/usr/bin/env python3
"""PyTorch side of bench_gpt_step_vs_pytorch: one GPT training step (forward, cross entropy,
backward, AdamW step) on one CPU thread, the same model, init and shapes as tensorplay's nn::GPT.
Prints one JSON line with tokens per second (best of the timed steps' rounds)."""
import argparse
import json
import math
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--context", type=int, default=128)
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--vocab", type=int, default=256)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--warmup", type=int, default=1)
args = parser.parse_args()

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(json.dumps({"error": "PyTorch is missing: " + str(e),
                      "install": "pip install torch --index-url https://download.pytorch.org/whl/cpu"
                                 " (or plain: pip install torch)"}))
    sys.exit(0)

torch.set_num_threads(1)
torch.manual_seed(0)


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
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as tensorplay's GPT
        # GPT-2 initialisation, as GPTImpl::init_weights.
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.startswith("ln_") or ".ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


model = GPT(args.vocab, args.context, args.layers, args.heads, args.width)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
idx = torch.randint(0, args.vocab, (args.batch, args.context))
targets = torch.randint(0, args.vocab, (args.batch * args.context,))


def step():
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, args.vocab), targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(args.warmup):
    step()
best = best_cpu = math.inf
for _ in range(args.steps):
    start, cpu_start = time.perf_counter(), time.thread_time()
    step()
    best_cpu = min(best_cpu, time.thread_time() - cpu_start)
    best = min(best, time.perf_counter() - start)
tokens = args.batch * args.context
# thread_time: with one intra-op thread, PyTorch computes on this (the calling) thread.
print(json.dumps({"side": "pytorch", "torch": torch.__version__, "tokens_per_s": tokens / best,
                  "cpu_tokens_per_s": tokens / best_cpu, "step_s": best}))
