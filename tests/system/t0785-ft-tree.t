#!/bin/bash
# t0785-ft-tree (local launcher): a job of 5 nodes whose agents form a
# heartbeat fan-in tree of width 2 (heartbeat.tree_width): node ranks 0
# and 1 report to the controller, 2 and 3 through 0, 4 through 1.
#  - "checkpoint now" reaches every rank through the tree: the command
#    travels in the relays' answers, and the checkpoint is committed only
#    when all 5 ranks wrote their shard (periodic checkpoints are off:
#    checkpoint.every_steps 0);
#  - kill -9 of a relay's agent (node rank 1): its child reattaches to the
#    controller (its log says so) unless the attempt ends first, the loss
#    is recorded against the relay or, when every agent ended before the
#    node was corroborated lost, against no node (never a healthy one),
#    the attempt restarts (its ranks died with the agent, so the trainers'
#    world is broken: the tree's repair keeps the others' heartbeats, it
#    cannot keep the attempt) and the job goes on;
#  - kill -9 of a leaf's agent likewise;
#  - kill -9 of a rank two levels down: its exit goes to the controller
#    directly (events do not climb the tree), the time it took printed;
#  - the job completes with params_crc32c equal to an uninterrupted run's.
# Long enough (about 10 s a run) to do all that in one job.
: "${FT_STEPS:=400}"
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 5) || bail "the baseline run failed"
echo "# uninterrupted run (world 5): params_crc32c $BASE"

# agent_of NODE: the pid of this test's dtagent of local node NODE.
agent_of () {
    local p
    for p in $(pgrep -f -- "--node $1 " 2>/dev/null); do
        tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "$TMP/" && { echo "$p"; return 0; }
    done
    return 1
}
# wait_att_failed N: attempt N of $ID has failed (up to 60 s).
wait_att_failed () { wait_for 60 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[$1 - 1].state')\" = failed"; }
# node_of ID RANK: the node of rank RANK (1 rank per node: node rank = rank).
node_of () { curl -s "$URL/v1/jobs/$1/ranks" | jq -r ".data[] | select(.rank == $2) | .node"; }

submit "$(dttrain_spec tree 5 "--inject-slow 0:25" \
    '{"heartbeat": {"tree_width": 2}, "checkpoint": {"every_steps": 0}}')" || bail "submit failed"
# The agents' logs (the local launcher's output files of attempt N).
agent_logs () { cat "$TMP"/users/*/job-"$ID"."$1".local*.log 2>/dev/null; }
check "the job runs past step 15" wait_step "$ID" 15 180
check "the spec keeps heartbeat.tree_width 2" \
    jqt '.data.spec.heartbeat.tree_width == 2' <(api GET "/v1/jobs/$ID")
check "three agents heartbeat through a relay (their log says which)" \
    test "$(agent_logs 1 | grep -c 'fan-in tree of width 2: heartbeats go through http://')" = 3
check "the relays forward their subtrees to the controller (POST /v1/agent/relay)" \
    grep -q '"POST /v1/agent/relay" 200' "$TMP/ctld.log"

# 1. checkpoint now, through the tree.
api POST "/v1/jobs/$ID/checkpoint" -d '{}' > "$TMP/ck.json"
check "checkpoint requested" test "$(status)" = 200
S=$(jq -r .data.step "$TMP/ck.json")
committed () { api GET "/v1/jobs/$ID/checkpoints" | jqt "[.data[] | select(.step == $S and .state == \"committed\")] | length > 0"; }
check "the checkpoint of step $S is committed: all 5 ranks got the command" wait_for 120 committed

# 2. a relay: node rank 1 (its child is node rank 4).
R1=$(node_of "$ID" 1); L4=$(node_of "$ID" 4)
A=$(agent_of "$R1")
check "found the relay's agent ($R1, pid $A)" test -n "$A"
T0=$(now_ms)
check "kill -9 the relay's agent" kill -9 "$A"
check "attempt 1 fails" wait_att_failed 1
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
# As for the leaf below: under the local launcher every agent may end
# (agent_exit, no node) before the relay's node is corroborated lost; a
# healthy node must never be blamed.
check "attempt 1 failed, blamed on the relay's node $R1 or on no node" \
    jqt ".data.attempts[0].state == \"failed\" and (.data.attempts[0].cause_node == \"$R1\" or .data.attempts[0].cause_node == null)" "$TMP/j.json"
# (the child notices at its next heartbeat; when the attempt's failure
# stops it first, it ends without ever needing to reattach)
REATTACH='relay http://[^ ]* unreachable .*: heartbeats go to the controller from now on'
check "its child $L4 reattached to the controller, or ended with the attempt first" \
    wait_for 5 sh -c "cat $TMP/users/*/job-$ID.1.$L4.log | grep -q -e '$REATTACH' -e 'dtagent: exiting with code'"
grep -q -- "$REATTACH" $TMP/users/*/job-"$ID".1."$L4".log 2>/dev/null \
    && echo "# $L4 reattached to the controller" || echo "# $L4 ended before its next heartbeat"
# how the loss was declared (its detail: silence alone, or corroborated)
echo "# $(sqlite3 "$TMP/state/dtctld.db" "SELECT kind || ': ' || coalesce(detail, '') FROM events WHERE job_id = $ID AND attempt = 1 AND kind IN ('node_lost', 'agent_exit') LIMIT 1")"
check "no node but the relay was blamed" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 1 AND kind = 'node_lost' AND node != '$R1'")" = 0

# 3. a leaf of attempt 2: node rank 3 (its relay is node rank 0).
check "attempt 2 runs past a step" wait_for 180 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts | length')\" -ge 2 && test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[1].state')\" = running"
check "attempt 2's ranks report steps" wait_for 120 sh -c "test -n \"\$(curl -s $URL/v1/jobs/$ID/ranks | jq -r '.data[] | select(.rank == 3 and .step > 0) | .node')\""
L3=$(node_of "$ID" 3)
A=$(agent_of "$L3")
check "found the leaf's agent ($L3, pid $A)" test -n "$A"
T0=$(now_ms)
check "kill -9 the leaf's agent" kill -9 "$A"
check "attempt 2 fails" wait_att_failed 2
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0" 2
# Under the local launcher the other ranks may lose their peer and end
# every agent before the leaf's node is corroborated lost: the attempt then
# ends with agent_exit and no node.  What must never happen is the blame
# of a healthy node.
check "attempt 2 failed, blamed on the leaf's node $L3 or on no node" \
    jqt ".data.attempts[1].state == \"failed\" and (.data.attempts[1].cause_node == \"$L3\" or .data.attempts[1].cause_node == null)" "$TMP/j.json"
echo "# $(sqlite3 "$TMP/state/dtctld.db" "SELECT kind || ': ' || coalesce(detail, '') FROM events WHERE job_id = $ID AND attempt = 2 AND kind IN ('node_lost', 'agent_exit') LIMIT 1")"

# 4. a rank of attempt 3 two levels down (node rank 2, behind the relay of
# node rank 0) killed: its exit is an event, which goes to the controller
# directly, not up the tree.  The time from the kill to the failure is
# printed (bench/ is the place for speed): the goal is 100 ms.
check "attempt 3 runs past a step" wait_for 180 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[2].state // empty')\" = running"
check "attempt 3's rank 2 reports steps" wait_for 120 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts | length')\" = 3 && test -n \"\$(curl -s $URL/v1/jobs/$ID/ranks | jq -r '.data[] | select(.rank == 2 and .step > 0) | .pid')\""
PID=$(rank_pid "$ID" 2)
T0=$(now_ms)
check "kill -9 rank 2 (pid $PID), two levels down" kill -9 "$PID"
check "attempt 3 fails" wait_att_failed 3
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0" 3
check "attempt 3 failed with cause trainer_exit, rank 2" \
    jqt '.data.attempts[2].cause == "trainer_exit" and .data.attempts[2].cause_rank == 2' "$TMP/j.json"
echo "# rank 2's exit, two levels down, reached the controller $T_DETECT_MS ms after the kill"

# 5. the end: the same parameters as without failures.
check "the job completes" wait_state "$ID" completed 300
api GET "/v1/jobs/$ID" > "$TMP/j.json"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
done_testing
