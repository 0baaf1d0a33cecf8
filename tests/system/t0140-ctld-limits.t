#!/bin/bash
# t0140-ctld-limits: denial of service, against the real controller over
# real sockets: bad limit values refused at start; MaxJobsPerUser (one
# user refused with the quota named, nothing stored, another user still
# served); a body without a credential refused at header time (401 with
# none of its 100 MB sent); a user request on the agents' listener
# refused; the per-address connection limit of the users' listener, while
# the agents' listener still serves an agent; MaxBodyBuffer (503 while
# another body fills the budget); MaxKvBytes; MaxResultSize and
# MaxEventsPerJob; just-in-time sets bounded; MaxJobCount; a request that
# dribbles its headers cut at RequestTimeout.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
[ -x "$DTCTL" ] || skip_all "dtctl not built"
command -v python3 >/dev/null || skip_all "python3 not installed"

# ---- bad values: a clear error naming the key, no daemon ------------------
bad_value () {
    local key=$1 out rc
    shift
    write_conf "$@"
    out=$("$DTCTLD" -c "$TMP/dtctld.conf" --foreground 2>&1 </dev/null); rc=$?
    check "bad $*: non-zero exit" test $rc -ne 0
    check "bad $*: the message names $key" grep -q "$key" <<<"$out"
}
bad_value MaxJobsPerUser "MaxJobsPerUser=-1"
bad_value MaxConnectionsPerAddress "MaxConnectionsPerAddress=lots"
bad_value RequestTimeout "RequestTimeout=10ms"
bad_value MaxBodyBuffer "MaxBodyBuffer=2048"
bad_value MaxKvBytes "MaxKvBytes=-5"
bad_value MaxEventsPerJob "MaxEventsPerJob=many"
bad_value MaxResultSize "MaxResultSize=1"
P=$(free_port)
bad_value AgentPort "ListenPort=$P" "AgentPort=$P"

# ---- a controller with small limits -----------------------------------------
# Users authenticate with MUNGE when munged runs (as a real site does);
# the external launcher starts nothing, so submitted jobs stay live.
if pgrep -x munged >/dev/null; then AUTH=munge; else AUTH=none; fi
write_conf "Launcher=external" "RendezvousTimeout=600s" "MaxJobsPerUser=2" \
    "MaxConnectionsPerAddress=4" "MaxBodySize=65536" "MaxBodyBuffer=100000" \
    "MaxKvBytes=150000" "MaxEventsPerJob=3" "MaxResultSize=100" "MaxJobCount=5"
sed -i "s/^AuthType=none/AuthType=$AUTH/; /^Launcher=local/d" "$TMP/dtctld.conf"
start_fg || bail "dtctld did not start"
AGENT_URL=$(curl -s "$URL/healthz" | jq -r .data.agent_url)
APORT=${AGENT_URL##*:}
check "healthz names the agents' listener, another port" \
    eval '[[ "$APORT" =~ ^[0-9]+$ ]] && [ "$APORT" != "$PORT" ]'

# ---- MaxJobsPerUser ---------------------------------------------------------
echo '{"name":"q","nodes":1,"ranks_per_node":1,"command":["true"]}' > "$TMP/spec.json"
chmod 644 "$TMP/spec.json"
if [ "$AUTH" = munge ]; then
    dt_users_setup
    U=$DT_USER_A; V=$DT_USER_B
    dtctl_as () { local u=$1; shift; as_user "$u" env DTCTL_CONTROLLER="$URL" "$DTCTL" "$@"; }
    njobs () { sqlite3 "$TMP/state/dtctld.db" "select count(*) from jobs where uid=$(user_uid "$1")"; }
    j1=$(dtctl_as "$U" submit "$TMP/spec.json" 2>"$TMP/err")
    j2=$(dtctl_as "$U" submit "$TMP/spec.json" 2>>"$TMP/err")
    check "$U submits 2 jobs (the quota)" eval '[[ "$j1" =~ ^[0-9]+$ && "$j2" =~ ^[0-9]+$ ]]' \
        || sed 's/^/# /' "$TMP/err"
    j3=$(dtctl_as "$U" submit "$TMP/spec.json" 2>"$TMP/err"); rc=$?
    check "$U's third live job is refused" test $rc -ne 0 -a -z "$j3"
    check "the refusal names the quota MaxJobsPerUser" grep -q "quota MaxJobsPerUser" "$TMP/err" \
        || sed 's/^/# /' "$TMP/err"
    check "nothing stored: $U still has 2 jobs" test "$(njobs "$U")" = 2
    # The same refusal over HTTP: 429, before the body is read.
    DTCURL_USER=$U api POST /v1/jobs -d @"$TMP/spec.json" >/dev/null
    check "over HTTP: 429" test "$(status)" = 429
    check "over HTTP: the error names the quota" jqt '.errors[0].error | test("MaxJobsPerUser")' "$TMP/body"
    submit_b () { dtctl_as "$V" submit "$1"; }
    jb=$(dtctl_as "$V" submit "$TMP/spec.json" 2>"$TMP/err")
    check "$V can still submit" eval '[[ "$jb" =~ ^[0-9]+$ ]]' || sed 's/^/# /' "$TMP/err"
    dtctl_as "$U" cancel "$j1" >/dev/null 2>&1
    wait_for 20 sh -c "[ \"\$(sqlite3 '$TMP/state/dtctld.db' \"select state from jobs where id=$j1\")\" = cancelled ]"
    j4=$(dtctl_as "$U" submit "$TMP/spec.json" 2>"$TMP/err")
    check "$U submits again once a job ended (live jobs count)" eval '[[ "$j4" =~ ^[0-9]+$ ]]' \
        || sed 's/^/# /' "$TMP/err"
else
    echo "# munged is not running: the per-user quota checks are skipped"
    submit_b () { curl -s -X POST "$URL/v1/jobs" -d @"$1" | jq -r .data.id; }
    jb=$(submit_b "$TMP/spec.json")
fi
# The external launcher hands the token over in StateDir/external (the
# database holds only its SHA-256).
TOKEN=$(cat "$TMP/state/external/job-$jb.1.token" 2>/dev/null)
check "an attempt token to act as an agent" test -n "$TOKEN"

# ---- a body without a credential: refused at header time ------------------
# raw PORT REQUEST-HEAD [BODY-BYTES]: send the head (and that many bytes of
# body), print the status line of the answer, or "closed" when the server
# closed the connection without one.
raw () {
    python3 - "$@" <<'EOF'
import socket, sys
port, head = int(sys.argv[1]), sys.argv[2].replace("\\r\\n", "\r\n")
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(30)
s.sendall(head.encode() + b"x" * (int(sys.argv[3]) if len(sys.argv) > 3 else 0))
try:
    d = s.recv(4096)
except OSError:
    d = b""
print(d.split(b"\r\n")[0].decode() if d else "closed")
EOF
}
big='Host: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n'
check "100 MB job spec, no credential: 401 with none of it sent" \
    test "$(raw "$PORT" "POST /v1/jobs HTTP/1.1\r\n$big")" = "HTTP/1.1 401 Unauthorized"
check "100 MB heartbeat, no token: 401 with none of it sent" \
    test "$(raw "$APORT" "POST /v1/agent/heartbeat HTTP/1.1\r\n$big")" = "HTTP/1.1 401 Unauthorized"
check "100 MB heartbeat, unknown token: 401 with none of it sent" \
    test "$(raw "$APORT" "POST /v1/agent/heartbeat HTTP/1.1\r\nAuthorization: Bearer 00ff\r\n$big")" \
    = "HTTP/1.1 401 Unauthorized"

# ---- user requests on the agents' listener: 403 -----------------------------
curl -s -o "$TMP/body" -w '%{http_code}' "$AGENT_URL/v1/jobs" > "$TMP/status"
check "GET /v1/jobs on the agents' listener: 403" test "$(status)" = 403
check "the error says where users go" jqt '.errors[0].error | test("ListenPort")' "$TMP/body"

# ---- per-address connections (users' listener) --------------------------------
# Hold 4 idle connections (the limit) from 127.0.0.1; a fifth is closed at
# once, while the agents' listener still serves an agent from the same
# address; once they are gone the users' listener serves again.
python3 - "$PORT" "$APORT" "$TOKEN" > "$TMP/conn.out" <<'EOF'
import socket, sys
port, aport, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def ask(p, req):
    s = socket.create_connection(("127.0.0.1", p))
    s.settimeout(30)
    try:
        s.sendall(req)
        d = s.recv(4096)
    except OSError:
        d = b""
    return d.split(b"\r\n")[0].decode() if d else "closed"
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
print("fifth:", ask(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
body = b'{"value":"aGVsbG8="}'
print("agent:", ask(aport, b"PUT /v1/agent/kv/limits/probe HTTP/1.1\r\nHost: x\r\n"
                 b"Authorization: Bearer " + token.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body))
for s in held:
    s.close()
EOF
check "5th connection from one address: closed without an answer" grep -qx "fifth: closed" "$TMP/conn.out" \
    || sed 's/^/# /' "$TMP/conn.out"
check "meanwhile an agent's KV put on the agents' listener: 200" grep -qx "agent: HTTP/1.1 200 OK" "$TMP/conn.out"
check "the users' listener serves again once they closed" wait_for 10 curl -sf "$URL/healthz" -o /dev/null
check "the agent's value was stored" \
    eval "curl -s -H 'Authorization: Bearer $TOKEN' $AGENT_URL/v1/agent/kv/limits/probe | jqt '.data.value == \"aGVsbG8=\"'"

# ---- MaxBodyBuffer: bodies buffered at once ---------------------------------
# A 60,000-byte KV put is held half sent (its buffer holds 65,536 bytes of
# the 100,000); a second one cannot fit and is answered 503 at once; the
# first, finished, is stored.
python3 - "$APORT" "$TOKEN" > "$TMP/budget.out" <<'EOF'
import base64, json, socket, sys
aport, token = int(sys.argv[1]), sys.argv[2]
def put(key, n):
    body = json.dumps({"value": base64.b64encode(b"v" * (n * 3 // 4)).decode()}).encode()
    head = (b"PUT /v1/agent/kv/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (key.encode(), token.encode(), len(body)))
    s = socket.create_connection(("127.0.0.1", aport))
    s.settimeout(30)
    return s, head, body
def status(s):
    try:
        d = s.recv(65536)
    except OSError:
        d = b""
    return d.split(b"\r\n")[0].decode() if d else "closed"
a, ha, ba = put("budget/a", 60000)
a.sendall(ha + ba[:40000])
# Until the controller has read A's bytes B still fits (and waits for its
# body): ask again, on a new connection, until B's head is answered.
second = "not answered"
for _ in range(100):
    b, hb, bb = put("budget/b", 60000)
    b.sendall(hb)
    b.settimeout(0.2)
    try:
        d = b.recv(65536)
        second = d.split(b"\r\n")[0].decode() if d else "closed"
    except socket.timeout:
        pass
    b.close()
    if second != "not answered":
        break
print("second:", second)
a.sendall(ba[40000:])
print("first:", status(a))
EOF
check "a body that does not fit MaxBodyBuffer: 503 at once" grep -qx "second: HTTP/1.1 503 Service Unavailable" "$TMP/budget.out" \
    || sed 's/^/# /' "$TMP/budget.out"
check "the body that held the budget: stored (200)" grep -qx "first: HTTP/1.1 200 OK" "$TMP/budget.out"

# ---- MaxKvBytes: every attempt's store together -----------------------------
# 60,000 bytes are held (budget/a); one more fits, the next does not.
kvput () {
    python3 -c 'import base64, json; print(json.dumps({"value": base64.b64encode(b"v" * 45000).decode()}))' > "$TMP/kv.json"
    curl -s -o "$TMP/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' --data-binary @"$TMP/kv.json" "$AGENT_URL/v1/agent/kv/$1" > "$TMP/status"
}
kvput quota/b
check "KV put within MaxKvBytes: 200" test "$(status)" = 200
kvput quota/c
check "KV put over MaxKvBytes: 429" test "$(status)" = 429
check "the error names the quota MaxKvBytes" jqt '.errors[0].error | test("quota MaxKvBytes")' "$TMP/body"
curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$AGENT_URL/v1/agent/kv/quota/c" > "$TMP/status"
check "nothing stored: the refused key is not set (404)" test "$(status)" = 404
# Many tiny keys: each entry costs the controller more than its key and
# value (about 100 bytes), and the quota counts that, so one attempt's
# token cannot grow the controller's memory by keys of a byte each.  What
# is left of MaxKvBytes takes about 29,800 bytes of keys "t/NNNNN" with
# 4-byte values: some 2,700 entries at 11 bytes each, under 300 at the
# entry's cost.
python3 - "$AGENT_URL" "$TOKEN" > "$TMP/tiny.txt" <<'PYEOF'
import http.client, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
hdr = {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"}
n, code = 0, 200
while code == 200 and n < 5000:
    c.request("PUT", "/v1/agent/kv/t/%05d" % n, body='{"value": "dg=="}', headers=hdr)
    r = c.getresponse(); r.read(); code = r.status
    n += code == 200
print(n, code)
PYEOF
read -r NTINY CTINY < "$TMP/tiny.txt"
check "tiny keys: the quota stops them at their entries' cost ($NTINY stored, then $CTINY)" \
    eval '[ "$CTINY" = 429 ] && [ "$NTINY" -ge 100 ] && [ "$NTINY" -lt 400 ]'

# ---- MaxResultSize and MaxEventsPerJob: what agents add to a job ----------
agent () {
    curl -s -o "$TMP/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' -d "$2" "$AGENT_URL/v1/agent/$1" > "$TMP/status"
}
nresults () { sqlite3 "$TMP/state/dtctld.db" "select count(*) from events where job_id=$jb and kind='result'"; }
agent register '{"node":"n1","node_order":0,"addr":"127.0.0.1","port":9}'
check "an agent registers" test "$(status)" = 200
res='{"kind":"result","rank":0,"result":{"loss":1.5}}'
agent events "{\"node\":\"n1\",\"events\":[{\"kind\":\"result\",\"rank\":0,\"result\":{\"blob\":\"$(printf '%0150d' 0)\"}}]}"
# The batch is answered per event (200): that one is refused, named.
check "a result over MaxResultSize: refused" jqt '.data.results[0].status == "refused"' "$TMP/body"
check "the error names MaxResultSize" jqt '.data.results[0].error | test("MaxResultSize")' "$TMP/body"
check "nothing recorded" test "$(nresults)" = 0
agent events "{\"node\":\"n1\",\"events\":[$res,$res]}"
check "2 results: 200" test "$(status)" = 200
agent events "{\"node\":\"n1\",\"events\":[$res,$res]}"
check "2 more would pass MaxEventsPerJob=3: 429" test "$(status)" = 429
check "the error names the quota MaxEventsPerJob" jqt '.errors[0].error | test("quota MaxEventsPerJob")' "$TMP/body"
check "nothing of that batch recorded" test "$(nresults)" = 2
agent events "{\"node\":\"n1\",\"events\":[$res]}"
check "one more fits: 200" test "$(status)" = 200
check "3 results recorded" test "$(nresults)" = 3

# ---- what was refused, in /metrics ------------------------------------------
curl -s "$URL/metrics" > "$TMP/metrics.txt"
for r in unauthenticated listener MaxKvBytes MaxEventsPerJob; do
    check "/metrics counts refusals: $r" \
        grep -Eq "^dtctld_requests_refused_total\{reason=\"$r\"\} [1-9]" "$TMP/metrics.txt"
done
if [ "$AUTH" = munge ]; then
    check "/metrics counts refusals: MaxJobsPerUser" \
        grep -Eq '^dtctld_requests_refused_total\{reason="MaxJobsPerUser"\} [1-9]' "$TMP/metrics.txt"
fi

# ---- just-in-time sets: bounded per attempt ---------------------------------
# Every one of 20 ranks starting a just-in-time set of its own would hold
# 20 x 20 entries; past 16 sets the others are ignored (accepted, logged).
mkdir -p "$TMP/jck"; chmod 777 "$TMP/jck"
echo "{\"name\":\"jit\",\"nodes\":1,\"ranks_per_node\":20,\"command\":[\"true\"],
       \"checkpoint\":{\"dir\":\"$TMP/jck\"}}" > "$TMP/jit.json"
chmod 644 "$TMP/jit.json"
jj=$(submit_b "$TMP/jit.json" 2>"$TMP/err")
check "a 20-rank job" eval '[[ "$jj" =~ ^[0-9]+$ ]]' || sed 's/^/# /' "$TMP/err"
TOKEN_B=$TOKEN
TOKEN=$(cat "$TMP/state/external/job-$jj.1.token" 2>/dev/null)
agent register '{"node":"j1","node_order":0,"addr":"127.0.0.1","port":9}'
ev=
for r in $(seq 0 19); do
    ev="$ev${ev:+,}{\"kind\":\"shard\",\"rank\":$r,\"step\":5,\"jit\":true,\"shard_rank\":0,
        \"path\":\"$TMP/jck/$jj/jit-5-r$r/rank-0.ckpt\",\"bytes\":10,\"crc32c\":\"00000000\"}"
done
agent events "{\"node\":\"j1\",\"events\":[$ev]}"
check "20 ranks' just-in-time shards: 200, all accepted" jqt '.data.accepted == 20' "$TMP/body" \
    || sed 's/^/# /' "$TMP/body"
check "past 16 sets the others are ignored (logged)" grep -q "16 ranks already do; ignored" "$TMP/ctld.log"
TOKEN=$TOKEN_B

# ---- MaxJobCount: live jobs of everyone ---------------------------------------
# 4 are live ($U's 2, $V's 2): root, under its own quota, adds the fifth;
# the sixth is refused whoever asks.
if [ "$AUTH" = munge ]; then
    nall () { sqlite3 "$TMP/state/dtctld.db" "select count(*) from jobs"; }
    api POST /v1/jobs -d @"$TMP/spec.json" >/dev/null
    check "the fifth live job: 201" test "$(status)" = 201
    n0=$(nall)
    api POST /v1/jobs -d @"$TMP/spec.json" >/dev/null
    check "the sixth: 429" test "$(status)" = 429
    check "the error names the quota MaxJobCount" jqt '.errors[0].error | test("quota MaxJobCount")' "$TMP/body"
    check "nothing stored" test "$(nall)" = "$n0"
fi

kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null

# ---- MaxAgentConnectionsPerAddress: the agents' listener, when a site sets it --
write_conf "MaxAgentConnectionsPerAddress=2"
start_fg || bail "dtctld did not restart"
AGENT_URL=$(curl -s "$URL/healthz" | jq -r .data.agent_url)
python3 - "${AGENT_URL##*:}" "$PORT" > "$TMP/aconn.out" <<'EOF'
import socket, sys
aport, port = int(sys.argv[1]), int(sys.argv[2])
def ask(p):
    s = socket.create_connection(("127.0.0.1", p))
    s.settimeout(30)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        d = s.recv(4096)
    except OSError:
        d = b""
    return d.split(b"\r\n")[0].decode() if d else "closed"
held = [socket.create_connection(("127.0.0.1", aport)) for _ in range(2)]
print("third:", ask(aport))
print("users:", ask(port))
EOF
check "agents' listener: a third connection from one address is closed" grep -qx "third: closed" "$TMP/aconn.out" \
    || sed 's/^/# /' "$TMP/aconn.out"
check "meanwhile the users' listener serves that address" grep -qx "users: HTTP/1.1 200 OK" "$TMP/aconn.out"
kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null

# ---- RequestTimeout: a request that dribbles in is cut ---------------------
# One header line every 0.2 s would take 60 s to finish the request; the
# controller cuts it after RequestTimeout=2s, before the request is done.
write_conf "RequestTimeout=2s"
start_fg || bail "dtctld did not restart"
python3 - "$PORT" > "$TMP/dribble.out" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
s.settimeout(0.2)
sent = 0
result = "not cut"
while sent < 300:
    try:
        s.sendall(b"X-Dribble-%d: y\r\n" % sent)
        sent += 1
        d = s.recv(4096)
        result = "closed" if d == b"" else "answered " + d.split(b"\r\n")[0].decode()
        break
    except socket.timeout:
        continue
    except OSError:
        result = "closed"
        break
print(result, "after", sent, "of 300 lines")
EOF
check "a request dribbling its headers is cut before it is done" grep -q "^closed after" "$TMP/dribble.out" \
    || sed 's/^/# /' "$TMP/dribble.out"
check "the controller logs the cut" grep -q "connection cut: request not done within 2000 ms" "$TMP/ctld.log"
check "/metrics counts the cut" sh -c "curl -s $URL/metrics | grep -Eq '^dtctld_http_requests_cut_total [1-9]'"
check "the controller still serves" curl -sf "$URL/healthz" -o /dev/null

done_testing
