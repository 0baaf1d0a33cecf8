#!/bin/bash
# t0710-ft-hang (local launcher): a dttrain rank frozen with SIGSTOP
# -> the controller's step-progress watchdog (automatic hang timeout: max of
# HangTimeoutFloor and 10 x the p99 step time) declares a hang long before
# the collective timeout, the attempt is ended (the frozen process is
# killed too), and the job completes from the latest committed checkpoint
# with the parameters of an uninterrupted run.  Every rank of a synchronous
# job stalls with the frozen one; the heartbeats say which one is stopped
# (and which are blocked in a collective), so the failure names the frozen
# rank and its node, which is not excluded (a hang blamed on a rank
# restarts in place); the frozen rank is killed,
# so its peer saves the state (just-in-time: at most 1 step lost).
. "$(dirname "$0")/ft-lib.sh"

write_conf "HangTimeoutFloor=3s"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

# hang_timeout_ms 0 = automatic; the collective timeout (60 s) is far off.
submit "$(dttrain_spec hang 2 "--inject-slow 0:25" '{"heartbeat": {"hang_timeout_ms": 0}}')" \
    || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
NODE=$(api GET "/v1/jobs/$ID/ranks" | jq -r '.data[] | select(.rank == 1) | .node')
T0=$(now_ms)
check "SIGSTOP rank 1 (pid $PID)" kill -STOP "$PID"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "attempt 1 failed with cause hang, detected by the controller" \
    jqt '.data.attempts[0].cause == "hang" and .data.attempts[0].evidence.detected_by == "controller"' "$TMP/j.json"
jq -c '.data.attempts[0] | {cause_node, cause_rank, detail, timeout: .evidence.timeout_ms, p99: .evidence.p99_step_ms, candidates: .evidence.candidates}' "$TMP/j.json" | sed 's/^/# /'
check "the frozen rank 1 on $NODE is blamed, as stopped, and no node is excluded" \
    jqt ".data.attempts[0].cause_node == \"$NODE\" and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.stopped == true and .data.exclude == []" "$TMP/j.json"
check "the automatic timeout was the 3 s floor (steps are fast)" \
    jqt '.data.attempts[0].evidence.timeout_ms == 3000' "$TMP/j.json"
check "detected after the timeout, well before the 60 s collective timeout" \
    test "$T_DETECT_MS" -ge 2500 -a "$T_DETECT_MS" -le 20000
check "at most 1 step lost: the frozen rank was killed and its peer saved the state (lost $STEPS_LOST)" \
    test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "the frozen process is gone" wait_for 20 sh -c "! kill -0 $PID 2>/dev/null"
check "attempt 2 resumed from a committed checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
done_testing
