#!/bin/bash
# t0740-ft-ctld-kill (local launcher): kill -9 of dtctld mid-run,
# restarted 5 s later on the same port: the agents keep their trainers
# running and reconnect, the same attempt continues (no restart), nothing
# committed is lost, the job completes with the parameters of an
# uninterrupted run, and PRAGMA integrity_check is ok.
# Long enough that the job cannot finish while the controller is down.
FT_STEPS=400
. "$(dirname "$0")/ft-lib.sh"

P=$(free_port)
write_conf "ListenPort=$P"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"
submit "$(dttrain_spec ctldkill 2 "--inject-slow 0:25" '{"heartbeat": {"node_timeout_ms": 3000}}')" \
    || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 90
sqlite3 "$TMP/state/dtctld.db" "SELECT step FROM checkpoints WHERE job_id = $ID AND state IN ('committed', 'deleted') ORDER BY step" | sort > "$TMP/before.txt"
T0=$(now_ms)
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "dtctld killed with SIGKILL, at least one checkpoint committed before" test -s "$TMP/before.txt"
sleep 5
check "dtctld restarts on port $P" start_fg
T1=$(now_ms)
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, detail}]' "$TMP/j.json" | sed 's/^/# /'
echo "# controller down for $(( (T1 - T0) / 1000 )) s"
check "one attempt: the run continued, no restart" jqt '.data.attempt == 1 and .data.restarts == 0
    and .data.attempts[0].state == "succeeded"' "$TMP/j.json"
sqlite3 "$TMP/state/dtctld.db" "SELECT step FROM checkpoints WHERE job_id = $ID AND state IN ('committed', 'deleted') ORDER BY step" | sort > "$TMP/after.txt"
check "every checkpoint committed before the kill is still recorded" \
    sh -c "comm -23 $TMP/before.txt $TMP/after.txt | grep -q . && exit 1 || exit 0"
check "checkpoints were committed after the kill too" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM checkpoints WHERE job_id = $ID AND commit_time > $T0")" -ge 1
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
done_testing
