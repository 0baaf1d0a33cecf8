#!/bin/bash
# t0754-slurm-ft-fewer-nodes (issue 7, Slurm testbed): a node of a 3-node
# job is killed on a 3-node cluster, with no spare and restart.min_nodes 2
# -> the next attempt is a new Slurm job on the 2 healthy nodes (the dead
# one excluded), with the same global batch (dttrain accumulates
# gradients), and the job completes.  The parameters legitimately differ
# from the uninterrupted 3-rank run (a different reduction order); the loss
# curve continues: the final validation loss is within 5% (relative) of
# the uninterrupted run's, and training does not regress across the
# restart: the first logged loss after the resume is at most 10% above the
# last one before the failure (a restart from scratch would jump back to
# about ln 256 = 5.5).
: "${FT_STEPS:=200}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 3
BASE=$(baseline 3) || bail "the baseline run failed"
BASE_VAL=$(tail -n 1 "$TMP/base.0.out" | jq -r .val_loss)
echo "# uninterrupted run (world 3): params_crc32c $BASE, val_loss $BASE_VAL"

submit "$(dttrain_spec fewer 3 "--inject-slow 0:25" \
    '{"restart": {"max_restarts": 3, "min_nodes": 2},
      "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
VICTIM=$(rank_node "$ID" 2)
echo "# killing $VICTIM (rank 2's node)"
T0=$(now_ms)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
check "the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v' "$TMP/j.json"
check "attempt 2 ran on 2 nodes, world size 2, without $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[1].num_nodes == 2 and .data.attempts[1].world_size == 2
        and ([.data.attempts[1].nodes[].node] | index($v) == null)' "$TMP/j.json"
check "the job result: $FT_STEPS steps on world size 2, global batch 32" \
    jqt ".data.result.steps == $FT_STEPS and .data.result.world_size == 2 and .data.result.global_batch == 32" "$TMP/j.json"
VAL=$(jq -r .data.result.val_loss "$TMP/j.json")
echo "# final val_loss $VAL (uninterrupted 3 ranks: $BASE_VAL)"
check "final val_loss within 5% of the uninterrupted run's" \
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 0.05 * abs(b))" "$VAL" "$BASE_VAL"
curl -s "$URL/v1/jobs/$ID/metrics" > "$TMP/m.json"
check "the loss curve continues across the restart (first loss after <= 1.10 x last before)" python3 - "$TMP/m.json" <<'PYEOF'
import json, sys
pts = json.load(open(sys.argv[1]))["data"]["points"]
before = [p for p in pts if p["attempt"] == 1 and p.get("loss") is not None]
after = [p for p in pts if p["attempt"] == 2 and p.get("loss") is not None]
if not before or not after:
    sys.exit(1)
lb = max(before, key=lambda p: p["step"])
la = min(after, key=lambda p: p["step"])
print("# last loss before: step %d %.4f; first after: step %d %.4f" % (lb["step"], lb["loss"], la["step"], la["loss"]))
sys.exit(la["loss"] > 1.10 * lb["loss"])
PYEOF
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
