#!/bin/bash
# t0201-slurm-launcher: orchestrator/launcher_slurm.c against a real 3-node
# Slurm testbed, driven without dtctld (slurm-launch-drive): submit, one
# agent per node with the attempt's environment, states and causes
# (completed, failed, cancelled, slurm_node_fail), excluded nodes, too many
# nodes refused with Slurm's reason, missing Slurm configuration.
. "$(dirname "$0")/testbed-lib.sh"
DRIVE=$TOP_BUILDDIR/tests/system/slurm-launch-drive
[ -x "$DRIVE" ] || { echo "Bail out! $DRIVE not built (make -C tests/system slurm-launch-drive)"; exit 99; }
tb_setup
trap tb_teardown EXIT
W=$TB_TMP/work
mkdir -p "$W"
cd "$W" || bail "cd $W"

# Stand-in agent: records what Slurm gave it, then behaves as $W/mode says.
cat > "$W/agent.sh" <<'AGENT'
#!/bin/bash
W=$(dirname "$0")
echo "node=$4 order=$6 host=$(hostname) addr=$(hostname -I | awk '{print $1}') url=$2 token=$DT_TOKEN job=$DT_JOB attempt=$DT_ATTEMPT var=$DT_TEST_VAR" >> "$W/agents.$SLURM_JOB_ID"
case $(cat "$W/mode" 2>/dev/null) in
    sleep) exec sleep 300 ;;
    fail)  [ "$SLURM_NODEID" = 1 ] && exit 3 ;;
esac
exit 0
AGENT
chmod +x "$W/agent.sh"
URL=http://10.77.0.1:$(tb_free_port)
drive () { "$DRIVE" "$@" 2>>"$W/drive.err"; }
field () { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p"; }   # value of key=value in a status line

"$TESTBED" up 3 >/dev/null || bail "testbed up failed"

# 1. A 3-node attempt: one agent per node, each with its own address.
t0=$(date +%s.%N)
h=$(drive submit "$W/agent.sh" "$URL" 3)
check "submit returns a Slurm job id" test -n "$h"
drive wait "$h" running 20 >/dev/null
t1=$(date +%s.%N)
st=$(drive wait "$h" ended 30)
echo "# state: $(echo $st)"
echo "# submit->running $(awk -v a=$t0 -v b=$t1 'BEGIN{printf "%.2f", b-a}')s"
# An attempt is one srun step of the allocation: when its step ends
# the launcher reports the attempt ended; with no controller to direct it,
# the batch script then ends the Slurm job with the step's status.
slurm_exit () { scontrol show job "$1" 2>/dev/null | grep -o ' ExitCode=[0-9]*:[0-9]*' | cut -d= -f2; }
check "completed, exit 0" eval '[ "$(echo "$st" | field state)" = ended ] \
    && { [ "$(echo "$st" | field cause)" = completed ] || echo "$st" | grep -q "step of attempt 1"; } \
    && tb_wait 15 eval "scontrol show job $h | grep -q JobState=COMPLETED" \
    && [ "$(slurm_exit "$h")" = 0:0 ]'
check "node list node[1-3], batch host node1" eval '[ "$(echo "$st" | field nodes)" = "node[1-3]" ] && [ "$(echo "$st" | field batch_host)" = node1 ]'
check "three agents on three nodes" [ "$(awk '{print $1}' agents.$h | sort -u | wc -l)" -eq 3 ]
check "three different addresses" [ "$(awk '{print $4}' agents.$h | sort -u | wc -l)" -eq 3 ]
check "node orders 0,1,2" [ "$(awk '{print $2}' agents.$h | sort | tr '\n' ' ')" = "order=0 order=1 order=2 " ]
check "hostname is the node name" eval '! awk "{sub(\"node=\",\"\",\$1); sub(\"host=\",\"\",\$3); if (\$1 != \$3) bad=1} END{exit !bad}" agents.$h'
check "agents get token, controller URL, job, attempt, job env" \
    grep -q "url=$URL token=0123456789abcdef job=7 attempt=1 var=hello world" agents.$h
check "batch and per-node output files (append mode)" eval 'ls dt-7-a1-batch.out dt-7-a1-node1.out dt-7-a1-node3.out >/dev/null'
check "job name dt-7-a1" eval 'scontrol show job $h | grep -q "JobName=dt-7-a1"'
check "no Slurm requeue" eval 'scontrol show job $h | grep -q "Requeue=0"'

# 2. More nodes than the partition has: refused at submission, Slurm's reason.
out=$("$DRIVE" submit "$W/agent.sh" "$URL" 5 2>&1); rc=$?
check "5 nodes on a 3-node partition refused" [ $rc -ne 0 ]
echo "# $out" | tail -n1
check "refusal carries Slurm's reason" eval 'echo "$out" | grep -q "Slurm cannot run this job: Partition.*partition debug has 3"'
check "refused job left nothing queued" tb_wait 5 eval '[ -z "$(squeue -h)" ]'

# 3. Excluded node: never gets an agent.
h=$(drive submit "$W/agent.sh" "$URL" 2 0 node2)
st=$(drive wait "$h" ended 30)
check "excluded node2: ran on node[1,3]" [ "$(echo "$st" | field nodes)" = "node[1,3]" ]
check "no agent on node2" eval '[ -s agents.$h ] && ! grep -q "node=node2" agents.$h'

# 4. Cancel: the Slurm job is gone within 5 s, cause cancelled, no process left.
echo sleep > mode
h=$(drive submit "$W/agent.sh" "$URL" 3)
drive wait "$h" running 20 >/dev/null
tb_wait 10 test -s agents.$h
t0=$(date +%s.%N)
drive cancel "$h"
check "cancel: squeue no longer lists the job within 5 s" tb_wait 5 eval '[ -z "$(squeue -h -j $h 2>/dev/null)" ]'
st=$(drive wait "$h" ended 10)
echo "# cancel->ended $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.2f", b-a}')s"
check "cancelled attempt: cause cancelled" [ "$(echo "$st" | field cause)" = cancelled ]
check "no agent process left on any node" eval '[ "$(ip netns pids dtnode1 | wc -l)" -eq 1 ] && [ "$(ip netns pids dtnode3 | wc -l)" -eq 1 ]'
check "cancel of an ended job is ok" drive cancel "$h"

# 5. An agent exits non-zero: cause failed.
echo fail > mode
h=$(drive submit "$W/agent.sh" "$URL" 3)
st=$(drive wait "$h" ended 30)
echo "# state: $(echo $st)"
check "agent exit 3: cause failed, exit 3" eval '[ "$(echo "$st" | field cause)" = failed ] \
    && tb_wait 15 eval "scontrol show job $h | grep -q JobState=FAILED" \
    && [ "$(slurm_exit "$h")" = 3:0 ]'

# 6. A node dies: Slurm NODE_FAIL -> cause slurm_node_fail (about 9 s here).
echo sleep > mode
h=$(drive submit "$W/agent.sh" "$URL" 3)
drive wait "$h" running 20 >/dev/null
tb_wait 10 eval '[ "$(wc -l < agents.$h)" -eq 3 ]'
"$TESTBED" kill-node node3 >/dev/null
t0=$(date +%s.%N)
st=$(drive wait "$h" ended 40)
echo "# node kill->NODE_FAIL ended $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.2f", b-a}')s"
check "node killed: cause slurm_node_fail" [ "$(echo "$st" | field cause)" = slurm_node_fail ]
"$TESTBED" start-node node3 >/dev/null

# 7. Unknown handles, no Slurm configuration.
st=$(drive poll 999999)
check "unknown job id: ended, cause lost" [ "$(echo "$st" | field cause)" = lost ]
out=$(SLURM_CONF=$TB_TMP/nonexistent.conf "$DRIVE" poll 1 2>&1); rc=$?
check "missing slurm.conf: clear error, no fatal()" eval '[ $rc -ne 0 ] && echo "$out" | grep -q "no Slurm configuration at $TB_TMP/nonexistent.conf" && ! echo "$out" | grep -q fatal'
out=$("$DRIVE" poll abc 2>&1)
check "bad handle named" eval 'echo "$out" | grep -q "bad handle .abc."'

# 8. SlurmExtraArgs: the supported sbatch options apply, others are refused.
echo ok > mode
h=$(drive "--conf=SlurmExtraArgs=--mem=500M -c 1" submit "$W/agent.sh" "$URL" 1)
check "SlurmExtraArgs --mem/-c: job runs with MinMemoryNode=500M" eval 'scontrol show job $h | grep -q "MinMemoryNode=500M"'
out=$("$DRIVE" "--conf=SlurmExtraArgs=--frob=1" poll 1 2>&1)
check "SlurmExtraArgs: unsupported option named" eval 'echo "$out" | grep -q "unsupported option .--frob."'

[ $failed = 0 ] || { echo "# driver stderr:"; sed 's/^/# /' "$W/drive.err" | tail -n 20; TB_KEEP=1; }
finish
