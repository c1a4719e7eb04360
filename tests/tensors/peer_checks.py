"""What the checks against transformers share: a line per comparison, the failures kept for the
exit status, the peer program run, and weights moved away from their initial values.

Each check script imports this module from its own folder (Python puts the script's folder first
on sys.path).
"""
import subprocess

import torch

failures = []


def report(name, ours, reference, limit):
    """Compares `ours` with `reference`: the largest absolute difference over the largest absolute
    reference value must be at most `limit`, and the shapes equal."""
    diff = (ours - reference).abs().max().item()
    scale = reference.abs().max().item()
    relative = diff / scale
    ok = relative <= limit and ours.shape == reference.shape
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |diff| {diff:.3e}, "
          f"max |reference| {scale:.3f}, relative {relative:.3e} (limit {limit:g})", flush=True)
    if not ok:
        failures.append(name)


def check(name, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not condition:
        failures.append(name)


def run(program, *args):
    """Runs the peer `program` with `args`; a failure ends the check."""
    subprocess.run([program, *map(str, args)], check=True)


def perturb(model):
    """Norms away from 1 and biases away from 0, so that each mapping shows in the logits."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
