#!/usr/bin/env bash
# Runs a command as one rank of a job started by srun or mpirun: its output goes to
# <dir>/rank<R>.out and its PID to <dir>/rank<R>.pid, R being the rank the launcher gave it.
# Usage: rank_output.sh <dir> <command> [args...]
dir=$1
shift
r=${RANK:-${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-unknown}}}}
echo $$ > "$dir/rank$r.pid"
exec "$@" > "$dir/rank$r.out" 2>&1
