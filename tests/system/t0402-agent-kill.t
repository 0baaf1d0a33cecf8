#!/bin/bash
# t0402-agent-kill: kill -9 of one dtagent (2 nodes x 2 ranks, local
# launcher): its trainers notice the agent's socket closing and end, and
# the controller records the node as lost.  Then the same with the
# trainers wrapped in a shell (so they are grandchildren of the agent, out
# of reach of PR_SET_PDEATHSIG): only libdtclient's watch on the socket can
# end them.  (How fast: bench/run, part local; the waits here only stop a
# hung test.)
. "$(dirname "$0")/agent-lib.sh"

NODE_MS=3000
ctld_start
JOB=$(submit "{\"name\": \"t0402\", \"nodes\": 2, \"ranks_per_node\": 2,
  \"command\": [\"$STEPTRAINER\", \"--steps\", \"100000\", \"--step-ms\", \"50\"],
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 300, \"node_timeout_ms\": $NODE_MS, \"hang_timeout_ms\": 30000}}")
check "job submitted" test -n "$JOB"
ranks_up () { local r; for r in 0 1 2 3; do [ -n "$(rank_pid $r)" ] || return 1; done; }
check "4 ranks started" wait_for 30 ranks_up
sleep 1

A2=$(agent_pid local2)
P2=$(rank_pid 2); P3=$(rank_pid 3)
ALL="$(rank_pid 0) $(rank_pid 1) $P2 $P3 $(agent_pid local1) $A2"
check "found the agent of local2" test -n "$A2"
t0=$(now_ms)
kill -9 "$A2"
check "its trainers are gone" wait_for 20 none_alive "$P2" "$P3"
t1=$(now_ms)
echo "# kill -9 of the agent -> its trainers gone after $((t1 - t0)) ms"
check "node_lost of local2 recorded" wait_for $((NODE_MS / 1000 + 10)) has_event "$JOB" node_lost "" local2
t2=$(event_time "$JOB" node_lost "" local2)
echo "# kill -9 of the agent -> node_lost recorded after $((t2 - t0)) ms (node timeout $NODE_MS ms)"
check "no process of the attempt left (those seen, and any process naming the test's directory)" \
    wait_for 20 eval 'none_alive $ALL && none_left'

# 2. Grandchildren: sh -c '<steptrainer> ...; true' keeps the shell between.
rm -rf "$T"/users/*/agents
JOB2=$(submit "{\"name\": \"t0402b\", \"nodes\": 1, \"ranks_per_node\": 2,
  \"command\": [\"/bin/sh\", \"-c\", \"$STEPTRAINER --steps 100000 --step-ms 50; true\"],
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 300, \"node_timeout_ms\": $NODE_MS, \"hang_timeout_ms\": 30000}}")
check "wrapped job submitted" test -n "$JOB2"
ranks_up2 () { [ -n "$(rank_pid 0)" ] && [ -n "$(rank_pid 1)" ]; }
check "2 wrapped ranks started" wait_for 30 ranks_up2
P0=$(rank_pid 0); P1=$(rank_pid 1)
A1=$(agent_pid local1)
check "the trainers are grandchildren of the agent" \
    same "$(ps -o ppid= -p "$(ps -o ppid= -p "$P0" | tr -d ' ')" | tr -d ' ')" "$A1"
t0=$(now_ms)
kill -9 "$A1"
check "wrapped trainers gone" wait_for 20 none_alive "$P0" "$P1"
t1=$(now_ms)
echo "# kill -9 of the agent -> wrapped trainers gone after $((t1 - t0)) ms"
check "nothing of the wrapped job left (the shells, the trainers)" wait_for 20 none_left
finish
