#!/bin/bash
# t0401-agent-hang: kill -STOP of one steptrainer rank (2 nodes x 2 ranks,
# local launcher): its agent sees no step progress and reports "hang",
# not before the hang timeout, kills it, and no process of the attempt is
# left afterwards.  Each rank starts a helper process first (as a trainer
# starts data loaders), which does not use libdtclient and is not stopped:
# it ends only if the agent kills the rank's whole process group.  (How
# soon after the timeout: bench/run, part local.)
. "$(dirname "$0")/agent-lib.sh"

HANG_MS=3000
ctld_start
JOB=$(submit "{\"name\": \"t0401\", \"nodes\": 2, \"ranks_per_node\": 2,
  \"command\": [\"/bin/sh\", \"-c\", \"sleep 600 & exec $STEPTRAINER --steps 100000 --step-ms 50\"],
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 300, \"node_timeout_ms\": 5000, \"hang_timeout_ms\": $HANG_MS}}")
check "job submitted" test -n "$JOB"
ranks_up () { local r; for r in 0 1 2 3; do [ -n "$(rank_pid $r)" ] || return 1; done; }
check "4 ranks started" wait_for 30 ranks_up
sleep 1   # a few steps reported, so the rank is known to make progress

ALL="$(rank_pid 0) $(rank_pid 1) $(rank_pid 2) $(rank_pid 3) $(agent_pid local1) $(agent_pid local2)"
P1=$(rank_pid 1)
t0=$(now_ms)
kill -STOP "$P1"
check "hang of rank 1 on local1 recorded" wait_for $((HANG_MS / 1000 + 10)) has_event "$JOB" hang 1 local1
t1=$(event_time "$JOB" hang 1 local1)
echo "# kill -STOP -> hang recorded after $((t1 - t0)) ms (hang timeout $HANG_MS ms)"
check "... and not before the hang timeout" test -n "$t1" -a "$((t1 - t0))" -ge $((HANG_MS - 200))
check "the stopped rank was killed" wait_for 10 none_alive "$P1"
check "no process of the attempt left (those seen, and any process naming the test's directory)" \
    wait_for 20 eval 'none_alive $ALL && none_left'
check "the job failed" wait_for 10 eval '[ "$(job_state "$JOB")" = failed ]'
check "its attempt failed with cause hang, blamed on rank 1 on local1" \
    wait_for 20 eval 'api GET "/v1/jobs/$JOB" | jqt ".data.attempts[-1].state == \"failed\" and .data.attempts[-1].cause == \"hang\"
        and .data.attempts[-1].cause_rank == 1 and .data.attempts[-1].cause_node == \"local1\""' \
    || api GET "/v1/jobs/$JOB" | jq -c ".data.attempts[-1] | {state, cause, cause_rank, cause_node, detail}" | diag
finish
