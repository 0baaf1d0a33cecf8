#!/bin/bash
# t0705-ft-jit (local launcher): the just-in-time checkpoint.
# When a peer is lost in a dp job, the surviving rank still holds the whole
# state of the last completed step: it writes every rank's shard of that
# step, the controller commits the set (kind jit) and the next attempt
# resumes from it, so at most the step in flight is lost - with periodic
# checkpoints far apart (every 1000 steps).  Four cases, 2 nodes x 1 rank,
# each failing at step 45, where rank 1 holds (--inject-hang, first attempt):
#   1. kill -9 of rank 1 (dp): resume_source jit, lost work <= 1 step, final
#      params_crc32c equal to an uninterrupted run's.  A helper holds copies
#      of rank 1's sockets open, so the kill never fails rank 0's collective
#      (as when gloo does not wake a wait on a dead peer): the controller's
#      just-in-time stop must wake it (its watch aborts the communicators);
#   2. the whole node 2 (its agent and rank, kill -9) lost: the failure is
#      node_lost on local2 (the survivor that exited after saving is not
#      blamed), resume from the just-in-time checkpoint, same parameters;
#   3. zero1: the lost rank's optimizer shard is gone, no just-in-time
#      checkpoint; the controller falls back to the last committed one and
#      records it (resume_source committed);
#   4. rank 1 hung (found by its agent), its sockets held open as in case 1:
#      the controller's kill of the hung rank comes with the just-in-time
#      stop, which wakes rank 0; resume from the just-in-time checkpoint.
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2, dp): params_crc32c $BASE"

ev_data () {  # ev_data ID ATTEMPT KIND JQ-PATH: from the events table
    sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '$4') FROM events WHERE job_id = $1 AND attempt = $2 AND kind = '$3' ORDER BY id LIMIT 1"
}
jit_checks () {  # jit_checks ID LABEL: the common assertions of cases 1 and 2
    local id=$1 what=$2 r2 got
    r2=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
    check "$what: attempt 2 resumed from step $r2 with resume_source jit" \
        test "$(ev_data "$id" 2 attempt_submitted '$.resume_source')" = jit
    check "$what: the checkpoint of step $r2 was committed as kind jit, written by rank 0" \
        test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $id AND kind = 'checkpoint_committed' AND json_extract(data, '\$.step') = $r2 AND json_extract(data, '\$.kind') = 'jit' AND json_extract(data, '\$.jit.written_by_rank') = 0")" = 1
    check "$what: its manifest says kind jit, 2 shards" \
        jqt ".kind == \"jit\" and .step == $r2 and (.shards | length) == 2" "$TMP/ckpt/$id/step-$r2/manifest.json"
    check "$what: the jit window recorded resume_source jit" \
        test "$(ev_data "$id" 1 jit_window '$.resume_source')" = jit
    check "$what: lost work <= 1 step (lost $STEPS_LOST)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
    check "$what: no just-in-time directory left behind" \
        test -z "$(find "$TMP/ckpt/$id" -maxdepth 1 -name 'jit-*')"
    check "$what: the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
    got=$(jq -r .data.result.params_crc32c "$TMP/j.json")
    check "$what: final params_crc32c $got equals the uninterrupted run's $BASE" same_params "$id" "$got" "$BASE"
}

# --- 0. the controller's throughput figure ------------------------------------------
# samples/s: each rank reports the samples of its last step (16 of the
# global batch of 32), not a running total.  A long job, cancelled after.
submit "$(dttrain_spec throughput 2 "--inject-slow 0:25 --steps 100000")" || bail "submit failed"
check "0: the job runs past step 10" wait_step "$ID" 10 90
sleep 1.2   # a throughput figure is computed over >= 1 s
S0=$(job_step "$ID"); M0=$(now_ms); sleep 1.5; S1=$(job_step "$ID"); M1=$(now_ms)
TP=$(curl -s "$URL/v1/jobs/$ID" | jq '.data.throughput // 0')
RATE=$(( (S1 - S0) * 32 * 1000 / (M1 - M0) ))
check "0: throughput $TP samples/s is that of the steps ($RATE samples/s, within 3x)" \
    python3 -c "import sys; t, r = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (r > 0 and r / 3 <= t <= r * 3))" "$TP" "$RATE"
api POST "/v1/jobs/$ID/cancel" > /dev/null
check "0: cancelled" wait_state "$ID" cancelled 30

# hold_sockets PID FILE: copies of PID's sockets, held open in the
# background (pidfd_getfd, as root) until killed; FILE gets their number.
hold_sockets () {
    "$DT_PY3" - "$1" "$2" <<'EOF' &
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid, out = int(sys.argv[1]), sys.argv[2]
pfd, held = libc.syscall(434, pid, 0), []          # pidfd_open
for fd in os.listdir("/proc/%d/fd" % pid):
    try:
        if pfd >= 0 and os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
            got = libc.syscall(438, pfd, int(fd), 0)   # pidfd_getfd
            if got >= 0:
                held.append(got)
    except OSError:
        pass
open(out, "w").write("%d\n" % len(held))
time.sleep(300)
EOF
    HOLDER=$!
}

# --- 1. kill -9 of one rank (dp), its peer stuck in a collective -------------------
NOCKPT='{"checkpoint": {"every_steps": 1000}}'
submit "$(first_attempt_only "--inject-hang 1:45" "$(dttrain_spec jit-rank 2 "--inject-slow 0:25" "$NOCKPT")")" \
    || bail "submit failed"
ID1=$ID
check "1: the job reaches step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
hold_sockets "$PID" "$TMP/held.n"
check "1: rank 1's sockets are held open by a helper" \
    wait_for 10 sh -c "test \"\$(cat '$TMP/held.n' 2>/dev/null)\" -gt 0"
T0=$(now_ms)
check "1: kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "1: the job completes" wait_state "$ID" completed 120
kill -9 "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
L1=$STEPS_LOST
check "1: attempt 1 failed with cause trainer_exit, node local2, rank 1, signal 9" \
    jqt '.data.attempts[0].cause == "trainer_exit" and .data.attempts[0].cause_node == "local2"
         and .data.attempts[0].cause_rank == 1 and .data.attempts[0].evidence.signal == 9' "$TMP/j.json"
check "1: the failure is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'trainer_exit'")" = 1
check "1: rank 0 logged its just-in-time checkpoint" \
    grep -q "rank 0: just-in-time checkpoint of step $(jq '.data.attempts[1].resume_step' "$TMP/j.json") written" \
    "$TMP"/users/0/agents/job-$ID.1/local1/dt-$ID-a1*/rank-0.err
check "1: rank 0's collective, never failed by the kill, was woken by the just-in-time stop" \
    grep -q "rank 0: the just-in-time checkpoint waits .* aborting" \
    "$TMP"/users/0/agents/job-$ID.1/local1/dt-$ID-a1*/rank-0.err
check "1: the rank_exit evidence carries the killed rank's last step, 45" \
    jqt '.data.attempts[0].evidence.last_step == 45' "$TMP/j.json"
jit_checks "$ID" 1
api GET "/v1/jobs/$ID/report" > "$TMP/r.json"
check "1: the goodput report counts at most 1 lost step" jqt '(.data.lost_steps | type) == "number" and .data.lost_steps <= 1' "$TMP/r.json" \
    || jq -c .data "$TMP/r.json" | cut -c1-400 | sed 's/^/# /'

# --- 2. the whole node 2 lost (agent and rank) -------------------------------------
submit "$(first_attempt_only "--inject-hang 1:45" "$(dttrain_spec jit-node 2 "--inject-slow 0:25" "$NOCKPT")")" \
    || bail "submit failed"
check "2: the job reaches step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
AGENT=$(ps -o ppid= -p "$PID" | tr -d ' ')
T0=$(now_ms)
check "2: kill -9 the agent of local2 (pid $AGENT) and its rank (pid $PID)" kill -9 "$AGENT" "$PID"
check "2: the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
L2=$STEPS_LOST
# The local launcher sees the agent's process end (agent_exit) before its
# heartbeats are missed for the node timeout (node_lost): either names local2.
check "2: attempt 1 failed on local2 (node_lost or agent_exit; not the surviving local1)" \
    jqt '(.data.attempts[0].cause == "node_lost" or .data.attempts[0].cause == "agent_exit")
         and .data.attempts[0].cause_node == "local2"' "$TMP/j.json" \
    || jq -c '.data.attempts[0] | {cause, cause_node, cause_rank, detail}' "$TMP/j.json" | sed 's/^/# /'
check "2: attempt 2 runs without local2" jqt '.data.attempts[1].nodelist | test("local2") | not' "$TMP/j.json"
jit_checks "$ID" 2

# --- 3. zero1: no just-in-time checkpoint, the last committed one -----------------------
BASEZ=$(MODEL_ARGS="$MODEL_ARGS --parallel zero1" baseline 2) || bail "the zero1 baseline run failed"
echo "# uninterrupted run (world 2, zero1): params_crc32c $BASEZ"
submit "$(first_attempt_only "--inject-hang 1:45" "$(dttrain_spec jit-zero1 2 "--inject-slow 0:25 --parallel zero1")")" \
    || bail "submit failed"
check "3: the job reaches step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
T0=$(now_ms)
check "3: kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "3: the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
L3=$STEPS_LOST
check "3: attempt 2 resumed from a committed checkpoint (step >= 20), resume_source committed" \
    test "$(ev_data "$ID" 2 attempt_submitted '$.resume_source')" = committed -a \
         "$(jq '.data.attempts[1].resume_step' "$TMP/j.json")" -ge 20
check "3: the jit window recorded the fallback (resume_source committed, no jit step)" \
    test "$(ev_data "$ID" 1 jit_window '$.resume_source'):$(ev_data "$ID" 1 jit_window '$.jit_step')" = committed:0
check "3: no checkpoint of kind jit" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.kind') = 'jit'")" = 0
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "3: final params_crc32c $GOT equals the uninterrupted zero1 run's $BASEZ" same_params "$ID" "$GOT" "$BASEZ"

# --- 4. a hung rank, its peer stuck in a collective that the kill does not fail ----
# Rank 1 holds at step 45 until its agent finds it hung (3 s); the
# controller has it killed.  Its sockets are held open as in case 1, so
# only the just-in-time stop that comes with the kill wakes rank 0.
submit "$(first_attempt_only "--inject-hang 1:45" "$(dttrain_spec jit-hang 2 "--inject-slow 0:25" \
    '{"checkpoint": {"every_steps": 1000}, "heartbeat": {"hang_timeout_ms": 3000}}')")" \
    || bail "submit failed"
check "4: the job reaches step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
T0=$(now_ms)
hold_sockets "$PID" "$TMP/held4.n"
check "4: rank 1's sockets are held open by a helper" \
    wait_for 10 sh -c "test \"\$(cat '$TMP/held4.n' 2>/dev/null)\" -gt 0"
check "4: the job completes" wait_state "$ID" completed 120
kill -9 "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "4: attempt 1 failed with cause hang, rank 1" \
    jqt '.data.attempts[0].cause == "hang" and .data.attempts[0].cause_rank == 1' "$TMP/j.json" \
    || jq -c '.data.attempts[0] | {cause, cause_node, cause_rank, detail}' "$TMP/j.json" | sed 's/^/# /'
check "4: rank 0's collective, never failed by the kill, was woken by the just-in-time stop" \
    grep -q "rank 0: the just-in-time checkpoint waits .* aborting" \
    "$TMP"/users/0/agents/job-$ID.1/local1/dt-$ID-a1*/rank-0.err
jit_checks "$ID" 4

echo "# steps lost: dp with just-in-time checkpoint $L1 (rank killed), $L2 (node lost);" \
     "zero1 without it $L3 (checkpoints every 20 steps)"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
done_testing
