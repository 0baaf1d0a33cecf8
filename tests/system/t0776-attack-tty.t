#!/bin/bash
# t0776-attack-tty (local launcher): dtctld in the foreground of a terminal
# (as an admin starts it to watch its log; here a pseudo-terminal of
# script(1)): a job's trainer has no controlling terminal.  It cannot open
# /dev/tty, so it can neither read the admin's terminal nor push keystrokes
# into the admin's shell (TIOCSTI).  Neither can a child it starts.
. "$(dirname "$0")/ctld-lib.sh"
command -v script >/dev/null || skip_all "script (util-linux) not installed"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "no /usr/bin/python3"

# (the probe: can this process open its controlling terminal?)
PROBE='if (: 3<>/dev/tty) 2>/dev/null; then echo tty; else echo none; fi'
check "positive control: a command run by script(1) has a controlling terminal" \
    test "$(script -qec "sh -c '$PROBE'" /dev/null < /dev/null | tr -d '\r')" = tty

write_conf
rm -f "$TMP/port"
# dtctld under script(1): its terminal is the pseudo-terminal.  stdin
# stays open (a FIFO nobody writes) so that script does not end at EOF.
mkfifo "$TMP/stdin"
PATH=$DT_PATH_NOWRAP script -qfec "$DTCTLD -c $TMP/dtctld.conf --foreground --port-file $TMP/port" \
    /dev/null < "$TMP/stdin" >> "$TMP/ctld.log" 2>&1 &
SCRIPT_PID=$!
exec 7> "$TMP/stdin"
CTLD_PIDS="$CTLD_PIDS $SCRIPT_PID"
wait_for 20 test -s "$TMP/port" || bail "dtctld did not start under script(1): $(tail -5 "$TMP/ctld.log")"
URL=http://127.0.0.1:$(cat "$TMP/port")
CTLD_PID=$(pgrep -f -- "^$DTCTLD -c $TMP/dtctld.conf --foreground" | head -1)
CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
check "dtctld ($CTLD_PID) has the pseudo-terminal as its controlling terminal" \
    test "$(ps -o tty= -p "$CTLD_PID" | tr -d ' ')" != "?"

OUT=$TMP/out
mkdir -p "$OUT" && chmod 1777 "$OUT"
spec=$(jq -n --arg p "$PROBE" --arg o "$OUT" '{name: "tty", nodes: 1, ranks_per_node: 1,
    command: ["sh", "-c", "(\($p)) > \($o)/rank; sh -c \"\($p)\" > \($o)/child; sleep 0.5"],
    checkpoint: {every_steps: 0}, restart: {max_restarts: 0}}')
api POST /v1/jobs -d "$spec" > "$TMP/submit.json"
check "the job is accepted" test "$(status)" = 201
ID=$(jq -r .data.id "$TMP/submit.json")
check "the job completes" wait_for 60 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = completed"
check "the trainer has no controlling terminal: /dev/tty cannot be opened" test "$(cat "$OUT/rank" 2>/dev/null)" = none
check "nor a child it starts" test "$(cat "$OUT/child" 2>/dev/null)" = none
exec 7>&-
done_testing
