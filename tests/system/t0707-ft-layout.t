#!/bin/bash
# t0707-ft-layout (local launcher): jobs with a parallel layout.
#   1. parallel {tp: 2} on 2 nodes: the ranks get DT_TP=2 and train
#      tensor-parallel; the controller's two-phase commit accepts the tp
#      shards; kill -9 of rank 1 -> the survivor (rank 0) holds only
#      position tp0, so no just-in-time checkpoint: the jit_window event says
#      why (tp1.pp0 missing) and the restart resumes from the last committed
#      checkpoint; the job completes with params_crc32c equal to an
#      uninterrupted tp2 run's.
#   2. parallel {pp: 2} on 4 nodes (dp 2 x pp 2), min_nodes 2, 4 local
#      nodes: the admin marks rank 2's node suspect and rank 2 is killed (a
#      rank's exit on a trusted node would restart in place): the survivors
#      0 (stage pp0), 1 and 3 (pp1) hold every slice, so their shards make a
#      just-in-time checkpoint (each shard from one survivor); 3 healthy
#      nodes are left and 3 ranks hold no whole pipeline: the controller
#      restarts on 2 nodes (pp 2 x dp 1, was dp 2) from that checkpoint,
#      records the old and new layout in the shrink event and in each
#      attempt, and the job completes.
#   3. parallel {tp: 2, shrink: ["tp"], zero1: true} on 4 nodes (dp 2 x
#      tp 2, optimizer state sharded over the dp group), min_nodes 1: every
#      node but rank 0's is marked suspect and rank 1 is killed: the
#      survivors hold a replica of every parameter but not rank 1's
#      optimizer slice, so the controller waits for no just-in-time
#      checkpoint (the jit_window event: committed, tp1.pp0.dp0 missing);
#      one healthy node holds no tp 2 group, so it re-plans tp 1 on 1 node
#      (same global batch), passes DT_TP=1 and DT_PARALLEL=zero1, and the
#      job completes in the new layout.  After the end, the job view, dtctl
#      show and the goodput report still give each attempt's communication
#      per dimension, and the report's restarts row gives the path, the
#      layout change and the times of the restart.
#   4. parallel {pp: 2} on 4 nodes (dp 2 x pp 2) with restart.reform, every
#      node cleared: kill -9 of rank 2 -> the survivors never exit, the
#      group re-forms in place (restart path reform) with rank 2 started
#      again, which takes its stage's slice from its data-parallel replica
#      (rank 0); the job completes with params_crc32c equal to an
#      uninterrupted pp 2 x dp 2 run's.
# 80 steps: each job is killed past step 45 (or 25), which leaves it 35
# steps to run before it could end on its own.
: "${FT_STEPS:=80}"
. "$(dirname "$0")/ft-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
FT_MODEL="--model transformer --context 16 --width 32 --heads 4 --layers 2"
MODEL_ARGS="--data $CORPUS --steps $FT_STEPS --global-batch 32 $FT_MODEL --val-samples 16 --quiet"

write_conf "LocalNodes=4" "AdminUsers=root"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(MODEL_ARGS="$MODEL_ARGS --tp 2" baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (tp 2, world 2): params_crc32c $BASE"

# --- 1. tp2, a rank killed ------------------------------------------------------------
submit "$(dttrain_spec tp2 2 "--inject-slow 0:4" '{"parallel": {"tp": 2}}')" || bail "submit failed"
check "the stored spec has the layout" jqt '.data.spec.parallel == {"tp": 2, "pp": 1}' "$TMP/submit.json"
check "the job runs past step 45" wait_step "$ID" 45 120
PID=$(rank_pid "$ID" 1)
T0=$(now_ms)
check "kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 180
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "checkpoints of the tp ranks were committed (2 shards each)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed'")" -ge 2
check "attempt 2 resumed from a committed checkpoint (step >= 20)" \
    jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
jw () { sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '$1') FROM events WHERE job_id = $ID AND kind = 'jit_window' ORDER BY id LIMIT 1"; }
check "the jit_window event: resumed from the committed checkpoint" test "$(jw '$.resume_source')" = committed
check "... because the survivors do not hold every slice" test "$(jw '$.why')" = "the survivors do not hold every slice"
check "... position tp1.pp0 (the killed rank's) is missing" test "$(jw '$.missing_positions')" = '["tp1.pp0"]'
check "the attempts record their layout (tp 2 x pp 1 x dp 1)" \
    jqt '[.data.attempts[].layout] == [{"tp": 2, "pp": 1, "dp": 1}, {"tp": 2, "pp": 1, "dp": 1}]' "$TMP/j.json"
check "the result says the layout: tp 2, dp 1" jqt '.data.result.tp == 2 and .data.result.dp == 1' "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
echo "# tp2 job after a restart: params_crc32c $GOT (uninterrupted $BASE)"
check "params_crc32c equals the uninterrupted tp2 run's" same_params "$ID" "$GOT" "$BASE"

# --- 2. fewer nodes: the layout keeps pp 2; the survivors hold every slice --------------------
# Rank 2 holds at step 50 in the first attempt, so the kill lands between
# the checkpoints of steps 40 and 60: the survivors' last completed step
# is always newer than the last committed checkpoint.
submit "$(first_attempt_only "--inject-hang 2:50" "$(dttrain_spec shrink 4 "--inject-slow 0:4" \
    '{"parallel": {"pp": 2}, "restart": {"max_restarts": 3, "min_nodes": 2}}')")" || bail "submit failed"
check "the 4-node pp2 job runs past step 45" wait_step "$ID" 45 120
NODE=$(curl -s "$URL/v1/jobs/$ID/ranks" | jq -r '.data[] | select(.rank == 2) | .node')
api POST "/v1/nodes/$NODE/suspect" >/dev/null
check "the admin marks rank 2's node $NODE suspect" test "$(status)" = 200
PID=$(rank_pid "$ID" 2)
check "kill -9 rank 2 (pid $PID)" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 180
api GET "/v1/jobs/$ID" > "$TMP/j2.json"
check "attempt 2 ran on 2 nodes (3 healthy, 3 ranks hold no whole pp group)" \
    jqt '.data.attempts[1].num_nodes == 2 and .data.attempts[1].world_size == 2' "$TMP/j2.json"
ev () { sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '$1') FROM events WHERE job_id = $ID AND kind = 'shrink' LIMIT 1"; }
check "the shrink event records the old layout (pp 2 x dp 2)" \
    test "$(ev '$.old_layout.pp') $(ev '$.old_layout.dp')" = "2 2"
check "... and the new one (pp 2 x dp 1)" test "$(ev '$.new_layout.pp') $(ev '$.new_layout.dp')" = "2 1"
check "the result: $FT_STEPS steps, pp 2 x dp 1, global batch 32" \
    jqt ".data.result.steps == $FT_STEPS and .data.result.pp == 2 and .data.result.dp == 1 and .data.result.global_batch == 32" "$TMP/j2.json"
check "the attempts record the layouts (pp 2 x dp 2, then pp 2 x dp 1)" \
    jqt '[.data.attempts[].layout] == [{"tp": 1, "pp": 2, "dp": 2}, {"tp": 1, "pp": 2, "dp": 1}]' "$TMP/j2.json"
check "the survivors' shards made a just-in-time checkpoint (jit_window: jit)" \
    test "$(jw '$.resume_source')" = jit
JSTEP=$(jw '$.jit_step')
check "attempt 2 resumed from it (step $JSTEP, resume_source jit)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '\$.resume_source') || ' ' || json_extract(data, '\$.resume_step') FROM events WHERE job_id = $ID AND kind = 'attempt_submitted' AND attempt = 2")" = "jit $JSTEP"
CK=$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '\$.jit.written_by_ranks') FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.kind') = 'jit'")
echo "# just-in-time checkpoint of step $JSTEP: stages pp0, pp1 written by ranks $CK"
check "its shards came from a survivor of each stage (rank 0 for pp0, 1 or 3 for pp1)" \
    eval 'case "$CK" in "[0,1]"|"[0,3]") true ;; *) false ;; esac'

# --- 3. zero1, too few nodes for a tp group: the spec lets the restart use tp 1 ----------------
api POST "/v1/nodes/$NODE/clear" >/dev/null
check "the admin clears $NODE (suspect since phase 2): 4 healthy nodes" test "$(status)" = 200
# (60 steps: after the restart one rank trains alone, and slowly)
MODEL_ARGS="${MODEL_ARGS/--steps $FT_STEPS/--steps 60}"
submit "$(dttrain_spec tp-shrink 4 "--inject-slow 0:4" \
    '{"parallel": {"tp": 2, "shrink": ["tp"], "zero1": true}, "restart": {"max_restarts": 3, "min_nodes": 1}}')" || bail "submit failed"
check "the stored spec keeps parallel.shrink and zero1" \
    jqt '.data.spec.parallel == {"tp": 2, "pp": 1, "shrink": ["tp"], "zero1": true}' "$TMP/submit.json"
# (what the kill needs is read first: on a loaded machine it still comes
# well before the job could end)
wait_step "$ID" 5 120 || bail "the zero1 job does not run"
KEEP=$(curl -s "$URL/v1/jobs/$ID/ranks" | jq -r '.data[] | select(.rank == 0) | .node')
PID=$(rank_pid "$ID" 1)
check "the dp 2 x tp 2 zero1 job runs past step 25" wait_step "$ID" 25 120
for node in local1 local2 local3 local4; do
    [ "$node" = "$KEEP" ] || api POST "/v1/nodes/$node/suspect" >/dev/null
done
check "every node but rank 0's ($KEEP) is suspect" test "$(status)" = 200
check "kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 180
api GET "/v1/jobs/$ID" > "$TMP/j3.json"
check "zero1: no just-in-time checkpoint, rank 1's optimizer slice (tp1.pp0.dp0) is held by no survivor" \
    test "$(jw '$.resume_source') $(jw '$.missing_positions')" = 'committed ["tp1.pp0.dp0"]'
check "attempt 2 resumed from the last committed checkpoint (resume_source committed, step >= 20)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '\$.resume_source') || ' ' || (json_extract(data, '\$.resume_step') >= 20) FROM events WHERE job_id = $ID AND kind = 'attempt_submitted' AND attempt = 2")" = "committed 1"
check "attempt 2 ran tp 1 x pp 1 x dp 1 on 1 node (was tp 2 x dp 2 on 4)" \
    jqt '[.data.attempts[].layout] == [{"tp": 2, "pp": 1, "dp": 2}, {"tp": 1, "pp": 1, "dp": 1}] and .data.attempts[1].num_nodes == 1' "$TMP/j3.json"
check "the shrink event records tp 2 -> tp 1" \
    test "$(ev '$.old_layout.tp') $(ev '$.new_layout.tp') $(ev '$.new_layout.dp')" = "2 1 1"
check "the failure record names the next layout" jqt '.data.failure.next_layout == {"tp": 1, "pp": 1, "dp": 1}' "$TMP/j3.json"
check "the result: 60 steps in tp 1, zero1 (DT_PARALLEL), global batch 32" \
    jqt ".data.result.steps == 60 and .data.result.tp == 1 and .data.result.parallel == \"zero1\" and .data.result.global_batch == 32" "$TMP/j3.json"
check "after the end, attempt 1's communication per dimension is kept (tp and dp bytes > 0)" \
    jqt '.data.attempts[0].comm_dims.steps > 0 and .data.attempts[0].comm_dims.tp.bytes > 0 and .data.attempts[0].comm_dims.dp.bytes > 0' "$TMP/j3.json"
DTCTL_CONTROLLER=$URL "$DTCTL" show "$ID" > "$TMP/show3.txt" 2>&1
check "dtctl show prints each attempt's layout" grep -q "tp1 pp1 dp1" "$TMP/show3.txt"
check "dtctl show prints attempt 1's communication per dimension" \
    eval 'sed -n "/^Communication per dimension/,\$p" "$TMP/show3.txt" | grep -Eq "^ +1 +dp +[0-9]+"'
api GET "/v1/jobs/$ID/report" > "$TMP/r3.json"
check "the report: the restart took new_allocation from tp2 pp1 dp2 zero1 to tp1 pp1 dp1 zero1, times recorded" \
    jqt '.data.restarts | length == 1 and .[0].path == "new_allocation" and .[0].after != null
        and .[0].from_layout == "tp2 pp1 dp2 zero1" and .[0].layout == "tp1 pp1 dp1 zero1" and .[0].layout_changed
        and .[0].stopped_s >= 0 and .[0].submitted_s >= 0 and .[0].running_s >= .[0].submitted_s
        and .[0].first_step_s >= .[0].running_s' "$TMP/r3.json"
check "the report: attempt 1's layout and communication per dimension" \
    jqt '.data.attempts[0].layout == {"tp": 2, "pp": 1, "dp": 2, "zero1": true} and .data.attempts[0].comm_dims.tp.bytes > 0' "$TMP/r3.json"
DTCTL_CONTROLLER=$URL "$DTCTL" report "$ID" > "$TMP/report3.txt" 2>&1
check "dtctl report prints the restart's row (path, layouts) and attempt 1's communication rows" \
    eval 'grep -Eq "^ +2 +new_allocation .*tp2 pp1 dp2 zero1 +tp1 pp1 dp1 zero1" "$TMP/report3.txt" && grep -Eq "^ +1 +tp +[0-9]+ " "$TMP/report3.txt"'

# --- 4. re-form in place under pp 2 x dp 2 ------------------------------------------------
for node in local1 local2 local3 local4; do api POST "/v1/nodes/$node/clear" >/dev/null; done
BASE4=$(MODEL_ARGS="$MODEL_ARGS --pp 2" baseline 4) || bail "the pp2 x dp2 baseline failed"
# Rank 2 holds at step 30 in the first attempt, so the kill lands there,
# half-way through the 60 steps, whatever the machine's speed: a rank
# killed after the last step finds the run over and nothing to re-form
# (on a fast host the steps once ran out before the kill).
submit "$(first_attempt_only "--inject-hang 2:30" \
    "$(dttrain_spec reform 4 "--inject-slow 0:4" '{"parallel": {"pp": 2}, "restart": {"reform": true}}')")" \
    || bail "submit failed"
check "4: the pp2 x dp2 job reaches step 30" wait_step "$ID" 30 120
PID=$(rank_pid "$ID" 2)
check "4: kill -9 rank 2 (pid $PID)" kill -9 "$PID"
check "4: the job completes" wait_state "$ID" completed 180
api GET "/v1/jobs/$ID" > "$TMP/j4.json"
jq -c '.data.attempts[] | {attempt, state, cause, restart_path, layout}' "$TMP/j4.json" | sed 's/^/# 4: /'
check "4: attempt 2 re-formed in place (path reform, pp 2 x dp 2) and completed the job" \
    jqt '(.data.attempts | length) == 2 and .data.attempts[1].restart_path == "reform"
         and .data.attempts[1].layout == {"tp": 1, "pp": 2, "dp": 2}' "$TMP/j4.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j4.json")
check "4: params_crc32c $GOT equals the uninterrupted pp2 x dp2 run's $BASE4" same_params "$ID" "$GOT" "$BASE4"
finish
