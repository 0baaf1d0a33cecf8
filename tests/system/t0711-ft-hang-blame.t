#!/bin/bash
# t0711-ft-hang-blame (local launcher): rank 1 of a 2-node dttrain
# job stops making progress without being stopped (--inject-hang: it sleeps
# outside any collective) while rank 0 blocks in the next allreduce waiting
# for it.  Both ranks stall; the hang must be blamed on rank 1 and its node,
# never on rank 0, whether the agents detect it (fixed hang timeout) or the
# controller's watchdog does (automatic timeout).  Rank 0 reports that it is
# blocked in a collective (libdtclient's set_waiting), which gives it twice
# the timeout.  No restarts: the injection would fire again on resume.
. "$(dirname "$0")/ft-lib.sh"

write_conf "HangTimeoutFloor=3s"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

for mode in agent controller; do
    case $mode in
    agent) hb='{"heartbeat": {"hang_timeout_ms": 3000}, "restart": {"max_restarts": 0}}' ;;
    controller) hb='{"heartbeat": {"hang_timeout_ms": 0}, "restart": {"max_restarts": 0}}' ;;
    esac
    submit "$(dttrain_spec "blame-$mode" 2 "--inject-hang 1:40" "$hb")" || bail "submit failed"
    check "$mode: the job fails (no restarts)" wait_state "$ID" failed 90
    api GET "/v1/jobs/$ID" > "$TMP/j.$mode.json"
    jq -c '.data.attempts[0] | {cause, cause_node, cause_rank, detail, by: .evidence.detected_by}' \
        "$TMP/j.$mode.json" | sed "s/^/# $mode: /"
    NODE=$(jq -r '.data.attempts[0].nodes[] | select(.node_rank == 1) | .node' "$TMP/j.$mode.json")
    check "$mode: cause hang, blamed on rank 1 on $NODE (not on rank 0, blocked on it)" \
        jqt ".data.attempts[0].cause == \"hang\" and .data.attempts[0].cause_rank == 1
             and .data.attempts[0].cause_node == \"$NODE\"" "$TMP/j.$mode.json"
done
check "agent: detected by rank 1's agent" \
    jqt '.data.attempts[0].evidence.detected_by == "agent"' "$TMP/j.agent.json"
check "controller: detected by the watchdog, rank 1 neither waiting nor stopped" \
    jqt '.data.attempts[0].evidence | .detected_by == "controller" and .waiting == false
         and .stopped == false and .tied_ranks == 0' "$TMP/j.controller.json"
done_testing
