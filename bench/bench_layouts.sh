#!/bin/bash
# bench_layouts.sh: dttrain's parallel layouts (numbers, not asserts).
#  (1) tokens/s of the transformer in each layout at 1, 2, 4 and 8 ranks
#      (dp, tp, pp and their combinations), with each dimension's
#      communication time from the summary (tp_comm_s, pp_comm_s,
#      dp_comm_s) as a fraction of the wall time;
#  (2) the pipeline bubble: for pp 2 and M micro-batches per step, the
#      fraction of stage 0's step spent blocked on its neighbour
#      (pp_comm_s / compute_s) against the theory (P - 1) / (M + P - 1).
# Caveat: every rank is a process; with more ranks than cores (the project's
# 2-core machine) the ranks share cores, so tokens/s at 4 and 8 ranks
# measure the scheduler as much as the layout, and the bubble includes
# waiting for a core.
# Usage: bench/bench_layouts.sh [BUILDDIR]   (default: the current directory)
# Env: STEPS (10), BATCH (32), CTX (64), WIDTH (128), HEADS (4), LAYERS (4),
#      RANKS ("1 2 4 8"), MBS ("1 2 4 8": micro-batches per step for (2)).
# Prints one JSON line per figure at the end ("bench_layouts": ...).
set -u
B=$(cd "${1:-.}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
DTTRAIN=$B/trainer/dttrain
STEPS=${STEPS:-10} BATCH=${BATCH:-32} CTX=${CTX:-64} WIDTH=${WIDTH:-128} HEADS=${HEADS:-4}
LAYERS=${LAYERS:-4} RANKS=${RANKS:-"1 2 4 8"} MBS=${MBS:-"1 2 4 8"}
PY=/usr/bin/python3
[ -x "$DTTRAIN" ] || { echo "bench_layouts: $DTTRAIN not built" >&2; exit 1; }
TMP=$(mktemp -d /tmp/bench-layouts.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cat "$SRC"/man/*.in "$SRC"/schemas/*.md "$SRC"/trainer/*.c > "$TMP/corpus.txt"
model="--data $TMP/corpus.txt --model transformer --global-batch $BATCH --context $CTX --width $WIDTH --heads $HEADS --layers $LAYERS --steps $STEPS --warmup-steps 2 --val-samples 0 --quiet --backend cpu"

# run W NAME args...: W ranks standalone (gloo over loopback); rank 0's summary in $TMP/NAME.json
run () {
    local W=$1 name=$2 r pids=""
    shift 2
    mkdir -p "$TMP/rdv-$name"
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r "$DTTRAIN" --rendezvous-dir "$TMP/rdv-$name" $model "$@" \
            >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" &
        pids="$pids $!"
    done
    local rc=0
    for p in $pids; do wait "$p" || rc=1; done
    [ $rc = 0 ] || { tail -2 "$TMP/$name.0.err" >&2; return 1; }
    tail -n 1 "$TMP/$name.0.out" > "$TMP/$name.json"
}

echo "# (1) tokens/s per layout (C$CTX E$WIDTH H$HEADS L$LAYERS, batch $BATCH, $STEPS steps; $(nproc) cores)"
printf '# %-18s %5s %10s %8s %8s %8s\n' layout ranks tokens/s tp% pp% dp%
for W in $RANKS; do
    for lay in "dp" "tp 2" "tp 4" "pp 2" "pp 4" "tp 2 pp 2" "tp 2 pp 4" "tp 4 pp 2"; do
        set -- $lay
        tp=1 pp=1
        while [ $# -gt 0 ]; do case $1 in tp) tp=$2 ;; pp) pp=$2 ;; esac; shift 2 2>/dev/null || shift; done
        [ $((W % (tp * pp))) = 0 ] || continue
        [ $((HEADS % tp)) = 0 ] && [ $((LAYERS % pp)) = 0 ] || continue
        dp=$((W / (tp * pp)))
        name="w$W-tp$tp-pp$pp"
        run "$W" "$name" --tp $tp --pp $pp || { echo "# $name failed"; continue; }
        $PY - "$TMP/$name.json" "$W" "$tp" "$pp" "$dp" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
w, tp, pp, dp = sys.argv[2:6]
wall = d["wall_s"] or 1
lay = "tp%s x pp%s x dp%s" % (tp, pp, dp)
print("  %-18s %5s %10.0f %7.1f%% %7.1f%% %7.1f%%" % (lay, w, d["tokens_per_s"], 100 * d["tp_comm_s"] / wall,
      100 * d["pp_comm_s"] / wall, 100 * d["dp_comm_s"] / wall))
print(json.dumps({"bench_layouts": "tokens_per_s", "ranks": int(w), "tp": int(tp), "pp": int(pp), "dp": int(dp),
                  "tokens_per_s": d["tokens_per_s"], "tp_comm_s": d["tp_comm_s"], "pp_comm_s": d["pp_comm_s"],
                  "dp_comm_s": d["dp_comm_s"], "wall_s": d["wall_s"]}), file=open(sys.argv[1] + ".line", "w"))
PYEOF
    done
done

echo "# (2) pipeline bubble, pp 2 on 2 ranks: measured (stage 0 blocked / step) vs (P-1)/(M+P-1)"
for M in $MBS; do
    [ $((BATCH % M)) = 0 ] || continue
    run 2 "bubble-$M" --pp 2 --micro-batch $((BATCH / M)) || continue
    $PY - "$TMP/bubble-$M.json" "$M" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
M, P = int(sys.argv[2]), 2
meas = d["pp_comm_s"] / d["compute_s"] if d["compute_s"] else 0
theory = (P - 1) / (M + P - 1)
print("  M %2d: measured %.3f, theory %.3f (%+.0f%%)" % (M, meas, theory, 100 * (meas - theory) / theory))
print(json.dumps({"bench_layouts": "bubble", "pp": P, "micro_batches": M, "measured": meas, "theory": theory}),
      file=open(sys.argv[1] + ".line", "w"))
PYEOF
done
cat "$TMP"/*.line 2>/dev/null
