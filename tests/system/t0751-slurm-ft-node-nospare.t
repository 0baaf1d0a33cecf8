#!/bin/bash
# t0751-slurm-ft-node-nospare (Slurm testbed): a whole node of a
# 2-node job without spares is killed -> the failure is recorded once
# (node_lost, that node), the Slurm job of the attempt ends (no process of
# it survives), the next attempt is a NEW Slurm job that excludes the dead
# node, the job completes, and params_crc32c equals an uninterrupted run's
# (world 2).
: "${FT_STEPS:=200}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

submit "$(dttrain_spec nospare 2 "--inject-slow 0:25" \
    '{"heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
VICTIM=$(rank_node "$ID" 1)
echo "# Slurm job $SJ; killing $VICTIM (rank 1's node, not the batch host)"
T0=$(now_ms)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
check "the job completes" wait_state "$ID" completed 120
# (after the injection, so that these checks do not delay it)
ft_check_user "$ID" "$SJ"
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost"
         and .data.attempts[0].cause_node == $v' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
check "the first Slurm job $SJ is over" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
SJ2=$(jq -r '.data.attempts[1].slurm_job_id' "$TMP/j.json")
check "attempt 2 is a new Slurm job ($SJ2)" test "$SJ2" -gt 0 -a "$SJ2" != "$SJ"
check "attempt 2 says restart_path new_allocation" jqt '.data.attempts[1].restart_path == "new_allocation"' "$TMP/j.json"
check "the new Slurm job excludes $VICTIM" eval 'scontrol show job "$SJ2" | grep -q "ExcNodeList=.*$VICTIM"'
check "attempt 2 did not use $VICTIM" \
    jqt --arg v "$VICTIM" '[.data.attempts[1].nodes[].node] | index($v) == null' "$TMP/j.json"
check "attempt 2 resumed from a checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
