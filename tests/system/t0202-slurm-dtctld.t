#!/bin/bash
# t0202-slurm-dtctld: dtctld on the Slurm launcher with a real 3-node Slurm
# testbed and real dtagents: a job becomes a Slurm job, three agents
# register from three nodes with three addresses, the job completes and the
# Slurm job id and nodes show in GET /v1/jobs/{id}; cancel ends the Slurm job
# within 5 s; too many nodes refused with Slurm's reason; an excluded node
# never gets an agent.
. "$(dirname "$0")/testbed-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
DTCTLD=$TOP_BUILDDIR/orchestrator/dtctld
DTAGENT=$TOP_BUILDDIR/agent/dtagent
for b in "$DTCTL" "$DTCTLD" "$DTAGENT"; do
    [ -x "$b" ] || { echo "Bail out! $b not built"; exit 99; }
done
command -v jq >/dev/null || { echo "Bail out! jq not installed"; exit 99; }
tb_setup
if [ -x "$TOP_BUILDDIR/trainer/dttrain" ] && [ -z "${T0202_STEPTRAINER:-}" ]; then
    TRAIN=("$TOP_BUILDDIR/trainer/dttrain" --data "$TB_TMP/data.txt" --quiet)
    head -c 200000 /dev/urandom | base64 > "$TB_TMP/data.txt"
    short=(--steps 10); long=(--steps 100000000)
else
    [ -x "$TOP_BUILDDIR/tests/system/steptrainer" ] || { echo "Bail out! no trainer built"; exit 99; }
    TRAIN=("$TOP_BUILDDIR/tests/system/steptrainer" --step-ms 50)
    short=(--steps 20); long=(--steps 100000000)
fi
ctld_pid=
cleanup () {
    [ -n "$ctld_pid" ] && kill "$ctld_pid" 2>/dev/null && wait "$ctld_pid" 2>/dev/null
    tb_teardown
}
trap cleanup EXIT

"$TESTBED" up 3 >/dev/null || bail "testbed up failed"

# dtctld on the bridge address, so agents in the node namespaces reach it.
port=$(tb_free_port)
URL=http://10.77.0.1:$port
S=$TB_TMP/state
mkdir -p "$S" "$TB_TMP/ckpt" "$TB_TMP/work"
cat > "$TB_TMP/dtctld.conf" <<EOF
ListenAddress=10.77.0.1
ListenPort=$port
ControllerURL=$URL
StateDir=$S
UserDir=$TB_TMP/users
Launcher=slurm
AuthType=munge
DtagentPath=$DTAGENT
CheckpointRoot=$TB_TMP/ckpt
HeartbeatInterval=200ms
NodeTimeout=3s
RendezvousTimeout=30s
LogLevel=debug
EOF
"$DTCTLD" -c "$TB_TMP/dtctld.conf" --foreground > "$TB_TMP/dtctld.log" 2>&1 &
ctld_pid=$!
tb_wait 20 curl -sf "$URL/healthz" -o /dev/null \
    || { sed 's/^/# /' "$TB_TMP/dtctld.log" | tail -n 30; bail "dtctld did not come up"; }
export DTCTL_CONTROLLER=$URL
cd "$TB_TMP/work" || bail "cd"

show () { "$DTCTL" show --json "$1"; }
state_is () { show "$1" | jqt --arg s "$2" '.state == $s'; }
submit () {   # submit NODES CMD...  -> job id
    local n=$1; shift
    printf '%s\n' "$@" | jq -R . | jq -s --argjson n "$n" --arg w "$TB_TMP/work" \
        '{name: "t0202", nodes: $n, workdir: $w, command: ., checkpoint: {every_steps: 0}}' > "$TB_TMP/spec.json"
    "$DTCTL" submit "$TB_TMP/spec.json" 2> >(tee -a "$TB_TMP/submit.err" >&2)
}

# 1. A 3-node job runs through Slurm and completes.
t0=$(date +%s.%N)
j=$(submit 3 "${TRAIN[@]}" "${short[@]}") || bail "submit failed"
check "job turns running" tb_wait 60 state_is "$j" running
echo "# submit->running $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.2f", b-a}')s"
sj=$(show "$j" | jq -r '.attempts[0].slurm_job_id')
check "the attempt is a Slurm job" eval '[ "$sj" -gt 0 ] && scontrol show job "$sj" | grep -q "JobName=dt-$j-a1"'
check "job completes" tb_wait 60 state_is "$j" completed
# The attempt ends only when Slurm's COMPLETING flag has cleared.
check "attempt succeeded" tb_wait 20 eval 'show "$j" | jqt ".attempts[0].state == \"succeeded\""'
show "$j" > "$TB_TMP/job.json"
check "three agents from three nodes" \
    jqt '[.attempts[0].nodes[].node] | unique | length == 3' "$TB_TMP/job.json"
check "three different addresses" \
    jqt '[.attempts[0].nodes[].addr] | unique | length == 3' "$TB_TMP/job.json"
check "nodes are node1..node3" \
    jqt '[.attempts[0].nodes[].node] | sort == ["node1","node2","node3"]' "$TB_TMP/job.json"
check "Slurm job id and batch host in GET /v1/jobs/{id}" \
    jqt --argjson sj "$sj" '.attempts[0].slurm_job_id == $sj and .attempts[0].batch_host == "node1"' "$TB_TMP/job.json"

# 2. Cancel through the API: the Slurm job is gone within 5 s.
j=$(submit 3 "${TRAIN[@]}" "${long[@]}") || bail "submit failed"
tb_wait 60 state_is "$j" running || fail "long job never ran"
sj=$(show "$j" | jq -r '.attempts[0].slurm_job_id')
t0=$(date +%s.%N)
"$DTCTL" cancel "$j" >/dev/null
check "cancel: squeue no longer lists the Slurm job within 5 s" \
    tb_wait 5 eval '[ -z "$(squeue -h -j "$sj" 2>/dev/null)" ]'
echo "# cancel->gone from squeue $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.2f", b-a}')s"
check "job cancelled" tb_wait 10 state_is "$j" cancelled
check "attempt recorded cancelled" tb_wait 20 eval 'show "$j" | jqt ".attempts[0].state == \"cancelled\""'
check "no agent or trainer left on any node" \
    tb_wait 10 eval '[ "$(ip netns pids dtnode1 | wc -l)$(ip netns pids dtnode2 | wc -l)$(ip netns pids dtnode3 | wc -l)" = 111 ]'

# 3. More nodes than the partition has: refused, with Slurm's reason.
out=$(submit 5 "${TRAIN[@]}" "${short[@]}" 2>&1); rc=$?
echo "# $out"
check "5 nodes on a 3-node partition refused at submission" [ $rc -ne 0 ]
check "the error carries Slurm's reason" eval 'echo "$out" | grep -q "Slurm cannot run this job: Partition"'
if [ $rc -eq 0 ]; then
    # The controller took the job instead: say what it recorded, stop it.
    tb_wait 10 eval 'show "$out" | jqt ".attempts[0].cause == \"launch_failed\""'
    echo "# accepted as job $out; attempt 1: $(show "$out" | jq -r '.attempts[0] | "\(.state) \(.cause): \(.detail)"')"
    "$DTCTL" cancel "$out" >/dev/null 2>&1
fi

# 4. Excluded node: resubmit the cancelled job excluding node2 on 2 nodes' worth
#    of cluster -- no agent ever runs on node2.
j2=$(submit 2 "${TRAIN[@]}" "${long[@]}") || bail "submit failed"
tb_wait 60 state_is "$j2" running || fail "2-node job never ran"
"$DTCTL" cancel "$j2" >/dev/null
tb_wait 20 eval 'show "$j2" | jqt ".attempts[0].state == \"cancelled\""' || fail "2-node job not cancelled"
"$DTCTL" resubmit "$j2" --exclude node2 >/dev/null || fail "resubmit --exclude node2"
check "resubmitted job runs" tb_wait 60 eval 'show "$j2" | jqt ".state == \"running\" and (.attempts | length) == 2"'
show "$j2" > "$TB_TMP/job2.json"
check "excluded node2 has no agent" \
    jqt '[.attempts[-1].nodes[].node] | sort == ["node1","node3"]' "$TB_TMP/job2.json"
check "Slurm job excludes node2" \
    eval 'scontrol show job $(jq -r ".attempts[-1].slurm_job_id" "$TB_TMP/job2.json") | grep -q "ExcNodeList=node2"'
check "no process of the job on node2" [ "$(ip netns pids dtnode2 | wc -l)" -eq 1 ]
"$DTCTL" cancel "$j2" >/dev/null

[ $failed = 0 ] || { echo "# dtctld log tail:"; tail -n 40 "$TB_TMP/dtctld.log" | sed 's/^/# /'; TB_KEEP=1; }
finish
