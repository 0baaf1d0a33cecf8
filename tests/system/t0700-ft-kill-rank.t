#!/bin/bash
# t0700-ft-kill-rank (local launcher): kill -9 of one dttrain rank
# mid-run -> the failure is recorded once (cause trainer_exit, the rank's
# node and rank, exit code), the job restarts from the latest committed
# checkpoint on the same nodes (a rank's own exit does not exclude its
# healthy node) and completes, and its final params_crc32c
# equals that of an uninterrupted run of the same world size.
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"
# The cleanup kills this test's processes only (ft_own_procs): its
# controller, not another user's process reading the same corpus.
. "$(dirname "$0")/users-lib.sh"
dt_users_setup
as_user "$DT_USER_B" python3 -c 'import time; time.sleep(60)' --data "$CORPUS" &
DECOY_RUNNER=$!
wait_for 10 pgrep -u "$DT_USER_B" -f -- "--data $CORPUS" >/dev/null
DECOY=$(pgrep -u "$DT_USER_B" -f -- "--data $CORPUS")
OWN=" $(ft_own_procs | tr '\n' ' ') "
check "cleanup scope: dtctld ($CTLD_PID) is this test's, $DT_USER_B's reader of the corpus (${DECOY:-none}) is not" \
    eval '[ -n "$DECOY" ] && [[ "$OWN" == *" $CTLD_PID "* ]] && [[ "$OWN" != *" $DECOY "* ]]'
kill -9 $DECOY 2>/dev/null; wait "$DECOY_RUNNER" 2>/dev/null

# --no-jit: this test is the fallback to the last committed checkpoint;
# t0705 covers the just-in-time checkpoint that dp jobs take by default.
# Rank 1 holds at step 45 in the first attempt, so the kill lands there.
submit "$(first_attempt_only "--inject-hang 1:45" "$(dttrain_spec killrank 2 "--inject-slow 0:25 --no-jit")")" \
    || bail "submit failed"
check "the job reaches step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
T0=$(now_ms)
check "kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "attempt 1 failed with cause trainer_exit, node local2, rank 1, signal 9" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit"
         and .data.attempts[0].cause_node == "local2" and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.signal == 9' "$TMP/j.json"
check "the kill landed mid-run, at step 45 (the killed rank's last step)" \
    jqt '.data.attempts[0].evidence.last_step == 45' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'trainer_exit'")" = 1
check "attempt 2 resumed from a committed checkpoint (step >= 20), on local2 again, nothing excluded" \
    jqt '.data.attempts[1].resume_step >= 20 and (.data.attempts[1].nodelist | test("local2"))
         and .data.exclude == [] and .data.attempts[1].restart_path == "new_allocation"' "$TMP/j.json"
check "the resume source is recorded (committed)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '\$.resume_source') FROM events WHERE job_id = $ID AND kind = 'attempt_submitted' AND attempt = 2")" = committed
# How soon: bench/run (parts local and recovery); here only that it was seen after the kill.
check "the failure was detected after the kill ($T_DETECT_MS ms)" test "$T_DETECT_MS" -ge 0
# The controller asks for the next multiple of 20 at least two heartbeats
# ahead of the fastest rank, so with fast steps it may skip one: up to two
# intervals are lost, counted exactly (the killed rank's last step).
check "lost work is under two checkpoint intervals (2 x 20 steps + slack)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 50
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
done_testing
