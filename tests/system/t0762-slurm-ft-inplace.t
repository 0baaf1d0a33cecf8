#!/bin/bash
# t0762-slurm-ft-inplace (Slurm testbed): kill -9 of one dttrain
# rank of a 2-node job with NO spare and restart.reform -> the failure is
# recorded once (trainer_exit, that rank's node and rank, signal 9), the
# surviving rank never exits: the next attempt (restart path reform) is the
# same Slurm job and step on the same two nodes (the node is healthy, so it
# is not excluded), the lost rank is started again and receives the state
# from the survivor (no step lost), the job completes, params_crc32c equals
# an uninterrupted run's (world 2), the re-form's timing is recorded, and
# the allocation ends with the job.  (The ordinary restart in place, a new
# step with a just-in-time checkpoint: t0752.)  Then a second kill while the
# group re-forms (the survivor, rank 1 of attempt 2, as soon as attempt 2
# exists), with --no-jit: the re-formation fails, the ordinary path takes
# over (a new step in place from the last committed checkpoint, after a
# backoff: a crash loop must back off), and the job still completes with
# the same parameters.
: "${FT_STEPS:=200}"
# As an ordinary user (users-lib.sh), as on a shared cluster.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 2
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

submit "$(dttrain_spec killrank 2 "--inject-slow 0:25" \
    '{"restart": {"reform": true}, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" \
    || bail "submit failed"
# live_pid ID RANK: PID := that rank's process id once reported (the
# ranks route says 0 until then, and kill 0 would hit this test's group).
live_pid () { PID=$(rank_pid "$1" "$2"); [ "$PID" -gt 1 ] 2>/dev/null && kill -0 "$PID" 2>/dev/null; }
# (what the kill needs is read first: 200 steps take a few seconds)
check "the job runs" wait_step "$ID" 1 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
wait_for 30 live_pid "$ID" 1 || bail "rank 1's pid is unknown ($PID)"
NODE=$(rank_node "$ID" 1)
[ -n "$NODE" ] || bail "rank 1's node is unknown"
echo "# Slurm job $SJ; kill -9 of rank 1 (pid $PID on $NODE)"
check "the job runs past step 30" wait_step "$ID" 30 90
T0=$(now_ms)
check "kill -9 rank 1" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 120
# (after the injection, so that these checks do not delay it)
ft_check_user "$ID" "$SJ"
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
timeline "$ID" "$T0"
check "attempt 1 failed with cause trainer_exit, node $NODE, rank 1, signal 9" \
    jqt --arg v "$NODE" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit"
         and .data.attempts[0].cause_node == $v and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.signal == 9' "$TMP/j.json"
check "the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind IN ('node_lost', 'trainer_exit', 'slurm_node_fail', 'agent_exit', 'hang')")" = 1
check "attempt 2 re-formed in place in the same Slurm job $SJ (restart_path reform)" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj and .data.attempts[1].restart_path == "reform"' "$TMP/j.json"
check "attempt 2 ran on the same nodes, $NODE included, and nothing is excluded" \
    jqt --arg v "$NODE" '([.data.attempts[1].nodes[].node] | sort) == ([.data.attempts[0].nodes[] | select(.spare | not) | .node] | sort)
         and ([.data.attempts[1].nodes[].node] | index($v) != null) and .data.exclude == []' "$TMP/j.json"
check "attempt 2 resumed from the survivor's memory, past step 30" jqt '.data.attempts[1].resume_step >= 30' "$TMP/j.json"
curl -s "$URL/v1/jobs/$ID/events" > "$TMP/ev.json"
jq -c '.data[] | select(.kind | startswith("reform")) | {kind, attempt, data}' "$TMP/ev.json" | sed 's/^/# /'
check "the re-form's timing is recorded (decision_ms, reform_ms)" \
    jqt '([.data[] | select(.kind == "reform" and .attempt == 2) | .data.decision_ms | numbers] | length) == 1
         and ([.data[] | select(.kind == "reform_registered" and .attempt == 2) | .data.reform_ms | numbers] | length) == 1' "$TMP/ev.json"
check "the surviving rank never exited (no rank_exit of attempt 1 but the killed rank's)" \
    jqt '[.data[] | select(.kind == "rank_exit" and .attempt == 1)] == []' "$TMP/ev.json"
check "attempt 2 started without a backoff (the job's failure.backoff_ms 0)" \
    jqt '.data.failure.backoff_ms == 0' "$TMP/j.json"
check "attempt 2's attempt_submitted event says backoff_ms 0" \
    jqt '[.data[] | select(.kind == "attempt_submitted" and .attempt == 2) | .data.backoff_ms] == [0]' "$TMP/ev.json"
check "no step lost: the surviving rank kept the state (lost $STEPS_LOST)" test "$STEPS_LOST" = 0
check "the goodput report has the re-form's time" \
    eval 'curl -s "$URL/v1/jobs/$ID/report" | jqt ".data.attempts[1].restart_path == \"reform\" and (.data.attempts[1].recovery_s | type) == \"number\" and .data.recovery_by_path.reform.count == 1"'
DTCTL_CONTROLLER=$URL "$DTCTL" show "$ID" 2>&1 | sed -n '/^Attempts:/,/^$/p' | sed 's/^/# /'
DTCTL_CONTROLLER=$URL "$DTCTL" show "$ID" > "$TMP/show.txt" 2>&1
sed -n '/^Restarts/,/^$/p' "$TMP/show.txt" | sed 's/^/# /'
check "dtctl show names the path" grep -q "reform" "$TMP/show.txt"
check "dtctl show lists the restart: re-formed after trainer_exit, no backoff, its time to the first step" \
    grep -Eq '^ +2 +reform +trainer_exit +0 ms +[0-9]+\.[0-9]+ s +decision [0-9]+ ms, re-form [0-9]+ ms$' "$TMP/show.txt"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'

# --- 2. a second kill while the group re-forms: the survivor (rank 1 of
# attempt 2) as soon as attempt 2 exists (well within the 2 s an attempt
# must run to count as healthy and allow another restart without backoff).
# The re-formation fails; with --no-jit the ordinary restart resumes from
# the last committed checkpoint in a new step of the same allocation.
submit "$(dttrain_spec killrank-nojit 2 "--inject-slow 0:25 --no-jit" \
    '{"restart": {"reform": true}, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500}}')" || bail "submit failed"
check "2: the job runs" wait_step "$ID" 1 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
wait_for 30 live_pid "$ID" 0 || bail "2: rank 0's pid is unknown ($PID)"
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "2: no Slurm job id ($SJ)"
check "2: the job runs past step 30" wait_step "$ID" 30 90
check "2: kill -9 rank 0" kill -9 "$PID"
# rank 1's process of attempt 2 (the ranks route shows the current attempt's)
pid_of_attempt2 () {
    [ "$(curl -s "$URL/v1/jobs/$ID" | jq '.data.attempts | length')" -ge 2 ] || return 1
    live_pid "$ID" 1 && P2=$PID
}
P2=
wait_for 60 pid_of_attempt2
check "2: attempt 2 has a rank 1 process ($P2)" test -n "$P2"
[ -n "$P2" ] || bail "2: no process of rank 1 of attempt 2 to kill"
check "2: kill -9 rank 1 of attempt 2 while the group re-forms" kill -9 "$P2"
check "2: the job completes" wait_state "$ID" completed 120
curl -s "$URL/v1/jobs/$ID" > "$TMP/j2.json"
curl -s "$URL/v1/jobs/$ID/events" > "$TMP/ev2.json"
ft_slurm_ids "$ID" | sed 's/^/# 2: attempt /'
jq -c '.data.attempts[] | {attempt, state, cause, cause_rank, slurm_job_id, restart_path, resume_step}' "$TMP/j2.json" | sed 's/^/# 2: /'
jq -c '[.data[] | select(.kind == "attempt_submitted") | {attempt, backoff_ms: .data.backoff_ms}]' "$TMP/ev2.json" | sed 's/^/# 2: /'
jq -c '.data[] | select(.kind == "jit_window") | {attempt, why: .data.why, waited_ms: .data.waited_ms}' "$TMP/ev2.json" | sed 's/^/# 2: /'
check "2: attempt 2 re-formed in place in the same Slurm job $SJ" \
    jqt --argjson sj "$SJ" '.data.attempts[1].slurm_job_id == $sj and .data.attempts[1].restart_path == "reform"
         and .data.attempts[1].resume_step >= 30 and .data.exclude == []' "$TMP/j2.json"
check "2: attempt 2 failed with trainer_exit (the re-formation failed)" \
    jqt '.data.attempts[1].state == "failed" and .data.attempts[1].cause == "trainer_exit"' "$TMP/j2.json"
check "2: attempt 3 ran in place in the same Slurm job, from a committed checkpoint, and the job ended with it" \
    jqt --argjson sj "$SJ" '(.data.attempts | length) == 3 and .data.attempts[2].slurm_job_id == $sj
         and .data.attempts[2].restart_path == "in_place" and .data.attempts[2].resume_step >= 20
         and (.data.attempts[2].state == "succeeded" or .data.attempts[2].state == "ending")' "$TMP/j2.json"
check "2: attempt 2 started at once, attempt 3 after the backoff (the second restart in a row)" \
    jqt '[.data[] | select(.kind == "attempt_submitted" and .attempt >= 2) | .data.backoff_ms] as $b
         | $b[0] == 0 and $b[1] > 0' "$TMP/ev2.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j2.json")
check "2: final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "2: the Slurm job ends" wait_for 20 eval '[ -z "$(squeue -h -j "$SJ" 2>/dev/null)" ]'
done_testing
