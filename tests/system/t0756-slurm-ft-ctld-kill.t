#!/bin/bash
# t0756-slurm-ft-ctld-kill (Slurm testbed): kill -9 of dtctld
# (Slurm launcher) mid-run, restarted 5 s later on the same address and
# port: the Slurm job and its agents keep the trainers running and
# reconnect, the same attempt continues (no restart), nothing committed is
# lost, the job completes with the parameters of an uninterrupted run
# (world 2), and PRAGMA integrity_check is ok.
: "${FT_STEPS:=200}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 2
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
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
