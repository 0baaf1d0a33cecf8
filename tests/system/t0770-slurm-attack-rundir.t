#!/bin/bash
# t0770-slurm-attack-rundir (Slurm testbed): attacks of one ordinary user
# (dtbob) on another's (dtalice's) job, through the places where the job's
# processes act as their user, against the real controller and agents.
#   1. The agent's run directory: dtbob pre-creates the old predictable
#      name (<workdir>/dt-JOB-aN) in a shared sticky workdir, full of
#      symbolic links to a file of root's and to one of dtalice's -> the
#      agent makes a fresh private directory instead (0700, dtalice's),
#      writes nothing through the links, and dtbob cannot enter it.  The
#      per-user output directory (UserDir/<uid>) cannot be made, entered or
#      filled by dtbob.  A workdir owned by dtbob is refused by the agent
#      with a clear error in dtalice's node log, and nothing is written
#      there.
#   2. The trainer socket: dtbob cannot connect to it (private directory);
#      a process of another uid that can reach it (root) is refused by the
#      agent (SO_PEERCRED), which says so in its log; the job goes on.
#   4. The attempt's token: dtbob reads every process's command line and
#      whatever environment he may while the batch job asks the
#      controller for its next step (a curl every 0.25 s): the token is
#      in none of them.
#   3. An agent's event batch with one bad event: the good ones are
#      accepted, the bad one is refused with its own error and an
#      agent_event_refused event of the job names it.
# Each: refused with a clear error, nothing outside the user's reach changed.
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
[ -x "$STEPTRAINER" ] || bail "$STEPTRAINER not built (make check builds it)"
ft_slurm_up 2
UID_A=$(user_uid "$DT_USER_A")
UID_B=$(user_uid "$DT_USER_B")
bob () { as_user "$DT_USER_B" "$@"; }
sha () { sha256sum "$1" | cut -d' ' -f1; }
environ_of () { tr '\0' '\n' < "/proc/$1/environ" | sed -n "s/^$2=//p"; }

# A shared, sticky workdir (as /tmp is), a file of root's, one of dtalice's.
SHARED=$TMP/shared
mkdir -p "$SHARED" && chmod 1777 "$SHARED"
VICTIM=$TMP/victim
echo "root's file: must stay as it is" > "$VICTIM"
ALICE_FILE=$FT_WORKDIR/precious
echo "dtalice's file" > "$ALICE_FILE" && chown "$DT_USER_A" "$ALICE_FILE"
V0=$(sha "$VICTIM"); A0=$(sha "$ALICE_FILE")

# ---- 1. run directory and log files planted by dtbob ------------------------
# Job 1's old run directory name, with links where the agent writes.
PLANT=$SHARED/dt-1-a1
bob mkdir "$PLANT" || bail "dtbob cannot plant $PLANT"
for f in rank-0.log rank-0.err rank-0.shm agent-node1.sock agent-node2.sock; do
    bob ln -s "$VICTIM" "$PLANT/$f"
done
bob ln -s "$ALICE_FILE" "$PLANT/rank-1.log"
PLANT_LIST=$(ls -la "$PLANT" | sed 1d | awk '{print $1, $3, $9, $10, $11}')
check "dtbob cannot create $DT_USER_A's output directory in UserDir" \
    eval '! bob mkdir "$TMP/users/$UID_A" 2>/dev/null'
check "dtbob cannot plant a link in UserDir" \
    eval '! bob ln -s "$VICTIM" "$TMP/users/$UID_A" 2>/dev/null && [ ! -e "$TMP/users/$UID_A" ]'

spec=$(jq -n --arg t "$STEPTRAINER" --arg w "$SHARED" '{name: "victim", nodes: 1,
    ranks_per_node: 1, command: [$t, "--steps", "100000", "--step-ms", "100"], workdir: $w,
    checkpoint: {every_steps: 0}, restart: {max_restarts: 0},
    heartbeat: {interval_ms: 250, node_timeout_ms: 5000}}')
submit "$spec" || bail "submit failed"
check "job $ID ($DT_USER_A's) runs" wait_step "$ID" 3 60
ft_check_user "$ID" "$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')"
PID=$(rank_pid "$ID" 0)
RUNDIR=$(environ_of "$PID" DT_RUN_DIR)
SOCK=$(environ_of "$PID" DT_AGENT_SOCKET)
AGENT=$(ps -o ppid= -p "$PID" | tr -d ' ')
NODE=$(rank_node "$ID" 0)
echo "# rank 0: pid $PID on $NODE, run dir $RUNDIR, socket $SOCK, agent pid $AGENT"
check "the run directory is a fresh one, not dtbob's $PLANT" \
    eval '[ "$RUNDIR" != "$PLANT" ] && [[ "$RUNDIR" == "$SHARED"/dt-1-a1-?????? ]]'
check "the run directory is $DT_USER_A's, mode 0700" \
    test "$(stat -c '%U %a' "$RUNDIR")" = "$DT_USER_A 700"
check "the rank's log is a plain file of $DT_USER_A's in it" \
    eval '[ -f "$RUNDIR/rank-0.log" ] && [ ! -L "$RUNDIR/rank-0.log" ] && [ "$(stat -c %U "$RUNDIR/rank-0.log")" = "$DT_USER_A" ]'
check "dtbob's planted directory is as he left it" \
    test "$(ls -la "$PLANT" | sed 1d | awk '{print $1, $3, $9, $10, $11}')" = "$PLANT_LIST"
check "nothing was written through the links: root's file unchanged" test "$(sha "$VICTIM")" = "$V0"
check "nothing was written through the links: $DT_USER_A's file unchanged" \
    test "$(sha "$ALICE_FILE")" = "$A0"
check "dtbob cannot enter the run directory" eval '! bob ls "$RUNDIR" >/dev/null 2>&1'
check "dtbob cannot create a file in it" eval '! bob touch "$RUNDIR/x" 2>/dev/null && [ ! -e "$RUNDIR/x" ]'
check "the batch output is in $DT_USER_A's directory, which dtbob cannot list" \
    eval '[ -f "$TMP/users/$UID_A/job-$ID.1.batch.log" ] && ! bob ls "$TMP/users/$UID_A" >/dev/null 2>&1'

# ---- 2. the trainer socket ---------------------------------------------------
connect_py='
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror); sys.exit(2)
s.settimeout(5)
try:
    data = s.recv(1)
except socket.timeout:
    print("open"); sys.exit(0)
except OSError as e:
    print("closed: %s" % e.strerror); sys.exit(1)
print("closed" if data == b"" else "open"); sys.exit(1 if data == b"" else 0)'
check "the socket is a file in the run directory (no abstract socket)" \
    eval '[ -S "$SOCK" ] && [ "$(dirname "$SOCK")" = "$RUNDIR" ]'
out=$(bob python3 -c "$connect_py" "$SOCK" 2>&1); rc=$?
echo "# dtbob connecting: $out"
check "dtbob cannot connect to the trainer socket (permission denied)" \
    eval '[ $rc -eq 2 ] && [[ "$out" == *"ermission denied"* ]]'
out=$(python3 -c "$connect_py" "$SOCK" 2>&1); rc=$?
echo "# root connecting: $out"
check "a peer of another uid (root) is disconnected by the agent" test "$rc" = 1
NODELOG=$TMP/users/$UID_A/job-$ID.1.$NODE.log
check "the agent says why, in $DT_USER_A's node log" \
    wait_for 5 grep -q "trainer socket: connection from pid [0-9]* uid 0 refused: not this job's user (uid $UID_A)" "$NODELOG"
S1=$(job_step "$ID")
check "the job goes on" wait_step "$ID" $((S1 + 3)) 30

# ---- 3. an event batch with one bad event ------------------------------------
TOKEN=$(environ_of "$AGENT" DT_TOKEN)
check "the agent's token (from its environment)" test "${#TOKEN}" -ge 32
body=$(jq -n --arg n "$NODE" '{node: $n, events: [
    {kind: "shard_failed", rank: 0, step: 999001, detail: "good event one"},
    {kind: "bogus", rank: 0},
    {kind: "shard_failed", rank: 0, step: 999002, detail: "good event two"}]}')
code=$(curl -s -o "$TMP/ev.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d "$body" "$URL/v1/agent/events")
echo "# events answer: $code $(cat "$TMP/ev.json")"
check "the batch is answered 200, one result per event" \
    eval '[ "$code" = 200 ] && jqt ".data.results | length == 3" "$TMP/ev.json"'
check "the good events are accepted, the bad one refused" \
    jqt '[.data.results[].status] == ["accepted", "refused", "accepted"] and .data.accepted == 2 and .data.refused == 1' "$TMP/ev.json"
check "the refusal names the bad field" \
    jqt '.data.results[1].error | test("events\\[1\\]\\.kind: unknown event kind .bogus.")' "$TMP/ev.json"
curl -s "$URL/v1/jobs/$ID/events" > "$TMP/jev.json"
check "both good events are recorded" \
    jqt '[.data[] | select(.kind == "shard_failed") | .detail] | (any(test("good event one")) and any(test("good event two")))' "$TMP/jev.json"
check "an agent_event_refused event names the bad one" \
    jqt --arg n "$NODE" '[.data[] | select(.kind == "agent_event_refused" and .node == $n) | .detail] | any(test("bogus"))' "$TMP/jev.json"
check "the job is still running" test "$(curl -s "$URL/v1/jobs/$ID" | jq -r .data.state)" = running

# ---- 4. the attempt's token, as another user of the node sees processes --------
TOKEN=$(environ_of "$AGENT" DT_TOKEN)
check "the agent holds the attempt's token (${#TOKEN} characters)" test "${#TOKEN}" -ge 32
# dtbob scans /proc until he has seen the batch job's curl to the
# controller (alloc/next) twice, 20 s at most: "CURLS FOUND".
bob python3 - "$TOKEN" > "$TMP/scan.txt" <<'PYEOF'
import os, sys, time
tok, seen, found = sys.argv[1].encode(), set(), []
own = {str(os.getpid()), str(os.getppid())}    # (this scan and its runuser hold it)
end = time.monotonic() + 20
while time.monotonic() < end and len(seen) < 2:
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in own:
            continue
        for what in ("cmdline", "environ"):
            try:
                blob = open("/proc/%s/%s" % (p, what), "rb").read()
            except OSError:
                continue
            if what == "cmdline" and b"alloc/next" in blob:
                seen.add(p)
            if tok in blob:
                found.append("%s:%s:%s" % (p, what, blob.replace(b"\0", b" ")[:120].decode(errors="replace").replace(" ", "_")))
print(len(seen), len(found), " ".join(sorted(set(found))[:3]))
PYEOF
read -r CURLS FOUND WHERE < "$TMP/scan.txt"
echo "# dtbob's scan: ${CURLS:-?} curl processes of the batch job seen, the token found ${FOUND:-?} times ${WHERE:+($WHERE)}"
check "dtbob saw the batch job's requests for its next step (the scan sees them)" test "${CURLS:-0}" -ge 2
check "... and the token in no command line or environment he can read" test "${FOUND:-1}" = 0

api POST "/v1/jobs/$ID/cancel" >/dev/null
check "$DT_USER_A cancels the job" wait_state "$ID" cancelled 30

# ---- 1b. a workdir of another user's --------------------------------------------
BOBDIR=$TMP/bobdir
mkdir -p "$BOBDIR" && chown "$DT_USER_B" "$BOBDIR" && chmod 0777 "$BOBDIR"
spec=$(echo "$spec" | jq --arg w "$BOBDIR" '.name = "bobdir" | .workdir = $w')
submit "$spec" || bail "submit 2 failed"
check "job $ID, with a workdir of dtbob's, fails" wait_state "$ID" failed 60
check "its agent refused the run directory base, saying why, in $DT_USER_A's node log" \
    eval 'grep -h "run directory base" "$TMP/users/$UID_A"/job-$ID.1.*.log | grep -q "owned by uid $UID_B, not by this user (uid $UID_A) or root: refused"'
check "nothing was created in dtbob's directory" test -z "$(ls -A "$BOBDIR")"

check "root's file is unchanged at the end" test "$(sha "$VICTIM")" = "$V0"
check "no trainer left on any node" wait_for 20 eval '[ -z "$(pgrep -f -- "$STEPTRAINER --steps 100000")" ]'
done_testing
