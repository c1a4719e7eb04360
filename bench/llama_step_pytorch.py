#!/usr/bin/env python3
"""PyTorch side of bench_llama_step_vs_pytorch: one training step (forward, cross entropy,
backward, AdamW step) of transformers' LlamaForCausalLM on one CPU thread, the sizes of
tensorplay's nn::Llama in the benchmark, built from a config with random weights (nothing
downloaded), with eager attention and with SDPA. Prints one JSON line with the faster one's
tokens per second (best of the timed steps)."""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

parser = argparse.ArgumentParser()
for name, default in (("layers", 4), ("width", 256), ("heads", 4), ("kv-heads", 2),
                      ("mlp-width", 688), ("context", 128), ("batch", 16), ("vocab", 256),
                      ("steps", 3), ("warmup", 1)):
    parser.add_argument("--" + name, type=int, default=default)
args = parser.parse_args()

try:
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(json.dumps({"error": "torch or transformers is missing: " + str(e),
                      "install": "bash scripts/make_torch_venv.sh"}))
    sys.exit(0)

torch.set_num_threads(1)


def measure(attention):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.width,
                         intermediate_size=args.mlp_width, num_hidden_layers=args.layers,
                         num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                         max_position_embeddings=args.context, tie_word_embeddings=False,
                         bos_token_id=None, eos_token_id=None, use_cache=False)
    config._attn_implementation = attention
    model = LlamaForCausalLM(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    idx = torch.randint(0, args.vocab, (args.batch, args.context))
    targets = torch.randint(0, args.vocab, (args.batch * args.context,))

    def step():
        logits = model(input_ids=idx, use_cache=False).logits
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
    return best, best_cpu


import transformers  # noqa: E402

tokens = args.batch * args.context
results = {attention: measure(attention) for attention in ("eager", "sdpa")}
fastest = min(results, key=lambda a: results[a][0])
best, best_cpu = results[fastest]
print(json.dumps({"side": "pytorch", "torch": torch.__version__,
                  "transformers": transformers.__version__, "attention": fastest,
                  "tokens_per_s": tokens / best, "cpu_tokens_per_s": tokens / best_cpu,
                  "eager_tokens_per_s": tokens / results["eager"][0],
                  "sdpa_tokens_per_s": tokens / results["sdpa"][0], "step_s": best}))
