# tap-lib.sh: the TAP output of every system test (ok, fail, check, not,
# diag, skip_all, bail, finish/done_testing) and jqt, the one way a test
# asserts on JSON.  Sourced by ctld-lib.sh, testbed-lib.sh, agent-lib.sh,
# dttrain-lib.sh and tests that use no other library; sourcing it twice
# (ft-slurm-lib.sh reaches it through two libraries) keeps the counts.
[ -n "${TAP_LIB_LOADED:-}" ] && return 0
TAP_LIB_LOADED=1

# python3 is Debian's /usr/bin/python3 (the one scripts/install-deps
# equips) when the first python3 on PATH is another: a version manager's
# shim (pyenv) costs 0.1-0.3 s of shell scripts a call, and the tests run
# python3 a few hundred times.  A function: the tests' own calls only.
# A process started in the background must be started through $DT_PY3,
# not the function: "python3 ... &" would run the function in a subshell,
# so $! would name that subshell, not the python3 process under it.
DT_PY3=python3
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    DT_PY3=/usr/bin/python3
    python3 () { /usr/bin/python3 "$@"; }
fi

n=0; failed=0
ok ()   { n=$((n + 1)); echo "ok $n - $*"; }
fail () { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
# check WHAT CMD...: one test point; returns CMD's failure, so that
# "check ... || diag FILE" prints the evidence of a failed check.
check () { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; return 1; fi; }
not () { ! "$@"; }
# diag [FILE...]: the files (or stdin) as TAP comments.
diag () { sed 's/^/# /' "$@"; }
skip_all () { echo "1..0 # SKIP $*"; exit 77; }
# A hard error (automake's 99): the test cannot go on.
bail () { echo "Bail out! $*"; exit 99; }
# A library may add its last test point at the end (TAP_FINISH_HOOK: a
# function, e.g. munge-lib.sh's check of every answer against the API).
# The plan comes last; a test whose own function took the name of one of
# this library's (tap_lib_own, at the end of this file) fails here: its
# points may not have been counted, or its end not reached.
tap_finish () {
    local hook=${TAP_FINISH_HOOK:-}
    TAP_FINISH_HOOK=
    [ -n "$hook" ] && "$hook"
    local f
    for f in $tap_lib_own; do
        [ "$(declare -f "$f" | cksum)" = "${tap_lib_sums[$f]:-}" ] ||
            fail "tap-lib.sh: the test redefined the library's function $f"
    done
    echo "1..$n"; exit $failed
}
finish () { tap_finish; }
done_testing () { tap_finish; }

# dt_port [ADDR]: a TCP port free on ADDR (default 127.0.0.1, "" for every
# address) right now, outside the kernel's ephemeral range
# (net.ipv4.ip_local_port_range).  A port from that range may become some
# client's source port; worse, a process that connects to it on the same
# address before its listener is up (a rank to its master's port, an agent
# to a controller being restarted) can be given that very port as its own
# source port and connect to itself (TCP simultaneous open), and the
# listener then cannot bind.
dt_port () {
    python3 - "${1-127.0.0.1}" <<'PYEOF'
import random, socket, sys
try:
    lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
except (OSError, ValueError):
    lo, hi = 32768, 60999
ports = [p for p in range(10000, 65536) if not lo <= p <= hi]
random.shuffle(ports)
for p in ports[:1000]:
    s = socket.socket()
    try:
        s.bind((sys.argv[1], p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit("dt_port: no free port outside the ephemeral range %d-%d" % (lo, hi))
PYEOF
}

# same A B: A and B are equal, and neither empty nor "null" (two missing
# answers are no evidence that two results agree).
same () {
    [ -n "$1" ] && [ "$1" != null ] && [ "$1" = "$2" ] && return 0
    echo "# same: '$1' vs '$2'"
    return 1
}

# procs_naming DIR [PID...]: the live processes (zombies excluded) whose
# command line or environment names DIR, a test's private directory, other
# than the PIDs given.  Every process a test started (agents get a state
# dir under it, ranks an agent socket under it, and whatever they start
# inherits that environment) names it, so this finds every descendant,
# including those that left their process group or were reparented.
procs_naming () {
    python3 - "$@" <<'PYEOF'
import os, sys
d, skip = sys.argv[1].encode(), set(sys.argv[2:]) | {str(os.getpid()), str(os.getppid())}
for p in os.listdir("/proc"):
    if not p.isdigit() or p in skip:
        continue
    try:
        with open("/proc/%s/stat" % p, "rb") as f:
            if f.read().split(b") ")[-1][:1] == b"Z":
                continue
        blob = open("/proc/%s/cmdline" % p, "rb").read() + open("/proc/%s/environ" % p, "rb").read()
    except OSError:
        continue
    if d in blob:
        print(p)
PYEOF
}

# jqt [jq options] FILTER [FILE...]: true when FILTER's last output is
# neither false nor null, like jq -e, output discarded.  Unlike jq -e (jq
# 1.6 exits 0 on empty input), it fails when there is no input at all, so
# that a dead controller or an empty answer fails the check; and when the
# input does not parse or the filter outputs nothing.
jqt () {
    local opts=() filter
    while [ $# -gt 0 ]; do
        case $1 in
        --arg|--argjson|--slurpfile|--rawfile) opts+=("$1" "$2" "$3"); shift 3 ;;
        --) shift; break ;;
        -*) opts+=("$1"); shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 1 ] || { echo "# jqt: no filter" >&2; return 2; }
    filter=$1; shift
    jq -e -n "${opts[@]}" "[inputs] | if length == 0 then error(\"jqt: empty input\") else .[] end | ($filter
)" "$@" >/dev/null
}

# The library's own functions, as loaded (tap_finish compares).
tap_lib_own="ok fail check not diag skip_all bail tap_finish finish done_testing same jqt"
declare -gA tap_lib_sums
for tap_f in $tap_lib_own; do tap_lib_sums[$tap_f]=$(declare -f "$tap_f" | cksum); done
unset tap_f
