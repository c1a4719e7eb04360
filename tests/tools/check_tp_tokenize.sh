#!/usr/bin/env bash
# tp-tokenize end to end: a BPE model trained on a text, shards that decode back to it (--verify),
# tokens.json naming their type, a second run with the saved model giving the same shards, llm.c's
# format, a bad option refused by name, and SentencePiece's log only with --verbose.
#   check_tp_tokenize.sh <tp-tokenize> <work dir>
set -euo pipefail
tool=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "check_tp_tokenize: $*" >&2; exit 1; }

for i in $(seq 1 300); do
  echo "line $i: the stages pass activations forward and gradients back,  twice over."
done >"$work/text.txt"
printf 'Grüße aus 東京\n' >>"$work/text.txt"

out=$("$tool" "$work/text.txt" --out "$work/a" --tokenizer bpe:300 --shard-tokens 2000 --verify \
  2>"$work/train.err")
# SentencePiece's training log (hundreds of lines) only with --verbose.
[ ! -s "$work/train.err" ] || fail "SentencePiece logged without --verbose: $(head -3 "$work/train.err")"
"$tool" "$work/text.txt" --out "$work/v" --tokenizer bpe:300 --verbose >/dev/null 2>"$work/verbose.err"
[ "$(wc -l <"$work/verbose.err")" -gt 10 ] || fail "--verbose did not show SentencePiece's log"
grep -q '"verified":true' <<<"$out" || fail "no verified round trip: $out"
grep -q '"verified": true' "$work/a/tokens.json" || fail "tokens.json does not say verified"
grep -q '"dtype":"uint16"' <<<"$out" || fail "expected uint16 shards: $out"
[ -f "$work/a/shard_00000.bin" ] && [ -f "$work/a/shard_00001.bin" ] || fail "expected 2+ shards"
[ -f "$work/a/tokenizer.model" ] && [ -f "$work/a/tokens.json" ] || fail "no tokenizer or tokens.json"

"$tool" "$work/text.txt" --out "$work/b" --tokenizer "$work/a/tokenizer.model" --shard-tokens 2000 >/dev/null
cmp "$work/a/shard_00000.bin" "$work/b/shard_00000.bin" || fail "the saved model tokenized differently"

out=$("$tool" "$work/text.txt" --out "$work/c" --tokenizer "$work/a/tokenizer.model" --format llmc --verify)
grep -q '"verified":true' <<<"$out" || fail "llm.c shards did not verify: $out"

if "$tool" "$work/text.txt" --out "$work/d" --format parquet 2>"$work/err.txt"; then
  fail "--format parquet was accepted"
fi
grep -q "give nanogpt or llmc" "$work/err.txt" || fail "unexpected error: $(cat "$work/err.txt")"
# A folder names itself: one without a tokenizer, and one given as the text.
mkdir -p "$work/no_tokenizer"
if "$tool" "$work/text.txt" --out "$work/e" --tokenizer "$work/no_tokenizer" 2>"$work/err.txt"; then
  fail "a folder without a tokenizer was accepted"
fi
grep -q "$work/no_tokenizer holds neither tokenizer.json nor tokenizer.model" "$work/err.txt" ||
  fail "unexpected error: $(cat "$work/err.txt")"
if "$tool" "$work/text.txt" --out "$work/f" --tokenizer "$work/nothing.model" 2>"$work/err.txt"; then
  fail "a missing tokenizer file was accepted"
fi
grep -q "$work/nothing.model: no such file or folder" "$work/err.txt" ||
  fail "unexpected error: $(cat "$work/err.txt")"
echo "check_tp_tokenize: ok"
