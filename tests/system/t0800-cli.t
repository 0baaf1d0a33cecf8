#!/bin/bash
# t0800-cli: every dtctl command against a real dtctld (local launcher,
# MUNGE auth, real agents), output checked with jq; and the error paths:
# unknown job, bad spec (field path shown), permission denied for another
# uid, MUNGE unreachable, controller unreachable, bad config file.  Jobs
# belong to an ordinary user (users-lib.sh: dtalice), the other (dtbob) is
# refused on them.
. "$(dirname "$0")/ctld-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer

[ -x "$DTCTL" ] || skip_all "$DTCTL not built"
[ "$(id -u)" -eq 0 ] || skip_all "needs root (a second user, munged)"

started_munged=
cleanup () {
    ctld_cleanup
    [ -n "$started_munged" ] && kill "$started_munged" 2>/dev/null
}
trap cleanup EXIT

# ---- munged: needed for AuthType=munge; start it the testbed's way -------
if ! munge -n </dev/null >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged || skip_all "cannot start munged"
    started_munged=$(cat /run/munge/munged.pid 2>/dev/null)
    wait_for 5 sh -c 'munge -n </dev/null >/dev/null 2>&1' || bail "munged did not come up"
fi

# ---- the two ordinary users (users-lib.sh) ---------------------------------
# Jobs are submitted, checkpointed, cancelled and resubmitted by
# $DT_USER_A, as on a shared cluster; $DT_USER_B tries the same on them;
# root (an admin) reads and clears nodes.
. "$(dirname "$0")/users-lib.sh"
dt_users_setup
dta () { as_user "$DT_USER_A" env DTCTL_CONTROLLER="$DTCTL_CONTROLLER" "$DTCTL" "$@"; }
dtb () { as_user "$DT_USER_B" env DTCTL_CONTROLLER="$DTCTL_CONTROLLER" "$DTCTL" "$@"; }

free_port () { dt_port 127.0.0.1; }

# ---- before the controller: unreachable, bad config -----------------------
dead_port=$(free_port)
out=$("$DTCTL" --controller "http://127.0.0.1:$dead_port" list 2>"$TMP/err"); rc=$?
check "unreachable controller: exit 2" test $rc -eq 2
check "unreachable controller: one line naming the URL" \
    eval '[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "cannot reach controller at http://127.0.0.1:$dead_port" "$TMP/err"'
check "--version prints the version" eval '"$DTCTL" --version | grep -q "^dtctl [0-9]"'
"$DTCTL" frobnicate 2>/dev/null; check "unknown command: exit 1" test $? -eq 1
"$DTCTL" show notanumber 2>"$TMP/err"; rc=$?
check "bad job id: exit 1 with a clear message" eval '[ $rc -eq 1 ] && grep -q "JOB must be a job id" "$TMP/err"'
echo "Bogus=1" >"$TMP/bad.conf"
DTCTL_CONF=$TMP/bad.conf "$DTCTL" list 2>"$TMP/err"; rc=$?
check "bad config file: exit 1 naming file:line" eval '[ $rc -eq 1 ] && grep -q "bad.conf:1" "$TMP/err"'

# ---- start dtctld (local launcher, MUNGE) --------------------------------
mkdir -p "$TMP/ckpt" "$TMP/work"
chmod 1777 "$TMP/ckpt" "$TMP/work"
write_conf "LogLevel=debug"
sed -i 's/^AuthType=none$/AuthType=munge/' "$TMP/dtctld.conf"
start_fg || { sed 's/^/# /' "$TMP/ctld.log"; bail "dtctld did not come up"; }
# dtctl talks to it through a proxy that hands every answer to the
# validator of the API's description (munge-lib.sh).
api_proxy "$URL"
export DTCTL_CONTROLLER=$API_PROXY_URL

# The config file route to the controller works too.
echo "ControllerURL=$URL" >"$TMP/dtctl.conf"
check "ControllerURL from DTCTL_CONF" eval 'DTCTL_CONTROLLER= DTCTL_CONF=$TMP/dtctl.conf "$DTCTL" list >/dev/null'

# ---- submit ---------------------------------------------------------------
# steptrainer (a check program) links libdtclient and reports real steps.
[ -x "$STEPTRAINER" ] || bail "$STEPTRAINER not built (make check builds it)"
long_cmd=("$STEPTRAINER" --steps 100000 --step-ms 100)
short_cmd=("$STEPTRAINER" --steps 20 --step-ms 50)
cd "$TMP/work"
long=$(dta submit --name long -N 2 -n 1 --checkpoint-every 0 -- "${long_cmd[@]}" 2>"$TMP/err")
check "submit with flags prints a job id" eval '[[ "$long" =~ ^[0-9]+$ ]]' || diag "$TMP/err"
jq -n --arg c "${short_cmd[*]}" '{name: "short", nodes: 1, command: ($c | split(" "))}' >"$TMP/short.json"
short=$(dta submit "$TMP/short.json" 2>"$TMP/err")
check "submit JOB.json prints a job id" eval '[[ "$short" =~ ^[0-9]+$ ]]' || diag "$TMP/err"
check "submit --json: data.spec holds the flags" \
    eval 'dta submit --json -J j3 -N 1 -e K=V -- true | jqt ".spec.env.K == \"V\" and .spec.name == \"j3\" and .spec.workdir == \"$TMP/work\""'

# -t as sbatch reads it: a bare number is minutes, Slurm's forms as written.
check "submit -t 30: thirty minutes, as sbatch (time_limit 1800)" \
    eval 'dta submit --json -J t30 -N 1 -t 30 -- true | jqt ".spec.time_limit == 1800"'
check "submit -t 1:30:00 and -t 90s: Slurm's form and a unit" \
    eval 'dta submit --json -N 1 -t 1:30:00 -- true | jqt ".spec.time_limit == 5400" && dta submit --json -N 1 -t 90s -- true | jqt ".spec.time_limit == 90"'

# The trainer's layout: --tp and --pp fill the spec's parallel; a world
# that holds no whole tp x pp groups is refused naming the field.
check "submit --tp 2: data.spec.parallel is {tp 2, pp 1}" \
    eval 'dta submit --json -N 2 --tp 2 -- true | jqt ".spec.parallel.tp == 2 and .spec.parallel.pp == 1"'
dta submit -N 3 --tp 2 --pp 1 -- true 2>"$TMP/err" >/dev/null; rc=$?
check "submit -N 3 --tp 2: exit 1 naming parallel" eval '[ $rc -eq 1 ] && grep -q "parallel" "$TMP/err"'
check "submit --shrink pp,tp --zero1: the spec's parallel.shrink and zero1" \
    eval 'dta submit --json -N 2 --tp 2 --shrink pp,tp --zero1 -- true | jqt ".spec.parallel == {\"tp\": 2, \"pp\": 1, \"shrink\": [\"pp\", \"tp\"], \"zero1\": true}"'
dta submit -N 2 --tp 2 --shrink tp,dp -- true 2>"$TMP/err" >/dev/null; rc=$?
check "submit --shrink tp,dp: refused before submitting, naming --shrink and dp" \
    eval '[ $rc -ne 0 ] && grep -q -- "--shrink: dp" "$TMP/err"'

# Bad specs: the controller's field path reaches the user.
echo '{"command": ["true"], "checkpoint": {"every_steps": -5}}' >"$TMP/bad1.json"
dta submit "$TMP/bad1.json" 2>"$TMP/err" >/dev/null; rc=$?
check "bad spec: exit 1" test $rc -eq 1
check "bad spec: the field path checkpoint.every_steps is shown" grep -q "checkpoint.every_steps" "$TMP/err"
check "bad spec: one line on stderr" test "$(wc -l <"$TMP/err")" -eq 1
echo '{"command": ["true"], "nodez": 2}' >"$TMP/bad2.json"
dta submit "$TMP/bad2.json" 2>"$TMP/err" >/dev/null; rc=$?
check "unknown spec field: exit 1 naming it" eval '[ $rc -eq 1 ] && grep -q "nodez" "$TMP/err"'
echo '{"command": [' >"$TMP/bad3.json"
dta submit "$TMP/bad3.json" 2>"$TMP/err" >/dev/null; rc=$?
check "malformed JSON file: exit 1 with file:line:col" eval '[ $rc -eq 1 ] && grep -q "bad3.json:[0-9]*:[0-9]*: " "$TMP/err"'

# ---- list -----------------------------------------------------------------
"$DTCTL" list >"$TMP/out"
check "list: squeue-like header" grep -Eq '^ID +NAME +USER +STATE +NODES +STEP +LOSS +RESTARTS +AGE$' "$TMP/out"
check "list: both jobs, owned by $DT_USER_A" \
    eval 'grep -Eq "^$long +long +$DT_USER_A " "$TMP/out" && grep -Eq "^$short +short +$DT_USER_A " "$TMP/out"'
check "list --json parses, newest first" \
    eval '"$DTCTL" list --json | jqt "length >= 3 and (.[0].id > .[-1].id)"'
check "list --name filters" eval '"$DTCTL" list --json --name long | jqt "length == 1 and .[0].id == $long"'
check "list --user filters" eval '"$DTCTL" list --json --user $DT_USER_A | jqt "length >= 3 and all(.user == \"$DT_USER_A\")"'
check "list --state completed holds only completed jobs (j3, not the running long job)" \
    wait_for 30 eval '"$DTCTL" list --json --state completed | jqt "length >= 1 and all(.state == \"completed\") and (map(.id) | index($long)) == null"'
"$DTCTL" list --state bogus 2>"$TMP/err" >/dev/null; rc=$?
check "list --state bogus: exit 1" test $rc -eq 1

# ---- show, unknown job -------------------------------------------------------
check "long job turns running" \
    wait_for 30 eval '"$DTCTL" show --json "$long" | jqt ".state == \"running\""'
uid_a=$(user_uid "$DT_USER_A")
check "its agents run as $DT_USER_A, from $DT_USER_A's own directory (0700)" \
    eval 'p=$(pgrep -f -- "--state-dir $TMP/users/$uid_a/agents/job-$long[.]" | head -1) && [ "$(ps -o user= -p "$p")" = "$DT_USER_A" ] && [ "$(stat -c "%U %a" "$TMP/users/$uid_a")" = "$DT_USER_A 700" ]'
"$DTCTL" show "$long" >"$TMP/out"
check "show: header with id, name, owner, state" grep -Eq "^Job $long long +user=$DT_USER_A +state=running" "$TMP/out"
check "show: attempts table with local nodes" eval 'grep -q "^Attempts:" "$TMP/out" && grep -q "local1,local2" "$TMP/out"'
check "show --json: the job with its attempts" \
    eval '"$DTCTL" show --json "$long" | jqt ".id == $long and .spec.nodes == 2 and (.attempts | length) == 1"'
"$DTCTL" show 999999 2>"$TMP/err" >/dev/null; rc=$?
check "unknown job: exit 3" test $rc -eq 3
check "unknown job: one line on stderr" eval '[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "999999" "$TMP/err"'

# ---- watch ------------------------------------------------------------------
"$DTCTL" watch "$long" --count 2 --interval 300ms >"$TMP/out" 2>&1
check "watch: per-rank table" grep -Eq '^RANK +NODE +STATE +STEP +LOSS +STEP_MS +COMPUTE_MS +COMM_MS +STRAGGLER' "$TMP/out"
check "watch: two refreshes" test "$(grep -c "^Job $long " "$TMP/out")" -eq 2
check "watch --json: one object per refresh with 2 ranks" \
    wait_for 20 eval '"$DTCTL" watch --json -c 1 "$long" | jqt ".job.id == $long and (.ranks | length) == 2"'

# ---- checkpoint -------------------------------------------------------------
out=$(dta checkpoint "$long" 2>"$TMP/err"); rc=$?
check "checkpoint: prints the step" eval '[ $rc -eq 0 ] && [[ "$out" =~ "checkpoint requested at step "[0-9]+ ]]' \
    || diag "$TMP/err"
step=${out##* }
check "checkpoint: committed at that step" \
    wait_for 20 eval '"$DTCTL" show --json "$long" | jqt ".last_checkpoint == $step"'
check "checkpoint: listed by show" eval '"$DTCTL" show "$long" | grep -Eq "^ +$step +1 +committed "'

# ---- permission denied for another uid -------------------------------------
for c in cancel checkpoint resubmit; do
    dtb "$c" "$long" 2>"$TMP/err" >/dev/null; rc=$?
    check "$DT_USER_B may not $c $DT_USER_A's job: exit 4" test $rc -eq 4
    check "$DT_USER_B $c: one line on stderr" test "$(wc -l <"$TMP/err")" -eq 1
done
check "the job is untouched" eval '"$DTCTL" show --json "$long" | jqt ".state == \"running\""'
dtb nodes clear local1 2>"$TMP/err" >/dev/null; rc=$?
check "$DT_USER_B may not clear a node: exit 4" test $rc -eq 4 || diag "$TMP/err"
check "$DT_USER_B may read: list works" eval 'dtb list --json | jqt "length >= 3"'

# MUNGE unreachable: hide munged's socket from dtctl only.
if unshare -m true 2>/dev/null; then
    unshare -m sh -c 'mount -t tmpfs none /run/munge && exec "$0" list' "$DTCTL" 2>"$TMP/err" >/dev/null; rc=$?
    check "munged unreachable: exit 4" test $rc -eq 4
    check "munged unreachable: says so" grep -q "munged" "$TMP/err"
else
    ok "munged unreachable: exit 4 # SKIP no mount namespace (unshare -m) here"
    ok "munged unreachable: says so # SKIP no mount namespace (unshare -m) here"
fi

# ---- nodes -------------------------------------------------------------------
# A job whose trainer exits 1 at once: the failure is blamed on its node.
bad=$(dta submit -J bad -N 1 --max-restarts 0 -- false 2>"$TMP/err")
check "a job whose trainer exits 1 fails" \
    wait_for 30 eval '"$DTCTL" show --json "$bad" | jqt ".state == \"failed\""' \
    || diag "$TMP/err"
bad_node=$("$DTCTL" show --json "$bad" | jq -r '.attempts[0].nodelist')
"$DTCTL" nodes >"$TMP/out"
check "nodes: table header with state, failures, last failure" \
    grep -Eq '^NAME +STATE +FAILURES +LAST_FAILURE +CAUSE +JOB ' "$TMP/out"
check "nodes: local1 is ok" grep -Eq '^local1 +ok ' "$TMP/out"
check "nodes: $bad_node shows its failure and its cause" \
    grep -Eq "^$bad_node +ok +[1-9][0-9]* +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z +[a-z_]+ " "$TMP/out" || diag "$TMP/out"
check "nodes --json: health and last failure" \
    eval '"$DTCTL" nodes --json | jqt --arg n "$bad_node" "any(.name == \"local1\" and .health == \"ok\") and any(.name == \$n and .last_failure_time != null)"'
"$DTCTL" nodes "$bad_node" >"$TMP/out"
check "nodes NODE: header, and the failure of job $bad in the history" \
    eval 'grep -Eq "^Node $bad_node +state=ok +failures=[1-9]" "$TMP/out" && grep -Eq "^  [0-9T:Z-]+ +failure +$bad +1 +[a-z_]+ +yes " "$TMP/out"' \
    || diag "$TMP/out"
check "nodes NODE --json: history rows with time, job, attempt, cause, detail" \
    eval '"$DTCTL" nodes --json "$bad_node" | jqt --argjson b "$bad" "any(.history[]; .kind == \"failure\" and .job == \$b and .attempt == 1 and (.cause | length) > 0 and has(\"detail\") and .since_clear)"'
check "nodes NODE --limit 1: one history row" \
    eval '"$DTCTL" nodes --json --limit 1 "$bad_node" | jqt ".history | length == 1"'
"$DTCTL" nodes nosuchnode 2>"$TMP/err" >/dev/null; rc=$?
check "nodes of an unknown node: exit 3, one line" eval '[ $rc -eq 3 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q nosuchnode "$TMP/err"'
"$DTCTL" nodes --limit 1 2>/dev/null >/dev/null; check "nodes --limit without NODE: exit 1" test $? -eq 1
"$DTCTL" nodes --limit 0 local1 2>/dev/null >/dev/null; check "nodes --limit 0: exit 1" test $? -eq 1
out=$("$DTCTL" nodes clear local1 2>"$TMP/err"); rc=$?
check "nodes clear NODE (root)" eval '[ $rc -eq 0 ] && [[ "$out" =~ local1 ]]' || diag "$TMP/err"
"$DTCTL" nodes local1 >"$TMP/out"
check "nodes NODE after a clear: who cleared it and when" \
    eval 'grep -Eq "^  Last cleared: [0-9T:Z-]+ \(.* ago\) by root \(uid 0\)" "$TMP/out" && grep -Eq "^  [0-9T:Z-]+ +cleared " "$TMP/out"' \
    || diag "$TMP/out"
check "nodes NODE --json after a clear: cleared.user root" \
    eval '"$DTCTL" nodes --json local1 | jqt ".cleared.user == \"root\" and .cleared.uid == 0 and .history[0].kind == \"cleared\""'
"$DTCTL" nodes clear 2>/dev/null; check "nodes clear without NODE: exit 1" test $? -eq 1
# An admin may mark a node suspect (and clear it again); another user may not.
dtb nodes suspect local1 2>"$TMP/err" >/dev/null; rc=$?
check "$DT_USER_B may not mark a node suspect: exit 4" test $rc -eq 4
out=$("$DTCTL" nodes suspect local1 2>"$TMP/err"); rc=$?
check "nodes suspect NODE (root): exit 0, says so" eval '[ $rc -eq 0 ] && [[ "$out" == "Node local1 marked suspect" ]]' || diag "$TMP/err"
check "the node is suspect, noted as marked by root" \
    eval '"$DTCTL" nodes --json | jqt "any(.[]; .name == \"local1\" and .health == \"suspect\" and (.note | test(\"marked suspect by uid 0\")))"'
"$DTCTL" nodes suspect nosuchnode 2>"$TMP/err" >/dev/null; rc=$?
check "nodes suspect of an unknown node: exit 3" test $rc -eq 3
"$DTCTL" nodes clear local1 >/dev/null
check "cleared again: local1 is ok" eval '"$DTCTL" nodes --json | jqt "any(.[]; .name == \"local1\" and .health == \"ok\")"'

# ---- cancel, illegal transitions, resubmit ---------------------------------
out=$(dta cancel "$long" 2>"$TMP/err"); rc=$?
check "cancel: exit 0" test $rc -eq 0
check "cancelled job and its attempt reach state cancelled" \
    wait_for 20 eval '"$DTCTL" show --json "$long" | jqt ".state == \"cancelled\" and .attempts[-1].state == \"cancelled\""'
dta cancel "$long" 2>"$TMP/err" >/dev/null; rc=$?
check "cancel a cancelled job: exit 5 (conflict)" test $rc -eq 5
check "conflict: one line on stderr" test "$(wc -l <"$TMP/err")" -eq 1
out=$(dta resubmit "$long" --exclude local2 2>"$TMP/err"); rc=$?
check "resubmit --exclude: exit 0" eval '[ $rc -eq 0 ] && [[ "$out" =~ "Job $long resubmitted" ]]' || diag "$TMP/err"
check "resubmit: a second attempt excluding local2" \
    eval '"$DTCTL" show --json "$long" | jqt "(.attempts | length) == 2 and (.attempts[-1].exclude | index(\"local2\"))"'
dta resubmit "$long" 2>/dev/null >/dev/null; rc=$?
check "resubmit a live job: exit 5" test $rc -eq 5
dta cancel "$long" >/dev/null 2>&1

# ---- the short job: completion, watch until the end, report, history -------
check "short job completes" \
    wait_for 60 eval '"$DTCTL" show --json "$short" | jqt ".state == \"completed\""'
"$DTCTL" watch "$short" >"$TMP/out" 2>&1; rc=$?
check "watch of an ended job prints once and exits 0" \
    eval '[ $rc -eq 0 ] && grep -q "^Job $short ended: completed" "$TMP/out"'
"$DTCTL" report "$short" >"$TMP/out" 2>"$TMP/err"; rc=$?
check "report: exit 0 with ETTR" eval '[ $rc -eq 0 ] && grep -q "ETTR" "$TMP/out"' || diag "$TMP/err"
check "report --json: ETTR of a failure-free job is a share" \
    eval '"$DTCTL" report --json "$short" | jqt ".ettr > 0 and .ettr <= 1"'
"$DTCTL" report 999999 2>/dev/null; check "report of an unknown job: exit 3" test $? -eq 3

"$DTCTL" history >"$TMP/out"
check "history: header" grep -Eq '^JOB +ATTEMPT +NAME +USER +STATE +CAUSE' "$TMP/out"
check "history: the long job's two attempts, newest first" \
    eval '[ "$(awk -v j=$long "\$1 == j {print \$2}" "$TMP/out" | tr "\n" " ")" = "2 1 " ]'
check "history --json: every attempt of every job" \
    eval '"$DTCTL" history --json | jqt "length >= 4 and any(.job == $short)"'

# ---- events ------------------------------------------------------------------
check "events: the submission is recorded" eval '"$DTCTL" events "$long" | grep -q "job_submitted"'
check "events --json" eval '"$DTCTL" events --json "$long" | jqt "length >= 2"'
# dtctl pages with ?after= until an empty answer: every event once, in order.
check "events --json: each event once, oldest first (paged with after=)" \
    eval '"$DTCTL" events --json "$long" | jqt "[.[].id] as \$i | \$i == (\$i | unique)"'

# ---- the controller goes away ---------------------------------------------
kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
DTCTL_CONTROLLER=$URL "$DTCTL" list 2>"$TMP/err" >/dev/null; rc=$?
check "controller stopped: exit 2" test $rc -eq 2

done_testing
