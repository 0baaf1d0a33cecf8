#!/bin/bash
# t0777-attack-relay (local launcher): an outsider's requests to a relay of
# the heartbeat fan-in tree (an agent's listener for its children, open to
# anyone who can reach the node):
#   - 24 concurrent 8 MiB POSTs without the attempt's token are refused 401
#     before their bodies are read: the agent's memory stays flat, and the
#     job goes on;
#   - a client that sends its request a byte a second has its connection
#     cut at the request timeout (10 s), not held for ever.
# And what the local launcher hands the job's agents: none of dtctld's
# descriptors (its database) and none of its environment.
. "$(dirname "$0")/ctld-lib.sh"
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
[ -x "$STEPTRAINER" ] || bail "$STEPTRAINER not built (make check builds it)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"

write_conf
export DTCTLD_ONLY_PROBE=probe-4711     # (in dtctld's environment only)
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
spec=$(jq -n --arg t "$STEPTRAINER" '{name: "relay", nodes: 3, ranks_per_node: 1,
    command: [$t, "--steps", "100000", "--step-ms", "50"],
    checkpoint: {every_steps: 0}, restart: {max_restarts: 0},
    heartbeat: {interval_ms: 250, tree_width: 2}}')
api POST /v1/jobs -d "$spec" > "$TMP/submit.json"
[ "$(status)" = 201 ] || bail "submit: $(status) $(cat "$TMP/submit.json")"
ID=$(jq -r .data.id "$TMP/submit.json")
step () { api GET "/v1/jobs/$ID" | jq -r '.data.step // -1'; }
check "the job runs (step 5)" wait_for 60 eval '[ "$(step)" -ge 5 ]'
# A relay: an agent of this job with a TCP listener (its children's).
A= HOST= PORT= NODE=
for p in $(pgrep -f -- "--state-dir $TMP/"); do
    read -r HOST PORT < <(ss -Hltnp 2>/dev/null | awk -v p="pid=$p," \
        'index($0, p) { i = match($4, /:[0-9]+$/); print substr($4, 1, i - 1), substr($4, i + 1); exit }')
    [ -n "$PORT" ] && { A=$p; NODE=$(tr '\0' ' ' < "/proc/$p/cmdline" | sed -n 's/.*--node \([^ ]*\).*/\1/p'); break; }
done
case $HOST in ""|"*"|"0.0.0.0"|"[::]") HOST=127.0.0.1 ;; esac
check "a relay: node $NODE's agent (pid $A) listens on $HOST:$PORT" \
    eval '[ -n "$A" ] && [ "${PORT:-0}" -gt 0 ] 2>/dev/null'
check "the agent holds no descriptor of dtctld's (its state directory, database)" \
    eval '! ls -l "/proc/$A/fd" | grep -q -- "$TMP/state"'
check "nor anything of dtctld's environment (agent and trainer)" \
    eval '! tr "\0" "\n" < "/proc/$A/environ" | grep -q DTCTLD_ONLY_PROBE &&
          ! pgrep -P "$A" | xargs -I{} sh -c "tr \"\\0\" \"\\n\" < /proc/{}/environ" | grep -q DTCTLD_ONLY_PROBE'
rss () { awk '/^VmRSS/ { print $2 }' "/proc/$A/status"; }
R0=$(rss)

# 24 clients at once, each a POST of 8 MiB without a token.
"$PY" - "$HOST" "$PORT" > "$TMP/flood.txt" <<'PYEOF'
import socket, sys, threading
host, port, n, size = sys.argv[1], int(sys.argv[2]), 24, 8 << 20
codes = []
def one():
    s = socket.create_connection((host, port), timeout=30)
    code = "none"
    try:
        s.sendall(b"POST /v1/agent/relay HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % size)
        chunk = b"[" + b" " * (1 << 16)
        try:
            for _ in range(size // len(chunk)):
                s.sendall(chunk)
        except OSError:
            pass        # refused and closed before the body: as it should
        head = s.recv(64)
        code = head.split()[1].decode() if head.startswith(b"HTTP/") else "none"
    except OSError:
        pass
    finally:
        s.close()
    codes.append(code)
ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(sorted(codes)))
PYEOF
R1=$(rss)
echo "# answers: $(cat "$TMP/flood.txt"); agent RSS $R0 kB -> $R1 kB"
check "every token-less request is answered 401" eval '[ "$(tr " " "\n" < "$TMP/flood.txt" | sort -u)" = 401 ]'
check "the agent's memory stays flat (RSS $R0 -> $R1 kB, less than 16 MiB more)" \
    test $((R1 - R0)) -lt 16384
S1=$(step)
check "the job goes on (its steps advance past $S1)" wait_for 20 eval '[ "$(step)" -gt "$S1" ]'

# A request a byte a second: cut at the request timeout.
"$PY" - "$HOST" "$PORT" > "$TMP/slow.txt" <<'PYEOF'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
t0 = time.monotonic()
req = b"POST /v1/agent/relay HTTP/1.1\r\nHost: relay\r\nX-Slow: " + b"a" * 100
cut = None
for b in req:
    try:
        s.sendall(bytes([b]))
        s.settimeout(1.0)
        s.recv(1, socket.MSG_PEEK)      # closed (b""), or answered
        cut = time.monotonic() - t0; break
    except socket.timeout:
        pass
    except OSError:
        cut = time.monotonic() - t0; break
    if time.monotonic() - t0 > 25:
        break
print("%.1f" % cut if cut is not None else "never")
PYEOF
CUT=$(cat "$TMP/slow.txt")
check "a client sending a byte a second is cut within 15 s (after ${CUT} s)" \
    eval '[ "$CUT" != never ] && [ "${CUT%.*}" -le 15 ]'
api POST "/v1/jobs/$ID/cancel" > /dev/null
check "the job is cancelled" wait_for 30 eval '[ "$(api GET "/v1/jobs/$ID" | jq -r .data.state)" = cancelled ]'
done_testing
