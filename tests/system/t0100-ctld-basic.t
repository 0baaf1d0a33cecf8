#!/bin/bash
# t0100-ctld-basic: dtctld with the local launcher and real dtagents:
# daemonize, submit with curl, list, show, bad input, permissions, cancel,
# illegal transitions (409, nothing changed), agent tokens (401/410),
# /metrics through promtool, SIGHUP with a bad config, SIGTERM, and the
# database's integrity.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
dt_users_setup

# ---- startup errors reach the terminal ------------------------------------
write_conf "ListenPort=notaport"
out=$("$DTCTLD" -c "$TMP/dtctld.conf" 2>&1); rc=$?
check "bad config: non-zero exit" test $rc -ne 0
check "bad config: the message names the key" grep -q "ListenPort" <<<"$out"

# A missing file (systemd's, before the admin copied the example) names
# the example that make install put there.
out=$("$DTCTLD" -c "$TMP/missing.conf" 2>&1); rc=$?
check "missing config: non-zero exit, pointing at dtctld.conf.example" \
    eval '[ $rc -ne 0 ] && grep -q "missing.conf: No such file" <<<"$out" && grep -q "cp .*/dtctld.conf.example $TMP/missing.conf" <<<"$out"'

write_conf
sed -i 's/^AuthType=munge$/AuthType=none/' "$TMP/dtctld.conf"
out=$("$DTCTLD" -c "$TMP/dtctld.conf" --listen 0.0.0.0 2>&1); rc=$?
check "AuthType=none off loopback: non-zero exit" test $rc -ne 0
check "AuthType=none off loopback: the message says why" grep -q loopback <<<"$out"

# ---- daemonized start: the parent returns once the daemon is ready ---------
write_conf "AdminUsers=$DT_USER_A"
"$DTCTLD" -c "$TMP/dtctld.conf" --port-file "$TMP/port" -v debug; rc=$?
check "daemon start exits 0" test $rc -eq 0
check "PID file written" test -s "$TMP/state/dtctld.pid"
DPID=$(cat "$TMP/state/dtctld.pid" 2>/dev/null)
CTLD_PIDS="$CTLD_PIDS $DPID"
check "daemon is alive" kill -0 "$DPID"
PORT=$(cat "$TMP/port"); URL=http://127.0.0.1:$PORT

# a second daemon on the same port fails, with the reason on the terminal
sed -i "s/^ListenPort=0/ListenPort=$PORT/" "$TMP/dtctld.conf"
out=$("$DTCTLD" -c "$TMP/dtctld.conf" -s "$TMP/state2" 2>&1); rc=$?
check "port taken: non-zero exit" test $rc -ne 0
check "port taken: message says so" grep -qi "in use" <<<"$out"
sed -i "s/^ListenPort=$PORT/ListenPort=0/" "$TMP/dtctld.conf"

check "healthz" eval "curl -sf $URL/healthz | jqt '.data.status == \"ok\"'"

# ---- submit, list, show ----------------------------------------------------
SPEC='{"name":"sleeper","nodes":2,"ranks_per_node":2,"command":["sleep","300"],
       "heartbeat":{"interval_ms":200}}'
api POST /v1/jobs -d "$SPEC" > "$TMP/submit.json"
check "submit answers 201" test "$(status)" = 201
ID=$(jq -r .data.id "$TMP/submit.json")
check "submit: data.id is a number" test "$ID" -ge 1 2>/dev/null
check "submit: defaults were filled in" \
    jqt '.data.spec.checkpoint.keep == 2 and .data.spec.restart.max_restarts == 3
           and (.errors | length) == 0' "$TMP/submit.json"

check "list shows the job" eval "curl -s $URL/v1/jobs | jqt 'any(.data[]; .id == $ID)'"
check "list filter name=sleeper" \
    eval "curl -s '$URL/v1/jobs?name=sleeper' | jqt '(.data | length) == 1'"
check "list filter state=completed excludes it" \
    eval "curl -s '$URL/v1/jobs?state=completed' | jqt '(.data | length) == 0'"
api GET "/v1/jobs?state=bogus" >/dev/null
check "list filter with a bad state: 400" test "$(status)" = 400

check "the job runs (both agents registered)" wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = running"
api GET /v1/jobs/$ID > "$TMP/show.json"
check "show: attempt 1 running on local1,local2" \
    jqt '.data.attempts[0].state == "running" and
           ([.data.attempts[0].nodes[].node] | sort) == ["local1","local2"] and
           .data.attempts[0].world_size == 4' "$TMP/show.json"
check "ranks: 4 ranks reported" wait_for 10 eval "curl -s $URL/v1/jobs/$ID/ranks | jqt '(.data | length) == 4'"
check "nodes: local1 and local2 known" \
    eval "curl -s $URL/v1/nodes | jqt '[.data[].name] | index(\"local1\") != null'"
check "events: submitted, registered, running" \
    eval "curl -s $URL/v1/jobs/$ID/events | jqt '[.data[].kind] | (index(\"job_submitted\") != null) and (index(\"agent_registered\") != null) and (.[0] == \"job_submitted\")'"
check "events carry UTC millisecond times" \
    eval "curl -s $URL/v1/jobs/$ID/events | jqt '.data[0].time | test(\"^[0-9-]{10}T[0-9:]{8}[.][0-9]{3}Z$\")'"
api GET /v1/jobs/$ID/checkpoints >/dev/null; check "checkpoints: 200" test "$(status)" = 200
api GET /v1/jobs/$ID/metrics >/dev/null; check "metrics of a job: 200" test "$(status)" = 200

# ---- bad input -----------------------------------------------------------------
api POST /v1/jobs -d '{"command":["x"],"checkpoint":{"every_steps":"often"}}' > "$TMP/bad.json"
check "invalid spec: 400" test "$(status)" = 400
check "invalid spec: the field path is named" \
    jqt '.errors[0].field == "checkpoint.every_steps" and .data == null' "$TMP/bad.json"
api POST /v1/jobs -d '{"command":["x"],' >/dev/null
check "malformed JSON: 400" test "$(status)" = 400
api POST /v1/jobs -d '{"command":["x"],"color":"red"}' > "$TMP/bad.json"
check "unknown field: 400 naming it" eval "test $(status) = 400 && jqt '.errors[0].field == \"color\"' $TMP/bad.json"
head -c 2000000 /dev/zero | tr '\0' 'a' > "$TMP/big"
api POST /v1/jobs --data-binary @"$TMP/big" >/dev/null
check "oversized body: 413" test "$(status)" = 413
api GET /v1/nowhere >/dev/null; check "unknown route: 404" test "$(status)" = 404
api DELETE /v1/jobs >/dev/null; check "wrong method: 405" test "$(status)" = 405
api GET /v1/jobs/abc >/dev/null; check "bad job id: 400" test "$(status)" = 400
api GET /v1/jobs/999999 >/dev/null; check "unknown job: 404" test "$(status)" = 404
njobs=$(sqlite3 "$TMP/state/dtctld.db" 'SELECT count(*) FROM jobs')
check "no partial writes from bad requests" test "$njobs" = 1

# ---- permissions: only the owner or an admin --------------------------------------
DTCURL_USER=$DT_USER_B api POST /v1/jobs/$ID/cancel >/dev/null
check "cancel by another user: 403" test "$(status)" = 403
DTCURL_USER=$DT_USER_B api POST /v1/jobs/$ID/checkpoint >/dev/null
check "checkpoint by another user: 403" test "$(status)" = 403
check "job still running after the refused cancel" test "$(job_state $ID)" = running

# ---- agent routes: tokens ---------------------------------------------------------
TOKEN=$(attempt_token "$ID")
check "token is 256 bits of hex" grep -Eq '^[0-9a-f]{64}$' <<<"$TOKEN"
check "the database holds the token's SHA-256 only" test \
    "$(sqlite3 "$TMP/state/dtctld.db" "SELECT token FROM attempts WHERE job_id = $ID")" = \
    "$(printf '%s' "$TOKEN" | sha256sum | cut -c1-64)"
api POST /v1/agent/heartbeat -H "Authorization: Bearer nope" -d '{"node":"local1","ranks":[]}' >/dev/null
check "unknown token: 401" test "$(status)" = 401
api PUT /v1/agent/kv/test/key -H "Authorization: Bearer $TOKEN" -d '{"value":"aGVsbG8="}' >/dev/null
check "kv put: 200" test "$(status)" = 200
check "kv get returns the value" \
    eval "curl -s -H 'Authorization: Bearer $TOKEN' $URL/v1/agent/kv/test/key | jqt '.data.value == \"aGVsbG8=\"'"
api GET /v1/agent/kv/absent -H "Authorization: Bearer $TOKEN" >/dev/null
check "kv get of an absent key: 404" test "$(status)" = 404
api PUT /v1/agent/kv/bad -H "Authorization: Bearer $TOKEN" -d '{"value":"not base64!"}' >/dev/null
check "kv put of a non-base64 value: 400" test "$(status)" = 400

# ---- cancel ----------------------------------------------------------------------
api POST /v1/jobs/$ID/cancel > "$TMP/cancel.json"
check "cancel: 200" test "$(status)" = 200
check "cancel: job is cancelled" jqt '.data.state == "cancelled"' "$TMP/cancel.json"
check "the attempt ends as cancelled" wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[-1].state')\" = cancelled"
check "no agent of the job survives" wait_for 10 sh -c "! pgrep -f -- '[-]-state-dir $TMP/users/0/agents/job-$ID[.]' >/dev/null"
api POST /v1/agent/heartbeat -H "Authorization: Bearer $TOKEN" -d '{"node":"local1","ranks":[]}' >/dev/null
check "token of an ended attempt: 410" test "$(status)" = 410

nev=$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID")
api POST /v1/jobs/$ID/cancel >/dev/null
check "cancel a cancelled job: 409" test "$(status)" = 409
api POST /v1/jobs/$ID/checkpoint >/dev/null
check "checkpoint a cancelled job: 409" test "$(status)" = 409
check "nothing changed by the refused requests" \
    same "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID")" "$nev"

# ---- a job that completes; its transitions ------------------------------------------
api POST /v1/jobs -d '{"name":"quick","nodes":1,"ranks_per_node":2,"command":["true"]}' > "$TMP/q.json"
QID=$(jq -r .data.id "$TMP/q.json")
check "a short job completes" wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$QID | jq -r .data.state)\" = completed"
check "its attempt succeeded" wait_for 10 sh -c "test \"\$(curl -s $URL/v1/jobs/$QID | jq -r '.data.attempts[-1].state')\" = succeeded"
api POST /v1/jobs/$QID/cancel >/dev/null
check "cancel a completed job: 409" test "$(status)" = 409
api POST /v1/jobs/$QID/resubmit >/dev/null
check "resubmit a completed job: 409" test "$(status)" = 409

# ---- a failing job: restarts, then failed with the cause ------------------------------
api POST /v1/jobs -d '{"name":"crash","nodes":2,"command":["sh","-c","exit 3"],
                       "restart":{"max_restarts":1}}' > "$TMP/f.json"
FID=$(jq -r .data.id "$TMP/f.json")
check "a failing job ends failed" wait_for 40 sh -c "test \"\$(curl -s $URL/v1/jobs/$FID | jq -r .data.state)\" = failed"
check "its last attempt ends failed" wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$FID | jq -r '.data.attempts[-1].state')\" = failed"
api GET /v1/jobs/$FID > "$TMP/f.json"
check "after 1 restart, with cause trainer_exit, node and rank" \
    jqt '.data.restarts == 1 and .data.attempt == 2 and .data.reason == "trainer_exit"
           and .data.failure.cause == "trainer_exit" and (.data.failure.node | startswith("local"))
           and (.data.failure.rank | type) == "number" and .data.failure.evidence.exit_code == 3' "$TMP/f.json"
check "both attempts failed with trainer_exit" \
    jqt '[.data.attempts[] | .state + "/" + .cause] == ["failed/trainer_exit","failed/trainer_exit"]' "$TMP/f.json"
api POST /v1/jobs/$FID/resubmit -d '{"exclude":["local9"]}' > "$TMP/r.json"
check "resubmit a failed job: 200, pending again with attempt 3" \
    eval "test $(status) = 200 && jqt '.data.attempt == 3 and (.data.exclude | index(\"local9\")) != null' $TMP/r.json"
check "the resubmitted job fails again" wait_for 40 sh -c "test \"\$(curl -s $URL/v1/jobs/$FID | jq -r .data.state)\" = failed"

# ---- /metrics ----------------------------------------------------------------------
curl -s "$URL/metrics" > "$TMP/metrics.txt"
check "/metrics counts jobs by state" grep -q '^dtctld_jobs{state="cancelled"} 1$' "$TMP/metrics.txt"
check "/metrics has the heartbeat histogram" grep -q '^dtctld_heartbeat_handling_seconds_bucket{le="+Inf"}' "$TMP/metrics.txt"
if command -v promtool >/dev/null; then
    check "promtool check metrics" sh -c "promtool check metrics < $TMP/metrics.txt"
else
    ok "promtool check metrics # SKIP promtool not installed"
fi

# ---- SIGHUP: a bad new config keeps the old one ------------------------------------------
# reloads WORD: the count of reloads with that result (/metrics)
reloads () { curl -s "$URL/metrics" | sed -n "s/^dtctld_config_reloads_total{result=\"$1\"} //p"; }
check "no reload yet: 0 taken, 0 refused" test "$(reloads taken) $(reloads refused)" = "0 0"
# (a key the command line does not override: -v sets the log level, so a
# bad LogLevel in the file is never read)
echo "SuspectCauses=sometimes" >> "$TMP/dtctld.conf"
kill -HUP "$DPID"
check "the bad config is refused (/metrics: 1 reload refused)" wait_for 10 eval '[ "$(reloads refused)" = 1 ]' \
    || curl -s "$URL/metrics" | grep reloads_total | sed 's/^/# /'
check "after SIGHUP with a bad config the daemon still serves" \
    sh -c "curl -sf $URL/healthz >/dev/null"
# the old config (AdminUsers=dtalice) is still in force
api POST /v1/jobs -d '{"name":"h1","command":["sleep","300"]}' > "$TMP/h.json"
HID=$(jq -r .data.id "$TMP/h.json")
DTCURL_USER=$DT_USER_A api POST /v1/jobs/$HID/cancel >/dev/null
check "the old config is kept: admin $DT_USER_A may cancel" test "$(status)" = 200
# a good new config takes effect
sed -i -e '/^SuspectCauses=sometimes/d' -e "s/^AdminUsers=$DT_USER_A/AdminUsers=$DT_USER_B/" "$TMP/dtctld.conf"
kill -HUP "$DPID"
check "the good config is taken (/metrics: 1 reload taken)" wait_for 10 eval '[ "$(reloads taken)" = 1 ]'
api POST /v1/jobs -d '{"name":"h2","command":["sleep","300"]}' > "$TMP/h.json"
HID=$(jq -r .data.id "$TMP/h.json")
DTCURL_USER=$DT_USER_A api POST /v1/jobs/$HID/cancel >/dev/null
check "after a good SIGHUP: $DT_USER_A is no longer admin (403)" test "$(status)" = 403
DTCURL_USER=$DT_USER_B api POST /v1/jobs/$HID/cancel >/dev/null
check "after a good SIGHUP: $DT_USER_B is admin (200)" test "$(status)" = 200
check "the cancelled jobs' agents are gone" wait_for 20 sh -c "! pgrep -f -- '[-]-state-dir $TMP/users/0/agents/' >/dev/null"

# ---- SIGTERM: clean exit, PID file removed --------------------------------------------------
kill -TERM "$DPID"
check "SIGTERM: the daemon exits" wait_for 10 sh -c "! kill -0 $DPID 2>/dev/null"
check "SIGTERM: PID file removed" test ! -e "$TMP/state/dtctld.pid"

check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
check "every transition has an event" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE kind = 'job_state'")" -ge 6
done_testing
