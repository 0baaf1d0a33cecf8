#!/bin/bash
# t0789-ft-numerics (local launcher): each attempt's numerics identity is
# recorded, the first attempt's is pinned, and a change is said.
#   1. pin: attempt 1 computes with another OpenBLAS core type than the
#      node's setting (the wrapper sets OPENBLAS_CORETYPE for attempt 1
#      only); after a rank is killed, attempt 2 gets the pinned core from
#      the controller (not the node's), no numerics_changed is recorded,
#      and the job ends with the parameters of an uninterrupted run with
#      that core.
#   2. record: attempt 2 is forced onto another core type (as a node with
#      another BLAS would be): an event numerics_changed names what
#      changed, the attempt and the job say from which attempt bit-
#      identity no longer holds, and so does dtctl show.
#   3. strict: with numerics "strict", the node whose trainer computes
#      otherwise is refused: attempt 2 fails with cause numerics_changed
#      on that node, the node is excluded, attempt 3 runs on the others
#      and the job ends with the uninterrupted run's parameters.
. "$(dirname "$0")/ft-lib.sh"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl

write_conf "LocalNodes=3"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
CORE=$(awk -v c="$BASE" '$1 == c { print $2; exit }' "$TMP/baseline.cores")
# another core type OpenBLAS runs on any x86-64 with AVX
OTHER=Sandybridge
[ "$CORE" = Sandybridge ] && OTHER=Haswell
BASE_OTHER=$(OPENBLAS_CORETYPE=$OTHER baseline 2) || bail "the baseline run ($OTHER) failed"
echo "# uninterrupted runs (world 2): $BASE with core $CORE (this environment's), $BASE_OTHER with $OTHER"
check "the two core types give different parameters (else this test proves nothing)" \
    test "$BASE" != "$BASE_OTHER"

# wrap SPEC 'shell code': the code runs before dttrain, in every attempt
wrap () { jq -c --arg x "$2" '.command[2] |= "\($x); \(.)"' <<< "$1"; }
# kill_rank1 ID: wait for step 45 (rank 1 holds there in attempt 1), kill it
kill_rank1 () {
    check "$2: the job reaches step 45" wait_step "$1" 45 90
    check "$2: kill -9 rank 1" kill -9 "$(rank_pid "$1" 1)"
}
spec () {
    local m=${2:-'{}'}
    first_attempt_only "--inject-hang 1:45" "$(dttrain_spec "$1" 2 "--inject-slow 0:25 --no-jit" "$m")"
}
events_of () { api GET "/v1/jobs/$1/events" | jq -c "[.data[] | select(.kind == \"$2\")]"; }

# --- 1. the first attempt's numerics are pinned ---------------------------
submit "$(wrap "$(spec pin)" "[ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ] && export OPENBLAS_CORETYPE=$OTHER")" \
    || bail "1: submit failed"
kill_rank1 "$ID" 1
check "1: the job completes" wait_state "$ID" completed 120
api GET "/v1/jobs/$ID" > "$TMP/j1.json"
check "1: attempt 1 recorded its numerics: dttrain on the CPU, OpenBLAS core $OTHER, 1 thread" \
    jqt --arg o "$OTHER" '.data.attempts[0].numerics | .trainer == "dttrain" and .backend == "cpu"
        and .blas == "OpenBLAS" and .blas_core == $o and .blas_threads == 1 and .pin_env.OPENBLAS_CORETYPE == $o' "$TMP/j1.json"
check "1: the job's pinned numerics are attempt 1's" \
    jqt '.data.numerics == .data.attempts[0].numerics and .data.numerics_changed_from == null' "$TMP/j1.json"
check "1: attempt 2 computed with the pinned core $OTHER, not the node's (${CORE})" \
    jqt --arg o "$OTHER" '.data.attempts[1].numerics.blas_core == $o and .data.attempts[1].numerics_changed == false' "$TMP/j1.json"
check "1: no numerics_changed event" test "$(events_of "$ID" numerics_changed)" = "[]"
check "1: the result says the core: $OTHER" jqt --arg o "$OTHER" '.data.result.numerics.blas_core == $o' "$TMP/j1.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j1.json")
check "1: final params_crc32c $GOT equals the uninterrupted $OTHER run's $BASE_OTHER" same_params "$ID" "$GOT" "$BASE_OTHER"

# --- 2. a changed identity is recorded and said ---------------------------
submit "$(wrap "$(spec changed)" "[ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ] || export OPENBLAS_CORETYPE=$OTHER")" \
    || bail "2: submit failed"
kill_rank1 "$ID" 2
check "2: the job completes (numerics record)" wait_state "$ID" completed 120
api GET "/v1/jobs/$ID" > "$TMP/j2.json"
events_of "$ID" numerics_changed > "$TMP/ev2.json"
check "2: one numerics_changed event, for attempt 2: blas_core $CORE -> $OTHER" \
    jqt --arg c "$CORE" --arg o "$OTHER" 'length == 1 and .[0].attempt == 2 and .[0].data.strict == false
        and .[0].data.changed.blas_core == {"pinned": $c, "now": $o}
        and (.[0].detail | test("no longer bit-identical"))' "$TMP/ev2.json"
check "2: attempt 2 is marked, attempt 1 is not; the job changed from attempt 2" \
    jqt '[.data.attempts[].numerics_changed] == [false, true] and .data.numerics_changed_from == 2' "$TMP/j2.json"
DTCTL_CONTROLLER=$URL "$DTCTL" show "$ID" > "$TMP/show2.txt" 2>&1
check "2: dtctl show names the pinned core, attempt 2's and from when bit-identity no longer holds" \
    eval 'grep -q "blas_core=$CORE" "$TMP/show2.txt" && grep -q "attempt 2 computed otherwise.*blas_core=$OTHER" "$TMP/show2.txt" &&
          grep -q "numerics changed from attempt 2 on" "$TMP/show2.txt"'
check "1: dtctl show says every attempt of job 1 computed alike" \
    eval 'DTCTL_CONTROLLER=$URL "$DTCTL" show 1 | grep -q "every attempt computed with these"'

# --- 3. strict: the node that computes otherwise is excluded --------------
submit "$(wrap "$(spec strict '{"numerics": "strict"}')" \
    "{ [ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ] || [ \"\$DT_NODE\" != local2 ]; } || export OPENBLAS_CORETYPE=$OTHER")" \
    || bail "3: submit failed"
check "3: the spec keeps numerics strict" jqt '.data.spec.numerics == "strict"' "$TMP/submit.json"
kill_rank1 "$ID" 3
check "3: the job completes" wait_state "$ID" completed 150
api GET "/v1/jobs/$ID" > "$TMP/j3.json"
check "3: attempt 2 failed with cause numerics_changed on local2, which is excluded" \
    jqt '.data.attempts[1].cause == "numerics_changed" and .data.attempts[1].cause_node == "local2"
         and (.data.exclude | index("local2")) != null' "$TMP/j3.json"
check "3: attempt 3 ran without local2, with the pinned numerics" \
    jqt '(.data.attempts[2].nodelist | test("local2") | not) and .data.attempts[2].numerics_changed == false
         and .data.numerics_changed_from == null' "$TMP/j3.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j3.json")
check "3: final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"

# --- bad input --------------------------------------------------------------
api POST /v1/jobs -d "$(dttrain_spec bad 1 "" '{"numerics": "exact"}')" > "$TMP/bad.json"
check "a bad numerics value is refused (400, naming the field)" \
    eval '[ "$(status)" = 400 ] && grep -q "numerics" "$TMP/bad.json"'
done_testing
