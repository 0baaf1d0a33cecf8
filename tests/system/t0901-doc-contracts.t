#!/bin/bash
# t0901-doc-contracts: the documents hold what the code does.
#  - The answers of every main route of a real dtctld (local launcher, real
#    agents and trainers: a running job, a checkpoint, a failed job with its
#    evidence, a cancel and a resubmit, nodes, errors), and those its real
#    agents receive (through api-proxy.py), validate against
#    schemas/openapi.json, strictly: a field the controller returns that
#    the description lacks, a wrong type or a word outside an enum fails
#    (api-validate.py, python3-jsonschema).
#  - Every dtctld.conf key is in dtctld.conf(5) and the example config;
#    every variable the agent sets for a rank is in dtctl(1)'s TRAINER
#    ENVIRONMENT; every cause and event kind the controller records is in
#    dtctl-job(5) and in the OpenAPI enums; code comments cite only files in
#    the tree (doc-contracts.py, which says how it reads the code).
# This test's point is the answers' validation: on whatever scripts/test says.
DT_API_VALIDATE=1
. "$(dirname "$0")/ctld-lib.sh"
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
CONTRACTS=$TOP_SRCDIR/tests/system/doc-contracts.py
VALIDATE=$TOP_SRCDIR/tests/system/api-validate.py
OPENAPI=$TOP_SRCDIR/schemas/openapi.json

command -v python3 >/dev/null || skip_all "python3 not installed"
[ -f "$TOP_BUILDDIR/man/dtctl-job.5" ] || bail "$TOP_BUILDDIR/man not built (run make first)"

# ---- the documents against the code -----------------------------------------
contract () {   # NAME CHECK
    local out
    out=$(python3 "$CONTRACTS" "$2" "$TOP_SRCDIR" "$TOP_BUILDDIR" 2>&1)
    check "$1" test -z "$out"
    [ -n "$out" ] && echo "$out" | sed 's/^/# /'
}
contract "every key ctldconf.c parses is in dtctld.conf(5) and the example" conf-keys
contract "every variable the agent sets for a rank is in dtctl(1) TRAINER ENVIRONMENT" trainer-env
contract "every cause the controller records is in dtctl-job(5) and the OpenAPI enum" causes
contract "every event kind the controller records is in dtctl-job(5) and the OpenAPI enum" events
contract "code comments cite only files in the tree" cites
# libdtclient's interface: the exported functions and the -version-info
# of the built library are those libdtclient.abi lists (a function added
# without bumping the version-info by libtool's rules fails here).
ABI=$TOP_SRCDIR/agent/client/libdtclient.abi
SO=$TOP_BUILDDIR/agent/client/.libs/libdtclient.so
if [ -e "$SO" ] && command -v nm >/dev/null; then
    vi=$(sed -n 's/^version-info //p' "$ABI")
    IFS=: read -r vc vr va <<<"$vi"
    check "libdtclient exports exactly the functions libdtclient.abi lists" \
        diff <(grep -v -e '^#' -e '^version-info ' "$ABI") \
             <(nm -D --defined-only "$SO" | awk '$2 ~ /[TDBR]/ {print $3}' | sort)
    check "libdtclient's -version-info is libdtclient.abi's ($vi)" \
        grep -q -- "-version-info $vi " "$TOP_SRCDIR/agent/client/Makefile.am"
    check "... and the built library is named by it (libdtclient.so.$((vc - va)).$va.$vr)" \
        test -e "$SO.$((vc - va)).$va.$vr"
fi

# ---- the API against its description -----------------------------------------
if ! python3 -c 'import jsonschema' 2>/dev/null; then
    ok "# SKIP python3-jsonschema not installed (scripts/install-deps installs it)"
    done_testing
fi
[ -n "$API_VALIDATOR_PID" ] || bail "the answers' validator did not start"

# The validator itself refuses a field the description lacks and a word
# outside an enum (so a passing run below means something).
echo '{"data": {"id": 1, "state": "running", "undocumented": 1}, "errors": [], "warnings": []}' >"$TMP/fake.json"
out=$(python3 "$VALIDATE" "$OPENAPI" GET /v1/jobs/1 200 "$TMP/fake.json" 2>&1); rc=$?
check "the validator refuses an undocumented field" eval '[ $rc -eq 1 ] && grep -q undocumented <<<"$out"'
echo '{"data": {"id": 1, "state": "sleeping"}, "errors": [], "warnings": []}' >"$TMP/fake.json"
python3 "$VALIDATE" "$OPENAPI" GET /v1/jobs/1 200 "$TMP/fake.json" 2>/dev/null
check "the validator refuses a state outside the enum" test $? -eq 1

[ -x "$STEPTRAINER" ] || bail "$STEPTRAINER not built (make check builds it)"
# The agents dial a proxy in front of their listener (ControllerURL), which
# hands every answer they get to the same validator (api-proxy.py).
AP=$(free_port)
api_proxy "http://127.0.0.1:$AP"
write_conf "AdminUsers=root" "MaxEventsPerJob=10000" "AgentPort=$AP" "ControllerURL=$API_PROXY_URL"
start_fg || { sed 's/^/# /' "$TMP/ctld.log"; bail "dtctld did not come up"; }
mkdir -p "$TMP/work" && chmod 1777 "$TMP/work"

api GET /healthz >/dev/null
check "GET /healthz: 200" test "$(status)" = 200

# A running job of two nodes that checkpoints.
SPEC=$(jq -n --arg t "$STEPTRAINER" --arg w "$TMP/work" \
    '{name: "contract", nodes: 2, ranks_per_node: 1, workdir: $w,
      command: [$t, "--steps", "100000", "--step-ms", "50", "--rendezvous"],
      checkpoint: {every_steps: 20}, heartbeat: {interval_ms: 200}}')
api POST /v1/jobs -d "$SPEC" >"$TMP/submit.json"
check "POST /v1/jobs: 201" test "$(status)" = 201
ID=$(jq -r .data.id "$TMP/submit.json")
check "the job runs and commits a checkpoint" \
    wait_for 30 eval "curl -s $URL/v1/jobs/$ID | jqt '.data.state == \"running\" and (.data.last_checkpoint // 0) > 0'"
api POST "/v1/jobs/$ID/checkpoint" >/dev/null
check "POST checkpoint: 200" test "$(status)" = 200
for r in "" "?state=running" "?name=contract" "?user=root" "?limit=5"; do
    api GET "/v1/jobs$r" >/dev/null
done
check "GET /v1/jobs (filters): 200" test "$(status)" = 200
for r in "" /events "/events?after=1" /checkpoints /metrics /report /ranks; do
    api GET "/v1/jobs/$ID$r" >/dev/null
    check "GET /v1/jobs/ID$r: 200" test "$(status)" = 200
done
api GET /v1/nodes >/dev/null
check "GET /v1/nodes: 200" test "$(status)" = 200
api GET /v1/nodes/local1 >/dev/null
check "GET /v1/nodes/NODE: 200" test "$(status)" = 200
api GET /metrics >/dev/null
check "GET /metrics: 200" test "$(status)" = 200

# A job that fails: a rank exits 3 at step 5, no restart.
SPEC=$(jq -n --arg t "$STEPTRAINER" --arg w "$TMP/work" \
    '{name: "failing", nodes: 1, workdir: $w, command: [$t, "--steps", "100", "--step-ms", "20", "--fail-at", "5:3"],
      restart: {max_restarts: 0}}')
api POST /v1/jobs -d "$SPEC" >"$TMP/fail.json"
FID=$(jq -r .data.id "$TMP/fail.json")
check "the failing job fails with cause trainer_exit" \
    wait_for 30 eval "curl -s $URL/v1/jobs/$FID | jqt '.data.state == \"failed\" and .data.failure.cause == \"trainer_exit\"'"
for r in "" /events /report /ranks; do
    api GET "/v1/jobs/$FID$r" >/dev/null
done
check "GET the failed job's routes: 200" test "$(status)" = 200
# A failed job's attempt ends after the job's state says failed (its agents
# are stopped first); resubmit answers 409 until then.
check "the failing job's attempt ends" \
    wait_for 30 eval "curl -s $URL/v1/jobs/$FID | jqt '.data.attempts[-1].state == \"failed\"'"
api POST "/v1/jobs/$FID/resubmit" -d '{"exclude": ["local9"]}' >/dev/null
check "POST resubmit: 200" test "$(status)" = 200

# Cancel, then the error answers.
api POST "/v1/jobs/$ID/cancel" >/dev/null
check "POST cancel: 200" test "$(status)" = 200
check "the cancelled job ends" \
    wait_for 30 eval "curl -s $URL/v1/jobs/$ID | jqt '.data.state == \"cancelled\"'"
api GET "/v1/jobs/$ID" >/dev/null
api GET "/v1/jobs/$ID/events" >/dev/null
api POST "/v1/jobs/$ID/cancel" >/dev/null
check "cancel again: 409" test "$(status)" = 409
api GET /v1/jobs/999999 >/dev/null
check "unknown job: 404" test "$(status)" = 404
api POST /v1/jobs -d '{"command": ["true"], "nodez": 1}' >/dev/null
check "bad spec: 400" test "$(status)" = 400
api GET "/v1/jobs/$ID/events?after=x" >/dev/null
check "bad after: 400" test "$(status)" = 400
# What the agents were answered went through the proxy to the validator.
for r in "POST /v1/agent/register 200" "POST /v1/agent/heartbeat 200" "POST /v1/agent/events 200" \
    "PUT /v1/agent/kv/[^ ]* 200" "GET /v1/agent/kv/[^ ]* 200"; do
    check "the agents' answers were validated: $r" grep -q "^$r\$" "$TMP/proxy-1.log"
done
api POST /v1/nodes/local1/suspect >/dev/null
api POST /v1/nodes/local1/clear >/dev/null
check "POST nodes/NODE/clear: 200" test "$(status)" = 200

done_testing
