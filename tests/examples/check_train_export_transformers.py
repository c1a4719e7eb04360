"""A Llama trained here, exported, loads in transformers with the same logits.

train_gpt trains a Llama (fewer key-value heads than heads, untied head) for 20 steps under
ZBVZeroBubble in 2 processes (tp-launch), each rank writing its stages' part of a Hugging Face
folder (--export); transformers' LlamaForCausalLM.from_pretrained loads the folder with no
missing, unexpected or mismatched tensors, and its logits on random tokens equal tensorplay's
(the same folder read back by llama_transformers_peer) within 1e-4 relative: the largest
absolute difference over the largest absolute logit.

Usage: check_train_export_transformers.py PEER TRAIN_GPT TP_LAUNCH WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

LIMIT = 1e-4
PEER, TRAIN_GPT, TP_LAUNCH, WORK = sys.argv[1:5]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
torch.set_num_threads(1)
transformers.utils.logging.disable_progress_bar()
print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)

folder = os.path.join(WORK, "exported")
run = subprocess.run(
    [TP_LAUNCH, "--nproc-per-node", "2", "--grace-seconds", "2", "--", TRAIN_GPT,
     "--model", "llama", "--kv-heads", "2", "--tie", "false", "--layers", "4", "--width", "32",
     "--heads", "4", "--context", "16", "--batch", "8", "--microbatches", "4", "--stages", "4",
     "--schedule", "ZBVZeroBubble", "--steps", "20", "--val-batches", "1", "--sample-chars", "0",
     "--checkpoint-dir", os.path.join(WORK, "run"), "--export", folder],
    capture_output=True, text=True)
if run.returncode != 0:
    print(run.stdout[-4000:], run.stderr[-4000:])
    print("FAIL: the two-process training run failed")
    sys.exit(1)
print("trained 20 steps under ZBVZeroBubble in 2 processes and exported", flush=True)

with open(os.path.join(folder, "config.json")) as f:
    vocab = json.load(f)["vocab_size"]
torch.manual_seed(0)
tokens = torch.randint(0, vocab, (3, 16))
tokens_path = os.path.join(WORK, "tokens.safetensors")
save_file({"tokens": tokens.float().contiguous()}, tokens_path)
ours_path = os.path.join(WORK, "ours.safetensors")
subprocess.run([PEER, "logits", folder, tokens_path, ours_path], check=True)
ours = load_file(ours_path)["logits"]

model, info = LlamaForCausalLM.from_pretrained(folder, output_loading_info=True)
model.eval()
problems = {k: v for k, v in info.items() if v}
with torch.no_grad():
    reference = model(tokens).logits
diff = (ours - reference).abs().max().item()
scale = reference.abs().max().item()
ok = not problems and ours.shape == reference.shape and diff / scale <= LIMIT
print(f"{'ok  ' if not problems else 'FAIL'} the exported folder loads in transformers: "
      f"{problems or 'every tensor'}")
print(f"{'ok  ' if ok else 'FAIL'} logits: max |diff| {diff:.3e}, max |reference| {scale:.3f}, "
      f"relative {diff / scale:.3e} (limit {LIMIT:g})")
sys.exit(0 if ok else 1)
