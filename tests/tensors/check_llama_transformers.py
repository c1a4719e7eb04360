"""Llama folders between tensorplay and transformers, both ways, on the same tokens.

For a configuration with fewer key-value heads than heads and an untied head, and one with a
tied head (random weights, nothing downloaded):
  - a folder written by transformers' save_pretrained (float32, and float16 and bfloat16 weights)
    loads in tensorplay, and its logits equal transformers' within 1e-4 relative;
  - the loss and the gradients of one step's cross entropy (float32), by name, equal within 1e-4
    relative;
  - a folder written by tensorplay loads in transformers with no missing, unexpected or
    mismatched tensors, and the logits equal tensorplay's within 1e-4 relative;
  - tensorplay's model.safetensors is byte for byte what the safetensors package writes for the
    same tensors.
Relative: the largest absolute difference over the largest absolute reference value.

Usage: check_llama_transformers.py PEER WORK_DIR (PEER: the llama_transformers_peer program).
"""
import copy
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import peer_checks  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from peer_checks import check, failures, perturb  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

LIMIT = 1e-4


def report(name, ours, reference):
    peer_checks.report(name, ours, reference, LIMIT)


def peer(*args):
    peer_checks.run(PEER, *args)


def make_config(sizes, theta):
    config = LlamaConfig(**sizes, bos_token_id=None, eos_token_id=None)
    if isinstance(getattr(config, "rope_parameters", None), dict):  # transformers 5
        config.rope_parameters["rope_theta"] = theta
    else:  # transformers 4 (an unknown keyword would be kept, not used: set the attribute)
        config.rope_theta = theta
    return config


PEER, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)

configs = {
    "gqa_untied": (dict(vocab_size=101, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=40,
                        rms_norm_eps=1e-5, tie_word_embeddings=False), 500000.0),
    "tied": (dict(vocab_size=97, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=24,
                  rms_norm_eps=1e-6, tie_word_embeddings=True), 10000.0),
}
for label, (sizes, theta) in configs.items():
    config = make_config(sizes, theta)
    torch.manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (3, config.max_position_embeddings - 4))
    targets = torch.randint(0, config.vocab_size, tokens.shape)
    tokens_path = os.path.join(WORK, f"{label}_tokens.safetensors")
    save_file({"tokens": tokens.float().contiguous(), "targets": targets.float().contiguous()},
              tokens_path)

    # transformers -> tensorplay, float32 and 16-bit weights.
    model = LlamaForCausalLM(config)
    perturb(model)
    model.eval()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        stored = copy.deepcopy(model).to(dtype)
        folder = os.path.join(WORK, f"{label}_from_transformers_{str(dtype)[6:]}")
        stored.save_pretrained(folder)
        # The reference computes in float32 with the stored (rounded) weights. Not
        # stored.float(): to(dtype) also rounds the rotary embedding's inv_freq buffer, which no
        # checkpoint holds (it is recomputed from rope_theta), and that rounding alone moves the
        # logits by about 1e-3 relative in bfloat16.
        rounded = copy.deepcopy(model)
        with torch.no_grad():
            for p in rounded.parameters():
                p.copy_(p.to(dtype).float())
            reference = rounded(tokens).logits
        out = os.path.join(folder, "tensorplay_logits.safetensors")
        peer("logits", folder, tokens_path, out)
        report(f"{label}: transformers {str(dtype)[6:]} folder, logits here",
               load_file(out)["logits"], reference)

    # One step's gradients by name.
    folder = os.path.join(WORK, f"{label}_from_transformers_float32")
    trained = copy.deepcopy(model)
    logits = trained(tokens).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab_size),
                                             targets.reshape(-1))
    loss.backward()
    out = os.path.join(WORK, f"{label}_tensorplay_grads.safetensors")
    peer("grads", folder, tokens_path, out)
    ours = load_file(out)
    report(f"{label}: loss here", ours.pop("loss").reshape(1), loss.detach().reshape(1))
    grads = {name: p.grad for name, p in trained.named_parameters()}
    check(f"{label}: a gradient for each of transformers' {len(grads)} parameters, by name",
          set(grads) == set(ours), str(sorted(set(grads) ^ set(ours))))
    worst = max((((ours[n] - g).abs().max() / g.abs().max()).item(), n)
                for n, g in grads.items() if n in ours)
    report(f"{label}: gradients by name, worst {worst[1]}", ours[worst[1]], grads[worst[1]])

    # tensorplay -> transformers.
    config_path = os.path.join(WORK, f"{label}_config.json")
    with open(config_path, "w") as f:
        json.dump(config.to_dict(), f)
    folder = os.path.join(WORK, f"{label}_from_tensorplay")
    out = os.path.join(WORK, f"{label}_tensorplay_logits.safetensors")
    peer("export", config_path, 1, folder, tokens_path, out)
    loaded, info = LlamaForCausalLM.from_pretrained(folder, output_loading_info=True)
    loaded.eval()
    problems = {k: v for k, v in info.items() if v}
    check(f"{label}: tensorplay folder loads in transformers with every tensor", not problems,
          str(problems) if problems else "no missing, unexpected or mismatched tensors")
    check(f"{label}: the head is tied as configured",
          (loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr())
          == sizes["tie_word_embeddings"])
    with torch.no_grad():
        reference = loaded(tokens).logits
    report(f"{label}: tensorplay folder, logits in transformers", load_file(out)["logits"],
           reference)

    # The safetensors package writes the same bytes for the same tensors.
    ours = os.path.join(folder, "model.safetensors")
    theirs = os.path.join(WORK, f"{label}_resaved.safetensors")
    save_file(load_file(ours), theirs, metadata={"format": "pt"})
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        same = a.read() == b.read()
    check(f"{label}: model.safetensors is byte for byte the reference writer's", same)

if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
print("all checks passed")
