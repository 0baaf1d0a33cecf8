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
# Then with restart.reform: both ranks declare the capability (message
# type 10, caps), rank 1 is killed with SIGKILL, and the controller
# re-forms the group in place: attempt 2 with path reform, the survivor
# is never restarted (its agent re-forms it as attempt 2), and the
# replacement runs with DT_REFORM_JOIN=1.
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
# The rank the agent wrote into each rank's page (Client.assigned_rank,
# which a hot spare's standby process reads on its takeover) is its RANK.
assigned () {
    f=$(find "$T/users" -path "*/job-$JOB.*" -name "rank-$1.err")
    [ -n "$f" ] && grep -q "^rank $1/2: pid [0-9]*, agent connected, assigned rank $1\$" "$f"
}
check "each rank's page assigns it its RANK (Client.assigned_rank)" eval 'assigned 0 && assigned 1'

# Re-forming in place: only when every rank declared the capability.
JOB=$(submit "{\"name\": \"t0404r\", \"nodes\": 1, \"ranks_per_node\": 2,
  \"command\": [\"$PY\", \"$TOP_SRCDIR/tests/system/data/dtclient_train.py\", \"60\"],
  \"env\": {\"PYTHONPATH\": \"$TOP_SRCDIR/agent/client/python\"},
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 1, \"reform\": true},
  \"heartbeat\": {\"interval_ms\": 200, \"node_timeout_ms\": 10000, \"hang_timeout_ms\": 20000}}")
check "reform job submitted" test -n "$JOB"
# (killed after the rendezvous: a replacement does not repeat it)
declared () {
    f=$(find "$T/users" -path "*/job-$JOB.*" -name "rank-$1.err")
    [ -n "$f" ] && grep -q "^rank $1: declared reform in attempt 1\$" "$f" && grep -q "^rank $1: peers" "$f"
}
check "both ranks declared the capability" wait_for 20 eval 'declared 0 && declared 1'
# (and after the controller saw a step: an attempt that made no progress
# backs off, and a restart that waits a backoff is not re-formed)
stepped () { api GET "/v1/jobs/$JOB/ranks" | jqt '[.data[] | select(.step > 0)] | length == 2'; }
check "the controller saw both ranks step" wait_for 20 stepped
f1=$(find "$T/users" -path "*/job-$JOB.*" -name "rank-1.err" | head -1)
pid1=$(sed -n 's/^rank 1\/2: pid \([0-9]*\),.*/\1/p' "$f1" | head -1)
check "rank 1 killed (SIGKILL)" kill -9 "$pid1"
ended () { case $(job_state "$JOB") in completed|failed|cancelled) return 0;; esac; return 1; }
check "the reform job ended" wait_for 60 ended
api GET "/v1/jobs/$JOB" > "$T/jr.json"
jq -c '[.data.attempts[] | {attempt, state, cause, restart_path}]' "$T/jr.json" | diag
check "completed in attempt 2, re-formed in place (path reform)" \
    jqt '.data.state == "completed" and (.data.attempts | length) == 2
         and .data.attempts[1].restart_path == "reform"' "$T/jr.json"
f0=$(find "$T/users" -path "*/job-$JOB.*" -name "rank-0.err" | head -1)
# (whether the trainer reads the command is t0788's: the page holds one
# command, and the agent may replace an unread re-form command with a
# checkpoint once the rank reported a step)
check "the survivor kept running (one process), its agent re-formed it as attempt 2" \
    eval 'test "$(grep -c "pid" "$f0")" = 1 && grep -q "command: re-form as attempt 2\$" "$T"/users/*/job-$JOB.*.log'
grep -q "^rank 0: re-form as attempt 2\$" "$f0" || diag < "$f0"
f1=$(find "$T/users" -path "*/job-$JOB.*" -name "rank-1.a2.err" | head -1)
check "the replacement joined attempt 2 (DT_REFORM_JOIN=1)" \
    grep -q "^rank 1: declared reform in attempt 2 (joining)\$" "$f1"
finish
