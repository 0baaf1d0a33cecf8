#!/bin/bash
# t0741-ft-ctld-down-at-end (local launcher): dtctld is killed
# with SIGKILL mid-run and stays down until every rank has finished and
# reported its result.  The agents keep their last events (result, rank
# exits, done) and deliver them once the controller is back, so the
# attempt succeeds as it is: no node counted lost, no second attempt, the
# parameters of an uninterrupted run.
FT_STEPS=120
. "$(dirname "$0")/ft-lib.sh"

P=$(free_port)
write_conf "ListenPort=$P"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
submit "$(dttrain_spec ctlddown 2 "" '{"heartbeat": {"node_timeout_ms": 3000}}')" \
    || bail "submit failed"
check "the job runs past step 10" wait_step "$ID" 10 90
PIDS="$(rank_pid "$ID" 0) $(rank_pid "$ID" 1)"
[[ "$PIDS" =~ ^[0-9]+\ [0-9]+$ ]] || bail "the processes of ranks 0 and 1 were not found ($PIDS)"
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
alive () { for p in $PIDS; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
# The trainers finish without a controller (their processes end).
check "the ranks ($PIDS) finish while dtctld is down" wait_for 120 eval '! alive'
sleep 6     # longer than the node timeout: only delivered events can save the attempt
check "dtctld restarts on port $P" start_fg
check "the job completes" wait_state "$ID" completed 60
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, detail}]' "$TMP/j.json" | sed 's/^/# /'
check "one attempt, succeeded, no restart" jqt '.data.attempt == 1 and .data.restarts == 0
    and .data.attempts[0].state == "succeeded"' "$TMP/j.json"
check "no node_lost event" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'node_lost'")" = 0
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
done_testing
