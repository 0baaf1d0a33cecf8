#!/bin/bash
# t0748-ft-time-limit (local launcher): the time-limit warning that
# Slurm sends (SIGUSR1, --signal=B:USR1@N) reaches one agent -> every rank
# checkpoints at one step and stops -> the attempt ends with cause
# time_limit (not as a completed job) -> the next attempt resumes from that
# final checkpoint, losing no step, and the job completes with the
# parameters of an uninterrupted run.
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
submit "$(dttrain_spec tlimit 2 "--inject-slow 0:25")" || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 90
AGENT=$(pgrep -f -- "--state-dir $TMP/users/0/agents/job-$ID.1/local1" | head -1)
T0=$(now_ms)
check "SIGUSR1 to the agent on local1 (pid $AGENT)" kill -USR1 "$AGENT"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "attempt 1 ended with cause time_limit after a committed final checkpoint" \
    jqt '.data.attempts[0].cause == "time_limit" and .data.attempts[0].evidence.final_checkpoint_committed' "$TMP/j.json"
check "a signal event was recorded" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'signal'")" = 1
R=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
api GET "/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
# The final checkpoint: the newest one attempt 1 committed (the retention
# of 3 may have deleted it since: it has a commit time either way).
FINAL=$(jq '[.data[] | select(.attempt == 1 and .commit_time != null and .state != "pending") | .step] | max // -1' "$TMP/c.json")
check "attempt 2 resumed from attempt 1's final committed checkpoint (step $R = $FINAL, past step 45)" \
    test "$R" -eq "$FINAL" -a "$FINAL" -ge 45 || jq -c '.data[] | {step, attempt, state, commit_time}' "$TMP/c.json" | diag
check "no step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -eq 0
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
done_testing
