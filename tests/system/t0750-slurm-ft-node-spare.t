#!/bin/bash
# t0750-slurm-ft-node-spare (Slurm testbed): a whole node of a job
# with spare_nodes: 1 is killed (scripts/slurm-testbed kill-node) -> the
# failure is recorded once (node_lost, that node), the next attempt runs as
# a new srun step in the SAME Slurm allocation (same Slurm job id, no trip
# through the queue) with the spare in the dead node's place, the job
# completes, and its params_crc32c equals an uninterrupted run's (world 3).
# 300 steps: the node must die mid-run, also on a loaded machine (at 200
# the job sometimes finished between step 50 and the kill).
: "${FT_STEPS:=300}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 4
BASE=$(baseline 3) || bail "the baseline run failed"
echo "# uninterrupted run (world 3): params_crc32c $BASE"

submit "$(dttrain_spec spare 3 "--inject-slow 0:25" \
    '{"spare_nodes": 1, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" \
    || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
VICTIM=$(rank_node "$ID" 1)
echo "# Slurm job $SJ; killing $VICTIM (rank 1's node)"
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
check "attempt 2 ran in the same Slurm job $SJ (in-allocation restart)" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj' "$TMP/j.json"
check "attempt 2 did not use $VICTIM" \
    jqt --arg v "$VICTIM" '[.data.attempts[1].nodes[].node] | index($v) == null' "$TMP/j.json"
check "attempt 2 ran on 3 nodes" jqt '[.data.attempts[1].nodes[].node] | length == 3' "$TMP/j.json"
check "attempt 2 says restart_path spare" jqt '.data.attempts[0].restart_path == null and .data.attempts[1].restart_path == "spare"' "$TMP/j.json"
check "attempt 2 resumed from a checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
check "the restart went through the allocation's loop (alloc_step event)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'alloc_step'")" -ge 1
check "one Slurm job for the whole run" test "$(ft_slurm_ids "$ID" | awk '{print $2}' | sort -u)" = "$SJ"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
