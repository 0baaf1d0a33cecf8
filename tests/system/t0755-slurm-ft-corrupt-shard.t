#!/bin/bash
# t0755-slurm-ft-corrupt-shard (Slurm testbed): rank 1 of a 2-node
# job crashes at step 70; on the restart, rank 0's wrapper corrupts rank 1's
# shard of the newest committed checkpoint (the one the attempt is told to
# resume from) before dttrain loads it -> dttrain exits 3 naming the shard,
# the controller marks that checkpoint bad, the next attempt resumes from
# the previous committed one, the job completes, and params_crc32c equals
# an uninterrupted run's (world 2).  4 nodes: failed nodes are excluded
# from later attempts.
: "${FT_STEPS:=120}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 4
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

SPEC=$(dttrain_spec corrupt 2 "--inject-slow 0:25" | jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS --inject-slow 0:25" --arg m "$TMP/corrupt.ms" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-crash 1:70; fi; if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] && [ \"$RANK\" = 0 ]; then f=$DT_RESUME_DIR/rank-1.ckpt; s=$(stat -c %s \"$f\"); printf \"\\\\377\" | dd of=\"$f\" bs=1 seek=$((s / 2)) conv=notrunc 2>/dev/null; echo \"corrupted $f\" >&2; date +%s%3N > \($m); fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
T0=$(now_ms)
check "the job completes" wait_state "$ID" completed 150
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
api GET "/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, cause, cause_node, cause_rank, resume_step, exit: .evidence.exit_code}]' "$TMP/j.json" | sed 's/^/# /'
jq -c '[.data[] | {step, state}]' "$TMP/c.json" | sed 's/^/# checkpoints: /'
# The crash of attempt 1 is injected by dttrain itself (step 70): its
# times are relative to the submission; attempt 2's wrapper notes when it
# corrupted the shard.
echo "# (attempt 1 -> 2: times relative to the job's submission; the crash is dttrain's own, at step 70)"
timeline "$ID" "$T0" 1
echo "# (attempt 2 -> 3: times relative to the corruption of the shard, before attempt 2 loaded it)"
timeline "$ID" "$(cat "$TMP/corrupt.ms" 2>/dev/null || echo "$T0")" 2
R2=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
check "attempt 1 failed: trainer_exit of rank 1" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit"
         and .data.attempts[0].cause_rank == 1' "$TMP/j.json"
check "attempt 2 resumed from the newest checkpoint ($R2) and failed: exit 3, corrupt shard" \
    jqt '.data.attempts[1].state == "failed" and .data.attempts[1].evidence.exit_code == 3
         and (.data.attempts[1].evidence.stderr_tail | test("checkpoint shard .*rank-1.ckpt"))' "$TMP/j.json"
# Each rank that finds the corrupt shard before the attempt ends may report
# it (rank 0 reads part of rank 1's shard too): at least one event.
check "the checkpoint of step $R2 was marked bad" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_bad' AND attempt = 2 AND json_extract(data, '\$.step') = $R2")" -ge 1
check "a checkpoint_bad event names the shard" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_bad' AND detail LIKE '%step-$R2/rank-1.ckpt%'")" -ge 1
check "attempt 3 resumed from the previous committed checkpoint (< $R2) and succeeded" \
    jqt ".data.attempts[2].resume_step < $R2 and .data.attempts[2].resume_step >= 20
         and .data.attempts[2].state == \"succeeded\"" "$TMP/j.json"
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no Slurm job of the test left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
