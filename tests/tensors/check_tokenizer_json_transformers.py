"""tokenizer.json files read by tensorplay against the `tokenizers` package.

Three byte-level BPE tokenizers are trained here with the `tokenizers` package on a mixed text of
300 kB (code, accents, CJK, emoji with joiners, whitespace runs, numbers, CRLF lines,
decomposed accents), each with special and plain added tokens:
  - GPT-2's (ByteLevel with its own pattern);
  - Llama 3's (Split by Llama 3's pattern, then ByteLevel; ignore_merges);
  - Qwen2's (NFC, Split by Qwen2's pattern, then ByteLevel).
For each, tensorplay's ids of the whole text equal encode(text, add_special_tokens=False)'s, its
decoded text equals decode(ids, skip_special_tokens=False)'s, and the encoding time of both in
one thread is reported ("ratio": theirs over ours).

Usage: check_tokenizer_json_transformers.py PEER WORK_DIR (PEER: tokenizer_json_peer).
"""
import json
import os
import random
import re
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # one thread, as tensorplay
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

PARTS = [
    "def encode(self, text: str) -> list[int]:\n    return [ord(c) for c in text]  # 42\n\n",
    "for (int i = 0; i < 1000; ++i) {\n\tsum += a[i] * 3.14159;\n}\r\n",
    "Café déjà vu, naïve façade — Übermäßig große Straße; Tiếng Việt có dấu.\n",
    "Cafe\u0301 de\u0301ja\u0300 vu (decomposed accents), A\u030a and \u212b.\n",
    "東京都は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.\n",
    "Family: 👨‍👩‍👧‍👦, flag: 🏳️‍🌈, skin: 👍🏽, keycap: 1️⃣ and plain 😀😀😀!\n",
    "Spaces:    four, tabs:\t\t\ttwo, mixed \t \n\n\n   trailing   \n",
    "Numbers: 1234567890, 3.1415926535, -42, 1e-10, 0x1F, 2024-12-04, 1,000,000.\n",
    "Don't stop; I'LL go. We've said it's 'quoted' and \"double\" — it's fine.\n",
    "<|im_start|>user\nHello tensorplay!<|im_end|>\n<|endoftext|>",
    "Ünïcödé ĀĒĪŌŪ ÆØÅ œ ß ﬁ ﬂ ½ ² ³ µ Ω ∑ ∫ √ ∞ ≠ ≤ ≥ → ← ↑ ↓\n",
    "Привет, мир! Γειά σου Κόσμε! שלום עולם! مرحبا بالعالم! नमस्ते दुनिया!\n",
]


def corpus(size):
    # Whole parts and random runs of their words, with whitespace runs and numbers between.
    rng = random.Random(45)
    words = [w for part in PARTS for w in re.split(r"(\s+)", part) if w]
    between = [" ", "  ", "   ", "\n", "\n\n", "\t", " \n ", "\r\n", "", "\u3000", "\u00a0"]
    pieces, length = [], 0
    while length < size:
        if rng.random() < 0.4:
            piece = rng.choice(PARTS)
        else:
            piece = "".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        piece += rng.choice(between + [str(rng.randint(0, 10 ** rng.randint(1, 12)))])
        pieces.append(piece)
        length += len(piece.encode())
    return "".join(pieces)


def build(kind, text, path):
    tokenizer = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if kind == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.train_from_iterator([text], trainer)
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tokenizer.add_tokens(["tensorplay"])
    tokenizer.save(path)


PEER, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
text = corpus(300_000)
text_path = os.path.join(WORK, "mixed.txt")
with open(text_path, "w", encoding="utf-8", newline="") as f:
    f.write(text)
print(f"text: {len(text.encode())} bytes, {len(text)} characters", flush=True)
failures = []
for kind in ("gpt2", "llama3", "qwen2"):
    path = os.path.join(WORK, f"{kind}_tokenizer.json")
    build(kind, text, path)
    out = os.path.join(WORK, f"{kind}_tensorplay.json")
    subprocess.run([PEER, path, text_path, out], check=True)
    with open(out, encoding="utf-8") as f:
        ours = json.load(f)
    best = 1e30
    for _ in range(5):
        tokenizer = Tokenizer.from_file(path)  # fresh, its cache empty, as the peer's
        start = time.perf_counter()
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        best = min(best, time.perf_counter() - start)
    decoded = tokenizer.decode(ids, skip_special_tokens=False)
    same_ids = ours["ids"] == ids
    if not same_ids:
        first = next((i for i, (a, b) in enumerate(zip(ours["ids"], ids)) if a != b),
                     min(len(ids), len(ours["ids"])))
        print(f"  first difference at token {first}: ours {ours['ids'][first:first + 8]}, "
              f"theirs {ids[first:first + 8]} ({tokenizer.decode(ids[first:first + 8])!r})")
    same_text = ours["decoded"] == decoded
    ratio = best / ours["encode_seconds"]
    print(f"{'ok  ' if same_ids else 'FAIL'} {kind}: {len(ids)} ids, the same ids", flush=True)
    print(f"{'ok  ' if same_text else 'FAIL'} {kind}: the same decoded text", flush=True)
    print(json.dumps({"tokenizer": kind, "bytes": len(text.encode()), "ids": len(ids),
                      "tokenizers_seconds": best, "tensorplay_seconds": ours["encode_seconds"],
                      "ratio": ratio}), flush=True)
    if not (same_ids and same_text):
        failures.append(kind)
if failures:
    print(f"failed: {failures}")
    sys.exit(1)
print("all checks passed")
