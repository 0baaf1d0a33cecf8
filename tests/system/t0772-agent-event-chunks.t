#!/bin/bash
# t0772-agent-event-chunks: an agent's event queue larger than the
# controller's MaxBodySize is not lost.  dtctld is stopped (SIGSTOP) while a
# trainer reports six large events, so that they queue up in its agent;
# once dtctld runs again (MaxBodySize=2048, one event fits, two do not), the
# agent's request is answered 413, it sends smaller chunks, and every event
# arrives, in order.  Local launcher, MUNGE auth, a job of an ordinary user.
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
[ -x "$DTCTL" ] || skip_all "$DTCTL not built"
command -v python3 >/dev/null || skip_all "python3 not installed"
dt_users_setup

started_munged=
cleanup () {
    [ -n "${CTLD_PID:-}" ] && kill -CONT "$CTLD_PID" 2>/dev/null
    ctld_cleanup
    [ -n "$started_munged" ] && kill "$started_munged" 2>/dev/null
}
trap cleanup EXIT
if ! munge -n </dev/null >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged || skip_all "cannot start munged"
    started_munged=$(cat /run/munge/munged.pid 2>/dev/null)
    wait_for 5 sh -c 'munge -n </dev/null >/dev/null 2>&1' || bail "munged did not come up"
fi

mkdir -p "$TMP/work" "$TMP/ckpt"
chown "$DT_USER_A" "$TMP/work"
chmod 1777 "$TMP/ckpt"
write_conf "LogLevel=debug" "MaxBodySize=2048"
sed -i 's/^AuthType=none$/AuthType=munge/' "$TMP/dtctld.conf"
start_fg || { sed 's/^/# /' "$TMP/ctld.log"; bail "dtctld did not come up"; }
export DTCTL_CONTROLLER=$URL
UID_A=$(user_uid "$DT_USER_A")
dta () { as_user "$DT_USER_A" env DTCTL_CONTROLLER="$URL" "$DTCTL" "$@"; }
GO=$TMP/work/go
DONE=$TMP/work/reported
# A python3 every user can run (not a per-user shim first in root's PATH).
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "$PY not installed"
jq -n --arg py "$PY" --arg t "$TOP_SRCDIR/tests/system/data/dtclient_events.py" \
    --arg go "$GO" --arg done "$DONE" --arg pp "$TOP_SRCDIR/agent/client/python" --arg w "$TMP/work" \
    '{name: "chunks", nodes: 1, ranks_per_node: 1, command: [$py, $t, $go, $done],
      env: {PYTHONPATH: $pp}, workdir: $w, restart: {max_restarts: 0},
      checkpoint: {every_steps: 0},
      heartbeat: {interval_ms: 200, node_timeout_ms: 120000, hang_timeout_ms: 120000}}' > "$TMP/spec.json"
chmod 644 "$TMP/spec.json"
ID=$(dta submit "$TMP/spec.json" 2>"$TMP/err") || { sed 's/^/# /' "$TMP/err"; bail "submit failed"; }
NODELOG=$TMP/users/$UID_A/job-$ID.1.local1.log
check "job $ID: the trainer is connected to its agent" \
    wait_for 30 eval 'grep -q "agent connected" "$(find "$TMP/users/$UID_A" -name rank-0.err | head -1)" 2>/dev/null'

kill -STOP "$CTLD_PID"
as_user "$DT_USER_A" touch "$GO"
check "the trainer reported its six events while dtctld was stopped" wait_for 60 test -e "$DONE"
kill -CONT "$CTLD_PID"

check "job $ID completes" \
    wait_for 60 eval '"$DTCTL" show --json "$ID" | jqt ".state == \"completed\""'
"$DTCTL" events --json "$ID" > "$TMP/ev.json"
# Delivery is at least once: a request that timed out while dtctld was
# stopped may still be read by it afterwards, and the agent sends those
# events again.  Every event must be there, first seen in order.
check "all six events arrived, in order" \
    jqt '[.[] | select(.kind == "shard_failed") | .detail | capture("step (?<s>[0-9]+): (?<i>[0-9]):x") | "\(.s):\(.i)"]
         | reduce .[] as $x ([]; if any(.[]; . == $x) then . else . + [$x] end)
         == ["1000:0", "1001:1", "1002:2", "1003:3", "1004:4", "1005:5"]' "$TMP/ev.json" \
    || jq -c '[.[] | [.kind, (.detail // "" | .[0:60])]]' "$TMP/ev.json" | sed 's/^/# /'
check "the controller answered a request too large for it (413)" \
    grep -q '"POST /v1/agent/events" 413' "$TMP/ctld.log"
check "the agent dropped nothing" eval '! grep -q "dropped" "$NODELOG"'
done_testing
