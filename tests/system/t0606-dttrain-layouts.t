#!/bin/bash
# t0606-dttrain-layouts: tensor- and pipeline-parallel layouts (--tp, --pp)
# of the transformer.  Invalid layouts are refused naming what does not
# fit; the comm thread's overlapped gradient reduction is bit-identical to
# the reduction after the backward pass; after 30 steps tp2, tp4, pp2,
# tp2 x pp2, dp2 x tp2 (dp and zero1) and
# dp2 x tp2 x pp2 (8 ranks) each match the 1-rank run within 1e-5; runs
# crashed and resumed in the same layout are bit-identical to uninterrupted
# ones; a pipeline neighbour's death or hang is an error naming it; a checkpoint
# written in one layout loads bit for bit in another (params_crc32c, the
# one-rank layout's, unchanged), and a run resumed in another layout ends
# where the 1-rank run does (1e-5).
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
shape="--model transformer --context 16 --width 32 --heads 4 --layers 2"
args="$shape --data $data --global-batch 32 --warmup-steps 5"

# --- invalid layouts -------------------------------------------------------------
refused () { # refused WHAT PATTERN WORLD args...
    local what=$1 pat=$2 w=$3
    shift 3
    WORLD_SIZE=$w RANK=0 "$DTTRAIN" --data "$data" "$@" 2>"$TMP/err"
    local rc=$?
    check "$what: exit 2 naming it" sh -c "test $rc -eq 2 && grep -q -- '$pat' $TMP/err"
}
refused "world not a multiple of tp x pp" "WORLD_SIZE=3 is not a multiple of --tp 2 x --pp 1" 3 $shape --tp 2
refused "tp not dividing the heads" "--tp 3 does not divide --heads 4" 3 $shape --tp 3
refused "pp not dividing the layers" "--pp 3 does not divide --layers 2" 3 $shape --pp 3
refused "tp with the MLP" "need --model transformer" 2 --model mlp --tp 2
refused "tp x pp above the world" "WORLD_SIZE=2 is not a multiple of --tp 2 x --pp 2" 2 $shape --tp 2 --pp 2
DT_TP=x WORLD_SIZE=2 RANK=0 "$DTTRAIN" --data "$data" $shape 2>"$TMP/err"; rc=$?
check "DT_TP=x: exit 2 naming it" sh -c "test $rc -eq 2 && grep -q \"DT_TP: 'x'\" $TMP/err"

# --- consistency with the 1-rank run after 30 steps ----------------------------------
# (with checkpoints at 10, 20, 30 for the tests across layouts below)
ck="--steps 30 --checkpoint-every 10"
run 1 one $args $ck --checkpoint-dir "$TMP/ck-one" --dump-params "$TMP/one"
check "1 rank: exit 0" test $? -eq 0
run 2 tp2 $args $ck --tp 2 --checkpoint-dir "$TMP/ck-tp2" --dump-params "$TMP/tp2"
check "tp2: exit 0" test $? -eq 0
run 4 tp4 $args --steps 30 --tp 4 --dump-params "$TMP/tp4"; check "tp4: exit 0" test $? -eq 0
run 4 dp2tp2 $args $ck --tp 2 --checkpoint-dir "$TMP/ck-dp2tp2" --dump-params "$TMP/dp2tp2"
check "dp2 x tp2: exit 0" test $? -eq 0
run 4 z2tp2 $args --steps 30 --tp 2 --parallel zero1 --overlap --dump-params "$TMP/z2tp2"
check "dp2 x tp2 zero1, all-gather overlapped with the forward pass: exit 0" test $? -eq 0
# pipelines: 4 micro-batches per replica and step
run 2 pp2 $args --steps 30 --pp 2 --micro-batch 4 --dump-params "$TMP/pp2"
check "pp2: exit 0" test $? -eq 0
run 4 tp2pp2 $args $ck --tp 2 --pp 2 --micro-batch 4 --checkpoint-dir "$TMP/ck-tp2pp2" \
    --dump-params "$TMP/tp2pp2"
check "tp2 x pp2: exit 0" test $? -eq 0
run 8 dp2tp2pp2 $args --steps 30 --tp 2 --pp 2 --micro-batch 2 --parallel zero1 \
    --dump-params "$TMP/dp2tp2pp2"
check "dp2 x tp2 x pp2 zero1 (8 ranks): exit 0" test $? -eq 0
check "dp2 x tp2 x pp2 says its layout" \
    test "$(summary dp2tp2pp2 tp) $(summary dp2tp2pp2 pp) $(summary dp2tp2pp2 dp)" = "2 2 2"
check "the stages' sends are counted" $PY -c "import sys; sys.exit(0 if $(summary pp2 pp_bytes) > 0 else 1)"
check "tp2 says its layout" test "$(summary tp2 tp) $(summary tp2 dp)" = "2 1"
check "dp2 x tp2 says its layout" test "$(summary dp2tp2 tp) $(summary dp2tp2 dp)" = "2 2"
for l in tp2 tp4 dp2tp2 z2tp2 pp2 tp2pp2 dp2tp2pp2; do
    check "$l vs 1 rank: params within 1e-5 after 30 steps" params_close "$TMP/one" "$TMP/$l" 1e-5
done
check "dp2 x tp2: dp and zero1 params_crc32c equal" \
    test "$(summary dp2tp2 params_crc32c)" = "$(summary z2tp2 params_crc32c)"
check "the tp ranks' all-reduces are counted" $PY -c "import sys; sys.exit(0 if $(summary tp2 tp_bytes) > 0 else 1)"
# The comm thread (--overlap) reduces the same gradient buckets in the
# same order as the reduction after the backward pass (in a pipeline,
# during the last micro-batch's), while the tp all-reduces and the stages'
# sends go on in the main thread: bit-identical, and the same bytes.
ob="$args --steps 10 --tp 2 --pp 2 --micro-batch 2 --bucket-mb 0.004"
run 8 ov $ob --overlap; check "dp2 x tp2 x pp2 --overlap, 4 KiB buckets: exit 0" test $? -eq 0
run 8 noov $ob --no-overlap; check "dp2 x tp2 x pp2 --no-overlap, 4 KiB buckets: exit 0" test $? -eq 0
check "... the comm thread ran" grep -q "gradient buckets overlapped with backward" "$TMP/ov.0.err"
check "... params_crc32c bit-identical with and without overlap" \
    test "$(summary ov params_crc32c)" = "$(summary noov params_crc32c)"
check "... the same bytes along dp, tp and pp" \
    test "$(summary ov dp_bytes) $(summary ov tp_bytes) $(summary ov pp_bytes)" = \
         "$(summary noov dp_bytes) $(summary noov tp_bytes) $(summary noov pp_bytes)"

# --- same layout: crash + resume, bit for bit -------------------------------------------
# Crashed at step 15 with the options of the 30-step runs above (which are
# the uninterrupted references), resumed from step 10 and run on to 30.
check "the manifest records the layout" \
    grep -q '"layout": {"tp": 2, "pp": 1, "dp": 2}' "$TMP/ck-dp2tp2/step-30/manifest.json"
run 4 crash $args $ck --tp 2 --checkpoint-dir "$TMP/ck-cr" --inject-crash 1:15
check "rank 1 exits 17 at the injected crash" test "$(cat $TMP/crash.1.rc)" = 17
check "its tp peer names it" grep -q "peer rank 1 lost or hung" "$TMP/crash.0.err"
run 4 resume $args $ck --tp 2 --checkpoint-dir "$TMP/ck-cr" --resume "$TMP/ck-cr"
check "resumed run exits 0" test $? -eq 0
check "resumed from step 10" grep -q "resumed from .*step-10" "$TMP/resume.0.err"
ref=$(summary dp2tp2 params_crc32c); got=$(summary resume params_crc32c)
echo "# tp2 x dp2: uninterrupted $ref, crashed+resumed $got"
check "params_crc32c bit-identical to the uninterrupted run" test -n "$ref" -a "$got" = "$ref"

# pipeline: a stage crashes; its neighbour names it; resumed, bit for bit
pargs="$args $ck --tp 2 --pp 2 --micro-batch 4"
run 4 pcrash $pargs --checkpoint-dir "$TMP/ck-pcr" --inject-crash 3:15
check "rank 3 (last stage) exits 17 at the injected crash" test "$(cat $TMP/pcrash.3.rc)" = 17
check "its pipeline neighbour names it" grep -q "stage 1 (rank 3).*\|peer rank 3 lost" "$TMP/pcrash.1.err"
run 4 presume $pargs --checkpoint-dir "$TMP/ck-pcr" --resume "$TMP/ck-pcr"
check "resumed tp2 x pp2 run exits 0" test $? -eq 0
ref=$(summary tp2pp2 params_crc32c); got=$(summary presume params_crc32c)
echo "# tp2 x pp2: uninterrupted $ref, crashed+resumed $got"
check "tp2 x pp2: params_crc32c bit-identical to the uninterrupted run" test -n "$ref" -a "$got" = "$ref"

# pipeline: a stage hangs; its neighbour gives up within --comm-timeout,
# naming it (never a hang)
launch 2 phang $args --steps 30 --pp 2 --inject-hang 1:5 --comm-timeout 3
set -- $LAUNCHED
p0=$1 p1=$2
deadline=$((SECONDS + 60))    # generous: 3 s timeout on a shared 2-core box
while kill -0 "$p0" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
if kill -0 "$p0" 2>/dev/null; then
    fail "stage 0 gave up on the hung stage 1"
    kill -9 "$p0"
else
    wait "$p0"; rc=$?
    check "stage 0 gave up on the hung stage 1 with exit 5 (rc $rc)" test $rc -eq 5
    check "... naming it and saying it timed out" \
        sh -c "grep -q 'stage 1 (rank 1)' $TMP/phang.0.err && grep -qi 'timed out' $TMP/phang.0.err"
fi
kill -9 "$p1" 2>/dev/null; wait "$p1" 2>/dev/null

# --- across layouts ---------------------------------------------------------------------
# The last checkpoint (step 30) of one layout, loaded in another with
# nothing left to run: the parameters are exactly those saved.
run 1 l-one $args --steps 30 --resume "$TMP/ck-tp2/step-30"
check "tp2 -> 1 rank: loads" grep -q "saved by 2 ranks (dp, tp 2, pp 1), now 1 (dp)" "$TMP/l-one.0.err"
check "tp2 -> 1 rank: params bit-identical" \
    test "$(summary l-one params_crc32c)" = "$(summary tp2 params_crc32c)"
run 4 l-tp2 $args --steps 30 --tp 2 --parallel zero1 --resume "$TMP/ck-one/step-30"
check "1 rank -> dp2 x tp2 zero1: loads" grep -q "saved by 1 rank (dp), now 4 (zero1, tp 2, pp 1)" "$TMP/l-tp2.0.err"
check "1 rank -> dp2 x tp2 zero1: params bit-identical" \
    test "$(summary l-tp2 params_crc32c)" = "$(summary one params_crc32c)"
run 4 l-tp4 $args --steps 30 --tp 4 --resume "$TMP/ck-dp2tp2/step-30"
check "dp2 x tp2 -> tp4: params bit-identical" \
    test "$(summary l-tp4 params_crc32c)" = "$(summary dp2tp2 params_crc32c)"
run 2 l-pp2 $args --steps 30 --resume "$TMP/ck-tp2pp2/step-30"
check "tp2 x pp2 -> dp2: params bit-identical" \
    test "$(summary l-pp2 params_crc32c)" = "$(summary tp2pp2 params_crc32c)"
run 4 l-dp2pp2 $args --steps 30 --pp 2 --resume "$TMP/ck-one/step-30"
check "1 rank -> dp2 x pp2: params bit-identical" \
    test "$(summary l-dp2pp2 params_crc32c)" = "$(summary one params_crc32c)"
# Resumed at step 10 in another layout and run on to step 30: where the
# 1-rank run ends (so the optimizer state came across too).
run 2 c-tp2 $args --steps 30 --tp 2 --resume "$TMP/ck-one/step-10" --dump-params "$TMP/c-tp2"
check "1 rank at 10 -> tp2 to 30: exit 0" test $? -eq 0
check "... params within 1e-5 of the 1-rank run" params_close "$TMP/one" "$TMP/c-tp2" 1e-5
run 1 c-one $args --steps 30 --resume "$TMP/ck-tp2/step-10" --dump-params "$TMP/c-one"
check "tp2 at 10 -> 1 rank to 30: exit 0" test $? -eq 0
check "... params within 1e-5 of the 1-rank run" params_close "$TMP/one" "$TMP/c-one" 1e-5
run 4 c-pp $args --steps 30 --pp 2 --micro-batch 4 --resume "$TMP/ck-tp2pp2/step-10" \
    --dump-params "$TMP/c-pp"
check "tp2 x pp2 at 10 -> dp2 x pp2 to 30: exit 0" test $? -eq 0
check "... params within 1e-5 of the 1-rank run" params_close "$TMP/one" "$TMP/c-pp" 1e-5
# A version 2 checkpoint (the format before layouts: 2 shards of a 2-rank
# dp run, written by the previous dttrain) resumes in a tensor-parallel
# layout and on 1 rank, ending where an uninterrupted run does (1e-5).
fx="$TOP_SRCDIR/tests/system/data"
vargs="--data $fx/ckpt-v1/text.txt --model transformer --context 4 --width 8 --heads 2 --layers 2 --steps 4 --global-batch 4 --warmup-steps 1 --val-samples 4"
run 2 v2ref $vargs --dump-params "$TMP/v2ref"; check "reference run for the v2 checkpoint: exit 0" test $? -eq 0
run 2 v2tp $vargs --tp 2 --resume "$fx/ckpt-v2/step-2" --dump-params "$TMP/v2tp"
check "a version 2 checkpoint resumes in tp2" grep -q "resumed from .*step-2" "$TMP/v2tp.0.err"
check "... and ends where an uninterrupted run does (1e-5)" params_close "$TMP/v2ref" "$TMP/v2tp" 1e-5
run 1 v2one $vargs --resume "$fx/ckpt-v2/step-2" --dump-params "$TMP/v2one"
check "... and on 1 rank (1e-5)" params_close "$TMP/v2ref" "$TMP/v2one" 1e-5
finish
