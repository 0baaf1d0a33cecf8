#!/bin/bash
# t0745-ft-straggler (local launcher with a 2-node pretend cluster,
# LocalNodes=2): rank 1 computes 4x slower; with straggler.action exclude
# the controller flags it (score over the window below the threshold),
# shows it in the job's status, has every rank checkpoint at one step and
# stop, and restarts without local2 - on 1 node (restart.min_nodes 1), the
# same global batch.  The world size changes (2 -> 1), so the parameters
# may legitimately differ from a 2-rank run: there is no uninterrupted
# run to compare them with (the test prints them).
FT_STEPS=400   # long enough that the stop for the exclusion lands before the end, also under load
. "$(dirname "$0")/ft-lib.sh"
MODEL_ARGS="$MODEL_ARGS --width 128"   # steps of ~10 ms: a window fills mid-run

write_conf "LocalNodes=2"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

submit "$(dttrain_spec straggle 2 "--inject-slow 1:4" '{"straggler": {"action": "exclude", "window_steps": 8, "threshold": 0.75}, "restart": {"min_nodes": 1}}')" \
    || bail "submit failed"
# The job's status lists the straggler while attempt 1 runs; poll it until
# it shows, or until attempt 2 started without it ever showing (a failure).
seen=no
for _ in $(seq 900); do
    curl -s "$URL/v1/jobs/$ID" > "$TMP/st.json"
    jqt '.data.stragglers | any(.rank == 1 and .node == "local2" and .score < 0.75)' "$TMP/st.json" \
        && { seen=yes; break; }
    jqt '.data.attempt >= 2' "$TMP/st.json" && break
    sleep 0.1
done
check "the straggler shows in the job's status while attempt 1 runs" test $seen = yes
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
jq -c '[.data.attempts[] | {attempt, state, cause, cause_node, cause_rank, num_nodes, world_size, resume_step, nodelist}]' "$TMP/j.json" | sed 's/^/# /'
check "a straggler event names rank 1 on local2" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'straggler' AND rank = 1 AND node = 'local2'")" = 1
check "attempt 1 ended with cause straggler_excluded (node local2, rank 1) after a final checkpoint" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "straggler_excluded"
         and .data.attempts[0].cause_node == "local2" and .data.attempts[0].cause_rank == 1
         and .data.attempts[0].evidence.final_checkpoint_committed' "$TMP/j.json"
STOP=$(jq '.data.attempts[0].evidence.stop_step' "$TMP/j.json")
check "attempt 2 resumed from the stop checkpoint (step $STOP) on 1 node without local2" \
    jqt ".data.attempts[1].resume_step == $STOP and .data.attempts[1].num_nodes == 1
         and .data.attempts[1].world_size == 1 and .data.attempts[1].nodelist == \"local1\"" "$TMP/j.json"
check "local2 is excluded from the job" jqt '.data.exclude | index("local2") != null' "$TMP/j.json"
check "a shrink event says why" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'shrink'")" = 1
check "the job result: $FT_STEPS steps, world 1, global batch 32" \
    jqt ".data.result.steps == $FT_STEPS and .data.result.world_size == 1 and .data.result.global_batch == 32" "$TMP/j.json"
echo "# params_crc32c: $(jq -r .data.result.params_crc32c "$TMP/j.json") after 2 -> 1 ranks"
done_testing
