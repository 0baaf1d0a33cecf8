#!/bin/bash
# t0920-ui-link: the web page's files and who may read through it:
#   - /ui/ serves the page's files (from UiDir, here the source tree) and
#     the charting library of Debian's libjs-chart.js, with no credential;
#     nothing outside UiDir is reachable (.., %2e%2e, %2f, a symlink, a
#     dot file, a directory);
#   - `dtctl ui` prints a link whose token reads as its user: dtalice's
#     link sees her job and, with PrivateData=jobs, not dtbob's; the token
#     only reads (a POST with it is refused, and it cannot make a link);
#   - an expired token, an altered one, and one signed before the
#     controller restarted (a new key) are refused with 401 saying why;
#   - GET /v1/jobs/{id}/metrics?max_points=N answers at most N points,
#     each attempt's first and last kept;
#   - a user's own dtctld with AuthType=none on loopback: the page reads
#     with no link at all.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
dt_users_setup
A=$DT_USER_A B=$DT_USER_B
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
REALCURL=$(PATH=$DT_PATH_NOWRAP command -v curl)
[ -f /usr/share/javascript/chart.js/chart.min.js ] || bail "libjs-chart.js is not installed (scripts/install-deps)"
raw () { "$REALCURL" -s --path-as-is -o "$TMP/raw" -w '%{http_code}' "$@"; }

write_conf "AdminUsers=root" "PrivateData=jobs,env,stderr" "UiDir=$TOP_SRCDIR/ui"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
export DTCTL_CONTROLLER=$URL

# ---- the files ----------------------------------------------------------------------
check "GET /ui/ with no credential: the jobs page" \
    eval '[ "$(raw "$URL/ui/")" = 200 ] && grep -q "<title>dtctl: jobs</title>" "$TMP/raw"'
check "GET /ui/job.html is the job page, as text/html" \
    eval '"$REALCURL" -s -D "$TMP/hdr" -o "$TMP/raw" "$URL/ui/job.html" && grep -qi "^content-type: text/html" "$TMP/hdr" && grep -q "canvas id=\"loss\"" "$TMP/raw"'
check "GET /ui/lib/chart.js is Debian's Chart.js" \
    eval '[ "$(raw "$URL/ui/lib/chart.js")" = 200 ] && cmp -s "$TMP/raw" /usr/share/javascript/chart.js/chart.min.js'
mkdir -p "$TMP/uidir" && cp "$TOP_SRCDIR"/ui/*.html "$TOP_SRCDIR"/ui/*.js "$TOP_SRCDIR"/ui/*.css "$TMP/uidir/"
ln -s /etc/passwd "$TMP/uidir/passwd.html"
echo secret > "$TMP/uidir/.hidden"
mkdir "$TMP/uidir/sub"
for p in "/ui/../etc/passwd" "/ui/..%2f..%2fetc%2fpasswd" "/ui/%2e%2e" "/ui/%2e%2e/%2e%2e/etc/passwd" \
         "/ui/..%5c..%5cetc%5cpasswd" "/ui/lib/..%2fui.js" "/ui/lib/chart.min.js" "/ui/lib/%2e%2e" \
         "/ui/%2fetc%2fpasswd" "/ui//etc/passwd" "/ui/.hidden" "/ui/sub" "/ui/passwd.html"; do
    : > "$TMP/raw"
    code=$(raw "$URL$p")
    check "GET $p: no file from outside the page ($code)" \
        eval '[ "$code" = 404 ] || [ "$code" = 400 ]; ! grep -q "root:" "$TMP/raw" && ! grep -q secret "$TMP/raw"'
done
# The same against a UiDir holding a symlink, a dot file and a directory.
sed -i "s|^UiDir=.*|UiDir=$TMP/uidir|" "$TMP/dtctld.conf"
kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
start_fg || bail "dtctld did not restart: $(cat "$TMP/ctld.log")"
export DTCTL_CONTROLLER=$URL
for p in /ui/passwd.html /ui/.hidden /ui/sub /ui/%2e%2e/t0920; do
    : > "$TMP/raw"; code=$(raw "$URL$p")
    check "UiDir with a symlink, a dot file, a directory: GET $p is 404" \
        eval '[ "$code" = 404 ] && ! grep -q "root:" "$TMP/raw" && ! grep -q secret "$TMP/raw"'
done
check "... and its regular files are served" test "$(raw "$URL/ui/nodes.html")" = 200

# ---- links ----------------------------------------------------------------------------
dta () { as_user "$A" env DTCTL_CONTROLLER="$URL" "$DTCTL" "$@"; }
dtb () { as_user "$B" env DTCTL_CONTROLLER="$URL" "$DTCTL" "$@"; }
DTCURL_USER=$A api POST /v1/jobs -d '{"name":"alices","nodes":1,"command":["sleep","300"]}' > "$TMP/ja.json"
JA=$(jq -r .data.id "$TMP/ja.json")
DTCURL_USER=$B api POST /v1/jobs -d '{"name":"bobs","nodes":1,"command":["sleep","300"]}' > "$TMP/jb.json"
JB=$(jq -r .data.id "$TMP/jb.json")
check "dtalice and dtbob each submit a job" eval '[ "$JA" -gt 0 ] && [ "$JB" -gt 0 ]'

dta ui "$JA" > "$TMP/link" 2> "$TMP/link.err"
check "dtctl ui JOB prints the job page's link with a token" \
    grep -Eq "^http://127\.0\.0\.1:$PORT/ui/job\.html\?id=$JA#token=dtui1\.[0-9]+\.[0-9]+\.[0-9a-f]{64}$" "$TMP/link"
check "... and says whose it is and until when" grep -q "reads as $A until" "$TMP/link.err"
TA=$(sed 's/.*#token=//' "$TMP/link")
TB=$(dtb ui --json | jq -r .token)
bearer () { local t=$1; shift; "$REALCURL" -s -o "$TMP/tb.json" -w '%{http_code}' -H "Authorization: Bearer $t" "$@"; }

check "dtalice's token reads as dtalice" \
    eval '[ "$(bearer "$TA" "$URL/v1/ui/whoami")" = 200 ] && jqt ".data.user == \"$A\"" "$TMP/tb.json"'
check "dtalice's token lists her job and not dtbob's (PrivateData=jobs)" \
    eval '[ "$(bearer "$TA" "$URL/v1/jobs")" = 200 ] && jqt "[.data[].id] == [$JA]" "$TMP/tb.json"'
check "dtalice's token: dtbob's job is 404" test "$(bearer "$TA" "$URL/v1/jobs/$JB")" = 404
check "... and its metrics, events and report too" \
    eval 'for r in metrics events report checkpoints ranks; do [ "$(bearer "$TA" "$URL/v1/jobs/$JB/$r")" = 404 ] || exit 1; done'
check "dtbob's token sees his job" test "$(bearer "$TB" "$URL/v1/jobs/$JB")" = 200
check "a link token only reads: cancelling with it is refused (401), the job runs on" \
    eval '[ "$(bearer "$TA" -X POST "$URL/v1/jobs/$JA/cancel")" = 401 ] && jqt ".errors[0].error | test(\"only reads\")" "$TMP/tb.json" && [ "$(job_state "$JA")" != cancelled ]'
check "a link token cannot make another link" \
    test "$(bearer "$TA" -X POST "$URL/v1/ui/link")" = 401
forged=${TA%.*}.$(printf '%064d' 0)
check "an altered signature is refused (401, 'bad signature')" \
    eval '[ "$(bearer "$forged" "$URL/v1/jobs")" = 401 ] && jqt ".errors[0].error | test(\"bad signature\")" "$TMP/tb.json"'
uidb=$(user_uid "$B")
swapped=$(sed "s/^dtui1\.[0-9]*\./dtui1.$uidb./" <<<"$TA")
check "dtalice's token with dtbob's uid put in is refused" \
    test "$(bearer "$swapped" "$URL/v1/jobs/$JB")" = 401
check "a malformed token is refused, saying the expected form" \
    eval '[ "$(bearer "dtui1.garbage" "$URL/v1/jobs")" = 401 ] && jqt ".errors[0].error | test(\"malformed\")" "$TMP/tb.json"'
# Expiry is in whole seconds: a link of N seconds works for N-1 to N
# seconds (from when it is made to the end of its last second), so a
# 1-second link made late in a second could expire before its first use.
TS=$(dta ui --ttl 2 --json | jq -r .token)
check "a 2-second link works at first" test "$(bearer "$TS" "$URL/v1/ui/whoami")" = 200
sleep 2.2
check "an expired link is refused (401, 'expired at')" \
    eval '[ "$(bearer "$TS" "$URL/v1/jobs")" = 401 ] && jqt ".errors[0].error | test(\"expired at\")" "$TMP/tb.json"'
check "dtctl ui --ttl 0 is a usage error" sh -c "! '$DTCTL' ui --ttl 0 2>/dev/null"
check "without a token or credential the API answers 401, naming the link" \
    eval '[ "$("$REALCURL" -s -o "$TMP/n.json" -w "%{http_code}" "$URL/v1/jobs")" = 401 ]'

# A restart makes a new key: every link made before is revoked.
kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
sed -i "s|^ListenPort=.*|ListenPort=$PORT|" "$TMP/dtctld.conf"
start_fg || bail "dtctld did not restart: $(cat "$TMP/ctld.log")"
check "after a restart, an unexpired link of before is refused (new key)" \
    eval '[ "$(bearer "$TA" "$URL/v1/jobs")" = 401 ] && jqt ".errors[0].error | test(\"bad signature\")" "$TMP/tb.json"'

# ---- downsampled series -------------------------------------------------------------------
sqlite3 "$TMP/state/dtctld.db" "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 4999)
  INSERT OR REPLACE INTO metrics (job_id, step, attempt, time, loss, samples_per_s, compute_ms, comm_ms)
  SELECT $JA, i, CASE WHEN i < 3000 THEN 1 ELSE 2 END, 1700000000000 + i * 100, 5.0 - i / 2000.0, 100, 10, 5 FROM s;"
api GET "/v1/jobs/$JA/metrics?max_points=200" > "$TMP/m.json"
check "max_points=200 over 5,000 rows: at most 200 points" \
    jqt '.data.total == 5000 and (.data.points | length) <= 200 and (.data.points | length) > 100 and .data.stride > 1' "$TMP/m.json"
check "... each attempt's first and last row kept" \
    jqt '[.data.points[].step] as $s | ($s | index(0)) != null and ($s | index(2999)) != null and ($s | index(3000)) != null and ($s | index(4999)) != null' "$TMP/m.json"
api GET "/v1/jobs/$JA/metrics?max_points=3" > /dev/null
check "max_points=3: 400 naming max_points" test "$(status)" = 400
api GET "/v1/jobs/$JA/metrics" > "$TMP/m.json"
check "without max_points every row" jqt '(.data.points | length) == 5000 and .data.stride == 1' "$TMP/m.json"
api POST /v1/jobs/$JA/cancel > /dev/null
api POST /v1/jobs/$JB/cancel > /dev/null

# ---- AuthType=none on loopback: no link needed -------------------------------------------------
mkdir -p "$TMP/alice" && chown "$A" "$TMP/alice"
{
    echo "ListenAddress=127.0.0.1"; echo "ListenPort=0"; echo "StateDir=$TMP/alice/state"
    echo "Launcher=external"; echo "AuthType=none"; echo "CheckpointRoot=$TMP/alice/ckpt"
    echo "UserDir=$TMP/alice/users"; echo "UiDir=$TOP_SRCDIR/ui"
} > "$TMP/alice/dtctld.conf"
chmod 644 "$TMP/alice/dtctld.conf"
setpriv --reuid="$A" --regid="$(id -g "$A")" --clear-groups -- env -i HOME=/tmp PATH=/usr/bin:/bin \
    "$DTCTLD" -c "$TMP/alice/dtctld.conf" --foreground --port-file "$TMP/alice/port" \
    > "$TMP/alice.log" 2>&1 &
ALICE_PID=$!
CTLD_PIDS="$CTLD_PIDS $ALICE_PID"
check "dtalice's own dtctld (AuthType=none) starts" wait_for 20 test -s "$TMP/alice/port"
AURL=http://127.0.0.1:$(cat "$TMP/alice/port" 2>/dev/null)
check "AuthType=none: the page's data reads with no token, as dtalice" \
    eval '[ "$(raw "$AURL/v1/ui/whoami")" = 200 ] && jqt ".data.user == \"$A\"" "$TMP/raw" && [ "$(raw "$AURL/v1/jobs")" = 200 ]'
check "AuthType=none: a forged token is still refused" \
    test "$("$REALCURL" -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $forged" "$AURL/v1/jobs")" = 401
kill "$ALICE_PID" 2>/dev/null; wait "$ALICE_PID" 2>/dev/null
done_testing
