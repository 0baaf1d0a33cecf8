#!/bin/bash
# t0787-ft-integrity-layout (local launcher): silent errors under a
# parallel layout.  dttrain runs with --tp 2 over 6 ranks (dp 3), 2 ranks
# per node, so each tensor-parallel position (tp0.pp0: ranks 0, 2, 4;
# tp1.pp0: ranks 1, 3, 5) has three replicas.  Rank 3 (tp1, on local2) gets
# a bit flip in its slice of h0.mlp.w1 before step 45: the controller votes
# within each group only (the tp ranks hold different slices: no false
# divergence between them), names rank 3 on local2 at step 50, rolls back to
# step 40 (the checkpoint's fingerprints verified per group at resume), and
# the job completes with the parameters of an uninterrupted run of the
# same layout.  Then the same flip with the checks off, and a crash at
# step 50 (a layout takes no just-in-time checkpoint): the restart refuses
# the checkpoint of step 40 by its fingerprints (group tp1.pp0's shards
# disagree) and resumes from 20, again ending as the uninterrupted run.
. "$(dirname "$0")/ft-lib.sh"

FT_STEPS=60
MODEL_ARGS="--data $CORPUS --steps $FT_STEPS --global-batch 24 $FT_MODEL --val-samples 16 --quiet --tp 2"
write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 6) || bail "the baseline run (dp 3 x tp 2) failed"
echo "# uninterrupted run (dp 3 x tp 2): params_crc32c $BASE"

submit "$(dttrain_spec tp 3 "--inject-slow 0:25 --inject-bitflip 3:45:h0.mlp.w1:3" \
    '{"ranks_per_node": 2, "integrity": {"every_steps": 10, "action": "rollback"}, "checkpoint": {"keep": 5}}')" \
    || bail "submit failed"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/job.json"
api GET "/v1/jobs/$ID/events" > "$TMP/ev.json"
jq -c '[.data.attempts[] | {attempt, cause, resume_step, exit: .evidence.exit_code}]' "$TMP/job.json" | sed 's/^/# /'
jq -c '.data[] | select(.kind | test("divergence|integrity|checkpoint_bad")) | [.attempt, .kind, .rank, .node, .detail]' \
    "$TMP/ev.json" | sed 's/^/#   /'
ev () { jq "[.data[] | select(.kind == \"$1\")$2] | length" "$TMP/ev.json"; }
check "one divergence: rank 3 on local2 in group tp1.pp0 at step 50, by majority of its 3 replicas" \
    test "$(ev replica_divergence '| select(.attempt == 1 and .rank == 3 and .node == "local2" and .data.step == 50
        and .data.group == "tp1.pp0" and (.data.fingerprints | keys) == ["1", "3", "5"]
        and .data.majority != .data.fingerprints["3"])')" = 1
check "no divergence reported in any other group or step" test "$(ev replica_divergence)" = 1
check "attempt 1 rolled back, attempt 2 resumed from step 40" \
    jqt '.data.attempts[0].cause == "integrity_rollback" and .data.attempts[1].resume_step == 40' "$TMP/job.json"
check "attributed to the hardware of local2" \
    test "$(ev integrity_attributed '| select(.data.cause == "hardware" and .node == "local2")')" = 1
GOT=$(jq -r .data.result.params_crc32c "$TMP/job.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"

SPEC=$(dttrain_spec late 3 "" '{"ranks_per_node": 2, "integrity": {"every_steps": 0}, "checkpoint": {"keep": 5}}' |
    jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-bitflip 3:25:h0.mlp.w1:3 --inject-crash 0:50; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "late: the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/late.job.json"
jq -c '[.data.attempts[] | {attempt, cause, resume_step, exit: .evidence.exit_code}]' "$TMP/late.job.json" | sed 's/^/# /'
check "late: the checkpoint of step 40 was refused at load (exit 3, fingerprint), the job resumed from 20" \
    jqt '[.data.attempts[1] | .evidence.exit_code == 3 and (.evidence.stderr_tail | test("fingerprint"))] == [true]
         and [.data.attempts[1,2] | .resume_step] == [40, 20]' "$TMP/late.job.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/late.job.json")
check "late: final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"
done_testing
