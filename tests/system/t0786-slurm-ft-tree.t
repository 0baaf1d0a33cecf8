#!/bin/bash
# t0786-slurm-ft-tree (Slurm testbed, 7 nodes): a job of 5 nodes whose
# agents form a heartbeat fan-in tree of width 2: node ranks 0 and 1
# report to the controller, 2 and 3 through 0, 4 through 1.
#  - "checkpoint now" reaches every rank through the tree (periodic
#    checkpoints are off: the checkpoint commits only if all 5 ranks, three
#    of them behind a relay, got the command);
#  - the node of a relay (node rank 1) is killed: the loss is recorded once,
#    against that node; its child reattaches to the controller and reports
#    the relay unheard (the corroboration: the child's ranks ended with the
#    attempt's, its agent stays in the tree until the attempt ends); the
#    attempt restarts (a new Slurm job without the dead node: the relay's
#    ranks died with it, so the trainers' world is broken; the tree's
#    repair keeps the others' heartbeats, it cannot keep the attempt);
#  - then the node of a leaf (node rank 3) likewise, corroborated by its
#    relay (node rank 0), which saw the leaf's connection close (the
#    testbed's kill-node kills the node's processes and leaves its network
#    up, so their kernel closes their sockets): the strong evidence that
#    lets the controller declare the loss after 2 intervals;
#  - the time from each kill to the detection is printed in heartbeat
#    intervals (the goal is 2 when a neighbour corroborates; bench/ is the
#    place for speed, so it is not asserted), with the rule that declared
#    the loss;
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
T1R=$(now_ms)
check "attempt 2 runs" wait_for 120 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[1].state')\" = running"
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
# 3. the node of a leaf of attempt 2, at once: attempt 2 has only some
# 190 steps (seconds) left, which the checks of the relay's loss (below)
# could use up on a loaded machine.
T0R=$T0
check "attempt 2's rank 3 reports steps" wait_for 120 sh -c "test -n \"\$(curl -s $URL/v1/jobs/$ID/ranks | jq -r '.data[] | select(.rank == 3 and .step > 0) | .node')\""
L3=$(rank_node "$ID" 3); N0=$(rank_node "$ID" 0)
echo "# killing $L3 (node rank 3, a leaf of $N0)"
T0=$(now_ms)
"$TESTBED" kill-node "$L3" >/dev/null || fail "kill-node $L3"
T1=$(now_ms)
timeline "$ID" "$T0R"
# detected A T0 T1: the time from the kill (the testbed's kill-node ran
# from T0 to T1; the node died in between) to attempt A's failure, in
# heartbeat intervals (250 ms), and how the loss was declared (silence
# alone, after a surviving rank's report, or corroborated by a neighbour
# in the tree).
detected () {
    local fail
    fail=$(curl -s "$URL/v1/jobs/$ID" | jq -r ".data.attempts[$(($1 - 1))].fail_time // empty" | python3 -c 'import sys, datetime; t = sys.stdin.read().strip(); print(int(datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000) if t else 0)')
    echo "# detected $((fail - $3))..$((fail - $2)) ms after the kill (kill-node took $(($3 - $2)) ms): $(awk -v a=$((fail - $3)) -v b=$((fail - $2)) 'BEGIN { printf "%.2f..%.2f", a / 250, b / 250 }') heartbeat intervals"
    echo "# $(sqlite3 "$TMP/state/dtctld.db" "SELECT kind || ' (neighbour_unheard ' || coalesce(json_extract(data, '\$.neighbour_unheard'), 'null') || ', evidence ' || coalesce(json_extract(data, '\$.neighbour_evidence'), 'none') || '): ' || coalesce(detail, '') FROM events WHERE job_id = $ID AND attempt = $1 AND kind = 'node_lost' LIMIT 1")"
}
detected 1 "$T0R" "$T1R"
check "attempt 1 failed with cause node_lost on the relay's node $R1" \
    jqt --arg v "$R1" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost"
         and .data.attempts[0].cause_node == $v' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 1 AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
# The child's next heartbeat to its dead relay is refused: it reattaches
# to the controller and says it has not heard from the relay (its ranks
# lost their peer, but its agent stays in the tree until the attempt
# ends); the controller logs the report.
check "its child $L4 reattached to the controller" \
    grep -q 'relay http://[^ ]* unreachable .*: heartbeats go to the controller from now on' "$TMP"/users/*/job-$ID.1.$L4.log
check "$L4 reported its relay $R1 unheard (the corroboration)" \
    grep -q "job $ID attempt 1: $L4 has not heard from $R1 for" "$TMP/ctld.log"

# (the leaf of step 3 was killed above)
check "the job completes" wait_state "$ID" completed 300
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0" 2
detected 2 "$T0" "$T1"
check "attempt 2 failed with cause node_lost on the leaf's node $L3" \
    jqt --arg v "$L3" '.data.attempts[1].state == "failed" and .data.attempts[1].cause == "node_lost"
         and .data.attempts[1].cause_node == $v' "$TMP/j.json"
check "the leaf's relay $N0 reported $L3's connection closed (the corroboration)" \
    grep -q "job $ID attempt 2: $N0 has not heard from $L3 for [0-9]* ms (its connection closed)" "$TMP/ctld.log"
# evidence A: the evidence of attempt A's node_lost event.
evidence () { sqlite3 "$TMP/state/dtctld.db" "SELECT coalesce(json_extract(data, '\$.neighbour_evidence'), 'none') FROM events WHERE job_id = $ID AND attempt = $1 AND kind = 'node_lost'"; }
check "the controller declared the leaf lost on that evidence (connection_closed)" \
    test "$(evidence 2)" = connection_closed
check "attempt 3 ran on neither dead node" \
    jqt --arg a "$R1" --arg b "$L3" '[.data.attempts[2].nodes[].node] | (index($a) == null and index($b) == null)' "$TMP/j.json"

# 4. the end: the same parameters as without failures.
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no Slurm job of the run is left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
