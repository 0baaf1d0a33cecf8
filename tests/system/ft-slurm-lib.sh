# ft-slurm-lib.sh: helpers of the fault-injection system tests on the real
# Slurm testbed (t075x-t079x, issue 7): the testbed (under its machine-wide
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

# ft_slurm_up NODES: lock, testbed of NODES nodes, dtctld on the Slurm
# launcher listening on the bridge (agents in the node namespaces dial it).
ft_slurm_up () {
    tb_setup
    trap ft_slurm_cleanup EXIT
    "$TESTBED" up "$1" > "$TMP/testbed.log" 2>&1 || { cat "$TMP/testbed.log"; bail "testbed up failed"; }
    local port
    port=$(tb_free_port)
    URL=http://10.77.0.1:$port
    {
        echo "# written by $(basename "$0")"
        echo "ListenAddress=10.77.0.1"
        echo "ListenPort=$port"
        echo "ControllerURL=$URL"
        echo "StateDir=$TMP/state"
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
    # dtctld listens on the bridge (not loopback), so users authenticate
    # with MUNGE: ft-lib.sh's plain curl calls get the credential from a
    # wrapper first in PATH.  dtctld (and the batch scripts, which inherit
    # its PATH) keep the real curl.
    local realcurl
    realcurl=$(command -v curl)
    printf '#!/bin/sh\nexec %s -H "X-Munge-Credential: $(munge -n)" "$@"\n' "$realcurl" > "$TMP/bin/curl"
    chmod +x "$TMP/bin/curl"
    "$DTCTLD" -c "$TMP/dtctld.conf" --foreground >> "$TMP/ctld.log" 2>&1 &
    PATH=$TMP/bin:$PATH
    CTLD_PID=$!
    CTLD_PIDS="$CTLD_PIDS $CTLD_PID"
    wait_for 20 curl -sf "$URL/healthz" -o /dev/null \
        || { tail -n 20 "$TMP/ctld.log" | sed 's/^/# /'; bail "dtctld did not come up"; }
}

ft_slurm_cleanup () {
    local rc=$?
    if [ "${failed:-0}" != 0 ] || [ "$rc" != 0 ]; then
        echo "# dtctld log (tail):"; tail -n 60 "$TMP/ctld.log" 2>/dev/null | sed 's/^/#   /'
        for f in "$TMP"/state/logs/*batch*; do
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
ft_trainers_left () { procs_naming "$TMP" $CTLD_PID; }
