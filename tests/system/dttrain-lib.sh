# dttrain-lib.sh: helpers for the dttrain system tests (t06xx): start W ranks
# of dttrain standalone (env RANK/WORLD_SIZE, gloo over loopback, bootstrap
# through a private --rendezvous-dir), collect exit codes, compare params.
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"
DTTRAIN=$TOP_BUILDDIR/trainer/dttrain
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

. "$(dirname "$0")/tap-lib.sh"

[ -x "$DTTRAIN" ] || bail "$DTTRAIN not built"

TMP=$(mktemp -d /tmp/dttrain-test.XXXXXX)
PIDS=""
cleanup () {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

# A real text corpus from the repository: man pages, the agent API, sources.
corpus () {
    # A fixed text, not the tree's own files: a test's numbers (losses,
    # how closely 1, 2 and 4 ranks agree) must not move when the code or
    # the documentation is edited.  Pseudo-words from a fixed seed.
    [ -s "$TMP/corpus.txt" ] || $PY - "$TMP/corpus.txt" <<'PYEOF'
import sys
words = ("the a checkpoint rank node step loss of to and in is job attempt controller agent "
         "trainer gradient model data parallel shard slurm restart failure heartbeat commit "
         "resume world size batch layer optimizer state").split()
x, out, n = 12345, [], 0
while n < 300000:
    x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    w = words[(x >> 33) % len(words)]
    out.append(w + (".\n" if (x >> 20) % 13 == 0 else " "))
    n += len(out[-1])
open(sys.argv[1], "w").write("".join(out))
PYEOF
    echo "$TMP/corpus.txt"
}

# The kernel backend of every launch (a test's own --backend comes later
# and wins): the CPU, so that these tests mean the same on a GPU machine,
# where several local ranks would need a GPU each.
: "${DTTRAIN_BACKEND:=cpu}"

# launch W NAME args... : start W ranks in the background; outputs in
# $TMP/NAME.R.{out,err}; exit codes in $TMP/NAME.R.rc once waited.
launch () {
    local W=$1 name=$2 r rdv rdvarg
    shift 2
    rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
    LAUNCHED=""
    for r in $(seq 0 $((W - 1))); do
        # LAUNCH_KV=1: bootstrap through libdtclient's kv (the no-op
        # client's DT_RENDEZVOUS_DIR fallback) instead of gloo's FileStore.
        if [ "${LAUNCH_KV:-0}" = 1 ]; then rdvarg=""; export DT_RENDEZVOUS_DIR=$rdv
        else rdvarg="--rendezvous-dir $rdv"; fi
        ( RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 OPENBLAS_NUM_THREADS=1 \
            exec "$DTTRAIN" $rdvarg --backend "$DTTRAIN_BACKEND" "$@" \
            >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" ) &
        LAUNCHED="$LAUNCHED $!"
        PIDS="$PIDS $!"
    done
}

# reap NAME : wait for the ranks of the last launch; write their rc files;
# return 0 if all exited 0.
reap () {
    local name=$1 r=0 p rc all=0
    for p in $LAUNCHED; do
        wait "$p"; rc=$?
        echo $rc > "$TMP/$name.$r.rc"
        [ $rc -eq 0 ] || { all=1; sed 's/^/# rank '$r': /' "$TMP/$name.$r.err" | tail -5; }
        r=$((r + 1))
    done
    return $all
}

# run W NAME args... : launch and reap.
run () { local W=$1 name=$2; launch "$@"; reap "$name"; }

# summary NAME KEY : a field of rank 0's JSON summary line.
summary () {
    $PY -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d[sys.argv[2]])' \
        "$TMP/$1.0.out" "$2"
}

# params_close A B TOL : relative L2 distance of two --dump-params files <= TOL.
params_close () {
    $PY - "$1" "$2" "$3" <<'PYEOF'
import array, math, sys
a = array.array('f'); b = array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); b.frombytes(open(sys.argv[2], 'rb').read())
if len(a) != len(b) or not a:
    print("# sizes differ: %d vs %d" % (len(a), len(b))); sys.exit(1)
d = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
nrm = math.sqrt(sum(x * x for x in a))
mx = max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a)
print("# relative L2 %.3g, max abs diff / max abs %.3g (tolerance %s)" % (d / nrm, mx, sys.argv[3]))
sys.exit(0 if d / nrm <= float(sys.argv[3]) and mx <= float(sys.argv[3]) else 1)
PYEOF
}
