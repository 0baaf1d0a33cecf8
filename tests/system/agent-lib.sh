# agent-lib.sh: helpers for the dtagent system tests (t04xx): a private
# dtctld with the local launcher on 127.0.0.1 (free port, private state
# dir), job submission, the controller's events, and the processes of the
# test.  Everything started is killed on exit.
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"
DTCTLD=$TOP_BUILDDIR/orchestrator/dtctld
DTAGENT=$TOP_BUILDDIR/agent/dtagent
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

. "$(dirname "$0")/tap-lib.sh"

for b in "$DTCTLD" "$DTAGENT" "$STEPTRAINER"; do
    [ -x "$b" ] || skip_all "$b not built"
done

T=$(mktemp -d /tmp/dtagent-test.XXXXXX)
# dtctld runs as root, so AuthType=munge: api's curl carries a credential
# bound to its request (munge-lib.sh).
. "$(dirname "$0")/munge-lib.sh"
munge_setup "$T"
CTLD_PID=""

# PIDs of every process of this test: anything whose command line or
# environment names the test's private directory (agents get --state-dir
# under it, ranks DT_AGENT_SOCKET under it), except the controller and the
# answers' validator (munge-lib.sh).
test_pids () { procs_naming "$T" $CTLD_PID ${API_VALIDATOR_PID:-}; }
# none_left: no process of the test is left but the controller.
none_left () { [ -z "$(test_pids)" ]; }

cleanup () {
    local p
    [ -n "$CTLD_PID" ] && kill "$CTLD_PID" 2>/dev/null
    for p in $(test_pids); do kill -9 "$p" 2>/dev/null; done
    if [ -n "$CTLD_PID" ]; then
        for _ in $(seq 50); do kill -0 "$CTLD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$CTLD_PID" 2>/dev/null
    fi
    for p in $(test_pids); do kill -9 "$p" 2>/dev/null; done
    api_validator_kill
    wait 2>/dev/null
    [ -n "$KEEP_TMP" ] || rm -rf "$T"
}
trap cleanup EXIT

# ctld_start [Key=Value ...]: a dtctld on 127.0.0.1, local launcher.
ctld_start () {
    mkdir -p "$T/state" "$T/ckpt" "$T/work"
    {
        echo "ListenAddress=127.0.0.1"
        echo "ListenPort=0"
        echo "StateDir=$T/state"
        echo "UserDir=$T/users"
        echo "Launcher=local"
        echo "AuthType=munge"
        echo "CheckpointRoot=$T/ckpt"
        echo "DtagentPath=$DTAGENT"
        for kv in "$@"; do echo "$kv"; done
    } > "$T/dtctld.conf"
    PATH=$DT_PATH_NOWRAP "$DTCTLD" --foreground --config "$T/dtctld.conf" --port-file "$T/port" \
        > "$T/dtctld.log" 2>&1 &
    CTLD_PID=$!
    for _ in $(seq 100); do
        [ -s "$T/port" ] && break
        kill -0 "$CTLD_PID" 2>/dev/null || break
        sleep 0.1
    done
    [ -s "$T/port" ] || { diag < "$T/dtctld.log"; bail "dtctld did not start"; }
    URL=http://127.0.0.1:$(cat "$T/port")
}

# api METHOD PATH [BODY]: the answer's JSON on stdout.
api () {
    if [ -n "$3" ]; then
        curl -s -m 10 -X "$1" -H 'Content-Type: application/json' --data "$3" "$URL$2"
    else
        curl -s -m 10 -X "$1" "$URL$2"
    fi
}

# submit JSON: prints the new job's id.
submit () {
    api POST /v1/jobs "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"]["id"])'
}

# job_state JOB: the job's state word.
job_state () {
    api GET "/v1/jobs/$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"]["state"])' 2>/dev/null
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
wait_for () {
    local end=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
    while [ $(( $(date +%s%N) / 1000000 )) -lt $end ]; do
        "$@" && return 0
        sleep 0.1
    done
    "$@"
}

now_ms () { echo $(( $(date +%s%N) / 1000000 )); }

# event_time JOB WORD [RANK [NODE]]: the controller's time (epoch ms) of the
# first event of JOB whose kind is WORD, or whose data's "cause" member is
# WORD (not a word found anywhere in its data: an attempt_state event that
# merely mentions trainer_exit does not count), and, if given, that rank
# and node; nothing if there is none.
event_time () {
    api GET "/v1/jobs/$1/events" | "$PY" -c '
import json, sys
word, rank, node = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(sys.stdin)["data"]
evs = d if isinstance(d, list) else d.get("events", [])
for e in evs:
    data = e.get("data")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    cause = data.get("cause") if isinstance(data, dict) else None
    if e.get("kind") != word and cause != word:
        continue
    if rank != "" and str(e.get("rank")) != rank:
        continue
    if node != "" and e.get("node") != node:
        continue
    tm = e["time"]
    if isinstance(tm, str):   # "2026-11-30T09:01:36.123Z"
        import datetime
        tm = int(datetime.datetime.fromisoformat(tm.replace("Z", "+00:00")).timestamp() * 1000 + 0.5)
    print(tm); break
' "$2" "${3:-}" "${4:-}"
}

# has_event JOB WORD [RANK [NODE]]
has_event () { [ -n "$(event_time "$@")" ]; }

# rank_pid R: the pid of rank R (steptrainer writes it first in its stderr).
rank_pid () {
    local f
    f=$(find "$T/users" -name "rank-$1.err" 2>/dev/null | head -1)
    [ -n "$f" ] && sed -n 's/^rank [0-9]*\/[0-9]*: pid \([0-9]*\),.*/\1/p' "$f" | head -1
}

# agent_pid NODE: the pid of the dtagent of NODE (local launcher: localN).
agent_pid () {
    for p in $(test_pids); do
        if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "dtagent .*--node $1 "; then
            echo "$p"; return 0
        fi
    done
    return 1
}

alive () { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
none_alive () { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
