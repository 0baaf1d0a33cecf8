#!/bin/bash
# t0720-ft-corrupt-shard (local launcher): the newest committed
# checkpoint's shard is corrupted before the restart that would load it ->
# dttrain exits 3 naming the shard, the controller marks that checkpoint
# bad, and the next attempt resumes from the previous committed one; the
# job completes with the parameters of an uninterrupted run.
. "$(dirname "$0")/ft-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

# Attempt 1 crashes (rank 1, step 70); on the first restart, rank 0's
# wrapper flips one byte in the middle of rank 1's shard of the checkpoint
# it is told to resume from, before dttrain loads it.  Every rank reads
# part of every shard, so each rank that finds the damage before the
# attempt ends may report it: one checkpoint_bad event or more.
SPEC=$(dttrain_spec corrupt 2 "--inject-slow 0:25" | jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS --inject-slow 0:25" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-crash 1:70; fi; if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] && [ \"$RANK\" = 0 ]; then f=$DT_RESUME_DIR/rank-1.ckpt; s=$(stat -c %s \"$f\"); printf \"\\\\377\" | dd of=\"$f\" bs=1 seek=$((s / 2)) conv=notrunc 2>/dev/null; echo \"corrupted $f\" >&2; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "the job completes" wait_state "$ID" completed 150
wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.attempts[-1].state')\" = succeeded"
api GET "/v1/jobs/$ID" > "$TMP/j.json"
api GET "/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
jq -c '[.data.attempts[] | {attempt, cause, cause_rank, resume_step, exit: .evidence.exit_code}]' "$TMP/j.json" | sed 's/^/# /'
jq -c '[.data[] | {step, state}]' "$TMP/c.json" | sed 's/^/# /'
R2=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
check "attempt 2 resumed from the newest checkpoint ($R2) and failed: exit 3, corrupt shard" \
    jqt '.data.attempts[1].state == "failed" and .data.attempts[1].evidence.exit_code == 3
         and (.data.attempts[1].evidence.stderr_tail | test("checkpoint shard .*rank-1.ckpt"))' "$TMP/j.json"
check "the checkpoint of step $R2 was marked bad (then written anew by attempt 3)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_bad' AND attempt = 2 AND json_extract(data, '\$.step') = $R2")" -ge 1
check "a checkpoint_bad event names the shard" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_bad' AND detail LIKE '%step-$R2/rank-1.ckpt%'")" -ge 1
check "attempt 3 resumed from the previous committed checkpoint (< $R2)" \
    jqt ".data.attempts[2].resume_step < $R2 and .data.attempts[2].resume_step >= 20
         and .data.attempts[2].state == \"succeeded\"" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
done_testing
