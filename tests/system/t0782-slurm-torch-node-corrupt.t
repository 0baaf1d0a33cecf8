#!/bin/bash
# t0782-slurm-torch-node-corrupt (Slurm testbed, as an ordinary user): a
# PyTorch DDP job with dtclient.torch (examples/pytorch/gpt_train.py),
# 3 nodes of 4, 1 rank each (three ranks: the gradient sums depend on
# their order, which dtclient.torch fixes whatever DDP's bucket layout).
#   1. rank 1's whole node is killed mid-run (scripts/slurm-testbed
#      kill-node) -> node_lost; the survivors' gradient reduction fails,
#      each writes every rank's shard of its last completed step
#      (just-in-time), the controller commits the first complete set, and
#      attempt 2 resumes from there (at most 1 step lost);
#   2. attempt 2's rank 1 finds its shard of that checkpoint corrupted (its
#      wrapper flips a byte before Python starts) -> dtclient.torch names
#      the shard and exits 3, the controller marks the checkpoint bad, and
#      attempt 3 resumes from the previous committed checkpoint;
# and the job completes with the parameters of an uninterrupted run of the
# same script (params_sha256, world 3).  120 steps: the kill lands near
# step 50, well before the end.
: "${TORCH_STEPS:=120}"
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
. "$(dirname "$0")/torch-lib.sh"
ft_slurm_up 4
BASE=$(torch_baseline 3) || bail "the baseline run failed"
echo "# uninterrupted run (world 3): params_sha256 $BASE"

# In attempt 2 (restart count 1) rank 1 corrupts its own shard of the
# checkpoint it is told to resume from, then runs the trainer.
SPEC=$(torch_spec nodecorrupt 3 "--sleep-ms 40" | jq --arg m "$TMP/corrupt.ms" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ] && [ \"$RANK\" = 1 ]; then f=$DT_RESUME_DIR/rank-1.ckpt; s=$(stat -c %s \"$f\"); printf \"\\\\377\" | dd of=\"$f\" bs=1 seek=$((s / 2)) conv=notrunc 2>/dev/null; echo \"corrupted $f\" >&2; date +%s%3N > \($m); fi; exec \"$@\"", "sh"] + .command')
submit "$SPEC" || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 120
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
VICTIM=$(rank_node "$ID" 1)
[ -n "$VICTIM" ] || bail "rank 1's node is unknown"
echo "# Slurm job $SJ; killing $VICTIM (rank 1's node) at step $(job_step "$ID")"
T0=$(now_ms)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "kill-node $VICTIM"
check "the job completes" wait_state "$ID" completed 180
wait_att "$ID" succeeded 20
ft_check_user "$ID" "$SJ"
api GET "/v1/jobs/$ID" > "$TMP/j.json"
api GET "/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, cause, cause_node, cause_rank, resume_step, exit: .evidence.exit_code}]' "$TMP/j.json" | sed 's/^/# /'
jq -c '[.data[] | {step, state}]' "$TMP/c.json" | sed 's/^/# checkpoints: /'
timeline "$ID" "$T0"
check "1: attempt 1 failed with cause node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost"
         and .data.attempts[0].cause_node == $v' "$TMP/j.json"
R2=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
KIND=$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(data, '\$.kind') FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.step') = $R2 LIMIT 1")
echo "# attempt 2 was told to resume from step $R2 (a $KIND checkpoint)"
check "1: attempt 2 resumed from a survivor's just-in-time checkpoint (step $R2, written by rank 0 or 2)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.step') = $R2 AND json_extract(data, '\$.kind') = 'jit' AND json_extract(data, '\$.jit.written_by_rank') IN (0, 2)")" = 1
check "1: at most 1 step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "1: periodic checkpoints were committed in attempt 1" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 1 AND kind = 'checkpoint_committed' AND json_extract(data, '\$.kind') = 'regular'")" -ge 2
check "2: attempt 2 failed: exit 3, the corrupt shard named" \
    jqt '.data.attempts[1].state == "failed" and .data.attempts[1].evidence.exit_code == 3
         and (.data.attempts[1].evidence.stderr_tail | test("checkpoint shard .*rank-1.ckpt"))' "$TMP/j.json"
check "2: the checkpoint of step $R2 was marked bad" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_bad' AND json_extract(data, '\$.step') = $R2")" = 1
check "2: attempt 3 resumed from the previous committed checkpoint (< $R2) and succeeded" \
    jqt ".data.attempts[2].resume_step < $R2 and .data.attempts[2].resume_step >= 20
         and .data.attempts[2].state == \"succeeded\"" "$TMP/j.json"
check "the job result: $TORCH_STEPS steps, from step $(jq .data.attempts[2].resume_step "$TMP/j.json")" \
    jqt ".data.result.steps == $TORCH_STEPS and .data.result.start_step == .data.attempts[2].resume_step" "$TMP/j.json"
GOT=$(jq -r .data.result.params_sha256 "$TMP/j.json")
check "final params_sha256 equals the uninterrupted run's" same "$GOT" "$BASE"
check "no Slurm job of the test left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
