#!/bin/bash
# t0752-slurm-ft-kill-rank (Slurm testbed): kill -9 of one dttrain
# rank of a 2-node job with spare_nodes: 1 -> the failure is recorded once
# (trainer_exit, that rank's node and rank, signal 9), the next attempt runs
# in place: a new step of the same Slurm allocation on the same two nodes
# (the node is healthy, so it is not excluded, and the spare stays idle,
# kept for a real node loss), the job completes, and params_crc32c equals
# an uninterrupted run's (world 2).
: "${FT_STEPS:=200}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

submit "$(dttrain_spec killrank 2 "--inject-slow 0:25" \
    '{"spare_nodes": 1, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" \
    || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
PID=$(rank_pid "$ID" 1)
NODE=$(rank_node "$ID" 1)
[ -n "$PID" ] && [ -n "$NODE" ] || bail "rank 1's pid or node is unknown"
echo "# Slurm job $SJ; kill -9 of rank 1 (pid $PID on $NODE)"
T0=$(now_ms)
check "kill -9 rank 1" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 120
# (after the injection, so that these checks do not delay it)
ft_check_user "$ID" "$SJ"
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause trainer_exit, node $NODE, rank 1, signal 9" \
    jqt --arg v "$NODE" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit"
         and .data.attempts[0].cause_node == $v and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.signal == 9' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
check "attempt 2 ran in place in the same Slurm job $SJ (restart_path in_place)" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj and .data.attempts[1].restart_path == "in_place"' "$TMP/j.json"
check "attempt 2 ran on the same nodes, $NODE included, and nothing is excluded" \
    jqt --arg v "$NODE" '([.data.attempts[1].nodes[].node] | sort) == ([.data.attempts[0].nodes[] | select(.spare | not) | .node] | sort)
         and ([.data.attempts[1].nodes[].node] | index($v) != null) and .data.exclude == []' "$TMP/j.json"
check "attempt 2 resumed from a checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
