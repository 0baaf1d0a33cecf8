#!/bin/bash
# t0911-attack-node-name: node-name poisoning.  Whoever holds an attempt's
# token (the job's user: it is in the agents' environment) registers a
# fake agent under another name: a node outside the attempt's allocation,
# a hostlist range, a name with a shell's or Slurm's special characters.
# Each is refused with a clear error and an agent_refused event, and the
# name never reaches the node table, so it can be neither blamed nor put
# in anyone's exclude list.  And a user's own trainer crashes, in several
# of that user's jobs, do not make a node suspect (default policy: only
# node loss and Slurm node failures, in the jobs of two users or more);
# an admin, and only an admin, may still mark a node suspect.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
dt_users_setup

write_conf "SuspectJobs=2" "SuspectWindow=1h" "LocalNodes=2"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
ndb () { sqlite3 "$TMP/state/dtctld.db" "$1"; }

api POST /v1/jobs -d '{"name":"victim","nodes":1,"spare_nodes":1,"command":["sleep","300"]}' > "$TMP/j.json"
ID=$(jq -r .data.id "$TMP/j.json")
check "a job starts on local1 with local2 as its spare" \
    wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = running"
TOKEN=$(attempt_token "$ID")
check "the attempt's token, as its user has it (agent environment)" grep -Eq '^[0-9a-f]{64}$' <<<"$TOKEN"

# register NAME: a fake agent's registration; prints the HTTP status.
register () {
    curl -s -o "$TMP/reg.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' \
        -d "$(jq -cn --arg n "$1" '{node: $n, node_order: 0, addr: "127.0.0.1", port: 5999}')" \
        "$URL/v1/agent/register"
}
refused () { ndb "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'agent_refused'"; }
nodes_before=$(ndb 'SELECT group_concat(name) FROM nodes ORDER BY name')

code=$(register gpu-node-17)
check "a node outside the allocation: 403" test "$code" = 403
check "... saying it is not a node of the attempt's allocation" \
    jqt '.errors[0].field == "node" and (.errors[0].error | test("gpu-node-17 is not a node of attempt 1"))' "$TMP/reg.json"
check "... with an agent_refused event naming it" test "$(refused)" = 1
check "... whose text names the name and the allocation" \
    sh -c "sqlite3 '$TMP/state/dtctld.db' \"SELECT detail FROM events WHERE job_id = $ID AND kind = 'agent_refused'\" | grep -q 'gpu-node-17.*local1'"
nref=1
for bad in 'node[1-100]' 'local1,local2' 'a b' '-x' '$(reboot)' "$(printf 'x%.0s' $(seq 64))"; do
    code=$(register "$bad")
    nref=$((nref + 1))
    check "bad node name '${bad:0:20}': 400 naming the rule, and an event" \
        eval '[ "$code" = 400 ] && jqt ".errors[0].field == \"node\" and (.errors[0].error | test(\"not a valid node name\"))" "$TMP/reg.json" && [ "$(refused)" = $nref ]'
done
check "no refused name reached the node table" \
    test "$(ndb 'SELECT group_concat(name) FROM nodes ORDER BY name')" = "$nodes_before"
check "no node is suspect" test "$(ndb "SELECT count(*) FROM nodes WHERE state = 'suspect'")" = 0
check "the job runs on, unharmed" test "$(curl -s "$URL/v1/jobs/$ID" | jq -r .data.state)" = running
api POST /v1/jobs/$ID/cancel >/dev/null
check "the job's agents are gone after its cancel" wait_for 20 sh -c "! pgrep -f -- '[-]-state-dir $TMP/state/agents/job-$ID[.]' >/dev/null"

# ---- one user's crashes do not make a node suspect ------------------------------------
for k in 1 2 3; do
    api POST /v1/jobs -d '{"name":"crash'$k'","nodes":1,"command":["sh","-c","exit 3"],"restart":{"max_restarts":0}}' > "$TMP/c.json"
    CID=$(jq -r .data.id "$TMP/c.json")
    check "crashing job $k fails on a node (trainer_exit)" \
        wait_for 40 sh -c "test \"\$(curl -s $URL/v1/jobs/$CID | jq -r '.data.attempts[-1].state + \"/\" + .data.attempts[-1].cause')\" = failed/trainer_exit"
done
check "their failures are in the nodes' history" \
    test "$(ndb "SELECT count(*) FROM node_health WHERE kind = 'trainer_exit'")" -ge 3
check "yet no node is suspect (SuspectJobs=2, but trainer exits of one user)" \
    test "$(ndb "SELECT count(*) FROM nodes WHERE state = 'suspect'")" = 0
check "no node_suspect event" test "$(ndb "SELECT count(*) FROM events WHERE kind = 'node_suspect'")" = 0

# ---- an admin marks a node suspect; a user may not -------------------------------------
DTCURL_USER=$DT_USER_B api POST /v1/nodes/local1/suspect > "$TMP/s.json"
check "dtbob may not mark local1 suspect: 403" test "$(status)" = 403
check "... and local1 is not suspect" test "$(ndb "SELECT state FROM nodes WHERE name = 'local1'")" != suspect
api POST /v1/nodes/local1/suspect > "$TMP/s.json"
check "root marks local1 suspect: 200, and it is" \
    eval '[ "$(status)" = 200 ] && jqt "any(.data[]; .name == \"local1\" and .health == \"suspect\")" "$TMP/s.json"'
check "a node_suspect event says who marked it" \
    test "$(ndb "SELECT count(*) FROM events WHERE kind = 'node_suspect' AND node = 'local1' AND detail LIKE '%marked suspect by uid 0%'")" = 1
api POST /v1/jobs -d '{"name":"after","nodes":1,"command":["sleep","300"]}' > "$TMP/a.json"
AID=$(jq -r .data.id "$TMP/a.json")
check "a new job runs on local2, not on the marked local1" \
    wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$AID | jq -r '.data.state + \" \" + (.data.attempts[-1].nodes[0].node // \"\")')\" = 'running local2'"
api POST /v1/jobs/$AID/cancel >/dev/null
done_testing
