#!/bin/bash
# t0400-agent-trainer-exit: dtctld + dtagent with the local launcher, 2 nodes
# x 2 ranks of steptrainer (libdtclient): the ranks get the torchrun
# environment and rendezvous through the kv relay; kill -9 of one rank is a
# trainer_exit event naming that rank and node, and nothing of the attempt
# is left afterwards.  (How fast it is detected: bench/run, part local.)
. "$(dirname "$0")/agent-lib.sh"

ctld_start
JOB=$(submit "{\"name\": \"t0400\", \"nodes\": 2, \"ranks_per_node\": 2,
  \"command\": [\"$STEPTRAINER\", \"--steps\", \"100000\", \"--step-ms\", \"50\", \"--rendezvous\"],
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 300, \"node_timeout_ms\": 5000, \"hang_timeout_ms\": 10000}}")
check "job submitted" test -n "$JOB"

ranks_up () { local r; for r in 0 1 2 3; do [ -n "$(rank_pid $r)" ] || return 1; done; }
check "4 ranks started" wait_for 30 ranks_up
rendezvous_done () { grep -q "rendezvous: rank 3 is pid" "$(find "$T/users" -name rank-0.err | head -1)"; }
check "ranks rendezvous through the agents' kv relay" wait_for 20 rendezvous_done

# The torchrun environment of rank 3 (node rank 1, local rank 1).
P3=$(rank_pid 3)
envof () { tr '\0' '\n' < "/proc/$P3/environ" | sed -n "s/^$1=//p"; }
check "rank 3: RANK LOCAL_RANK WORLD_SIZE GROUP_RANK" \
    test "$(envof RANK) $(envof LOCAL_RANK) $(envof WORLD_SIZE) $(envof GROUP_RANK) $(envof LOCAL_WORLD_SIZE)" = "3 1 4 1 2"
# Every rank: node rank = rank / 2, local rank = rank % 2 (2 ranks per node).
rank_env () {
    local r p
    for r in 0 1 2 3; do
        p=$(rank_pid $r)
        [ "$(tr '\0' '\n' < "/proc/$p/environ" | grep -E '^(RANK|LOCAL_RANK|GROUP_RANK)=' | sort | tr '\n' ' ')" \
            = "GROUP_RANK=$((r / 2)) LOCAL_RANK=$((r % 2)) RANK=$r " ] || { echo "# rank $r: wrong environment"; return 1; }
    done
}
check "every rank: RANK, LOCAL_RANK and GROUP_RANK of its place" rank_env
check "rank 3: MASTER_ADDR/PORT, TORCHELASTIC_RUN_ID, DT_JOB" \
    test -n "$(envof MASTER_ADDR)" -a -n "$(envof MASTER_PORT)" -a "$(envof TORCHELASTIC_RUN_ID)" = "dt-$JOB-a1" -a "$(envof DT_JOB)" = "$JOB"
check "rank 3: DT_AGENT_SOCKET, DT_AGENT_SHM, OMP_NUM_THREADS=1, no DT_TOKEN" \
    test -n "$(envof DT_AGENT_SOCKET)" -a -n "$(envof DT_AGENT_SHM)" -a "$(envof OMP_NUM_THREADS)" = 1 -a -z "$(envof DT_TOKEN)"
check "rank 3 leads its own process group" \
    test "$(ps -o pgid= -p "$P3" | tr -d ' ')" = "$P3"

ALL="$(rank_pid 0) $(rank_pid 1) $(rank_pid 2) $P3 $(agent_pid local1) $(agent_pid local2)"
t0=$(now_ms)
kill -9 "$P3"
check "trainer_exit of rank 3 on local2 recorded" wait_for 10 has_event "$JOB" trainer_exit 3 local2
t1=$(event_time "$JOB" trainer_exit 3 local2)
echo "# kill -9 -> trainer_exit recorded after $((t1 - t0)) ms"
check "no process of the attempt left (those seen, and any process naming the test's directory)" \
    wait_for 20 eval 'none_alive $ALL && none_left'
check "the job failed (max_restarts 0)" wait_for 10 eval '[ "$(job_state "$JOB")" = failed ]'
finish
