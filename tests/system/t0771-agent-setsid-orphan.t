#!/bin/bash
# t0771-agent-setsid-orphan: a rank's descendant that leaves the rank's
# process group and session (setsid) does not outlive the attempt.  The
# agent is a child subreaper: the orphan comes to it, and it kills every
# descendant when it ends -- whether the ranks completed or the job was
# cancelled.  Local launcher (Slurm's proctrack/cgroup would hide a missing
# reaper), MUNGE auth, jobs of an ordinary user (users-lib.sh).
. "$(dirname "$0")/ctld-lib.sh"
. "$(dirname "$0")/users-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
[ -x "$DTCTL" ] || skip_all "$DTCTL not built"
[ -x "$STEPTRAINER" ] || bail "$STEPTRAINER not built (make check builds it)"
command -v setsid >/dev/null || skip_all "setsid not installed"
dt_users_setup

started_munged=
cleanup () {
    ctld_cleanup
    for p in $(pgrep -f "sleep 777[12][.]5" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
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
write_conf "LogLevel=debug"
sed -i 's/^AuthType=none$/AuthType=munge/' "$TMP/dtctld.conf"
start_fg || { sed 's/^/# /' "$TMP/ctld.log"; bail "dtctld did not come up"; }
export DTCTL_CONTROLLER=$URL
UID_A=$(user_uid "$DT_USER_A")
dta () { as_user "$DT_USER_A" env DTCTL_CONTROLLER="$URL" "$DTCTL" "$@"; }
orphan () { pgrep -f "sleep $1" | head -1; }
cd "$TMP/work" || bail "cd"

# job_with_orphan MARK STEPS: a rank that starts 'sleep MARK' in a session
# of its own, then trains STEPS steps.
job_with_orphan () {
    dta submit -J "orphan-$1" -N 1 -n 1 --max-restarts 0 --checkpoint-every 0 -- \
        sh -c "setsid sleep $1 </dev/null >/dev/null 2>&1 & exec $STEPTRAINER --steps $2 --step-ms 100"
}

# 1. The ranks complete; the orphan must not survive the agent.
ID=$(job_with_orphan 7771.5 40) || bail "submit failed"
check "job $ID: the setsid'd descendant runs" wait_for 30 eval '[ -n "$(orphan 7771.5)" ]'
P=$(orphan 7771.5)
R=$(curl -s "$URL/v1/jobs/$ID/ranks" | jq -r '.data[0].pid')
check "it runs as $DT_USER_A, in a session of its own (not the rank's)" \
    eval '[ "$(ps -o user= -p "$P")" = "$DT_USER_A" ] && [ "$(ps -o sid= -p "$P")" != "$(ps -o sid= -p "$R")" ]'
check "job $ID completes" \
    wait_for 60 eval '"$DTCTL" show --json "$ID" | jqt ".state == \"completed\""'
check "the descendant is gone with the attempt" wait_for 10 eval '! kill -0 "$P" 2>/dev/null'
check "the agent says it killed it" \
    wait_for 5 grep -Eq "killed [0-9]+ leftover process(es)? of the ranks" "$TMP/users/$UID_A/job-$ID.1.local1.log"

# 2. The job is cancelled while it runs.
ID=$(job_with_orphan 7772.5 100000) || bail "submit 2 failed"
check "job $ID: the setsid'd descendant runs" wait_for 30 eval '[ -n "$(orphan 7772.5)" ]'
P=$(orphan 7772.5)
dta cancel "$ID" >/dev/null 2>&1
check "job $ID is cancelled" \
    wait_for 30 eval '"$DTCTL" show --json "$ID" | jqt ".state == \"cancelled\""'
check "the descendant is gone with the attempt" wait_for 15 eval '! kill -0 "$P" 2>/dev/null'
done_testing
