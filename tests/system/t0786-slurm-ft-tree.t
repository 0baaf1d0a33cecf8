#!/bin/bash
# t0786-slurm-ft-tree (Slurm testbed, 7 nodes): a job of 5 nodes whose
# agents form a heartbeat fan-in tree of width 2: node ranks 0 and 1
# report to the controller, 2 and 3 through 0, 4 through 1.
#  - "checkpoint now" reaches every rank through the tree (periodic
#    checkpoints are off: the checkpoint commits only if all 5 ranks, three
#    of them behind a relay, got the command);
#  - the node of a relay (node rank 1) is killed: the loss is recorded once,
#    against that node; its child reattaches to the controller (its log
#    says so); the attempt restarts (a new Slurm job without the dead
#    node: the relay's ranks died with it, so the trainers' world is
#    broken; the tree's repair keeps the others' heartbeats, it cannot keep
#    the attempt);
#  - then the node of a leaf (node rank 3) likewise;
#  - the job completes with params_crc32c equal to an uninterrupted run's.
: "${FT_STEPS:=400}"
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 7
BASE=$(baseline 5) || bail "the baseline run failed"
echo "# uninterrupted run (world 5): params_crc32c $BASE"

submit "$(dttrain_spec tree 5 "--inject-slow 0:25" \
    '{"heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500, "tree_width": 2},
      "checkpoint": {"every_steps": 0}}')" || bail "submit failed"
# agent_logs N: the agents' logs of attempt N (srun's output files).
agent_logs () { cat "$TMP"/users/*/job-"$ID"."$1".*.log 2>/dev/null; }
check "the job runs past step 15" wait_step "$ID" 15 180
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
check "three agents heartbeat through a relay (their log says which)" \
    test "$(agent_logs 1 | grep -c 'fan-in tree of width 2: heartbeats go through http://')" = 3

# 1. checkpoint now, through the tree.
api POST "/v1/jobs/$ID/checkpoint" -d '{}' > "$TMP/ck.json"
check "checkpoint requested" test "$(status)" = 200
S=$(jq -r .data.step "$TMP/ck.json")
committed () { api GET "/v1/jobs/$ID/checkpoints" | jqt "[.data[] | select(.step == $S and .state == \"committed\")] | length > 0"; }
check "the checkpoint of step $S is committed: all 5 ranks got the command" wait_for 120 committed

# 2. the node of a relay.
R1=$(rank_node "$ID" 1); L4=$(rank_node "$ID" 4)
echo "# Slurm job $SJ; killing $R1 (node rank 1, the relay of $L4)"
T0=$(now_ms)
"$TESTBED" kill-node "$R1" >/dev/null || fail "kill-node $R1"
check "attempt 2 runs" wait_for 120 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[1].state')\" = running"
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
# 3. the node of a leaf of attempt 2, at once: attempt 2 has only some
# 190 steps (seconds) left, which the checks of the relay's loss (below)
# could use up on a loaded machine.
T0R=$T0
check "attempt 2's rank 3 reports steps" wait_for 120 sh -c "test -n \"\$(curl -s $URL/v1/jobs/$ID/ranks | jq -r '.data[] | select(.rank == 3 and .step > 0) | .node')\""
L3=$(rank_node "$ID" 3)
echo "# killing $L3 (node rank 3, a leaf)"
T0=$(now_ms)
"$TESTBED" kill-node "$L3" >/dev/null || fail "kill-node $L3"
timeline "$ID" "$T0R"
# how the loss was declared (silence alone, or corroborated by a neighbour)
echo "# $(sqlite3 "$TMP/state/dtctld.db" "SELECT kind || ': ' || coalesce(detail, '') FROM events WHERE job_id = $ID AND attempt = 1 AND kind = 'node_lost' LIMIT 1")"
check "attempt 1 failed with cause node_lost on the relay's node $R1" \
    jqt --arg v "$R1" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost"
         and .data.attempts[0].cause_node == $v' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 1 AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
# The child gives its relay up when a heartbeat gets no answer in 3 s
# (agent/relay.c); the controller may end the attempt, corroborating the
# loss from the other nodes, before that: then the child is stopped with
# its attempt and never needs to reattach.  Either is right; which one
# happened is printed.
FAIL_MS=$(jq -r '.data.attempts[0].fail_time // empty' "$TMP/j.json" | python3 -c 'import sys, datetime; t = sys.stdin.read().strip(); print(int(datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000) if t else 0)')
if cat $TMP/users/*/job-$ID.1.$L4.log | grep -q 'relay http://[^ ]* unreachable .*: heartbeats go to the controller from now on'; then
    echo "# $L4 reattached to the controller"
    check "its child $L4 reattached to the controller" true
else
    echo "# $L4 did not reattach: attempt 1 failed (the controller decided) $((FAIL_MS - T0R)) ms after the kill"
    check "its child $L4 reattached, or attempt 1 failed before its relay request could time out (3 s + one 250 ms interval)" \
        test "$FAIL_MS" -gt 0 -a $((FAIL_MS - T0R)) -lt 3500
fi

# (the leaf of step 3 was killed above)
check "the job completes" wait_state "$ID" completed 300
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0" 2
# how the loss was declared (silence alone, or corroborated by a neighbour)
echo "# $(sqlite3 "$TMP/state/dtctld.db" "SELECT kind || ': ' || coalesce(detail, '') FROM events WHERE job_id = $ID AND attempt = 2 AND kind = 'node_lost' LIMIT 1")"
check "attempt 2 failed with cause node_lost on the leaf's node $L3" \
    jqt --arg v "$L3" '.data.attempts[1].state == "failed" and .data.attempts[1].cause == "node_lost"
         and .data.attempts[1].cause_node == $v' "$TMP/j.json"
check "attempt 3 ran on neither dead node" \
    jqt --arg a "$R1" --arg b "$L3" '[.data.attempts[2].nodes[].node] | (index($a) == null and index($b) == null)' "$TMP/j.json"

# 4. the end: the same parameters as without failures.
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same "$GOT" "$BASE"
check "no Slurm job of the run is left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
