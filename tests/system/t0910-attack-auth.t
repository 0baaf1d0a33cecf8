#!/bin/bash
# t0910-attack-auth: an ordinary user's attempts on the controller's
# authentication and state, each refused with a clear error and nothing of
# anyone else changed:
#   - AuthType=none is refused to a root dtctld (every local user would be
#     root); under a user's own dtctld, an X-Dtctl-Uid header is ignored;
#   - a MUNGE credential made for one request (GET /v1/jobs) and replayed
#     on another (POST /v1/jobs) is refused; so is one bound to nothing;
#   - the StateDir (0700, repaired when it was opened up) and the database
#     (0600) are not readable by dtalice; agent tokens are stored as their
#     SHA-256, never in clear;
#   - PrivateData: dtbob does not see the values of dtalice's env, nor the
#     stderr tail of another user's failed rank; the owner and root do;
#     with PrivateData=jobs dtbob does not see dtalice's job at all.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
dt_users_setup
A=$DT_USER_A B=$DT_USER_B
REALCURL=$(PATH=$DT_PATH_NOWRAP command -v curl)
ndb () { sqlite3 "$TMP/state/dtctld.db" "$1"; }

# ---- AuthType=none as root: refused at start, saying why and what to use --------
write_conf
sed -i 's/^AuthType=munge$/AuthType=none/' "$TMP/dtctld.conf"
out=$("$DTCTLD" -c "$TMP/dtctld.conf" --foreground 2>&1); rc=$?
check "AuthType=none as root: dtctld refuses to start" test $rc -ne 0
check "AuthType=none as root: the message names root and MUNGE" \
    eval 'grep -q "root" <<<"$out" && grep -qi "AuthType=munge" <<<"$out"'
check "AuthType=none as root: no state was created" test ! -e "$TMP/state"

# ---- a user's own dtctld with AuthType=none: X-Dtctl-Uid is ignored ----------------
mkdir -p "$TMP/alice" && chown "$A" "$TMP/alice"
{
    echo "ListenAddress=127.0.0.1"; echo "ListenPort=0"; echo "StateDir=$TMP/alice/state"
    echo "Launcher=external"; echo "AuthType=none"; echo "CheckpointRoot=$TMP/alice/ckpt"
    echo "UserDir=$TMP/alice/users"
} > "$TMP/alice/dtctld.conf"
chmod 644 "$TMP/alice/dtctld.conf"
# setpriv execs (runuser would stay the parent): $! is dtalice's dtctld,
# which the cleanup kills.
setpriv --reuid="$A" --regid="$(id -g "$A")" --clear-groups -- env -i HOME=/tmp PATH=/usr/bin:/bin \
    "$DTCTLD" -c "$TMP/alice/dtctld.conf" --foreground --port-file "$TMP/alice/port" \
    > "$TMP/alice.log" 2>&1 &
ALICE_PID=$!
CTLD_PIDS="$CTLD_PIDS $ALICE_PID"
check "dtalice's own dtctld (AuthType=none) starts" wait_for 20 test -s "$TMP/alice/port"
AURL=http://127.0.0.1:$(cat "$TMP/alice/port" 2>/dev/null)
"$REALCURL" -s -X POST -H 'X-Dtctl-Uid: 0' -d '{"name":"asroot","command":["true"]}' \
    "$AURL/v1/jobs" > "$TMP/asroot.json"
check "X-Dtctl-Uid: 0 is ignored: the job belongs to dtalice, not root" \
    jqt --argjson u "$(user_uid "$A")" '.data.uid == $u and .data.uid != 0' "$TMP/asroot.json"
kill "$ALICE_PID" 2>/dev/null; wait "$ALICE_PID" 2>/dev/null
check "dtalice's dtctld is gone" sh -c "! kill -0 $ALICE_PID 2>/dev/null"

# ---- the real controller (root, MUNGE) ---------------------------------------------
mkdir -p "$TMP/state" && chmod 755 "$TMP/state"     # opened up by a careless admin
write_conf "AdminUsers=root"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
check "an opened-up StateDir is made 0700, with a warning" \
    eval '[ "$(stat -c %a "$TMP/state")" = 700 ] && grep -q "StateDir .* was mode 0755" "$TMP/ctld.log"'
check "the database is 0600" test "$(stat -c %a "$TMP/state/dtctld.db")" = 600
check "dtalice cannot read the database" sh -c "! runuser -u $A -- cat '$TMP/state/dtctld.db' >/dev/null 2>&1"
check "dtalice cannot list the StateDir" sh -c "! runuser -u $A -- ls '$TMP/state' >/dev/null 2>&1"

# ---- replayed credentials --------------------------------------------------------------
SPEC='{"name":"replay","command":["sleep","300"]}'
before=$(ndb 'SELECT count(*) FROM jobs')
cred=$(DTCURL_USER=$A "$TOP_SRCDIR/tests/system/dtcurl" --cred GET /v1/jobs)
code=$("$REALCURL" -s -o "$TMP/replay.json" -w '%{http_code}' -X POST -H "X-Munge-Credential: $cred" \
    -H 'Content-Type: application/json' -d "$SPEC" "$URL/v1/jobs")
check "a credential for GET /v1/jobs replayed on POST /v1/jobs: 401" test "$code" = 401
check "... saying it was made for another request" \
    jqt '.errors[0].error | test("made for another request")' "$TMP/replay.json"
cred=$(runuser -u "$A" -- munge -n)
code=$("$REALCURL" -s -o "$TMP/empty.json" -w '%{http_code}' -X POST -H "X-Munge-Credential: $cred" \
    -d "$SPEC" "$URL/v1/jobs")
check "a credential bound to nothing (empty payload): 401, saying so" \
    eval '[ "$code" = 401 ] && jqt ".errors[0].error | test(\"payload is empty\")" "$TMP/empty.json"'
cred=$(DTCURL_USER=$A "$TOP_SRCDIR/tests/system/dtcurl" --cred POST /v1/jobs "$SPEC")
code=$("$REALCURL" -s -o /dev/null -w '%{http_code}' -X POST -H "X-Munge-Credential: $cred" \
    -d '{"name":"other","command":["sleep","1"]}' "$URL/v1/jobs")
check "a credential for one body replayed with another body: 401" test "$code" = 401
check "no job was created by the refused requests" test "$(ndb 'SELECT count(*) FROM jobs')" = "$before"
code=$("$REALCURL" -s -o /dev/null -w '%{http_code}' -X POST -H 'X-Dtctl-Uid: 0' -d "$SPEC" "$URL/v1/jobs")
check "X-Dtctl-Uid without a credential (AuthType=munge): 401" test "$code" = 401

# ---- agent tokens are stored hashed ------------------------------------------------------
api POST /v1/jobs -d "$SPEC" > "$TMP/j.json"
ID=$(jq -r .data.id "$TMP/j.json")
check "root's job runs" wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = running"
TOKEN=$(attempt_token "$ID")
check "the agents hold a 256-bit token" grep -Eq '^[0-9a-f]{64}$' <<<"$TOKEN"
check "the token is nowhere in the database in clear" \
    sh -c "! sqlite3 '$TMP/state/dtctld.db' .dump | grep -q '$TOKEN'"
check "the database holds its SHA-256" \
    test "$(ndb "SELECT token FROM attempts WHERE job_id = $ID")" = "$(printf '%s' "$TOKEN" | sha256sum | cut -c1-64)"
api POST /v1/agent/heartbeat -H "Authorization: Bearer $(ndb "SELECT token FROM attempts WHERE job_id = $ID")" \
    -d '{"node":"local1","ranks":[]}' >/dev/null
check "the stored hash is not a token: 401" test "$(status)" = 401
api POST /v1/jobs/$ID/cancel >/dev/null

# ---- PrivateData: env values and stderr tails of others' jobs ------------------------------
DTCURL_USER=$A api POST /v1/jobs -d '{"name":"private","nodes":1,"command":["true"],
    "env":{"WANDB_API_KEY":"s3cret-4711","MODE":"fast"},"restart":{"max_restarts":0}}' > "$TMP/p.json"
check "dtalice submits a job with env values" test "$(status)" = 201
PID_=$(jq -r .data.id "$TMP/p.json")
DTCURL_USER=$B api GET /v1/jobs/$PID_ > "$TMP/pb.json"
check "dtbob sees the job, the names of its env variables, not their values" \
    jqt '.data.spec.env | keys == ["MODE","WANDB_API_KEY"] and all(.[]; . == "(hidden: PrivateData)")' "$TMP/pb.json"
check "dtbob's answers carry the secret nowhere (show, list, events)" \
    sh -c "! { cat '$TMP/pb.json'; DTCURL_USER=$B curl -s '$URL/v1/jobs'; DTCURL_USER=$B curl -s '$URL/v1/jobs/$PID_/events'; } | grep -q s3cret-4711"
DTCURL_USER=$A api GET /v1/jobs/$PID_ > "$TMP/pa.json"
check "dtalice (the owner) sees her values" jqt '.data.spec.env.WANDB_API_KEY == "s3cret-4711"' "$TMP/pa.json"
api GET /v1/jobs/$PID_ > "$TMP/pr.json"
check "root (admin) sees them" jqt '.data.spec.env.WANDB_API_KEY == "s3cret-4711"' "$TMP/pr.json"

# (the command computes the marker: the spec itself does not hold it)
api POST /v1/jobs -d '{"name":"leaky","nodes":1,"command":["sh","-c","echo tail-leak-$((800 + 15)) >&2; exit 3"],
    "restart":{"max_restarts":0}}' > "$TMP/l.json"
LID=$(jq -r .data.id "$TMP/l.json")
check "root's failing job ends failed" wait_for 40 sh -c "test \"\$(curl -s $URL/v1/jobs/$LID | jq -r .data.state)\" = failed"
check "root sees the stderr tail of its failed rank" \
    sh -c "curl -s '$URL/v1/jobs/$LID' | grep -q tail-leak-815"
check "dtbob sees no stderr tail (show, events, report)" \
    sh -c "! { DTCURL_USER=$B curl -s '$URL/v1/jobs/$LID'; DTCURL_USER=$B curl -s '$URL/v1/jobs/$LID/events'; DTCURL_USER=$B curl -s '$URL/v1/jobs/$LID/report'; } | grep -q tail-leak-815"
check "... and is told it is hidden" \
    sh -c "DTCURL_USER=$B curl -s '$URL/v1/jobs/$LID' | grep -q 'hidden: PrivateData'"

# PrivateData=jobs (SIGHUP): other users' jobs are not listed, not shown.
echo "PrivateData=jobs" >> "$TMP/dtctld.conf"
kill -HUP "$CTLD_PID"
check "PrivateData=jobs: dtbob gets 404 for dtalice's job" \
    wait_for 10 sh -c "test \"\$(DTCURL_USER=$B curl -s -o /dev/null -w '%{http_code}' $URL/v1/jobs/$PID_)\" = 404"
check "PrivateData=jobs: dtbob's list holds none of the others' jobs" \
    eval "DTCURL_USER=$B curl -s '$URL/v1/jobs' | jqt '(.data | length) == 0'"
check "PrivateData=jobs: nor their events" \
    test "$(DTCURL_USER=$B curl -s -o /dev/null -w '%{http_code}' "$URL/v1/jobs/$PID_/events")" = 404
check "PrivateData=jobs: dtalice still sees hers, root all" \
    eval "DTCURL_USER=$A curl -s '$URL/v1/jobs/$PID_' | jqt '.data.spec.env.WANDB_API_KEY == \"s3cret-4711\"' \
           && curl -s '$URL/v1/jobs' | jqt '(.data | length) >= 3'"
# The node views: root's failed job blamed its node.
LNODE=$(curl -s "$URL/v1/jobs/$LID" | jq -r .data.attempts[0].cause_node)
curl -s "$URL/v1/nodes/$LNODE" > "$TMP/nr.json"
DTCURL_USER=$B curl -s "$URL/v1/nodes/$LNODE" > "$TMP/nb.json"
DTCURL_USER=$B curl -s "$URL/v1/nodes" > "$TMP/nlb.json"
check "root sees job $LID in $LNODE's history, with its failure's detail" \
    jqt --argjson j "$LID" '[.data.history[] | select(.job == $j and .detail != null)] | length >= 1' "$TMP/nr.json"
check "PrivateData=jobs: dtbob sees $LNODE's failures (time, cause) but not root's job, attempt or detail" \
    jqt '(.data.history | length) >= 1 and all(.data.history[] | select(.kind == "failure");
          .job == null and .attempt == null and (.cause | type) == "string"
          and (.detail == null or .detail == "(hidden: PrivateData)"))' "$TMP/nb.json"
check "... nor root's job on any node of the list" \
    jqt --argjson j "$LID" '[.data[] | select(.job == $j)] == []' "$TMP/nlb.json"
# /metrics answers without a credential: no series per job unless configured.
api POST /v1/jobs -d '{"name":"metered","nodes":1,"command":["sleep","300"]}' > "$TMP/m.json"
MID=$(jq -r .data.id "$TMP/m.json")
check "root's job $MID runs" wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$MID | jq -r .data.state)\" = running"
/usr/bin/curl -s "$URL/metrics" > "$TMP/metrics0.txt"
check "/metrics without a credential: the server's series, none labelled by job" \
    eval 'grep -q "^dtctld_live_attempts " "$TMP/metrics0.txt" && ! grep -q "job=\"" "$TMP/metrics0.txt"'
echo "MetricsPerJob=yes" >> "$TMP/dtctld.conf"
kill -HUP "$CTLD_PID"
check "with MetricsPerJob=yes: job $MID's series" \
    wait_for 10 eval '/usr/bin/curl -s "$URL/metrics" | grep -q "^dtctld_job_wall_seconds{job=\"$MID\"}"'
api POST "/v1/jobs/$MID/cancel" > /dev/null
done_testing
