# Helpers of the cluster checks (sourced): losses of a run, a job killed with kill -9, results.
# A job's ranks write to <dir>/rank<R>.out through rank_output.sh.

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rank_output=$here/rank_output.sh

# The "step N ... loss" lines of seed_mlp's output (the last stage's rank prints them).
seed_losses() { grep '^step' "$1"; }

# train_gpt's loss per step, "N LOSS" lines, from an output where lines may carry a prefix.
gpt_losses() { grep -oE 'step +[0-9]+/[0-9]+ +loss +[0-9.]+' "$1" | awk '{print $2, $4}'; }

# Waits until <file> holds a line matching <regex>, at most <seconds>.
wait_for_line() {
  local file=$1 regex=$2 seconds=$3
  for _ in $(seq $((seconds * 10))); do
    grep -qE "$regex" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Kills rank <victim> of a running job with kill -9 once it trains, then checks that the launcher
# (<launcher_pid>) and every rank are gone within 10 s and that some output names the dead rank.
# Usage: kill_rank_check <dir> <launcher_pid> <victim> <ranks> <what>
kill_rank_check() {
  local dir=$1 launcher=$2 victim=$3 ranks=$4 what=$5
  wait_for_line "$dir/rank$((ranks - 1)).out" '^step' 60 ||
    { kill -9 "$launcher" 2>/dev/null; cat "$dir"/rank*.out; fail "$what: the job did not start training"; }
  local pid
  pid=$(cat "$dir/rank$victim.pid")
  local start=$SECONDS
  kill -9 "$pid"
  local gone=0
  for _ in $(seq 100); do
    local alive=0
    kill -0 "$launcher" 2>/dev/null && alive=1
    for r in $(seq 0 $((ranks - 1))); do kill -0 "$(cat "$dir/rank$r.pid")" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && { gone=1; break; }
    sleep 0.1
  done
  wait "$launcher" 2>/dev/null
  local took=$((SECONDS - start))
  if [ $gone -eq 0 ]; then
    kill -9 "$launcher" 2>/dev/null
    for r in $(seq 0 $((ranks - 1))); do kill -9 "$(cat "$dir/rank$r.pid")" 2>/dev/null; done
    tail -n 3 "$dir"/*.out
    fail "$what: ranks still running 10 s after kill -9 of rank $victim"
  fi
  grep -hE "rank $victim\b.*(gone|lost|died|closed|down)|(gone|lost|died|closed|down).*rank $victim\b" \
      "$dir"/*.out > "$dir/named.txt" ||
    { tail -n 5 "$dir"/*.out; fail "$what: no rank's output names the dead rank $victim"; }
  echo "ok: $what: kill -9 of rank $victim, every rank gone within ${took}-$((took + 1)) s; a survivor says:"
  head -1 "$dir/named.txt" | cut -c1-300
}
