#!/bin/bash
# t0753-slurm-ft-hang (Slurm testbed): one rank of a 2-node job
# (no spares) frozen with SIGSTOP -> detected as a hang (cause hang, blamed
# on that rank and its node, not on rank 0 blocked on it in the allreduce;
# no node is excluded), the frozen rank is killed so that its peer
# saves the state (just-in-time: at most 1 step lost), the next attempt
# runs in place (a new step of the same Slurm job, on the same nodes), the
# job completes, and params_crc32c
# equals an uninterrupted run's (world 2).  hang_timeout_ms 4000 keeps the
# test short (the automatic timeout has a 30 s floor).
: "${FT_STEPS:=300}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

submit "$(dttrain_spec hang 2 "--inject-slow 0:25" \
    '{"heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500, "hang_timeout_ms": 4000}}')" \
    || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
PID=$(rank_pid "$ID" 1)
NODE=$(rank_node "$ID" 1)
[ -n "$PID" ] && [ -n "$NODE" ] || bail "rank 1's pid or node is unknown"
echo "# Slurm job $SJ; SIGSTOP of rank 1 (pid $PID on $NODE)"
T0=$(now_ms)
check "SIGSTOP rank 1" kill -STOP "$PID"
check "the job completes" wait_state "$ID" completed 150
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause hang" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "hang"' "$TMP/j.json"
echo "# blamed: node $(jq -r .data.attempts[0].cause_node "$TMP/j.json") rank $(jq -r .data.attempts[0].cause_rank "$TMP/j.json") ($(jq -r .data.attempts[0].detail "$TMP/j.json"))"
check "the frozen rank 1 on $NODE is blamed, and no node is excluded" \
    jqt ".data.attempts[0].cause_node == \"$NODE\" and .data.attempts[0].cause_rank == 1
         and .data.exclude == []" "$TMP/j.json"
check "attempt 2 ran in place: the same Slurm job $SJ, the same nodes" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj and .data.attempts[1].restart_path == "in_place"
         and ([.data.attempts[1].nodes[].node] | sort) == ([.data.attempts[0].nodes[] | select(.spare | not) | .node] | sort)' "$TMP/j.json"
check "at most 1 step lost: the frozen rank was killed and its peer saved the state (lost $STEPS_LOST)" \
    test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
check "the frozen process is gone" wait_for 20 eval '! kill -0 "$PID" 2>/dev/null'
check "the first Slurm job $SJ is over" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "attempt 2 resumed from a checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
