#!/bin/bash
# t0603-dttrain-peer-loss: a dead peer gives an error, not a hang (exit 5,
# naming the peer); a hung peer gives an error within the collective
# timeout; SIGTERM stops cleanly with a checkpoint; --inject-slow slows a
# rank without changing the result.  The default model (the transformer),
# small.
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
args="--data $data --steps 40 --global-batch 16 --context 8 --width 16 --heads 2 --layers 1"

# Dead peer: rank 2 of 3 exits at step 5.
run 3 dead $args --inject-crash 2:5
check "crashed rank exits 17" test "$(cat $TMP/dead.2.rc)" = 17
check "rank 0 exits 5" test "$(cat $TMP/dead.0.rc)" = 5
check "rank 1 exits 5" test "$(cat $TMP/dead.1.rc)" = 5
check "rank 0 says which collective failed, with gloo's peer address" \
    grep -q "collective failed at step .*gloo.*127.0.0.1" "$TMP/dead.0.err"
# gloo's error names an address; it maps to a rank when it is the peer's
# listening address (not when it is an ephemeral one).  Whenever a rank is
# named, it must be one that is really gone (a cascade may name a survivor
# that already exited).
named_ok () {
    local r p
    for r in 0 1; do
        for p in $(sed -n 's/.*peer rank \([0-9]*\) lost.*/\1/p' "$TMP/dead.$r.err"); do
            [ "$(cat "$TMP/dead.$p.rc")" != 0 ] || return 1
        done
    done
}
check "survivors name only ranks that are gone" named_ok
grep -h "peer rank" "$TMP"/dead.[01].err | sed 's/^/# /'
run 2 dead2 $args --inject-crash 1:3
check "2 ranks: survivor names the lost peer rank" grep -q "peer rank 1 lost" "$TMP/dead2.0.err"

# Hung peer: rank 1 stops at step 5; rank 0 must give up after --comm-timeout.
launch 2 hang $args --inject-hang 1:5 --comm-timeout 3
set -- $LAUNCHED
p0=$1 p1=$2
deadline=$((SECONDS + 60))    # generous: 3 s timeout on a shared 2-core box
while kill -0 "$p0" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
if kill -0 "$p0" 2>/dev/null; then
    fail "rank 0 gave up on the hung peer"
    kill -9 "$p0"
else
    wait "$p0"; rc=$?
    check "rank 0 gave up on the hung peer with exit 5 (rc $rc)" test $rc -eq 5
    check "rank 0 says it timed out" grep -qi "timed out" "$TMP/hang.0.err"
fi
check "hung rank is still there (it is the hung one)" kill -0 "$p1"
kill -9 "$p1" 2>/dev/null; wait "$p1" 2>/dev/null

# SIGTERM to one rank: both stop at the same step with a committed
# checkpoint and exit 0 (the signal travels in the per-step control allreduce).
launch 2 term $args --steps 1000000 --checkpoint-dir "$TMP/ck-term" --checkpoint-every 10
set -- $LAUNCHED
deadline=$((SECONDS + 60))
while [ ! -f "$TMP/ck-term/step-10/manifest.json" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
kill -TERM "$2"
reap term; check "SIGTERM to rank 1: both ranks exit 0" test $? -eq 0
check "SIGTERM: summary says stopped" test "$(summary term stopped)" = True
s=$(summary term steps)
check "SIGTERM: checkpoint of the stop step ($s) committed" test -n "$s" -a -f "$TMP/ck-term/step-$s/manifest.json"
check "SIGTERM: rank 1 logged the stop" grep -q "stopping after step" "$TMP/term.1.err"

# A slow rank changes timing, not results.
run 2 fast $args; check "2 ranks: exit 0" test $? -eq 0
run 2 slow $args --inject-slow 1:3; check "2 ranks, rank 1 3x slower: exit 0" test $? -eq 0
check "slow rank: same params_crc32c" same "$(summary fast params_crc32c)" "$(summary slow params_crc32c)"
finish
