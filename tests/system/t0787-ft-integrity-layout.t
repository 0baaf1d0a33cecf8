#!/bin/bash
# t0787-ft-integrity-layout (local launcher): silent errors under a
# parallel layout with tensor and pipeline parallelism.  dttrain runs two
# blocks with --tp 2 --pp 2 over 12 ranks (dp 3), 3 ranks per node, so each
# (tp, pp) position has three replicas: tp0.pp0 (ranks 0, 4, 8), tp1.pp0 (1,
# 5, 9), tp0.pp1 (2, 6, 10), tp1.pp1 (3, 7, 11).  Rank 7 (tp1 of the second
# stage, on local3) gets a bit flip in its slice of h1.mlp.w1 (a tensor only
# the second stage holds) before step 13: with checks every 5 steps the
# controller votes within each group only (the tp ranks hold different
# slices and the stages different tensors: no false divergence between
# them), names rank 7 on local3 at step 15, rolls back to step 10 (the
# checkpoint's fingerprints verified per group at resume), attributes the
# fault to local3's hardware, and the job completes with the parameters of
# an uninterrupted run of the same layout.  Then, under pipeline parallelism alone (dp 2 x pp 2, 4 ranks),
# a flip in rank 3's h1.mlp.w1 before step 15 with the checks off, and a
# crash at step 25 (no just-in-time checkpoint): the restart refuses the
# checkpoint of step 20 by its fingerprints (group tp0.pp1's shards
# disagree) and resumes from 10, ending as an uninterrupted run of that
# layout.  Last, without a controller, a NaN in tp rank 1's gradient of a
# tensor both tp ranks hold whole: skipped and named.
. "$(dirname "$0")/ft-lib.sh"

FT_STEPS=25
MODEL_ARGS="--data $CORPUS --steps $FT_STEPS --global-batch 24 $FT_MODEL --layers 2 --val-samples 16 --quiet --tp 2 --pp 2"
write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 12) || bail "the baseline run (dp 3 x tp 2 x pp 2) failed"
echo "# uninterrupted run (dp 3 x tp 2 x pp 2): params_crc32c $BASE"
CKPT='"checkpoint": {"every_steps": 10, "keep": 5}'

submit "$(dttrain_spec tppp 4 "--inject-slow 0:3 --inject-bitflip 7:13:h1.mlp.w1:3" \
    "{\"ranks_per_node\": 3, \"integrity\": {\"every_steps\": 5, \"action\": \"rollback\"}, $CKPT}")" \
    || bail "submit failed"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/job.json"
api GET "/v1/jobs/$ID/events" > "$TMP/ev.json"
jq -c '[.data.attempts[] | {attempt, cause, resume_step, exit: .evidence.exit_code}]' "$TMP/job.json" | sed 's/^/# /'
jq -c '.data[] | select(.kind | test("divergence|integrity|checkpoint_bad")) | [.attempt, .kind, .rank, .node, .detail]' \
    "$TMP/ev.json" | sed 's/^/#   /'
ev () { jq "[.data[] | select(.kind == \"$1\")$2] | length" "$TMP/ev.json"; }
check "one divergence: rank 7 on local3 in group tp1.pp1 at step 15, by majority of its 3 replicas" \
    test "$(ev replica_divergence '| select(.attempt == 1 and .rank == 7 and .node == "local3" and .data.step == 15
        and .data.group == "tp1.pp1" and (.data.fingerprints | keys) == ["11", "3", "7"]
        and .data.majority != .data.fingerprints["7"] and .data.tensors == ["h1.mlp.w1"])')" = 1
check "no divergence reported in any other group or step" test "$(ev replica_divergence)" = 1
check "attempt 1 rolled back, attempt 2 resumed from step 10" \
    jqt '.data.attempts[0].cause == "integrity_rollback" and .data.attempts[1].resume_step == 10' "$TMP/job.json"
check "attributed to the hardware of local3, which is excluded" \
    jqt '.data.exclude == ["local3"]' "$TMP/job.json"
check "the attribution event says hardware of local3" \
    test "$(ev integrity_attributed '| select(.data.cause == "hardware" and .node == "local3")')" = 1
GOT=$(jq -r .data.result.params_crc32c "$TMP/job.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"

# (pipeline parallelism alone, dp 2 x pp 2: 4 ranks, 2 per node; group
# tp0.pp1 is ranks 1 and 3)
PP_ARGS="--data $CORPUS --steps 30 --global-batch 24 $FT_MODEL --layers 2 --val-samples 16 --quiet --pp 2"
BASE_PP=$(MODEL_ARGS=$PP_ARGS baseline 4) || bail "the baseline run (dp 2 x pp 2) failed"
echo "# uninterrupted run (dp 2 x pp 2): params_crc32c $BASE_PP"
SPEC=$(dttrain_spec late 2 "" "{\"ranks_per_node\": 2, \"integrity\": {\"every_steps\": 0}, $CKPT}" |
    jq --arg t "$DTTRAIN" --arg a "$PP_ARGS" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-bitflip 3:15:h1.mlp.w1:3 --inject-crash 0:25 --no-jit; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "late: the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/late.job.json"
jq -c '[.data.attempts[] | {attempt, cause, resume_step, exit: .evidence.exit_code}]' "$TMP/late.job.json" | sed 's/^/# /'
check "late: the checkpoint of step 20 was refused at load (exit 3, fingerprint), the job resumed from 10" \
    jqt '[.data.attempts[1] | .evidence.exit_code == 3 and (.evidence.stderr_tail | test("fingerprint"))] == [true]
         and [.data.attempts[1,2] | .resume_step] == [20, 10]' "$TMP/late.job.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/late.job.json")
check "late: final params_crc32c $GOT equals the uninterrupted run's $BASE_PP" same_params "$ID" "$GOT" "$BASE_PP"

# A NaN in tp rank 1's gradient of a tensor every tp rank holds whole (wte,
# its offset 0), without data parallelism (2 ranks, tp 2, no controller):
# the step's update is skipped on both ranks and rank 1 says its own
# gradient was not finite (the norm counts such tensors on tp rank 0
# only, yet a non-finite value anywhere makes it non-finite).
rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 OPENBLAS_NUM_THREADS=1 "$DTTRAIN" --rendezvous-dir "$rdv" --data "$CORPUS" \
        --steps 5 --global-batch 8 $FT_MODEL --val-samples 8 --tp 2 --inject-nan 1:3 \
        > "$TMP/nan.$r.out" 2> "$TMP/nan.$r.err" &
    eval "P$r=\$!"
done
wait "$P0"; RC0=$?; wait "$P1"; RC1=$?
check "tp NaN: both ranks finish (exit $RC0, $RC1), one update skipped, rank 1's own gradient named" \
    sh -c "test $RC0 = 0 && test $RC1 = 0 && test \"\$(tail -1 $TMP/nan.0.out | jq .skipped_updates)\" = 1 &&
        grep -q 'rank 1: step 3: non-finite gradient.*NOT finite' $TMP/nan.1.err"
done_testing
