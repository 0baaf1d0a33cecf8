#!/bin/bash
# t0756-slurm-ft-ctld-kill (Slurm testbed): kill -9 of dtctld
# (Slurm launcher) mid-run, restarted 5 s later on the same address and
# port: the Slurm job and its agents keep the trainers running and
# reconnect, the same attempt continues (no restart), nothing committed is
# lost, the job completes with the parameters of an uninterrupted run
# (world 2), and PRAGMA integrity_check is ok.
# Part 2: dtctld killed while a hot spare's re-formation gathers its
# agents (restart.reform, spare_nodes 1, a node killed; dtctld killed as
# soon as the re-formed attempt is in the database).  The restarted
# controller cannot go on with it (the agents still on the failed attempt
# learn the new token only from the re-form command, and the store holds
# tokens hashed): it fails it at once (rendezvous_timeout, the detail says
# why), the ordinary restart follows in the same allocation from the last
# committed checkpoint, and the job still completes with the uninterrupted
# run's parameters.  (Had every agent re-registered before the kill, the
# re-formed attempt goes on: also checked, whichever happened.)
: "${FT_STEPS:=200}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

submit "$(dttrain_spec ctldkill 2 "--inject-slow 0:40" '{"heartbeat": {"node_timeout_ms": 3000}}')" \
    || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
sqlite3 "$TMP/state/dtctld.db" "SELECT step FROM checkpoints WHERE job_id = $ID AND state IN ('committed', 'deleted') ORDER BY step" | sort > "$TMP/before.txt"
S0=$(job_step "$ID")
T0=$(now_ms)
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
echo "# Slurm job $SJ; dtctld (pid $CTLD_PID) killed with SIGKILL at step $S0"
check "at least one checkpoint committed before the kill" test -s "$TMP/before.txt"
sleep 5
check "the Slurm job $SJ is still running while dtctld is down" \
    eval '[ "$(squeue -h -j "$SJ" -o %T 2>/dev/null)" = RUNNING ]'
# Same configuration (same port); dtctld keeps the real curl in its PATH.
PATH=${PATH#"$TMP/bin:"} "$DTCTLD" -c "$TMP/dtctld.conf" --foreground >> "$TMP/ctld.log" 2>&1 &
CTLD_PID=$!
CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
check "dtctld restarts on the same port" wait_for 20 curl -sf "$URL/healthz" -o /dev/null
T1=$(now_ms)
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, detail}]' "$TMP/j.json" | sed 's/^/# /'
echo "# timeline (times relative to the kill -9 of dtctld)"
echo "#   dtctld killed          +0.000 s  (job at step $S0)"
echo "#   dtctld restarted       +$(( (T1 - T0) / 1000 )).$(printf %03d $(( (T1 - T0) % 1000 ))) s"
echo "#   attempt 1 continued    (no new attempt; steps lost 0: no restart)"
echo "#   job completed          $(python3 -c 'import sys;print("%+.3f s" % ((int(sys.argv[1]) - int(sys.argv[2])) / 1000))' "$(now_ms)" "$T0") (seen)"
check "one attempt: the run continued, no restart" jqt '.data.attempt == 1 and .data.restarts == 0
    and .data.attempts[0].state == "succeeded"' "$TMP/j.json"
check "the attempt kept its Slurm job $SJ" jqt --argjson sj "$SJ" '.data.attempts[0].slurm_job_id == $sj' "$TMP/j.json"
sqlite3 "$TMP/state/dtctld.db" "SELECT step FROM checkpoints WHERE job_id = $ID AND state IN ('committed', 'deleted') ORDER BY step" | sort > "$TMP/after.txt"
echo "# committed before the kill: $(tr '\n' ' ' < "$TMP/before.txt"); at the end: $(tr '\n' ' ' < "$TMP/after.txt")"
check "every checkpoint committed before the kill is still recorded" \
    sh -c "comm -23 $TMP/before.txt $TMP/after.txt | grep -q . && exit 1 || exit 0"
check "checkpoints were committed after the kill too" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM checkpoints WHERE job_id = $ID AND commit_time > $T0")" -ge 1
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- 2. dtctld killed while a hot spare's re-formation gathers its agents
PATH=${PATH#"$TMP/bin:"} "$DTCTLD" -c "$TMP/dtctld.conf" --foreground >> "$TMP/ctld.log" 2>&1 &
CTLD_PID=$!
CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
wait_for 20 curl -sf "$URL/healthz" -o /dev/null || bail "2: dtctld did not start"
submit "$(dttrain_spec ctldkill-hotspare 2 "--inject-slow 0:25" \
    '{"spare_nodes": 1, "restart": {"reform": true}, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 1000}}')" \
    || bail "2: submit failed"
check "2: the job runs" wait_step "$ID" 1 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
VICTIM=$(rank_node "$ID" 1)
[[ "$SJ" =~ ^[0-9]+$ ]] && [ -n "$VICTIM" ] || bail "2: no Slurm job id ($SJ) or rank 1 node ($VICTIM)"
check "2: the job runs past step 50" wait_step "$ID" 50 90
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "2: kill-node $VICTIM"
att2 () { sqlite3 "$TMP/state/dtctld.db" "SELECT state FROM attempts WHERE job_id = $ID AND attempt = 2" 2>/dev/null; }
for _ in $(seq 3000); do [ -n "$(att2)" ] && break; sleep 0.01; done
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
ST2=$(att2)
echo "# 2: Slurm job $SJ; killed $VICTIM (rank 1's node), then dtctld with attempt 2 ${ST2:-absent}"
check "2: attempt 2 was in the database when dtctld was killed" test -n "$ST2"
PATH=${PATH#"$TMP/bin:"} "$DTCTLD" -c "$TMP/dtctld.conf" --foreground >> "$TMP/ctld.log" 2>&1 &
CTLD_PID=$!
CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
check "2: dtctld restarts on the same port" wait_for 20 curl -sf "$URL/healthz" -o /dev/null
check "2: the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j2.json"
jq -c '.data.attempts[] | {attempt, state, cause, cause_node, slurm_job_id, restart_path, resume_step, detail}' "$TMP/j2.json" | sed 's/^/# 2: /'
check "2: attempt 1 failed with node_lost on $VICTIM, attempt 2 re-formed with the hot spare" \
    jqt --arg v "$VICTIM" '.data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v
         and .data.attempts[1].restart_path == "hot_spare"' "$TMP/j2.json"
if [ "$ST2" = starting ]; then
    check "2: the restarted dtctld failed the re-forming attempt 2 at once (rendezvous_timeout: the controller restarted)" \
        jqt '.data.attempts[1].state == "failed" and .data.attempts[1].cause == "rendezvous_timeout"
             and (.data.attempts[1].detail | test("controller restarted while attempt 2 re-formed"))' "$TMP/j2.json"
    check "2: attempt 3, the ordinary restart, ran in the same Slurm job $SJ without $VICTIM, from a committed checkpoint" \
        jqt --argjson sj "$SJ" --arg v "$VICTIM" '(.data.attempts | length) == 3 and .data.attempts[2].slurm_job_id == $sj
             and (.data.attempts[2].restart_path == "in_place" or .data.attempts[2].restart_path == "spare")
             and .data.attempts[2].resume_step >= 20 and ([.data.attempts[2].nodes[].node] | index($v) == null)' "$TMP/j2.json"
else
    check "2: attempt 2 had re-formed before the kill ($ST2) and went on to the end" \
        jqt '(.data.attempts | length) == 2 and .data.attempts[1].state == "succeeded"' "$TMP/j2.json"
fi
check "2: the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j2.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j2.json")
check "2: final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "2: the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "2: PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
check "2: no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
