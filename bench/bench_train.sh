#!/bin/bash
# bench_train.sh: dttrain benchmarks (numbers for the notes, not asserts).
#  (1) step throughput of a larger model on 1 rank as a fraction of the
#      OpenBLAS SGEMM rate measured on the model's own GEMM shapes in the same run;
#  (2) dttrain vs the same model in PyTorch DDP (gloo, CPU) on 1 and 2 ranks;
#  (3) gloo allreduce bandwidth inside dttrain vs a bare gloo allreduce of
#      the same size and buckets (bench_gloo).
# Usage: bench/bench_train.sh [BUILDDIR]   (default: the current directory)
# Env: STEPS (20), BATCH (512), CTX (64), EMB (32), HID (1024), LAYERS (4).
set -u
B=$(cd "${1:-.}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
DTTRAIN=$B/trainer/dttrain
STEPS=${STEPS:-20} BATCH=${BATCH:-512} CTX=${CTX:-64} EMB=${EMB:-32} HID=${HID:-1024} LAYERS=${LAYERS:-4}
TMP=$(mktemp -d /tmp/bench-train.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# OpenBLAS 0.3.21 falls back to Prescott kernels on CPUs it does not know;
# dttrain corrects that itself (re-exec), the others get the same setting here.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$("$DTTRAIN" --help >/dev/null 2>&1; OPENBLAS_VERBOSE=2 "$B/bench/bench_sgemm" --reps 1 8 8 8 2>&1 | sed -n 's/^Core: //p')
    if [ "$core" = Prescott ]; then
        grep -qw avx512f /proc/cpuinfo && export OPENBLAS_CORETYPE=SkylakeX || export OPENBLAS_CORETYPE=Haswell
        echo "# OpenBLAS detected core Prescott: using OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE for every program"
    fi
fi
cat "$SRC"/man/*.in "$SRC"/schemas/*.md "$SRC"/trainer/*.c "$SRC"/kernels/*.c "$SRC"/common/*.c > "$TMP/corpus.txt"
# --model mlp: bench/torch_ddp_ref.py is the MLP's PyTorch twin.
model="--model mlp --data $TMP/corpus.txt --steps $STEPS --global-batch $BATCH --context $CTX --embed $EMB --hidden $HID --layers $LAYERS"
py () { /usr/bin/python3 -c "import json,sys; $1" "${@:2}"; }
field () { py 'print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }

echo "== (1) 1 rank, model: B=$BATCH C=$CTX E=$EMB H=$HID L=$LAYERS, $STEPS steps"
# The model's GEMM shapes (forward; bench_sgemm adds the two backward ones).
shapes="$BATCH $HID $((CTX * EMB))"
for l in $(seq 2 "$LAYERS"); do shapes="$shapes $BATCH $HID $HID"; done
shapes="$shapes $BATCH 256 $HID"
"$B/bench/bench_sgemm" --reps 3 $shapes > "$TMP/sgemm.json"
"$DTTRAIN" $model --quiet > "$TMP/one.json" 2>"$TMP/one.err"
"$B/bench/bench_sgemm" --reps 3 $shapes > "$TMP/sgemm2.json"
s1=$(field "$TMP/sgemm.json" sgemm_gflops); s2=$(field "$TMP/sgemm2.json" sgemm_gflops)
m=$(field "$TMP/one.json" model_gflops_per_s)
py 'a,b,m=map(float,sys.argv[1:4]); s=(a+b)/2; print("sgemm %.1f GFLOP/s (before %.1f, after %.1f); dttrain model %.1f GFLOP/s = %.0f%% of SGEMM" % (s,a,b,m,100*m/s))' "$s1" "$s2" "$m"
echo "dttrain 1 rank: $(field "$TMP/one.json" tokens_per_s) tokens/s"

echo "== (2) dttrain vs PyTorch DDP (gloo, CPU), same model, data, global batch"
for W in 1 2; do
    port=$(py 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W "$DTTRAIN" $model --quiet --rendezvous-dir "$rdv" > "$TMP/dt$W.$r" 2>&1 &
    done; wait
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            /usr/bin/python3 "$SRC/bench/torch_ddp_ref.py" $model > "$TMP/pt$W.$r" 2>&1 &
    done; wait
    dt=$(field "$TMP/dt$W.0" tokens_per_s); pt=$(field "$TMP/pt$W.0" tokens_per_s)
    py 'd,p=map(float,sys.argv[2:4]); print("%s rank(s): dttrain %.0f tokens/s, torch DDP %.0f tokens/s, ratio %.2f" % (sys.argv[1],d,p,d/p))' "$W" "$dt" "$pt"
    [ "$W" = 2 ] && cp "$TMP/dt2.0" "$TMP/dt2.json"
done

echo "== (3) gloo allreduce: inside dttrain (2 ranks) vs bare bench_gloo"
params=$(field "$TMP/dt2.json" params)
inside=$(field "$TMP/dt2.json" allreduce_gbps)
rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 "$B/bench/bench_gloo" --rendezvous-dir "$rdv" --floats "$params" \
        --bucket-floats 1048576 --reps 11 > "$TMP/g.$r" 2>&1 &
done; wait
rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 "$B/bench/bench_gloo" --rendezvous-dir "$rdv" --floats "$params" \
        --reps 11 > "$TMP/g1.$r" 2>&1 &
done; wait
bare=$(field "$TMP/g.0" algbw_gbps); one=$(field "$TMP/g1.0" algbw_gbps)
echo "$params floats ($((params * 4 / 1048576)) MiB): inside dttrain $inside GB/s; bare gloo, same 4 MiB buckets $bare GB/s; bare gloo, one message $one GB/s"
