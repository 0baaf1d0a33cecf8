#!/bin/bash
# t0602-dttrain-resume: checkpoints and consistent resume.  A 2-rank run that
# crashes at step 29 (nine steps after checkpoint 20, so its asynchronous
# write is committed even on a loaded machine) and resumes from the
# checkpoint of step 20 ends with the same params_crc32c as an uninterrupted run, bit for bit (dp and zero1); a
# corrupt shard is an error naming it (exit 3); a config change is an error
# naming the field (exit 4); a zero1 checkpoint resumes on another world size.
# The default model, the transformer, at a small size.
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
args="--data $data --steps 30 --global-batch 32 --context 16 --width 16 --heads 2 --layers 1 --checkpoint-every 10"

for par in dp zero1; do
    run 2 full-$par $args --parallel $par --checkpoint-dir "$TMP/ck-full-$par"
    check "$par: uninterrupted 2-rank run exits 0" test $? -eq 0
    ref=$(summary full-$par params_crc32c)
    check "$par: manifests of steps 10, 20, 30 written" \
        test -f "$TMP/ck-full-$par/step-10/manifest.json" -a -f "$TMP/ck-full-$par/step-30/manifest.json"

    run 2 crash-$par $args --parallel $par --checkpoint-dir "$TMP/ck-$par" --inject-crash 1:29
    check "$par: rank 1 exits 17 at the injected crash" test "$(cat $TMP/crash-$par.1.rc)" = 17
    check "$par: rank 0 exits 5 (peer lost)" test "$(cat $TMP/crash-$par.0.rc)" = 5
    check "$par: rank 0 says the collective failed" grep -q "collective failed" "$TMP/crash-$par.0.err"
    check "$par: step 20 committed before the crash" test -f "$TMP/ck-$par/step-20/manifest.json"
    check "$par: no step 30 after the crash" test ! -e "$TMP/ck-$par/step-30"

    run 2 resume-$par $args --parallel $par --checkpoint-dir "$TMP/ck-$par" --resume "$TMP/ck-$par"
    check "$par: resumed run exits 0" test $? -eq 0
    grep -q "resumed from .*step-20" "$TMP/resume-$par.0.err" || sed 's/^/# /' "$TMP/resume-$par.0.err"
    check "$par: resumed from step 20" grep -q "resumed from .*step-20" "$TMP/resume-$par.0.err"
    got=$(summary resume-$par params_crc32c)
    echo "# $par: uninterrupted $ref, crashed+resumed $got"
    check "$par: params_crc32c bit-identical to the uninterrupted run" same "$got" "$ref"
done

# Resume through the agent's environment (DT_CHECKPOINT_DIR + DT_RESUME_STEP).
DT_CHECKPOINT_DIR="$TMP/ck-full-dp" DT_RESUME_STEP=20 run 2 envres $args
check "DT_CHECKPOINT_DIR + DT_RESUME_STEP: exit 0" test "$(cat $TMP/envres.0.rc)" = 0
check "DT_RESUME_STEP=20: resumed from step-20" grep -q "resumed from .*step-20" "$TMP/envres.0.err"
check "DT_RESUME_STEP=20: same params as uninterrupted" same "$(summary envres params_crc32c)" "$(summary full-dp params_crc32c)"

# zero1 checkpoint of 2 ranks resumed on 3 and on 1 rank: resharded.
run 3 resh3 $args --parallel zero1 --checkpoint-dir "$TMP/ck-r3" --resume "$TMP/ck-zero1/step-20"
check "zero1 2 -> 3 ranks: exit 0" test $? -eq 0
check "zero1 2 -> 3 ranks: says so" grep -q "saved by 2 ranks (zero1), now 3 (zero1)" "$TMP/resh3.0.err"
run 1 resh1 $args --parallel dp --checkpoint-dir "$TMP/ck-r1" --resume "$TMP/ck-zero1/step-20"
check "zero1 2 ranks -> dp 1 rank: exit 0" test $? -eq 0
l3=$(summary resh3 train_loss); l1=$(summary resh1 train_loss); lf=$(summary full-zero1 train_loss)
echo "# final train loss: 2 ranks $lf, resumed on 3 $l3, on 1 $l1"
check "resharded runs end at the same loss (1e-4)" \
    $PY -c "import sys; sys.exit(0 if abs($l3-$lf) < 1e-4 and abs($l1-$lf) < 1e-4 else 1)"

# A config change is refused, naming the field.
run 2 mism $args --width 24 --checkpoint-dir "$TMP/ck-m" --resume "$TMP/ck-dp/step-20"
check "changed --width: exit 4" test "$(cat $TMP/mism.0.rc)" = 4
check "changed --width: error names the field" grep -q "'width'" "$TMP/mism.0.err"
run 1 mism2 $args --lr 0.01 --checkpoint-dir "$TMP/ck-m" --resume "$TMP/ck-dp/step-20"
check "changed --lr: exit 4 naming 'lr'" sh -c "test \$(cat $TMP/mism2.0.rc) = 4 && grep -q \"'lr'\" $TMP/mism2.0.err"

# A corrupt shard is refused, naming the shard.
cp -r "$TMP/ck-dp/step-20" "$TMP/bad"
printf '\xff\xff\xff\xff' | dd of="$TMP/bad/rank-1.ckpt" bs=1 seek=2000 conv=notrunc 2>/dev/null
run 2 corrupt $args --checkpoint-dir "$TMP/ck-c" --resume "$TMP/bad"
check "corrupt shard: exit 3" test "$(cat $TMP/corrupt.0.rc)" = 3
check "corrupt shard: error names rank-1.ckpt" grep -q "rank-1.ckpt.*CRC32C" "$TMP/corrupt.0.err"
finish
