"""RMSNorm and rotary embedding against transformers' LlamaRMSNorm and LlamaRotaryEmbedding with
apply_rotary_pos_emb: outputs and gradients within 1e-5 relative (float32), for Llama 3's rope
theta and a context longer than the sequence. Relative: the largest absolute difference over the
largest absolute reference value.

Usage: check_llama_parts_transformers.py PEER WORK_DIR (PEER: the gpt2_transformers_peer program).
"""
import os
import subprocess
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (LlamaRMSNorm, LlamaRotaryEmbedding,
                                                      apply_rotary_pos_emb)

LIMIT = 1e-5
PEER, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
torch.set_num_threads(1)
print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)

width, heads, context, time, eps, theta = 96, 4, 64, 40, 1e-6, 500000.0
head_dim = width // heads
try:
    config = LlamaConfig(hidden_size=width, num_attention_heads=heads,
                         max_position_embeddings=context, rms_norm_eps=eps,
                         rope_parameters={"rope_type": "default", "rope_theta": theta})
except TypeError:  # transformers before 5 names it rope_theta
    config = LlamaConfig(hidden_size=width, num_attention_heads=heads,
                         max_position_embeddings=context, rms_norm_eps=eps, rope_theta=theta)

torch.manual_seed(0)
h = (torch.randn(2, time, width) * 3).requires_grad_()
q = torch.randn(2, heads, time, head_dim).requires_grad_()
grad_h, grad_q = torch.randn(2, time, width), torch.randn(2, heads, time, head_dim)
norm = LlamaRMSNorm(width, eps=eps)
with torch.no_grad():
    norm.weight.add_(torch.randn(width) * 0.5)
rope = LlamaRotaryEmbedding(config)

y = norm(h)
cos, sin = rope(q, torch.arange(time)[None, :])
r, _ = apply_rotary_pos_emb(q, q, cos, sin)
((y * grad_h).sum() + (r * grad_q).sum()).backward()
reference = {"rms_norm": y.detach(), "rotary": r.detach(), "d_h": h.grad,
             "d_weight": norm.weight.grad, "d_q": q.grad}

inputs = os.path.join(WORK, "llama_parts_in.safetensors")
outputs = os.path.join(WORK, "llama_parts_out.safetensors")
save_file({"h": h.detach(), "weight": norm.weight.detach(), "q": q.detach(), "grad_h": grad_h,
           "grad_q": grad_q}, inputs)
subprocess.run([PEER, "llama_parts", inputs, outputs, str(eps), str(theta), str(context)],
               check=True)
ours = load_file(outputs)

failed = []
for name, want in reference.items():
    got = ours[name]
    diff = (got - want).abs().max().item()
    scale = want.abs().max().item()
    ok = got.shape == want.shape and diff / scale <= LIMIT
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |diff| {diff:.3e}, max |value| {scale:.3f}, "
          f"relative {diff / scale:.3e} (limit {LIMIT:g})", flush=True)
    if not ok:
        failed.append(name)
if failed:
    print(f"failed: {failed}")
    sys.exit(1)
print("all checks passed")
