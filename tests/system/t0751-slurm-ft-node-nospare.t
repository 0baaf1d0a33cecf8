#!/bin/bash
# t0751-slurm-ft-node-nospare (Slurm testbed): a whole node of a
# 2-node job without spares is killed -> the failure is recorded once
# (node_lost, that node), the Slurm job of the attempt ends (no process of
# it survives), the next attempt is a NEW Slurm job that excludes the dead
# node, the job completes, and params_crc32c equals an uninterrupted run's
# (world 2).
# Then two jobs in a parallel layout (transformer with 2 layers, 2 heads,
# 60 steps), on the 5-node cluster (the dead node restarted):
#   2. tp 2 x pp 2 on 4 nodes with a spare: a node killed -> the spare
#      takes its place; the survivors hold no replica of the dead rank's
#      (tp, pp) position, so no just-in-time checkpoint (the jit_window
#      event says so), the restart resumes from the last committed one in
#      the same layout, and the job ends with params_crc32c equal to an
#      uninterrupted tp 2 x pp 2 run's.
#   3. dp 2 x tp 2 on the 4 healthy nodes, no spare, min_nodes 2: a node
#      killed -> the survivors hold every slice and write a just-in-time
#      checkpoint together; 3 ranks would hold no whole tp group, so the
#      next attempt is a new Slurm job on 2 of the 3 healthy nodes in the
#      new layout tp 2 x dp 1, resumed from that checkpoint, and the job
#      completes.
: "${FT_STEPS:=200}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 5
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
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- layouts ---------------------------------------------------------------------------
# (the PATH without the test's curl wrapper: the daemon is the cluster's)
PATH=${DT_PATH_NOWRAP:-$PATH} "$TESTBED" start-node "$VICTIM" >/dev/null || fail "start-node $VICTIM"
check "$VICTIM is back: 5 nodes idle" \
    wait_for 30 eval '[ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq 5 ]'
MODEL_ARGS="${MODEL_ARGS/--steps $FT_STEPS/--steps 60}"
MODEL_ARGS="${MODEL_ARGS/--layers 1/--layers 2}"
LBASE=$(MODEL_ARGS="$MODEL_ARGS --tp 2 --pp 2" baseline 4) || bail "the tp 2 x pp 2 baseline run failed"
echo "# uninterrupted run (tp 2 x pp 2, world 4, 60 steps): params_crc32c $LBASE"
jw () { sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '$1') FROM events WHERE job_id = $ID AND kind = 'jit_window' ORDER BY id LIMIT 1"; }

# 2. tp 2 x pp 2 with a spare
submit "$(dttrain_spec tp2pp2 4 "--inject-slow 0:2" \
    '{"spare_nodes": 1, "parallel": {"tp": 2, "pp": 2},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
check "the tp 2 x pp 2 job runs past step 25" wait_step "$ID" 25 90
VICTIM=$(rank_node "$ID" 3)
echo "# killing $VICTIM (rank 3's node: tp1.pp1)"
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/l2.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
check "attempt 2 took the spare (restart_path spare), same layout tp 2 x pp 2 x dp 1" \
    jqt '.data.attempts[1].restart_path == "spare" and .data.attempts[1].layout == {"tp": 2, "pp": 2, "dp": 1}' "$TMP/l2.json"
check "no just-in-time checkpoint: the survivors do not hold tp1.pp1" \
    test "$(jw '$.resume_source') $(jw '$.missing_positions')" = 'committed ["tp1.pp1"]'
GOT=$(jq -r .data.result.params_crc32c "$TMP/l2.json")
check "params_crc32c $GOT equals the uninterrupted tp 2 x pp 2 run's $LBASE" same_params "$ID" "$GOT" "$LBASE"

# 3. dp 2 x tp 2, no spare: fewer nodes, a new layout, from the survivors' checkpoint
submit "$(dttrain_spec dp2tp2 4 "--inject-slow 0:5" \
    '{"parallel": {"tp": 2}, "restart": {"max_restarts": 3, "min_nodes": 2},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
check "the dp 2 x tp 2 job runs past step 25" wait_step "$ID" 25 90
VICTIM=$(rank_node "$ID" 3)
echo "# killing $VICTIM (rank 3's node: dp1 tp1)"
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/l3.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
check "the survivors' shards made a just-in-time checkpoint" test "$(jw '$.resume_source')" = jit
check "attempt 2: a new Slurm job on 2 nodes in tp 2 x dp 1 (was dp 2), resumed from it" \
    jqt --argjson s "$(jw '$.jit_step')" '.data.attempts[0].layout == {"tp": 2, "pp": 1, "dp": 2}
        and .data.attempts[1].layout == {"tp": 2, "pp": 1, "dp": 1} and .data.attempts[1].num_nodes == 2
        and .data.attempts[1].restart_path == "new_allocation" and .data.attempts[1].resume_step == $s' "$TMP/l3.json"
check "the result: 60 steps, tp 2 x dp 1, global batch 32" \
    jqt '.data.result.steps == 60 and .data.result.tp == 2 and .data.result.dp == 1 and .data.result.global_batch == 32' "$TMP/l3.json"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
