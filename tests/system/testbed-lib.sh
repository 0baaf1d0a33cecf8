# testbed-lib.sh: helpers for system tests that run the Slurm testbed
# (scripts/slurm-testbed).  Source it from a tNNNN-*.t script.
#
# The testbed uses machine-wide names (bridge dtbr0, netns dtnode*, port
# 6817, /etc/hosts lines), so tests that use it take an exclusive lock and
# run one at a time even under 'make -j check'.

TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
TESTBED=$TOP_SRCDIR/scripts/slurm-testbed
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"

. "$(dirname "$0")/tap-lib.sh"

# Skip (77) where the testbed cannot run: not root, no namespaces, no Slurm.
tb_require () {
    [ "$(id -u)" -eq 0 ] || skip_all "not root"
    command -v slurmctld >/dev/null 2>&1 || skip_all "slurmctld not installed"
    ip netns add dtprobe$$ 2>/dev/null || skip_all "network namespaces not allowed"
    ip netns del dtprobe$$
}

# Private state dir + the machine-wide lock; call once, early.
tb_setup () {
    tb_require
    TB_TMP=$(mktemp -d /tmp/dt-test.XXXXXX)
    # Jobs run as ordinary users: slurmstepd, as the user, executes the
    # batch script from slurmd's spool and srun reads slurm.conf, both in
    # here.
    chmod 755 "$TB_TMP"
    export DT_TESTBED_DIR=$TB_TMP/testbed
    local lock=/tmp/dtctl-slurm-testbed.lock
    [ -d /run/lock ] && lock=/run/lock/dtctl-slurm-testbed.lock
    exec 9>"$lock" || bail "cannot open the testbed lock $lock"
    flock -w 600 9 || bail "could not get the testbed lock in 600 s"
    export SLURM_CONF=$DT_TESTBED_DIR/etc/slurm.conf
}

# Called from the test's EXIT trap.
tb_teardown () {
    "$TESTBED" down >/dev/null 2>&1
    [ -n "${TB_TMP:-}" ] && [ -z "${TB_KEEP:-}" ] && rm -rf "$TB_TMP"
}

# What 'down' must leave behind: nothing.
tb_no_netns ()   { ! ip netns list | grep -q '^dtnode'; }
tb_no_veth ()    { ! ip -o link show | grep -q 'dtveth-'; }
tb_no_bridge ()  { ! ip link show dtbr0 >/dev/null 2>&1; }
tb_no_hosts ()   { ! grep -q 'dtctl-slurm-testbed' /etc/hosts; }
tb_no_cgroups () { ! ls -d /sys/fs/cgroup/*/slurm_node* >/dev/null 2>&1; }
tb_alive () {   # any of these PIDs alive (zombies do not count)?
    local p st
    for p in "$@"; do
        st=$(awk '{print $3}' /proc/$p/stat 2>/dev/null) || continue
        [ "$st" != Z ] && return 0
    done
    return 1
}

# Free TCP port on the host (asks the kernel).
tb_free_port () {
    dt_port ""
}

# Wait until "$@" succeeds, up to $1 seconds.
tb_wait () {
    local secs=$1 i; shift
    for i in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done
    return 1
}
