#!/bin/bash
# t0605-dttrain-transformer: the transformer (--model transformer) against
# PyTorch 1.13 as the oracle (same initial parameters, same batch: loss and
# every gradient within 1e-5 relative; then 20 AdamW steps, the parameters
# within 1e-5), and everything the MLP promises: 1, 2 and 4 ranks agree
# after 50 steps (1e-5), dp and zero1 bit for bit, crash + resume
# bit-identical, a checkpoint of the other model refused naming the field.
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
shape="--model transformer --context 16 --width 32 --heads 4 --layers 2"

# --- the model's options -------------------------------------------------------
"$DTTRAIN" --data "$data" --model transformer --width 30 --heads 4 2>"$TMP/err"; rc=$?
check "--width not a multiple of --heads: exit 2 naming both" \
    sh -c "test $rc -eq 2 && grep -q -- '--width 30 is not a multiple of --heads 4' $TMP/err"
"$DTTRAIN" --data "$data" --model transformer --hidden 64 2>"$TMP/err"; rc=$?
check "--hidden with the transformer: exit 2 naming it" sh -c "test $rc -eq 2 && grep -q -- '--hidden sizes --model mlp' $TMP/err"
"$DTTRAIN" --data "$data" --model mlp --heads 2 2>"$TMP/err"; rc=$?
check "--heads with the MLP: exit 2 naming it" sh -c "test $rc -eq 2 && grep -q -- '--heads sizes --model transformer' $TMP/err"
"$DTTRAIN" --data "$data" --model lstm 2>"$TMP/err"; rc=$?
check "unknown --model: exit 2 naming it" sh -c "test $rc -eq 2 && grep -q lstm $TMP/err"

# --- PyTorch as the oracle -------------------------------------------------------
if $PY -c 'import torch' 2>/dev/null; then
    oargs="--data $data --context 16 --width 32 --heads 4 --layers 2 --global-batch 16 --steps 20 --warmup-steps 5"
    run 1 oracle $shape --data "$data" --global-batch 16 --steps 20 --warmup-steps 5 \
        --dump-tensors "$TMP/dump" --dump-params "$TMP/dump/final.f32"
    check "oracle run (20 steps, tensors dumped) exits 0" test $? -eq 0
    $PY "$TOP_SRCDIR/tests/system/tfm-oracle.py" "$TMP/dump" $oargs --final "$TMP/dump/final.f32" \
        --tol 1e-5 >"$TMP/oracle.txt" 2>&1
    rc=$?
    sed 's/^/# /' "$TMP/oracle.txt" | grep -v '^# grad h\|^# param h'
    check "PyTorch: loss, every gradient and the parameters after 20 steps within 1e-5" test $rc -eq 0
    check "PyTorch: all 29 tensors compared" test "$(grep -c '^grad .* rel ' "$TMP/oracle.txt")" = 29
else
    echo "# PyTorch (/usr/bin/python3 -c 'import torch') not available: oracle skipped"
    fail "PyTorch oracle: torch not importable"
fi

# --- 1, 2, 4 ranks; dp and zero1 -------------------------------------------------
args="$shape --data $data --steps 50 --global-batch 32 --warmup-steps 5"
run 1 w1 $args --dump-params "$TMP/p1"; check "1 rank: exit 0" test $? -eq 0
run 2 w2 $args --dump-params "$TMP/p2"; check "2 ranks dp: exit 0" test $? -eq 0
run 4 w4 $args --micro-batch 3 --dump-params "$TMP/p4"
check "4 ranks dp, micro-batches of 3: exit 0" test $? -eq 0
run 2 z2 $args --parallel zero1 --dump-params "$TMP/z2"; check "2 ranks zero1: exit 0" test $? -eq 0
check "1 vs 2 ranks: params within 1e-5 after 50 steps" params_close "$TMP/p1" "$TMP/p2" 1e-5
check "1 vs 4 ranks: params within 1e-5 after 50 steps" params_close "$TMP/p1" "$TMP/p4" 1e-5
check "2 ranks: dp and zero1 params_crc32c equal" \
    test "$(summary w2 params_crc32c)" = "$(summary z2 params_crc32c)"
l0=$(summary w1 train_loss)
echo "# 1 rank: train loss after 50 steps $l0 (uniform: 5.545)"
check "the loss falls (below 4.5 nats after 50 steps)" $PY -c "import sys; sys.exit(0 if $l0 < 4.5 else 1)"

# --- crash + resume, bit for bit ----------------------------------------------------
rargs="$shape --data $data --steps 30 --global-batch 32 --checkpoint-every 10"
for par in dp zero1; do
    run 2 full-$par $rargs --parallel $par --checkpoint-dir "$TMP/ck-full-$par"
    check "$par: uninterrupted 2-rank run exits 0" test $? -eq 0
    run 2 crash-$par $rargs --parallel $par --checkpoint-dir "$TMP/ck-$par" --inject-crash 1:25
    check "$par: rank 1 exits 17 at the injected crash" test "$(cat $TMP/crash-$par.1.rc)" = 17
    run 2 resume-$par $rargs --parallel $par --checkpoint-dir "$TMP/ck-$par" --resume "$TMP/ck-$par"
    check "$par: resumed run exits 0" test $? -eq 0
    check "$par: resumed from step 20" grep -q "resumed from .*step-20" "$TMP/resume-$par.0.err"
    ref=$(summary full-$par params_crc32c); got=$(summary resume-$par params_crc32c)
    echo "# $par: uninterrupted $ref, crashed+resumed $got"
    check "$par: params_crc32c bit-identical to the uninterrupted run" test -n "$ref" -a "$got" = "$ref"
done

# --- a checkpoint of the other model, or another shape, is refused ---------------------
run 1 mlp --model mlp --data "$data" --steps 10 --global-batch 32 --context 16 --checkpoint-dir "$TMP/ck-mlp"
check "an MLP run writes a checkpoint" test -f "$TMP/ck-mlp/step-10/manifest.json"
run 1 mism $rargs --checkpoint-dir "$TMP/ck-m" --resume "$TMP/ck-mlp"
check "transformer resuming an MLP checkpoint: exit 4" test "$(cat $TMP/mism.0.rc)" = 4
check "... the error names the field 'model'" grep -q "'model' differs" "$TMP/mism.0.err"
run 1 mism2 $rargs --heads 2 --checkpoint-dir "$TMP/ck-m2" --resume "$TMP/ck-dp/step-20"
check "changed --heads: exit 4 naming 'heads'" \
    sh -c "test \$(cat $TMP/mism2.0.rc) = 4 && grep -q \"'heads'\" $TMP/mism2.0.err"
# --- the shards' named tensor table; the first format still loads ---------------------
check "a transformer shard names its tensors (params/, adam_m/, adam_v/ + name)" \
    sh -c "grep -aq 'params/h0.attn.wqkv' $TMP/ck-dp/step-20/rank-0.ckpt \
        && grep -aq 'adam_v/head.w' $TMP/ck-dp/step-20/rank-1.ckpt"
# A version 1 shard (before the tensor table; an MLP, written by the
# previous dttrain) resumes and continues like an uninterrupted run.
fx="$TOP_SRCDIR/tests/system/data/ckpt-v1"
fargs="--model mlp --data $fx/text.txt --steps 4 --global-batch 4 --context 4 --embed 2 --hidden 4 --layers 1"
run 1 v1ref $fargs --dump-params "$TMP/v1ref"; check "reference run for the v1 shard: exit 0" test $? -eq 0
run 1 v1res $fargs --resume "$fx/step-2" --dump-params "$TMP/v1res"
check "a version 1 checkpoint resumes: exit 0" test $? -eq 0
check "... from its step 2" grep -q "resumed from .*step-2" "$TMP/v1res.0.err"
check "... and ends where an uninterrupted run does (1e-5)" params_close "$TMP/v1ref" "$TMP/v1res" 1e-5
finish
