#!/bin/bash
# t0750-slurm-ft-node-spare (Slurm testbed): a whole node of a job
# with spare_nodes: 1 is killed (scripts/slurm-testbed kill-node) -> the
# failure is recorded once (node_lost, that node), the next attempt runs as
# a new srun step in the SAME Slurm allocation (same Slurm job id, no trip
# through the queue) with the spare in the dead node's place, the job
# completes, and its params_crc32c equals an uninterrupted run's (world 3).
# 300 steps: the node must die mid-run, also on a loaded machine (at 200
# the job sometimes finished between step 50 and the kill).
# Part 2, a hot spare (restart.reform): the spare's agent keeps warm
# standby trainers; after the node kill the surviving ranks never exit,
# the standby processes take the lost node's ranks and receive the state
# from a survivor (restart path hot_spare, the same Slurm job and step),
# the lost node is excluded and out of the allocation, and params_crc32c
# again equals the uninterrupted run's.
# Part 3, a second kill while the group re-forms with the hot spare: the
# survivor that holds rank 0 (the state's source), as soon as attempt 2
# runs.  The re-formation fails (attempt 2 trainer_exit), the ordinary
# path takes over (with --no-jit: a new step of the same allocation, from
# the last committed checkpoint, after a backoff, without the lost node),
# and params_crc32c again equals the uninterrupted run's.
: "${FT_STEPS:=300}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 4
# live_pid ID RANK: PID := that rank's process id once reported (the
# ranks route says 0 until then, and kill 0 would hit this test's group).
live_pid () { PID=$(rank_pid "$1" "$2"); [ "$PID" -gt 1 ] 2>/dev/null && kill -0 "$PID" 2>/dev/null; }
BASE=$(baseline 3) || bail "the baseline run failed"
echo "# uninterrupted run (world 3): params_crc32c $BASE"

submit "$(dttrain_spec spare 3 "--inject-slow 0:25" \
    '{"spare_nodes": 1, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" \
    || bail "submit failed"
check "the job runs past step 50" wait_step "$ID" 50 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
VICTIM=$(rank_node "$ID" 1)
echo "# Slurm job $SJ; killing $VICTIM (rank 1's node)"
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
check "attempt 2 ran in the same Slurm job $SJ (in-allocation restart)" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj' "$TMP/j.json"
check "attempt 2 did not use $VICTIM" \
    jqt --arg v "$VICTIM" '[.data.attempts[1].nodes[].node] | index($v) == null' "$TMP/j.json"
check "attempt 2 ran on 3 nodes" jqt '[.data.attempts[1].nodes[].node] | length == 3' "$TMP/j.json"
check "attempt 2 says restart_path spare" jqt '.data.attempts[0].restart_path == null and .data.attempts[1].restart_path == "spare"' "$TMP/j.json"
check "attempt 2 resumed from a checkpoint" jqt '.data.attempts[1].resume_step >= 20' "$TMP/j.json"
check "the restart went through the allocation's loop (alloc_step event)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'alloc_step'")" -ge 1
check "one Slurm job for the whole run" test "$(ft_slurm_ids "$ID" | awk '{print $2}' | sort -u)" = "$SJ"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- 2. a hot spare.  The node timeout stays below the survivors' 3 s wait
# for the re-form command (their peer's socket fails at the kill).
"$TESTBED" start-node "$VICTIM" >/dev/null 2>&1 || true
submit "$(dttrain_spec hotspare 3 "--inject-slow 0:25" \
    '{"spare_nodes": 1, "restart": {"reform": true}, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 1000}}')" \
    || bail "2: submit failed"
# (what the kill needs is read first, so that it comes soon after step 50)
check "2: the job runs" wait_step "$ID" 1 90
curl -s "$URL/v1/jobs/$ID" > "$TMP/j2a.json"
SJ=$(jq -r '.data.attempts[0].slurm_job_id' "$TMP/j2a.json")
SPARE=$(jq -r '.data.attempts[0].nodes[] | select(.spare) | .node' "$TMP/j2a.json")
VICTIM=$(rank_node "$ID" 1)
[ -n "$SPARE" ] && [ -n "$VICTIM" ] || bail "2: no spare ($SPARE) or rank 1 node ($VICTIM)"
echo "# 2: Slurm job $SJ, spare $SPARE; killing $VICTIM (rank 1's node)"
check "2: the job runs past step 50" wait_step "$ID" 50 90
T0=$(now_ms)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "2: kill-node $VICTIM"
check "2: the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/j2.json"
curl -s "$URL/v1/jobs/$ID/events" > "$TMP/ev2.json"
timeline "$ID" "$T0"
jq -c '.data.attempts[] | {attempt, state, cause, cause_node, restart_path, resume_step, nodes: [.nodes[] | {node, node_rank, spare}]}' "$TMP/j2.json" | sed 's/^/# 2: /'
check "2: attempt 1 failed with node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v' "$TMP/j2.json"
check "2: attempt 2 re-formed with the hot spare in the same Slurm job $SJ (restart_path hot_spare), the last attempt" \
    jqt --argjson sj "$SJ" '(.data.attempts | length) == 2 and .data.attempts[1].restart_path == "hot_spare" and .data.attempts[1].slurm_job_id == $sj' "$TMP/j2.json"
check "2: the spare $SPARE took node rank 1, the others kept theirs, $VICTIM excluded" \
    jqt --arg s "$SPARE" --arg v "$VICTIM" '([.data.attempts[1].nodes[] | select(.node_rank == 1) | .node] == [$s])
         and ([.data.attempts[0].nodes[] | select(.node_rank == 0 or .node_rank == 2) | {node, node_rank}] | sort)
             == ([.data.attempts[1].nodes[] | select(.node_rank == 0 or .node_rank == 2) | {node, node_rank}] | sort)
         and (.data.exclude | index($v) != null)' "$TMP/j2.json"
check "2: the reform event names the lost node and the spare" \
    jqt --arg s "$SPARE" --arg v "$VICTIM" '[.data[] | select(.kind == "reform" and .attempt == 2) | .data | select(.spare == $s and .lost_node == $v)] | length == 1' "$TMP/ev2.json"
# The spare's standby process (its log in the agent's run directory)
# became rank 1 and received the state from a survivor.
SB=$(grep -l "standby: takes over rank 1 in attempt 2" $(find "$TMP" /tmp/dtctl-agent* -name 'standby-0.err' 2>/dev/null) 2>/dev/null | head -1)
[ -n "$SB" ] && grep -E "standby|re-formed" "$SB" | sed 's/^/# 2: /'
check "2: a standby process started ahead of time took over rank 1 and joined the re-formed group" \
    eval '[ -n "$SB" ] && grep -q "re-formed as attempt 2 .*joined" "$SB"'
check "2: the surviving ranks never exited (no rank_exit in attempt 1)" \
    jqt '[.data[] | select(.kind == "rank_exit" and .attempt == 1)] == []' "$TMP/ev2.json"
check "2: $VICTIM left the Slurm allocation" eval '! scontrol show hostnames "$(squeue -h -j "$SJ" -o %N 2>/dev/null)" | grep -qx "$VICTIM"'
check "2: resumed from the survivors' memory: no step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "2: the goodput report lists the hot_spare restart" \
    eval 'curl -s "$URL/v1/jobs/$ID/report" | jqt ".data.attempts[1].restart_path == \"hot_spare\" and .data.recovery_by_path.hot_spare.count == 1"'
DTCTL_CONTROLLER=$URL "$DTCTL" show "$ID" > "$TMP/show2.txt" 2>&1
sed -n '/^Restarts/,/^$/p' "$TMP/show2.txt" | sed 's/^/# 2: /'
check "2: dtctl show names the path" grep -Eq '^ +2 +hot_spare +node_lost' "$TMP/show2.txt"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j2.json")
check "2: final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "2: the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "2: no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- 3. a second kill while the group re-forms with the hot spare: rank 0
# (attempt 1's surviving process, the state's source) as soon as the
# re-formed attempt 2 runs (read from the database: its agents have all
# registered, the survivors are told to re-form; on the test's model the
# re-formation takes about 0.1 s, so the API is too slow to aim at it).
# The re-formation fails; with --no-jit the ordinary restart resumes from
# the last committed checkpoint.
"$TESTBED" start-node "$VICTIM" >/dev/null 2>&1 || true
submit "$(dttrain_spec hotspare-nojit 3 "--inject-slow 0:25 --no-jit" \
    '{"spare_nodes": 1, "restart": {"reform": true}, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 1000}}')" \
    || bail "3: submit failed"
check "3: the job runs" wait_step "$ID" 1 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "3: no Slurm job id ($SJ)"
# (learned by the launcher's poll, after the rendezvous wrote the row)
check "3: the running attempt's record names its batch host" \
    wait_for 10 eval 'curl -s "$URL/v1/jobs/$ID" | jqt ".data.attempts[0].state == \"running\" and (.data.attempts[0].batch_host | type) == \"string\""'
wait_for 30 live_pid "$ID" 0 || bail "3: rank 0's pid is unknown ($PID)"
P0=$PID
VICTIM=$(rank_node "$ID" 1)
[ -n "$VICTIM" ] || bail "3: rank 1's node is unknown"
echo "# 3: Slurm job $SJ; killing $VICTIM (rank 1's node), then rank 0 (pid $P0) as attempt 2 runs"
check "3: the job runs past step 50" wait_step "$ID" 50 90
DB=$TMP/state/dtctld.db
att2 () { sqlite3 "$DB" "SELECT state FROM attempts WHERE job_id = $ID AND attempt = 2" 2>/dev/null; }
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "3: kill-node $VICTIM"
for _ in $(seq 6000); do S2=$(att2); [ "$S2" = running ] && break; sleep 0.005; done
kill -9 "$P0"
check "3: kill -9 of rank 0 (pid $P0) as soon as the re-formed attempt 2 ran (it was $S2)" test "$S2" = running
echo "# 3: attempt 2 at the kill: $(att2), its first steps $(sqlite3 "$DB" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 2 AND kind = 'first_step'")"
check "3: the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/j3.json"
curl -s "$URL/v1/jobs/$ID/events" > "$TMP/ev3.json"
jq -c '.data.attempts[] | {attempt, state, cause, cause_node, cause_rank, slurm_job_id, restart_path, resume_step, nodes: [.nodes[] | .node]}' "$TMP/j3.json" | sed 's/^/# 3: /'
jq -c '[.data[] | select(.kind == "attempt_submitted") | {attempt, backoff_ms: .data.backoff_ms}]' "$TMP/ev3.json" | sed 's/^/# 3: /'
check "3: attempt 1 failed with node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v' "$TMP/j3.json"
check "3: attempt 2 re-formed with the hot spare in the same Slurm job $SJ and failed with trainer_exit of rank 0 (the re-formation failed)" \
    jqt --argjson sj "$SJ" '.data.attempts[1].restart_path == "hot_spare" and .data.attempts[1].slurm_job_id == $sj
         and .data.attempts[1].state == "failed" and .data.attempts[1].cause == "trainer_exit" and .data.attempts[1].cause_rank == 0' "$TMP/j3.json"
check "3: each failure recorded once (node_lost of attempt 1, trainer_exit of attempt 2)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT group_concat(attempt || ':' || kind) FROM (SELECT attempt, kind FROM events WHERE job_id = $ID AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang') ORDER BY attempt, kind)")" = "1:node_lost,2:trainer_exit"
check "3: attempt 3 ran in place in the same Slurm job without $VICTIM, from a committed checkpoint, and the job ended with it" \
    jqt --argjson sj "$SJ" --arg v "$VICTIM" '(.data.attempts | length) == 3 and .data.attempts[2].slurm_job_id == $sj
         and .data.attempts[2].restart_path == "in_place" and .data.attempts[2].resume_step >= 20
         and ([.data.attempts[2].nodes[].node] | index($v) == null) and (.data.exclude | index($v) != null)
         and (.data.attempts[2].state == "succeeded" or .data.attempts[2].state == "ending")' "$TMP/j3.json"
check "3: attempt 2 started at once, attempt 3 after the backoff (the second restart in a row)" \
    jqt '[.data[] | select(.kind == "attempt_submitted" and .attempt >= 2) | .data.backoff_ms] as $b
         | $b[0] == 0 and $b[1] > 0' "$TMP/ev3.json"
check "3: the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j3.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j3.json")
check "3: final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "3: the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "3: no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
