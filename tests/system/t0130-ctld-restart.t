#!/bin/bash
# t0130-ctld-restart: the straightforward failure path end to end with real
# agents and a real libdtclient trainer (steptrainer): periodic checkpoints
# committed in two phases (all shards, then the manifest, then SQLite), a
# trainer exit -> attempt failed with cause/node/rank -> a new attempt
# resuming from the latest committed checkpoint -> job completed with the
# trainer's result; old checkpoints pruned beyond 'keep'.
. "$(dirname "$0")/ctld-lib.sh"
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
[ -x "$STEPTRAINER" ] || skip_all "steptrainer not built"
command -v sha256sum >/dev/null || skip_all "sha256sum not installed"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

# The first attempt fails at step 33 with code 7; later ones do not.
SPEC=$(jq -n --arg t "$STEPTRAINER" --arg c "$TMP/ckpt" '{
    name: "restartme", nodes: 2, ranks_per_node: 2,
    command: ["sh", "-c", "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" --steps 60 --step-ms 40 --fail-at 33:7; else exec \"$0\" --steps 60 --step-ms 40; fi", $t],
    checkpoint: {dir: $c, every_steps: 10, keep: 2},
    restart: {max_restarts: 2},
    heartbeat: {interval_ms: 200}}')
api POST /v1/jobs -d "$SPEC" > "$TMP/s.json"
check "submit: 201" test "$(status)" = 201
ID=$(jq -r .data.id "$TMP/s.json")

check "the job completes" wait_for 90 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r .data.state)\" = completed"
check "its last attempt succeeds" wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[-1].state')\" = succeeded"
api GET /v1/jobs/$ID > "$TMP/j.json"
check "two attempts, one restart" jqt '.data.attempt == 2 and .data.restarts == 1' "$TMP/j.json"
check "attempt 1 failed: trainer_exit, with node, rank and exit code 7" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit"
         and (.data.attempts[0].cause_node | startswith("local"))
         and (.data.attempts[0].cause_rank | type) == "number"
         and .data.attempts[0].evidence.exit_code == 7' "$TMP/j.json"
api GET /v1/jobs/$ID/checkpoints > "$TMP/c.json"
# The latest checkpoint of attempt 1 that was committed (deleted since or
# not; a partial one, removed without a commit, has no commit time) before
# attempt 2 was submitted.
SUB2=$(jq -r '.data.attempts[1].submit_time' "$TMP/j.json")
LAST1=$(jq --arg t "$SUB2" '[.data[] | select(.attempt == 1 and .commit_time != null
    and .commit_time <= $t) | .step] | max' "$TMP/c.json")
jq -c '.data[] | {step, attempt, state, commit_time}' "$TMP/c.json" | sed 's/^/# /'
echo "# attempt 2 submitted at $SUB2"
check "attempt 1 committed checkpoints before failing" test "$LAST1" -ge 10 2>/dev/null
check "attempt 2 resumed from attempt 1's latest committed checkpoint ($LAST1)" \
    jqt ".data.attempts[1].resume_step == $LAST1" "$TMP/j.json"
check "the job holds the trainer's result" jqt '.data.result.steps == 60' "$TMP/j.json"

check "two checkpoints committed, older ones deleted (keep 2)" \
    jqt '([.data[] | select(.state == "committed")] | length) == 2
         and ([.data[] | select(.state == "deleted")] | length) >= 1' "$TMP/c.json"
NEWEST=$(jq '[.data[] | select(.state == "committed") | .step] | max' "$TMP/c.json")
OLDEST=$(jq '[.data[] | select(.state == "deleted") | .step] | min' "$TMP/c.json")
check "each committed checkpoint has all 4 shards" \
    jqt 'all(.data[] | select(.state == "committed"); .shards == 4)' "$TMP/c.json"
M=$TMP/ckpt/$ID/step-$NEWEST/manifest.json
check "manifest.json written for step $NEWEST" jqt ".step == $NEWEST and .world_size == 4 and (.shards | length) == 4" "$M"
check "the manifest's sha256 is the one committed in SQLite" \
    same "$(sha256sum < "$M" | cut -d' ' -f1)" "$(jq -r ".data[] | select(.step == $NEWEST) | .manifest_sha256" "$TMP/c.json")"
check "the deleted checkpoint's files are gone" test ! -e "$TMP/ckpt/$ID/step-$OLDEST"
check "the failure's event is recorded once" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'trainer_exit'")" = 1
check "node health records the failure" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM node_health WHERE job_id = $ID")" -ge 1
api GET /v1/jobs/$ID/metrics > "$TMP/m.json"
check "step metrics were recorded" jqt '(.data.points | length) >= 3' "$TMP/m.json"
curl -s "$URL/metrics" > "$TMP/metrics.txt"
check "/metrics: restarts and committed checkpoints counted" \
    sh -c "grep -q '^dtctld_restarts_total 1$' $TMP/metrics.txt && grep -q '^dtctld_checkpoints_committed 2$' $TMP/metrics.txt"
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$TMP/state/dtctld.db" 'PRAGMA integrity_check')" = ok
done_testing
