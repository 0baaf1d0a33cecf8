# ctld-lib.sh: shared helpers of the dtctld system tests (t01xx): TAP
# output, a private temp dir, starting dtctld on a free port with the local
# launcher, curl wrappers, and cleanup of every process started.
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"
DTCTLD=$TOP_BUILDDIR/orchestrator/dtctld
DTAGENT=$TOP_BUILDDIR/agent/dtagent

. "$(dirname "$0")/tap-lib.sh"
# Wait up to $1 seconds for a command to succeed.
wait_for () { local t=$(( $1 * 10 )); shift; while [ $t -gt 0 ]; do "$@" && return 0; sleep 0.1; t=$((t - 1)); done; return 1; }

for b in "$DTCTLD" "$DTAGENT"; do [ -x "$b" ] || skip_all "$b not built"; done
for c in curl jq sqlite3; do command -v $c >/dev/null || skip_all "$c not installed"; done

TMP=$(mktemp -d /tmp/t01xx.XXXXXX)
chmod 755 "$TMP"
# dtctld runs as root, so AuthType=munge: every curl of the test carries a
# credential bound to its request (DTCURL_USER=dtbob curl ... sends as dtbob).
. "$(dirname "$0")/munge-lib.sh"
munge_setup "$TMP"
CTLD_PIDS=
ctld_cleanup () {
    api_validator_kill
    for p in $CTLD_PIDS; do kill -9 "$p" 2>/dev/null; done
    [ -f "$TMP/state/dtctld.pid" ] && kill -9 "$(cat "$TMP/state/dtctld.pid")" 2>/dev/null
    # Agents and trainers of the local launcher: their process groups.
    for p in $(pgrep -f -- "--state-dir $TMP/" 2>/dev/null); do
        kill -9 -- -"$(ps -o pgid= -p "$p" | tr -d ' ')" 2>/dev/null; kill -9 "$p" 2>/dev/null
    done
    [ -n "$KEEP_TMP" ] || rm -rf "$TMP"
}
trap ctld_cleanup EXIT

# write_conf [extra lines...]: $TMP/dtctld.conf for the local launcher.
# An extra ListenPort=N replaces the default (a free port); with it the
# agents' listener gets a fixed free port too (AgentPort, unless given),
# so that a controller restarted on the same ports is found again by its
# agents (ListenPort + 1, the default, may be some client's port).
write_conf () {
    local ap=
    case " $* " in
        *" ListenPort=0 "* | *" AgentPort="*) ;;
        *" ListenPort="*)
            ap=$(free_port)
            case " $* " in *" ListenPort=$ap "*) ap=$(free_port) ;; esac ;;
    esac
    {
        echo "# written by $(basename "$0")"
        echo "ListenAddress=127.0.0.1"
        case " $* " in *" ListenPort="*) ;; *) echo "ListenPort=0" ;; esac
        echo "StateDir=$TMP/state"
        echo "UserDir=$TMP/users"
        echo "Launcher=local"
        echo "AuthType=munge"
        echo "CheckpointRoot=$TMP/ckpt"
        echo "HeartbeatInterval=200ms"
        echo "NodeTimeout=3s"
        echo "DtagentPath=$DTAGENT"
        [ -n "$ap" ] && echo "AgentPort=$ap"
        # the web page's files from the source tree (not installed)
        case " $* " in *" UiDir="*) ;; *) echo "UiDir=$TOP_SRCDIR/ui" ;; esac
        for l in "$@"; do echo "$l"; done
    } > "$TMP/dtctld.conf"
}

# free_port: a TCP port free right now (for tests that restart dtctld on
# the same port, so that running agents find it again), outside the
# ephemeral range (dt_port: an agent dialling it while dtctld is down must
# not connect to itself).
free_port () {
    dt_port 127.0.0.1
}

# start_fg: dtctld in the foreground (background job), log in $TMP/ctld.log.
start_fg () {
    rm -f "$TMP/port"
    PATH=$DT_PATH_NOWRAP "$DTCTLD" -c "$TMP/dtctld.conf" --foreground \
        --port-file "$TMP/port" "$@" >> "$TMP/ctld.log" 2>&1 &
    CTLD_PID=$!
    CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
    wait_for 20 test -s "$TMP/port" || return 1
    PORT=$(cat "$TMP/port")
    URL=http://127.0.0.1:$PORT
}

# api METHOD PATH [curl args...]: prints the body; $TMP/status has the code.
# The request carries a MUNGE credential of root, or of $DTCURL_USER, and
# its answer is validated like every curl of the test (munge-lib.sh).
api () {
    local m=$1 p=$2; shift 2
    rm -f "$TMP/body"   # a failed connection must not leave the previous answer
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$URL$p" "$@" > "$TMP/status"
    cat "$TMP/body" 2>/dev/null
}
status () { cat "$TMP/status"; }
# attempt_token JOB: the bearer token of JOB's live attempt, read from the
# environment of one of its agents (DT_TOKEN, next to DT_JOB and this
# controller's DT_CONTROLLER; the database holds only the token's SHA-256).
attempt_token () {
    # The agents dial the agents' listener (AgentPort), named by /healthz.
    python3 - "$1" "$(curl -s "$URL/healthz" | jq -r '.data.agent_url // empty')" <<'PYEOF'
import os, sys
job, url = sys.argv[1], sys.argv[2]
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        env = dict(kv.split(b"=", 1) for kv in open("/proc/%s/environ" % p, "rb").read().split(b"\0") if b"=" in kv)
    except OSError:
        continue
    if env.get(b"DT_JOB") == job.encode() and env.get(b"DT_CONTROLLER") == url.encode() and b"DT_TOKEN" in env:
        print(env[b"DT_TOKEN"].decode()); break
PYEOF
}
job_state () { api GET "/v1/jobs/$1" | jq -r .data.state; }
att_state () { api GET "/v1/jobs/$1" | jq -r ".data.attempts[-1].state"; }
