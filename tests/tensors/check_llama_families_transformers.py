"""Llama-shaped families and rotary scalings between tensorplay and transformers.

For each case below (random weights, nothing downloaded): Llama with rope_scaling of type llama3,
linear, dynamic and yarn at a context longer than the original rotary window, a head_dim of its
own, Qwen2 (q, k and v biases), Qwen3 (q and k norms per head, a head_dim of its own) and Mistral
(a sliding window longer than the context, and one shorter):
  - a folder written by transformers' save_pretrained (float32) loads in tensorplay, and its
    logits equal transformers' within 1e-5 relative;
  - the loss and the gradients of one step's cross entropy, by name, equal within 1e-4 relative,
    for the model whole and split into 3 pipeline stages trained by 1F1B (PIPELINE_PEER);
  - a folder written by tensorplay loads in transformers with every tensor, as the same class,
    with the same logits within 1e-5 relative;
  - tensorplay's model.safetensors is byte for byte what the safetensors package writes.
Relative: the largest absolute difference over the largest absolute reference value.

Usage: check_llama_families_transformers.py PEER WORK_DIR [PIPELINE_PEER] (PEER: the
llama_transformers_peer program; PIPELINE_PEER: llama_pipeline_peer, whose check is skipped,
saying so, when not given).
"""
import copy
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import peer_checks  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from peer_checks import check, failures, perturb, report  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

LOGITS_LIMIT = 1e-5
GRADS_LIMIT = 1e-4


def peer(*args):
    peer_checks.run(PEER, *args)


PEER, WORK = sys.argv[1], sys.argv[2]
PIPELINE_PEER = sys.argv[3] if len(sys.argv) > 3 and os.path.exists(sys.argv[3]) else None
if PIPELINE_PEER is None:
    print("no llama_pipeline_peer: the gradients of 3 pipeline stages are not checked", flush=True)
os.makedirs(WORK, exist_ok=True)
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()
print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)

SMALL = dict(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
             tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)


def rope(rope_type, theta=10000.0, **parameters):
    return dict(rope_parameters=dict(rope_type=rope_type, rope_theta=theta, **parameters))


# (label, model_type, config fields, sequence length)
CASES = [
    ("llama3", "llama", dict(max_position_embeddings=64, **rope(
        "llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16)), 60),
    ("linear", "llama", dict(max_position_embeddings=64, **rope("linear", factor=4.0)), 60),
    # Dynamic NTK scales past max_position_embeddings, the original window.
    ("dynamic", "llama", dict(max_position_embeddings=16, **rope("dynamic", factor=4.0)), 50),
    ("yarn", "llama", dict(max_position_embeddings=64, **rope(
        "yarn", theta=50000.0, factor=4.0, original_max_position_embeddings=16,
        beta_fast=32.0, beta_slow=1.0)), 60),
    ("yarn_no_original", "llama", dict(max_position_embeddings=48, **rope(
        "yarn", factor=2.0, attention_factor=1.2)), 40),
    ("head_dim", "llama", dict(max_position_embeddings=32, head_dim=24, attention_bias=True,
                               **rope("default")), 30),
    ("qwen2", "qwen2", dict(max_position_embeddings=64, tie_word_embeddings=True, **rope(
        "yarn", theta=1000000.0, factor=4.0, original_max_position_embeddings=16)), 60),
    ("qwen3", "qwen3", dict(max_position_embeddings=48, head_dim=12, **rope("default")), 40),
    ("qwen3_llama3", "qwen3", dict(max_position_embeddings=64, head_dim=32, **rope(
        "llama3", theta=500000.0, factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16)), 60),
    ("mistral", "mistral", dict(max_position_embeddings=40, head_dim=20, sliding_window=64,
                                **rope("default")), 36),
    # A window shorter than the sequence: the band mask.
    ("mistral_window", "mistral", dict(max_position_embeddings=48, sliding_window=12,
                                       **rope("linear", factor=2.0)), 40),
]

for label, model_type, fields, length in CASES:
    sizes = dict(SMALL)
    sizes.update(fields)
    config = AutoConfig.for_model(model_type, **sizes)
    torch.manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (3, length))
    targets = torch.randint(0, config.vocab_size, tokens.shape)
    tokens_path = os.path.join(WORK, f"{label}_tokens.safetensors")
    save_file({"tokens": tokens.float().contiguous(), "targets": targets.float().contiguous()},
              tokens_path)

    # transformers -> tensorplay.
    model = AutoModelForCausalLM.from_config(config)
    perturb(model)
    model.eval()
    folder = os.path.join(WORK, f"{label}_from_transformers")
    model.save_pretrained(folder)
    with torch.no_grad():
        reference = copy.deepcopy(model)(tokens).logits
    out = os.path.join(folder, "tensorplay_logits.safetensors")
    peer("logits", folder, tokens_path, out)
    report(f"{label}: transformers folder, logits here", load_file(out)["logits"], reference,
           LOGITS_LIMIT)
    if (getattr(config, "sliding_window", None) or length) < length:
        # The window matters at this length: attention over every earlier token differs.
        full = copy.deepcopy(config)
        full.sliding_window = None
        unwindowed = AutoModelForCausalLM.from_config(full)
        unwindowed.load_state_dict(model.state_dict())
        unwindowed.eval()
        with torch.no_grad():
            moved = ((unwindowed(tokens).logits - reference).abs().max() /
                     reference.abs().max()).item()
        check(f"{label}: the sliding window matters at {length} tokens", moved > 1e-3,
              f"full attention's logits differ by {moved:.2e} relative")
    if config.rope_parameters["rope_type"] != "default":
        # The scaling matters at this length: unscaled rotary positions give other logits.
        plain = copy.deepcopy(config)
        plain.rope_parameters = {"rope_type": "default",
                                 "rope_theta": config.rope_parameters["rope_theta"]}
        unscaled = AutoModelForCausalLM.from_config(plain)
        unscaled.load_state_dict(model.state_dict())
        unscaled.eval()
        with torch.no_grad():
            moved = ((unscaled(tokens).logits - reference).abs().max() /
                     reference.abs().max()).item()
        check(f"{label}: the scaling matters at {length} tokens", moved > 1e-3,
              f"unscaled logits differ by {moved:.2e} relative")

    # One step's gradients by name.
    trained = copy.deepcopy(model)
    logits = trained(tokens).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab_size),
                                             targets.reshape(-1))
    loss.backward()
    out = os.path.join(WORK, f"{label}_tensorplay_grads.safetensors")
    peer("grads", folder, tokens_path, out)
    ours = load_file(out)
    report(f"{label}: loss here", ours.pop("loss").reshape(1), loss.detach().reshape(1),
           GRADS_LIMIT)
    grads = {name: p.grad for name, p in trained.named_parameters()}
    check(f"{label}: a gradient for each of transformers' {len(grads)} parameters, by name",
          set(grads) == set(ours), str(sorted(set(grads) ^ set(ours))))
    worst = max((((ours[n] - g).abs().max() / g.abs().max()).item(), n)
                for n, g in grads.items() if n in ours)
    report(f"{label}: gradients by name, worst {worst[1]}", ours[worst[1]], grads[worst[1]],
           GRADS_LIMIT)
    if PIPELINE_PEER:
        out = os.path.join(WORK, f"{label}_pipeline_grads.safetensors")
        subprocess.run([PIPELINE_PEER, folder, tokens_path, out], check=True)
        piped = load_file(out)
        report(f"{label}: loss of 3 stages under 1F1B", piped.pop("loss").reshape(1),
               loss.detach().reshape(1), GRADS_LIMIT)
        check(f"{label}: 3 stages give a gradient for each parameter, by name",
              set(grads) == set(piped), str(sorted(set(grads) ^ set(piped))))
        worst = max((((piped[n] - g).abs().max() / g.abs().max()).item(), n)
                    for n, g in grads.items() if n in piped)
        report(f"{label}: gradients of 3 stages by name, worst {worst[1]}", piped[worst[1]],
               grads[worst[1]], GRADS_LIMIT)

    # tensorplay -> transformers.
    config_path = os.path.join(folder, "config.json")
    back = os.path.join(WORK, f"{label}_from_tensorplay")
    out = os.path.join(WORK, f"{label}_tensorplay_logits.safetensors")
    peer("export", config_path, 1, back, tokens_path, out)
    loaded, info = AutoModelForCausalLM.from_pretrained(back, output_loading_info=True)
    loaded.eval()
    problems = {k: v for k, v in info.items() if v}
    check(f"{label}: tensorplay folder loads in transformers as {type(model).__name__}",
          not problems and type(loaded) is type(model),
          str(problems) if problems else type(loaded).__name__)
    def rope_of(c):
        p = dict(c.rope_parameters)
        if p["rope_type"] == "yarn":  # transformers' defaults, written out or not
            p.setdefault("beta_fast", 32.0)
            p.setdefault("beta_slow", 1.0)
        return p
    check(f"{label}: the same rotary parameters", rope_of(loaded.config) == rope_of(model.config),
          f"{rope_of(loaded.config)} vs {rope_of(model.config)}")
    with torch.no_grad():
        reference = loaded(tokens).logits
    report(f"{label}: tensorplay folder, logits in transformers", load_file(out)["logits"],
           reference, LOGITS_LIMIT)

    # Round trip: transformers' folder through tensorplay is the same bytes.
    ours = os.path.join(back, "model.safetensors")
    theirs = os.path.join(WORK, f"{label}_resaved.safetensors")
    save_file(load_file(ours), theirs, metadata={"format": "pt"})
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        same = a.read() == b.read()
    check(f"{label}: model.safetensors is byte for byte the reference writer's", same)

if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
print("all checks passed")
