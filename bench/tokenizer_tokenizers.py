"""The `tokenizers` side of bench_tokenizer.

  tokenizer_tokenizers.py make DIR        writes DIR/text.txt (about 1 MB of mixed text: code,
                                          accents, CJK, emoji with joiners, whitespace runs,
                                          numbers) and DIR/tokenizer.json (Llama 3's byte-level
                                          BPE, trained on it)
  tokenizer_tokenizers.py time TOKENIZER TEXT ROUNDS
                                          prints {"seconds": best encode of TEXT, "ids": count,
                                          "checksum": ...}, one thread, each round's tokenizer
                                          fresh (its cache empty)
"""
import json
import os
import random
import re
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PARTS = [
    "def encode(self, text: str) -> list[int]:\n    return [ord(c) for c in text]\n\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * 3.14159;\n}\r\n",
    "Café déjà vu, naïve façade — Übermäßig große Straße; Tiếng Việt có dấu.\n",
    "東京都は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.\n",
    "Family: 👨‍👩‍👧‍👦, flag: 🏳️‍🌈, skin: 👍🏽 and plain 😀😀😀!\n",
    "Spaces:    four, tabs:\t\t\ttwo, mixed \t \n\n\n   trailing   \n",
    "Don't stop; I'LL go. We've said it's 'quoted' and \"double\" — it's fine.\n",
    "Привет, мир! Γειά σου Κόσμε! שלום עולם! مرحبا بالعالم! नमस्ते दुनिया!\n",
    "The quick brown fox jumps over the lazy dog while the pipeline stages exchange tensors.\n",
]


def mixed_text(size):
    rng = random.Random(45)
    words = [w for part in PARTS for w in re.split(r"(\s+)", part) if w]
    pieces, length = [], 0
    while length < size:
        piece = rng.choice(PARTS) if rng.random() < 0.3 else "".join(
            rng.choice(words) for _ in range(rng.randint(1, 12)))
        piece += rng.choice([" ", "  ", "\n", "\t", str(rng.randint(0, 10 ** rng.randint(1, 9)))])
        pieces.append(piece)
        length += len(piece.encode())
    return "".join(pieces)


def checksum(ids):
    return sum((i + 1) * t for i, t in enumerate(ids)) % (2 ** 61 - 1)


if sys.argv[1] == "make":
    folder = sys.argv[2]
    os.makedirs(folder, exist_ok=True)
    text = mixed_text(1_000_000)
    with open(os.path.join(folder, "text.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(text)
    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=8000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"], show_progress=False))
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
elif sys.argv[1] == "time":
    path, text_path, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    best, ids = float("inf"), []
    for _ in range(rounds):
        tokenizer = Tokenizer.from_file(path)
        start = time.perf_counter()
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"seconds": best, "ids": len(ids), "checksum": checksum(ids)}))
else:
    sys.exit(f"unknown command {sys.argv[1]!r}")
