# ft-slurm-lib.sh: helpers of the fault-injection system tests on the real
# Slurm testbed (t075x-t079x): the testbed (under its machine-wide
# lock), dtctld on the Slurm launcher, and everything of ft-lib.sh (corpus,
# dttrain job spec, the uninterrupted baseline run, waiting for steps, the
# failure timeline).  Source it from a t07[5-9]x-*.t script after setting
# FT_STEPS if the default does not suit.
. "$(dirname "$0")/testbed-lib.sh"
tb_require
. "$(dirname "$0")/ft-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
# The agents of the Slurm launcher keep the rank logs (appended to) and
# pages in <workdir>/dt-JOB-aN, workdir /tmp by default: every run's job 1
# would share /tmp/dt-1-a1..., and an earlier run's stderr would end up in
# this run's evidence (stderr_tail).  A private workdir for the jobs.
FT_WORKDIR=$TMP/work
mkdir -p "$FT_WORKDIR"
# DT_SUBMIT_USER=NAME (set before sourcing, e.g. $DT_USER_A of
# users-lib.sh): every request of the test (submit, status, cancel) carries
# that ordinary user's MUNGE credential, so the jobs run as that user; the
# job's workdir is the user's and the checkpoint root is open to it
# (sticky, as /tmp).  Unset: root, as before.
if [ -n "${DT_SUBMIT_USER:-}" ]; then
    . "$(dirname "$0")/users-lib.sh"
    dt_users_setup
    export DT_SUBMIT_USER
    chown "$DT_SUBMIT_USER" "$FT_WORKDIR"
fi

# ft_slurm_up NODES: lock, testbed of NODES nodes, dtctld on the Slurm
# launcher listening on the bridge (agents in the node namespaces dial it).
ft_slurm_up () {
    tb_setup
    trap ft_slurm_cleanup EXIT
    # The Slurm daemons get the PATH without the test's curl wrapper: they
    # are the cluster, not processes of the test (ft_trainers_left).
    PATH=${DT_PATH_NOWRAP:-$PATH} "$TESTBED" up "$1" > "$TMP/testbed.log" 2>&1 \
        || { cat "$TMP/testbed.log"; bail "testbed up failed"; }
    local port
    port=$(tb_free_port)
    URL=http://10.77.0.1:$port
    {
        echo "# written by $(basename "$0")"
        echo "ListenAddress=10.77.0.1"
        echo "ListenPort=$port"
        echo "ControllerURL=$URL"
        echo "StateDir=$TMP/state"
        echo "UserDir=$TMP/users"
        echo "Launcher=slurm"
        echo "AuthType=munge"
        echo "CheckpointRoot=$TMP/ckpt"
        echo "HeartbeatInterval=200ms"
        echo "NodeTimeout=1s"
        echo "RendezvousTimeout=30s"
        echo "DtagentPath=$DTAGENT"
        echo "LogLevel=debug"
    } > "$TMP/dtctld.conf"
    mkdir -p "$TMP/state" "$TMP/ckpt" "$TMP/bin"
    chmod 1777 "$TMP/ckpt"
    # Users authenticate with MUNGE: ft-lib.sh's plain curl calls get a
    # credential bound to their request from the dtcurl wrapper first in
    # PATH (munge-lib.sh, set up by ctld-lib.sh; DTCURL_USER or
    # DT_SUBMIT_USER names the user).  dtctld (and the batch scripts, which
    # inherit its PATH) keep the real curl.
    munge_setup "$TMP"
    PATH=$DT_PATH_NOWRAP "$DTCTLD" -c "$TMP/dtctld.conf" --foreground >> "$TMP/ctld.log" 2>&1 &
    CTLD_PID=$!
    CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
    wait_for 20 curl -sf "$URL/healthz" -o /dev/null \
        || { tail -n 20 "$TMP/ctld.log" | sed 's/^/# /'; bail "dtctld did not come up"; }
}

ft_slurm_cleanup () {
    local rc=$?
    if [ "${failed:-0}" != 0 ] || [ "$rc" != 0 ]; then
        echo "# dtctld log (tail):"; tail -n 60 "$TMP/ctld.log" 2>/dev/null | sed 's/^/#   /'
        for f in "$TMP"/users/*/*batch*; do
            [ -f "$f" ] && { echo "# $f:"; tail -n 20 "$f" | sed 's/^/#   /'; }
        done
    fi
    [ -n "${CTLD_PID:-}" ] && kill "$CTLD_PID" 2>/dev/null && wait "$CTLD_PID" 2>/dev/null
    tb_teardown
    ft_cleanup
}

# The Slurm view of the job's attempts: "attempt slurm_job_id nodelist" lines.
ft_slurm_ids () {
    curl -s "$URL/v1/jobs/$1" | jq -r '.data.attempts[] | "\(.attempt) \(.slurm_job_id) \(.nodelist // "")"'
}
# Node of rank R of the live attempt.
rank_node () { curl -s "$URL/v1/jobs/$1/ranks" | jq -r ".data[] | select(.rank == $2) | .node"; }
# Process ids of every process of this test's jobs still alive on any node
# (the nodes share the host's process table): trainers, their agents,
# batch shells and whatever they started all name the test's directory
# (corpus, workdir, checkpoint dir) in their command line or environment.
ft_trainers_left () { procs_naming "$TMP" $CTLD_PID ${API_VALIDATOR_PID:-}; }
# ft_check_user ID SLURMJOB: with DT_SUBMIT_USER, the job belongs to that
# user, its Slurm job runs as that user, and the batch output is in the
# user's own directory (UserDir/<uid>, mode 0700, owned by the user).
ft_check_user () {
    [ -n "${DT_SUBMIT_USER:-}" ] || return 0
    local uid id=$1 sj=$2
    uid=$(id -u "$DT_SUBMIT_USER")
    check "the job belongs to $DT_SUBMIT_USER" \
        test "$(curl -s "$URL/v1/jobs/$id" | jq -r .data.user)" = "$DT_SUBMIT_USER"
    check "Slurm job $sj runs as $DT_SUBMIT_USER" \
        eval 'scontrol show job "$sj" | grep -q "UserId=$DT_SUBMIT_USER("'
    check "batch output in $TMP/users/$uid (the user's, 0700)" \
        eval '[ "$(stat -c "%U %a" "$TMP/users/$uid")" = "$DT_SUBMIT_USER 700" ] && ls "$TMP/users/$uid/job-$id.1.batch.log" >/dev/null'
}
