#!/bin/bash
# t0783-slurm-torch-hang-tlimit (Slurm testbed, as an ordinary user): a
# PyTorch DDP job with dtclient.torch (examples/pytorch/gpt_train.py),
# 2 nodes of 3, 1 rank each.
#   1. rank 1 frozen with SIGSTOP -> a hang, blamed on rank 1 and its node
#      (not on rank 0, blocked on it in a marked all-reduce); the node is
#      trusted, so no node is excluded (the restart goes in place);
#      rank 0, blocked on it, writes the just-in-time shards ahead and
#      reports them when the frozen rank is killed; attempt 2 resumes
#      from that just-in-time checkpoint;
#   2. attempt 2's Slurm time limit lowered to 1 minute (as t0759) ->
#      Slurm's USR1 warning -> the ranks agree on a step, checkpoint it and
#      exit -> cause time_limit with its final checkpoint committed ->
#      attempt 3, a new Slurm job, resumes from that final checkpoint;
# and the job completes with the parameters of an uninterrupted run of the
# same script (params_sha256, world 2).  Attempt 2 runs slow steps
# (--sleep-ms 400: still running when the warning comes; the sleep does
# not change the parameters).
: "${TORCH_STEPS:=150}"
DT_SUBMIT_USER=dtalice
. "$(dirname "$0")/ft-slurm-lib.sh"
. "$(dirname "$0")/torch-lib.sh"
ft_slurm_up 3
BASE=$(torch_baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_sha256 $BASE"

SPEC=$(torch_spec hangtl 2 "--sleep-ms 40" \
    '{"time_limit": 600, "heartbeat": {"interval_ms": 250, "node_timeout_ms": 2500, "hang_timeout_ms": 4000}}' \
    | jq '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then exec \"$@\" --sleep-ms 400; fi; exec \"$@\"", "sh"] + .command')
submit "$SPEC" || bail "submit failed"
check "the job runs past step 45" wait_step "$ID" 45 120
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
PID=$(rank_pid "$ID" 1)
NODE=$(rank_node "$ID" 1)
[ -n "$PID" ] && [ -n "$NODE" ] || bail "rank 1's pid or node is unknown"
echo "# Slurm job $SJ; SIGSTOP of rank 1 (pid $PID on $NODE) at step $(job_step "$ID")"
T0=$(now_ms)
check "1: SIGSTOP rank 1" kill -STOP "$PID"
check "1: attempt 2 runs" wait_for 60 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '[.data.attempts[] | select(.attempt == 2 and .state == \"running\")] | length')\" = 1"
check "1: attempt 2 made a step" wait_for 60 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq -r '[.data.attempts[] | select(.attempt == 2)][0].resume_step // 0')\" -lt \"\$(curl -s $URL/v1/jobs/$ID | jq -r '.data.step // -1')\""
SJ2=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[1].slurm_job_id')
[[ "$SJ2" =~ ^[0-9]+$ ]] || bail "attempt 2 has no Slurm job id ($SJ2)"
T1=$(now_ms)
check "2: the Slurm job $SJ2's time limit is lowered to 1 minute" scontrol update jobid="$SJ2" TimeLimit=1
check "the job completes" wait_state "$ID" completed 180
wait_att "$ID" succeeded 20
ft_check_user "$ID" "$SJ"
api GET "/v1/jobs/$ID" > "$TMP/j.json"
api GET "/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
jq -c '[.data.attempts[] | {attempt, cause, cause_node, cause_rank, resume_step}]' "$TMP/j.json" | sed 's/^/# /'
timeline "$ID" "$T0" 1
check "1: attempt 1 failed with cause hang, blamed on the frozen rank 1 on $NODE" \
    jqt ".data.attempts[0].state == \"failed\" and .data.attempts[0].cause == \"hang\"
         and .data.attempts[0].cause_node == \"$NODE\" and .data.attempts[0].cause_rank == 1" "$TMP/j.json"
check "1: no node is excluded (a hang blamed on a rank of a trusted node)" \
    jqt ".data.exclude == []" "$TMP/j.json"
check "1: the frozen process is gone" wait_for 20 eval '! kill -0 "$PID" 2>/dev/null'
check "1: attempt 2 resumed from a checkpoint (step >= 40)" jqt '.data.attempts[1].resume_step >= 40' "$TMP/j.json"
R2=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
check "1: ... the survivor's just-in-time checkpoint (step $R2, written by rank 0)" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'checkpoint_committed' AND json_extract(data, '\$.step') = $R2 AND json_extract(data, '\$.kind') = 'jit' AND json_extract(data, '\$.jit.written_by_rank') = 0")" = 1
echo "# (attempt 2 -> 3: times relative to the time limit being lowered)"
timeline "$ID" "$T1" 2
check "2: attempt 2 ended with cause time_limit after a committed final checkpoint" \
    jqt '.data.attempts[1].state == "failed" and .data.attempts[1].cause == "time_limit"
         and .data.attempts[1].evidence.final_checkpoint_committed' "$TMP/j.json"
SJ3=$(jq -r '.data.attempts[2].slurm_job_id' "$TMP/j.json")
check "2: attempt 3 is a new Slurm job ($SJ3)" test "$SJ3" -gt 0 -a "$SJ3" != "$SJ2"
R3=$(jq '.data.attempts[2].resume_step' "$TMP/j.json")
FINAL=$(jq '[.data[] | select(.attempt == 2 and .commit_time != null and .state != "pending") | .step] | max // -1' "$TMP/c.json")
check "2: attempt 3 resumed from attempt 2's final checkpoint (step $R3 = $FINAL)" \
    test "$R3" -eq "$FINAL" -a "$FINAL" -gt "$(jq '.data.attempts[1].resume_step' "$TMP/j.json")"
check "2: no step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -eq 0
check "the job result: $TORCH_STEPS steps, from step $R3" \
    jqt ".data.result.steps == $TORCH_STEPS and .data.result.start_step == $R3" "$TMP/j.json"
GOT=$(jq -r .data.result.params_sha256 "$TMP/j.json")
check "final params_sha256 equals the uninterrupted run's" same "$GOT" "$BASE"
check "no Slurm job of the test left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
