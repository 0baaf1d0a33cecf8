#!/bin/bash
# t0761-slurm-ft-integrity (Slurm testbed, as an ordinary user): rank 1's
# gradient of step 45 is NaN in the first attempt only (a transient
# hardware fault) in a 2-node job of a 3-node cluster with
# integrity.action rollback -> event nonfinite names rank 1 and its node
# N, the update is skipped, the attempt rolls back to step 40, the re-run
# passes step 45 cleanly -> attributed to the hardware: N gets a
# silent_data_corruption failure and joins the job's exclude list.  A
# crash of rank 0 later in the re-run (exclude_failed_nodes off, so only
# the integrity verdict excludes anything) shows that the next attempt
# runs without N; the job completes with the parameters of an
# uninterrupted run.
: "${FT_STEPS:=120}"
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

A="$MODEL_ARGS --inject-slow 0:25"
SPEC=$(dttrain_spec nan 2 "" '{"integrity": {"every_steps": 10, "action": "rollback"},
    "checkpoint": {"keep": 5}, "restart": {"exclude_failed_nodes": false},
    "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}' |
    jq --arg t "$DTTRAIN" --arg a "$A" '.command = ["sh", "-c",
  "case \"$TORCHELASTIC_RESTART_COUNT\" in 0) exec \"$0\" \($a) --inject-nan 1:45 ;; 1) exec \"$0\" \($a) --inject-crash 0:90 --no-jit ;; esac; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "the job completes" wait_state "$ID" completed 180
api GET "/v1/jobs/$ID" > "$TMP/j.json"
api GET "/v1/jobs/$ID/events" > "$TMP/e.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, cause, resume_step, nodes: [.nodes[]?.node]}]' "$TMP/j.json" | sed 's/^/# /'
jq -c '.data[] | select(.kind | test("nonfinite|integrity")) | [.attempt, .kind, .rank, .node, .detail]' "$TMP/e.json" | sed 's/^/#   /'
N=$(jq -r '[.data[] | select(.kind == "nonfinite" and .attempt == 1)][0].node // empty' "$TMP/e.json")
SJ=$(jq -r '.data.attempts[0].slurm_job_id' "$TMP/j.json")
ft_check_user "$ID" "$SJ"
check "nonfinite at step 45 names rank 1 on its node ($N)" \
    jqt --arg n "$N" '[.data[] | select(.kind == "nonfinite" and .attempt == 1 and .rank == 1
         and .data.step == 45 and .node == $n and $n != "")] | length == 1' "$TMP/e.json"
check "rank 1 ran on $N in attempt 1" \
    jqt --arg n "$N" '[.data.attempts[0].nodes[] | select(.node == $n and .node_rank == 1)] | length == 1' "$TMP/j.json"
check "attempt 1 rolled back; attempt 2 resumed from step 40" \
    jqt '.data.attempts[0].cause == "integrity_rollback" and .data.attempts[1].resume_step == 40' "$TMP/j.json"
check "attributed to the hardware of $N (not reproduced), $N excluded" \
    jqt --arg n "$N" '(.data.exclude | index($n) != null)' "$TMP/j.json"
check "$N has a silent_data_corruption failure" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM node_health WHERE node = '$N' AND kind = 'silent_data_corruption'")" = 1
check "attempt 3 (after the crash) runs without $N" \
    jqt --arg n "$N" '.data.attempts[1].cause == "trainer_exit" and ([.data.attempts[2].nodes[].node] | index($n) == null)' "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no trainer left on any node" wait_for 20 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
