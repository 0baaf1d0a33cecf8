#!/bin/bash
# t0754-slurm-ft-fewer-nodes (Slurm testbed): a node of a 3-node
# job is killed on a 3-node cluster, with no spare and restart.min_nodes 2
# -> the next attempt is a new Slurm job on the 2 healthy nodes (the dead
# one excluded), with the same global batch (dttrain accumulates
# gradients), and the job completes.  The parameters legitimately differ
# from the uninterrupted 3-rank run (a different reduction order); the loss
# curve continues: every training loss the job logged after the resume
# matches the uninterrupted run's loss at the same step (same batches, as
# sampling depends on the step only) within 0.1% relative, and so does the
# final validation loss (measured: about 1e-5 and 1e-7; only the order of
# the floating-point reductions differs).  (A restart from
# scratch would jump back to about ln 256 = 5.5.)
# Then, on the 2 healthy nodes left, a tp 2 job (2 nodes, 120 steps: the
# restarted attempt trains long enough for its heartbeats to see its first
# step) whose spec allows parallel.shrink ["tp"] and restart.min_nodes 1
# loses a node: one node holds no tp 2 group, so the next attempt runs on 1 node with
# tp 1 (a smaller tp, not fewer replicas); the shrink event records the
# old and new layout, the attempts' layouts and the goodput report's
# restarts row say the same, and the job completes from the last committed
# checkpoint.
# Last, the first phase's lost node started again: a pp 2 job (2 nodes, 2
# blocks, --micro-batch 4 --clip 0, so that pp 2 and one rank compute the
# same bits) with parallel.shrink ["pp"] loses rank 1's node and finishes
# in pp 1 on the node left, from the last committed checkpoint: the shrink
# event and the attempts say pp 2 -> pp 1, and the job's params_crc32c
# equals an uninterrupted one-rank run's: the resumed rank loaded exactly
# the parameters and optimizer state the two stages saved, and the loss
# curve continued bit for bit.
: "${FT_STEPS:=200}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
# The baseline logs the loss of every step (rank 0's standard error).
BASE=$(MODEL_ARGS="${MODEL_ARGS/ --quiet/ --log-every 1}" baseline 3) || bail "the baseline run failed"
BASE_VAL=$(tail -n 1 "$TMP/base.0.out" | jq -r .val_loss)
echo "# uninterrupted run (world 3): params_crc32c $BASE, val_loss $BASE_VAL"

submit "$(dttrain_spec fewer 3 "--inject-slow 0:25" \
    '{"restart": {"max_restarts": 3, "min_nodes": 2},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
# (what the kill needs is read first, so that on a loaded machine it still
# comes early enough to leave a loss curve after the restart)
wait_step "$ID" 5 90 || bail "the job does not run"
VICTIM=$(rank_node "$ID" 2)
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
[ -n "$VICTIM" ] || bail "rank 2's node is unknown"
check "the job runs past step 50" wait_step "$ID" 50 90
T0=$(date +%s%3N)  # (not python: no start-up before the kill)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
echo "# killed $VICTIM (rank 2's node)"
LOST1=$VICTIM
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v' "$TMP/j.json"
check "attempt 2 ran on 2 nodes, world size 2, without $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[1].num_nodes == 2 and .data.attempts[1].world_size == 2
        and ([.data.attempts[1].nodes[].node] | index($v) == null)' "$TMP/j.json"
check "attempt 2 is a new Slurm job (not $SJ)" \
    jqt --argjson sj "$SJ" '(.data.attempts[1].slurm_job_id | type) == "number" and .data.attempts[1].slurm_job_id != $sj' "$TMP/j.json"
check "the job result: $FT_STEPS steps on world size 2, global batch 32" \
    jqt ".data.result.steps == $FT_STEPS and .data.result.world_size == 2 and .data.result.global_batch == 32" "$TMP/j.json"
VAL=$(jq -r .data.result.val_loss "$TMP/j.json")
echo "# final val_loss $VAL (uninterrupted 3 ranks: $BASE_VAL)"
check "final val_loss within 0.1% of the uninterrupted run's" \
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-3 * abs(b))" "$VAL" "$BASE_VAL"
curl -s "$URL/v1/jobs/$ID/metrics" > "$TMP/m.json"
check "the loss curve continues across the restart: each loss after it within 0.1% of the uninterrupted run's at that step" \
    python3 - "$TMP/m.json" "$TMP/base.0.err" <<'PYEOF'
import json, re, sys
pts = json.load(open(sys.argv[1]))["data"]["points"]
base = {}
for line in open(sys.argv[2]):
    m = re.search(r"step (\d+)/\d+ loss ([0-9.]+)", line)
    if m:
        base[int(m.group(1))] = float(m.group(2))
after = [p for p in pts if p["attempt"] == 2 and p.get("loss") is not None and p["step"] in base]
if len(after) < 2:
    print("# only %d losses after the restart to compare (baseline: %d steps)" % (len(after), len(base)))
    sys.exit(1)
worst = max(after, key=lambda p: abs(p["loss"] - base[p["step"]]) / base[p["step"]])
rel = abs(worst["loss"] - base[worst["step"]]) / base[worst["step"]]
print("# %d losses after the restart compared; largest difference at step %d: %.5f vs %.5f (%.2e relative)"
      % (len(after), worst["step"], worst["loss"], base[worst["step"]], rel))
sys.exit(rel > 1e-3)
PYEOF
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- parallel.shrink: tp 2 -> tp 1 on the one node left ---------------------------------
MODEL_ARGS="${MODEL_ARGS/--steps $FT_STEPS/--steps 120}"
submit "$(dttrain_spec shrink 2 "--inject-slow 0:5" \
    '{"parallel": {"tp": 2, "shrink": ["tp"]}, "restart": {"max_restarts": 3, "min_nodes": 1},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
wait_step "$ID" 5 90 || bail "the tp 2 job does not run"
VICTIM=$(rank_node "$ID" 1)
[ -n "$VICTIM" ] || bail "rank 1's node is unknown"
check "the tp 2 job runs past step 25" wait_step "$ID" 25 90
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
echo "# killed $VICTIM (rank 1's node: tp1)"
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/s.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
shrink_ev () { sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '$1') FROM events WHERE job_id = $ID AND kind = 'shrink' ORDER BY id LIMIT 1"; }
check "the shrink event: tp 2 x pp 1 x dp 1 -> tp 1 x pp 1 x dp 1" \
    test "$(shrink_ev '$.old_layout') $(shrink_ev '$.new_layout')" = '{"tp":2,"pp":1,"dp":1} {"tp":1,"pp":1,"dp":1}'
check "attempt 2: a new Slurm job on 1 node in tp 1 (attempt 1: tp 2), resumed from a checkpoint" \
    jqt --arg v "$VICTIM" '.data.attempts[0].layout == {"tp": 2, "pp": 1, "dp": 1}
        and .data.attempts[1].layout == {"tp": 1, "pp": 1, "dp": 1} and .data.attempts[1].num_nodes == 1
        and .data.attempts[1].restart_path == "new_allocation" and .data.attempts[1].resume_step >= 20
        and ([.data.attempts[1].nodes[].node] | index($v) == null)' "$TMP/s.json"
# The first step's time comes with the goodput flush (about once a
# second), which may follow the job's end: read the report until it is in.
report_first_step () {
    curl -s "$URL/v1/jobs/$ID/report" > "$TMP/s-report.json" &&
        jqt '.data.restarts[0].first_step_s != null' "$TMP/s-report.json" 2>/dev/null
}
wait_for 10 report_first_step
check "the report's restart: new_allocation, tp2 pp1 dp1 -> tp1 pp1 dp1, the time to the first step recorded" \
    jqt '.data.restarts | length == 1 and .[0].attempt == 2 and .[0].path == "new_allocation"
        and .[0].from_layout == "tp2 pp1 dp1" and .[0].layout == "tp1 pp1 dp1" and .[0].layout_changed
        and .[0].first_step_s > 0' "$TMP/s-report.json"
check "after the end, attempt 1's tensor-parallel communication is kept (job view and report)" \
    jqt -s 'all(.[]; .data.attempts[0].comm_dims.tp.bytes > 0)' "$TMP/s.json" "$TMP/s-report.json"
check "the result: 120 steps in tp 1, global batch 32" \
    jqt '.data.result.steps == 120 and .data.result.tp == 1 and .data.result.world_size == 1 and .data.result.global_batch == 32' "$TMP/s.json"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- parallel.shrink: pp 2 -> pp 1 on the one node left ---------------------------------
T_PP=$(date +%s)
# The first phase's lost node comes back (the tp phase's would stay
# "completing" for about 35 s, until Slurm gives up the job it had there).
# (the PATH without the test's curl wrapper: the daemon is the cluster's)
PATH=${DT_PATH_NOWRAP:-$PATH} "$TESTBED" start-node "$LOST1" >/dev/null || fail "start-node $LOST1"
check "$LOST1 is back: idle" wait_for 30 eval '[ "$(sinfo -h -N -n "$LOST1" -o %t 2>/dev/null)" = idle ]'
MODEL_ARGS="${MODEL_ARGS/--layers 1/--layers 2} --micro-batch 4 --clip 0"
PBASE=$(baseline 1) || bail "the one-rank baseline run failed"
echo "# uninterrupted run (1 rank, 120 steps): params_crc32c $PBASE"
submit "$(dttrain_spec ppshrink 2 "--inject-slow 0:5" \
    '{"parallel": {"pp": 2, "shrink": ["pp"]}, "restart": {"max_restarts": 3, "min_nodes": 1},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
wait_step "$ID" 5 90 || bail "the pp 2 job does not run"
VICTIM=$(rank_node "$ID" 1)
[ -n "$VICTIM" ] || bail "rank 1's node is unknown"
check "the pp 2 job runs past step 25" wait_step "$ID" 25 90
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
echo "# killed $VICTIM (rank 1's node: the last stage)"
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/p.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
check "the shrink event: tp 1 x pp 2 x dp 1 -> tp 1 x pp 1 x dp 1" \
    test "$(shrink_ev '$.old_layout') $(shrink_ev '$.new_layout')" = '{"tp":1,"pp":2,"dp":1} {"tp":1,"pp":1,"dp":1}'
check "attempt 2: a new Slurm job on 1 node in pp 1 (attempt 1: pp 2), resumed from a checkpoint" \
    jqt --arg v "$VICTIM" '.data.attempts[0].layout == {"tp": 1, "pp": 2, "dp": 1}
        and .data.attempts[1].layout == {"tp": 1, "pp": 1, "dp": 1} and .data.attempts[1].num_nodes == 1
        and .data.attempts[1].restart_path == "new_allocation" and .data.attempts[1].resume_step >= 20
        and ([.data.attempts[1].nodes[].node] | index($v) == null)' "$TMP/p.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/p.json")
check "the result: 120 steps in pp 1, params_crc32c $GOT equals the uninterrupted one-rank run's $PBASE" \
    jqt --arg c "$PBASE" '.data.result.steps == 120 and .data.result.pp == 1 and .data.result.world_size == 1
        and .data.result.params_crc32c == $c' "$TMP/p.json"
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
echo "# the pp shrink phase took $(( $(date +%s) - T_PP )) s"
done_testing
