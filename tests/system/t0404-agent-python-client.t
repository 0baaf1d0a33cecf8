#!/bin/bash
# t0404-agent-python-client: a Python trainer using the dtclient module
# (agent/client/python, standard library only) under dtagent, 1 node x 2
# ranks: kv rendezvous through the agent, step reports reach the
# controller's rank view with client=true, and the result is stored.
# The ranks start slowly (1.5 s before the trainer runs, as an
# interpreter's imports and a process group's rendezvous under load) and
# set up for 1.2 s after connecting: together longer than the 2 s hang
# timeout, but the hang clock starts when a rank's libdtclient connects,
# not when it is spawned, so neither the agent nor the controller may
# call that a hang (max_restarts 0: one would fail the job).
. "$(dirname "$0")/agent-lib.sh"

ctld_start
JOB=$(submit "{\"name\": \"t0404\", \"nodes\": 1, \"ranks_per_node\": 2,
  \"command\": [\"sh\", \"-c\", \"sleep 1.5; exec \\\"\$@\\\"\", \"sh\",
                \"$PY\", \"$TOP_SRCDIR/tests/system/data/dtclient_train.py\", \"40\", \"1.2\"],
  \"env\": {\"PYTHONPATH\": \"$TOP_SRCDIR/agent/client/python\"},
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 200, \"node_timeout_ms\": 10000, \"hang_timeout_ms\": 2000}}")
check "job submitted" test -n "$JOB"
ended () { case $(job_state "$JOB") in completed|failed|cancelled) return 0;; esac; return 1; }
check "the job ended" wait_for 60 ended
check "the job completed" test "$(job_state "$JOB")" = completed
[ "$(job_state "$JOB")" = completed ] \
    || api GET "/v1/jobs/$JOB/events" | jq -c '.data[] | [.kind, .node, .rank, .detail]' | diag
for r in 0 1; do
    f=$(find "$T/users" -name "rank-$r.err" | head -1)
    check "rank $r: connected and rendezvoused with both ranks" \
        grep -q "^rank $r: peers \[[0-9]*, [0-9]*\]" "$f"
    grep -q "agent connected" "$f" || diag < "$f"
done
ranks_ok () {
    api GET "/v1/jobs/$JOB/ranks" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)["data"]
rows = d if isinstance(d, list) else d.get("ranks", [])
ok = len(rows) == 2 and all(r.get("client") in (True, 1) and r.get("step", 0) >= 30 for r in rows)
if not ok: print("# ranks view: %s" % json.dumps(rows)[:600])
sys.exit(0 if ok else 1)'
}
# (the step a rank reports reaches the controller with its next heartbeat)
check "the controller saw both ranks' steps, as libdtclient ranks" wait_for 10 ranks_ok
result_stored () { api GET "/v1/jobs/$JOB" | grep -q dtclient_train.py; }
check "the result is stored" result_stored
finish
