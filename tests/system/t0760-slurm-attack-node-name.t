#!/bin/bash
# t0760-slurm-attack-node-name (Slurm testbed): node-name poisoning under
# Slurm.  With the token of a running attempt (its user has it: it is in
# the batch job's environment), a fake agent registers as another node of
# the cluster that is not in the attempt's allocation, and as a hostlist
# range: both are refused (403, 400) with an agent_refused event, the
# names never reach the node table, no node becomes suspect, and the job
# runs on.  The real agent, on its allocated node, was accepted.
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 2

submit "$(jq -cn --arg w "$FT_WORKDIR" '{name: "victim", nodes: 1, command: ["sleep", "300"], workdir: $w}')" \
    || bail "submit failed"
check "the job runs on one node of the allocation" wait_state "$ID" running 90
curl -s "$URL/v1/jobs/$ID" > "$TMP/j.json"
NODE=$(jq -r '.data.attempts[-1].nodes[0].node' "$TMP/j.json")
OTHER=$(sinfo -h -N -o '%N' | sort -u | grep -vx "$NODE" | head -n 1)
echo "# the attempt runs on $NODE; $OTHER is a node of the cluster outside its allocation"
TOKEN=$(attempt_token "$ID")
check "the attempt's token, from the batch job's environment" grep -Eq '^[0-9a-f]{64}$' <<<"$TOKEN"

register () {
    curl -s -o "$TMP/reg.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' \
        -d "$(jq -cn --arg n "$1" '{node: $n, node_order: 0, addr: "10.77.0.99", port: 5999}')" \
        "$URL/v1/agent/register"
}
refused () { sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'agent_refused'"; }
nodes_before=$(sqlite3 "$TMP/state/dtctld.db" 'SELECT group_concat(name) FROM nodes ORDER BY name')

check "a cluster node outside the allocation ($OTHER): 403, saying why" \
    eval '[ "$(register "$OTHER")" = 403 ] && jqt ".errors[0].error | test(\"is not a node of attempt\")" "$TMP/reg.json"'
check "... with an agent_refused event" test "$(refused)" = 1
check "a hostlist range (node[1-2]): 400, naming the rule" \
    eval '[ "$(register "node[1-2]")" = 400 ] && jqt ".errors[0].error | test(\"not a valid node name\")" "$TMP/reg.json"'
check "... with an agent_refused event" test "$(refused)" = 2
check "the node table is unchanged" \
    test "$(sqlite3 "$TMP/state/dtctld.db" 'SELECT group_concat(name) FROM nodes ORDER BY name')" = "$nodes_before"
check "no node is suspect" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM nodes WHERE state = 'suspect'")" = 0
check "the job runs on" test "$(curl -s "$URL/v1/jobs/$ID" | jq -r .data.state)" = running
api POST /v1/jobs/$ID/cancel >/dev/null
check "the job is cancelled" wait_state "$ID" cancelled 30
done_testing
