#!/bin/bash
# t0706-ft-torch (local launcher): a PyTorch DDP trainer with
# dtclient.torch (examples/pytorch/gpt_train.py), 2 nodes x 1 rank: its
# periodic checkpoints are committed by the controller's two-phase commit;
# kill -9 of rank 1 mid-run -> the survivor writes a just-in-time
# checkpoint of its last completed step, the controller commits it, the
# next attempt resumes from it (at most 1 step lost), and the job ends
# with the parameters of an uninterrupted run (params_sha256).
. "$(dirname "$0")/ft-lib.sh"
. "$(dirname "$0")/torch-lib.sh"

write_conf
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE=$(torch_baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_sha256 $BASE"

submit "$(torch_spec jit 2 "--sleep-ms 30")" || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 90
PID=$(rank_pid "$ID" 1)
T0=$(now_ms)
check "kill -9 rank 1 (pid $PID)" kill -9 "$PID"
check "the job completes" wait_state "$ID" completed 120
api GET "/v1/jobs/$ID" > "$TMP/j.json"
timeline "$ID" "$T0"
check "attempt 1 failed: rank 1 exited" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "trainer_exit" and .data.attempts[0].cause_rank == 1' "$TMP/j.json"
check "periodic checkpoints were committed in attempt 1" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND attempt = 1 AND kind = 'checkpoint_committed' AND json_extract(data, '\$.kind') = 'regular'")" -ge 2
R=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
check "attempt 2 resumed from the just-in-time checkpoint of step $R, written by rank 0" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.step') = $R AND json_extract(data, '\$.kind') = 'jit' AND json_extract(data, '\$.jit.written_by_rank') = 0")" = 1
check "at most 1 step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "the job result: $TORCH_STEPS steps, resumed at step $R" \
    jqt ".data.result.steps == $TORCH_STEPS and .data.result.start_step == $R" "$TMP/j.json"
GOT=$(jq -r .data.result.params_sha256 "$TMP/j.json")
check "final params_sha256 equals the uninterrupted run's" same "$GOT" "$BASE"
check "no trainer left" wait_for 10 eval '[ -z "$(torch_trainers_left)" ]'
finish
