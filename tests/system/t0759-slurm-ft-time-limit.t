#!/bin/bash
# t0759-slurm-ft-time-limit (Slurm testbed): a 2-node job with
# time_limit 10 min (dtctld asks Slurm for the warning, --signal=B:USR1@60,
# SlurmWarnSeconds default); mid-run, its Slurm job's limit is lowered to
# 1 minute with scontrol (Slurm limits are whole minutes and checked about
# every 30 s: this makes the limit come in under a minute without a job
# that lasts minutes) -> slurmctld's own time-limit check sends USR1 to the
# batch shell, which forwards it to the agents -> every rank checkpoints at
# one step and stops -> the attempt ends with cause time_limit (not as a
# completed job) -> the next attempt is a new Slurm job that resumes from
# that final checkpoint, losing no step, and the job completes with the
# parameters of an uninterrupted run (world 2).  Attempt 1 runs ~200 ms
# steps (--inject-slow 0:1000, so that it is still running when the
# warning comes), later attempts full speed: the slowness does not change
# the parameters.
: "${FT_STEPS:=300}"
. "$(dirname "$0")/ft-slurm-lib.sh"
ft_slurm_up 2
BASE=$(baseline 2) || bail "the baseline run failed"
echo "# uninterrupted run (world 2): params_crc32c $BASE"

SPEC=$(dttrain_spec tlimit 2 "" '{"time_limit": 600}' | jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-slow 0:1000; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "the job runs past step 22 (a checkpoint committed)" wait_step "$ID" 22 90
SJ=$(curl -s "$URL/v1/jobs/$ID" | jq -r '.data.attempts[0].slurm_job_id')
[[ "$SJ" =~ ^[0-9]+$ ]] || bail "attempt 1 has no Slurm job id ($SJ)"
scontrol show job "$SJ" | grep -o 'TimeLimit=[^ ]*' | sed 's/^/# Slurm job '"$SJ"': /'
T0=$(now_ms)
check "the Slurm job $SJ's time limit is lowered to 1 minute" scontrol update jobid="$SJ" TimeLimit=1
echo "# limit lowered at step $(job_step "$ID"); the warning comes with slurmctld's next time-limit check (<= ~30 s)"
check "the job completes" wait_state "$ID" completed 120
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/j.json"
ft_slurm_ids "$ID" | sed 's/^/# attempt /'
grep -h 'SIGUSR1' "$TMP"/users/*/*batch* 2>/dev/null | head -2 | sed 's/^/# batch: /'
# The failure is injected by slurmctld: the moment the controller got the
# warning (its 'signal' event) is the injection of the timeline.
api GET "/v1/jobs/$ID/events" > "$TMP/ev.json"
SIG_MS=$(jq -r '[.data[] | select(.kind == "signal")][0].time // empty' "$TMP/ev.json" \
    | python3 -c 'import sys, datetime; t = sys.stdin.read().strip(); print(int(datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000) if t else "")')
echo "# limit lowered +0.000 s; SIGUSR1 reached the controller $([ -n "$SIG_MS" ] && echo "+$(( (SIG_MS - T0) / 1000 )) s" || echo never) later"
echo "# (timeline: times relative to the SIGUSR1 reaching the controller)"
timeline "$ID" "${SIG_MS:-$T0}"
check "attempt 1 ended with cause time_limit after a committed final checkpoint" \
    jqt '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "time_limit"
         and .data.attempts[0].evidence.final_checkpoint_committed' "$TMP/j.json"
check "a signal event (SIGUSR1) was recorded" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM events WHERE job_id = $ID AND kind = 'signal' AND detail LIKE '%SIGUSR1%'")" -ge 1
SJ2=$(jq -r '.data.attempts[1].slurm_job_id' "$TMP/j.json")
check "attempt 2 is a new Slurm job ($SJ2)" test "$SJ2" -gt 0 -a "$SJ2" != "$SJ"
R=$(jq '.data.attempts[1].resume_step' "$TMP/j.json")
curl -s "$URL/v1/jobs/$ID/checkpoints" > "$TMP/c.json"
# The final checkpoint: the newest one attempt 1 committed (the retention
# of 3 may have deleted it since: it has a commit time either way).
FINAL=$(jq '[.data[] | select(.attempt == 1 and .commit_time != null and .state != "pending") | .step] | max // -1' "$TMP/c.json")
check "attempt 2 resumed from attempt 1's final committed checkpoint (step $R = $FINAL, past step 22)" \
    test "$R" -eq "$FINAL" -a "$FINAL" -gt 22 || jq -c '.data[] | {step, attempt, state, commit_time}' "$TMP/c.json" | diag
check "no step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -eq 0
check "the job result: $FT_STEPS steps" jqt ".data.result.steps == $FT_STEPS" "$TMP/j.json"
GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
check "final params_crc32c $GOT equals the uninterrupted run's $BASE" same_params "$ID" "$GOT" "$BASE"
check "no Slurm job left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
done_testing
