#!/bin/bash
# t0735-ft-node-health (local launcher): a node blamed for failures
# of SuspectJobs different jobs within SuspectWindow becomes suspect, shows
# so in GET /v1/nodes, and is kept out of new attempts until an admin
# clears it (POST /v1/nodes/{name}/clear, what `dtctl nodes clear` calls).
. "$(dirname "$0")/ft-lib.sh"

# The mechanism with a permissive policy: one user's trainer crashes count
# here (the default counts only node loss, in two users' jobs: t0911).
write_conf "SuspectJobs=2" "SuspectWindow=1h" "SuspectUsers=1" "SuspectCauses=any"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
# One node, no restart: each job fails at once on the first free node.
crash () { submit "$(dttrain_spec "crash$1" 1 "--inject-crash 0:0" '{"restart": {"max_restarts": 0}}')" && wait_state "$ID" failed 60 && wait_att "$ID" failed 20; }
node_state () { curl -s "$URL/v1/nodes" | jq -r ".data[] | select(.name == \"$1\") | .state"; }

check "job A fails on local1" crash A
JOB_A=$ID
check "local1 is still up after failures in one job" test "$(node_state local1)" = up
check "job B fails on local1" crash B
JOB_B=$ID
check "local1 is suspect after failures in 2 jobs" test "$(node_state local1)" = suspect
api GET /v1/nodes > "$TMP/n.json"
jq -c '.data[] | {name, state, failures, suspect_since, note}' "$TMP/n.json" | sed 's/^/# /'
check "a node_suspect event was recorded" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE kind = 'node_suspect' AND node = 'local1'")" = 1
# GET /v1/nodes/{name}: the health history behind the suspect state.
api GET /v1/nodes/local1 > "$TMP/h.json"
check "GET /v1/nodes/local1: 200, health suspect, never cleared" \
    jqt '.data.name == "local1" and .data.health == "suspect" and .data.cleared == null' "$TMP/h.json"
check "history: a failure of job A and of job B, newest first, both counting" \
    jqt --argjson a "$JOB_A" --argjson b "$JOB_B" '[.data.history[] | select(.kind == "failure")] as $f
        | ($f | map(.job) | index($b)) != null and ($f | map(.job) | rindex($a)) != null
        and ($f | map(.job) | index($b)) < ($f | map(.job) | rindex($a))
        and all($f[]; .since_clear and (.cause | length) > 0 and .attempt == 1 and (.time | test("Z$")))' "$TMP/h.json"
check "GET /v1/nodes: local1 with health and last failure" \
    jqt '.data[] | select(.name == "local1") | .health == "suspect" and .last_failure_time != null and .last_cause != null' "$TMP/n.json"
api GET /v1/nodes/nosuchnode > /dev/null
check "GET /v1/nodes/nosuchnode: 404" test "$(status)" = 404
api GET "/v1/nodes/local1?limit=1" > "$TMP/h1.json"
check "GET /v1/nodes/local1?limit=1: one history row" jqt '.data.history | length == 1' "$TMP/h1.json"
api GET "/v1/nodes/local1?limit=0" > /dev/null
check "GET /v1/nodes/local1?limit=0: 400" test "$(status)" = 400
submit "$(dttrain_spec after 1 "--steps 5" '{"restart": {"max_restarts": 0}}')" || bail "submit failed"
check "a new job does not run on suspect local1" wait_for 30 eval \
    "curl -s $URL/v1/jobs/$ID | jqt '.data.attempts[0].nodelist == \"local2\" and (.data.attempts[0].exclude | index(\"local1\") != null)'"
wait_state "$ID" completed 60
api POST /v1/nodes/nosuchnode/clear > /dev/null
check "clearing an unknown node: 404" test "$(status)" = 404
api POST /v1/nodes/local1/clear > "$TMP/c.json"
check "POST /v1/nodes/local1/clear: 200, local1 up" \
    eval "test \"\$(cat $TMP/status)\" = 200 && jqt '.data[] | select(.name == \"local1\") | .state == \"up\"' $TMP/c.json"
submit "$(dttrain_spec again 1 "--steps 5" '{"restart": {"max_restarts": 0}}')" || bail "submit failed"
check "after the clear, new attempts use local1 again" wait_for 30 eval \
    "curl -s $URL/v1/jobs/$ID | jqt '.data.attempts[0].nodelist == \"local1\"'"
wait_state "$ID" completed 60
check "a failure after the clear does not make it suspect again at once" crash C
check "local1 is up (history before the clear no longer counts)" test "$(node_state local1)" = up
api GET /v1/nodes/local1 > "$TMP/h.json"
jq -c '.data | {health, cleared, history: [.history[] | {time, kind, job, cause, since_clear}]}' "$TMP/h.json" | sed 's/^/# /'
check "history after the clear: the clear is recorded with its time and uid" \
    jqt '.data.health == "ok" and (.data.cleared.time | test("Z$")) and (.data.cleared.uid | type) == "number"
        and any(.data.history[]; .kind == "cleared")' "$TMP/h.json"
check "history after the clear: only job C's failure still counts" \
    jqt --argjson c "$ID" '[.data.history[] | select(.since_clear)] | length >= 1 and all(.[]; .job == $c)' "$TMP/h.json"
done_testing
