#!/bin/bash
# t0758-slurm-ft-straggler (Slurm testbed of 2 nodes): rank 1 of a
# 2-node job computes 4x slower (--inject-slow); with straggler.action
# exclude the controller flags it (score over the window below the
# threshold), has every rank checkpoint at one step and stop, and restarts
# without that node: on 1 node (restart.min_nodes 1, no other node in the
# cluster), the same global batch.  The world size changes (2 -> 1), so
# the parameters may legitimately differ from a 2-rank run: there is no
# uninterrupted run to compare them with (the test prints them).
: "${FT_STEPS:=600}"   # long enough for a full straggler window and the stop, also under load
. "$(dirname "$0")/ft-slurm-lib.sh"
MODEL_ARGS="$MODEL_ARGS --width 128"   # steps of ~10 ms: a window fills mid-run
ft_slurm_up 2

submit "$(dttrain_spec straggle 2 "--inject-slow 1:4" '{"straggler": {"action": "exclude", "window_steps": 8, "threshold": 0.75}, "restart": {"min_nodes": 1}}')" \
    || bail "submit failed"
T0=$(now_ms)
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, cause_rank, num_nodes, world_size, resume_step, nodelist}]' "$TMP/j.json" | sed 's/^/# /'
VICTIM=$(jq -r '.data.attempts[0].cause_node' "$TMP/j.json")
echo "# (times relative to the job's submission; the slowness is there from step 0)"
timeline "$ID" "$T0"
check "a straggler event names rank 1 on $VICTIM" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'straggler' AND rank = 1 AND node = '$VICTIM'")" = 1
check "rank 1 ran on $VICTIM in attempt 1" \
    jqt --arg v "$VICTIM" '.data.attempts[0].nodes | any(.node == $v)' "$TMP/j.json"
check "attempt 1 ended with cause straggler_excluded (rank 1) after a final checkpoint" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "straggler_excluded"
         and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.final_checkpoint_committed' "$TMP/j.json"
STOP=$(jq '.data.attempts[0].evidence.stop_step' "$TMP/j.json")
check "attempt 2 resumed from the stop checkpoint (step $STOP) on 1 node without $VICTIM" \
    jqt --arg v "$VICTIM" ".data.attempts[1].resume_step == $STOP and .data.attempts[1].num_nodes == 1
         and .data.attempts[1].world_size == 1 and .data.attempts[1].nodelist != \$v
         and ([.data.attempts[1].nodes[].node] | index(\$v) == null)" "$TMP/j.json"
check "$VICTIM is excluded from the job" jqt --arg v "$VICTIM" '.data.exclude | index($v) != null' "$TMP/j.json"
check "a shrink event says why" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shrink'")" = 1
check "the job result: $FT_STEPS steps, world 1, global batch 32" \
    jqt ".data.result.steps == $FT_STEPS and .data.result.world_size == 1 and .data.result.global_batch == 32" "$TMP/j.json"
echo "# params_crc32c: $(jq -r .data.result.params_crc32c "$TMP/j.json") after 2 -> 1 ranks"
check "no Slurm job left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
