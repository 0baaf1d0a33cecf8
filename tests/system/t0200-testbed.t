#!/bin/bash
# t0200-testbed: scripts/slurm-testbed up/down twice leaves nothing behind;
# kill-node/start-node; up after a crash; bad arguments.
. "$(dirname "$0")/testbed-lib.sh"
tb_setup
trap tb_teardown EXIT

node_pids () { cat "$DT_TESTBED_DIR"/node*/slurmd.pid "$DT_TESTBED_DIR"/ctld/slurmctld.pid 2>/dev/null; }
idle_count () { sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l; }

for round in 1 2; do
    "$TESTBED" up 3 || bail "round $round: up 3 failed"
    check "round $round: 3 nodes idle" [ "$(idle_count)" -eq 3 ]
    check "round $round: node names resolve" [ "$(getent hosts node3 | awk '{print $1}')" = 10.77.0.13 ]
    check "round $round: each node its own netns with one slurmd" \
        [ "$(ip netns pids dtnode1 | wc -l)" -eq 1 -a "$(ip netns pids dtnode3 | wc -l)" -eq 1 ]
    pids=$(node_pids)
    check "round $round: 4 daemon pids recorded" [ "$(echo $pids | wc -w)" -eq 4 ]
    "$TESTBED" down || fail "round $round: down rc"
    check "round $round: no daemon left" not tb_alive $pids
    check "round $round: no netns left" tb_no_netns
    check "round $round: no veth left" tb_no_veth
    check "round $round: no bridge left" tb_no_bridge
    check "round $round: no /etc/hosts lines left" tb_no_hosts
    check "round $round: no cgroup dirs left" tb_no_cgroups
done

# A node crash and its return.
"$TESTBED" up 2 || bail "up 2 failed"
"$TESTBED" kill-node node2 || fail "kill-node rc"
check "kill-node leaves no process in the node" [ -z "$(ip netns pids dtnode2)" ]
"$TESTBED" start-node node2 || fail "start-node rc"
check "start-node: node2 idle again" tb_wait 20 eval '[ "$(idle_count)" -eq 2 ]'

# A crash of the whole testbed (kill -9 every daemon): up again works.
kill -9 $(node_pids) 2>/dev/null
"$TESTBED" up 3 >/dev/null
check "up after a crash works" [ $? -eq 0 -a "$(idle_count)" -eq 3 ]
check "status ok while up" eval '"$TESTBED" status >/dev/null'
# slurmctld's pid file lost: down finds it by its configuration in /proc.
ctld=$(cat "$DT_TESTBED_DIR/ctld/slurmctld.pid" 2>/dev/null)
rm -f "$DT_TESTBED_DIR/ctld/slurmctld.pid"
"$TESTBED" down >/dev/null
check "down without slurmctld's pid file stops it all the same (${ctld:-no pid})" \
    eval '[ -n "$ctld" ] && ! tb_alive $ctld'
"$TESTBED" up 1 >/dev/null || bail "up 1 failed"

# Bad arguments: usage errors, named.
out=$("$TESTBED" up 0 2>&1); rc=$?
check "up 0 refused (rc 2, says why)" eval '[ $rc -eq 2 ] && echo "$out" | grep -q "node count"'
out=$("$TESTBED" kill-node node9 2>&1); rc=$?
check "kill-node of unknown node refused" eval '[ $rc -eq 2 ] && echo "$out" | grep -q "no such node .node9."'
out=$("$TESTBED" frobnicate 2>&1); rc=$?
check "unknown command refused" [ $rc -eq 2 ]

"$TESTBED" down >/dev/null
check "final down: nothing left" eval 'tb_no_netns && tb_no_veth && tb_no_bridge && tb_no_hosts'
finish
