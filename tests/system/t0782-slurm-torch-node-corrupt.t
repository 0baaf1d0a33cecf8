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
#   3. a hot spare: the same job with restart.reform, DTCLIENT_TORCH_REFORM=1
#      and a spare node (3 + 1 nodes); the spare's standby process waits
#      warm in dtt.init_process_group, rank 1's node is killed, the
#      survivors never exit, the standby process takes over rank 1 (path
#      hot_spare, the same Slurm job) with the state of a survivor, and the
#      parameters again equal the uninterrupted run's.
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

# --- 3. a hot spare (restart.reform with DTCLIENT_TORCH_REFORM=1, spare_nodes
# 1): the spare's agent starts the script ahead of time as a standby
# process (DT_STANDBY=1: data, model and optimizer built, waiting in
# dtt.init_process_group); rank 1's node is killed, the surviving ranks
# never exit, the standby process takes over rank 1 (restart path
# hot_spare, the same Slurm job and step), receives the state from a
# survivor, and the parameters equal the uninterrupted run's.
"$TESTBED" start-node "$VICTIM" >/dev/null 2>&1 || true
T3=$(now_ms)
submit "$(torch_spec thotspare 3 "--sleep-ms 20" \
    '{"spare_nodes": 1, "restart": {"reform": true}, "env": {"DTCLIENT_TORCH_REFORM": "1"},
      "heartbeat": {"interval_ms": 200, "node_timeout_ms": 1000}}')" || bail "3: submit failed"
check "3: the job runs" wait_step "$ID" 1 90
curl -s "$URL/v1/jobs/$ID" > "$TMP/j3a.json"
SJ=$(jq -r '.data.attempts[0].slurm_job_id' "$TMP/j3a.json")
SPARE=$(jq -r '.data.attempts[0].nodes[] | select(.spare) | .node' "$TMP/j3a.json")
VICTIM=$(rank_node "$ID" 1)
[ -n "$SPARE" ] && [ -n "$VICTIM" ] || bail "3: no spare ($SPARE) or rank 1 node ($VICTIM)"
# The spare is hot once its standby process said so (its log, in the
# agent's run directory of the job).
sb_log () { find "$TMP" -path "*dt-$ID-*" -name 'standby-0.err' 2>/dev/null | head -n 1; }
check "3: the spare $SPARE's standby process is warm and waits" \
    wait_for 60 eval 'SB=$(sb_log); [ -n "$SB" ] && grep -q "standby 0: warm, waiting" "$SB"'
check "3: the job runs past step 40" wait_step "$ID" 40 60
echo "# 3: Slurm job $SJ, spare $SPARE; killing $VICTIM (rank 1's node) at step $(job_step "$ID")"
T0=$(now_ms)
"$TESTBED" kill-node "$VICTIM" >/dev/null || fail "3: kill-node $VICTIM"
check "3: the job completes" wait_state "$ID" completed 120
ft_check_user "$ID" "$SJ"
api GET "/v1/jobs/$ID" > "$TMP/j3.json"
api GET "/v1/jobs/$ID/events" > "$TMP/ev3.json"
timeline "$ID" "$T0"
jq -c '.data.attempts[] | {attempt, state, cause, cause_node, restart_path, resume_step, nodes: [.nodes[] | {node, node_rank, spare}]}' "$TMP/j3.json" | sed 's/^/# 3: /'
grep -h "standby\|re-formed\|takes over" "$SB" | sed 's/^/# 3: /'
check "3: attempt 1 failed with node_lost on $VICTIM" \
    jqt --arg v "$VICTIM" '.data.attempts[0].state == "failed" and .data.attempts[0].cause == "node_lost" and .data.attempts[0].cause_node == $v' "$TMP/j3.json"
check "3: attempt 2 re-formed with the hot spare in the same Slurm job $SJ (restart_path hot_spare), the last attempt" \
    jqt --argjson sj "$SJ" '(.data.attempts | length) == 2 and .data.attempts[1].restart_path == "hot_spare" and .data.attempts[1].slurm_job_id == $sj' "$TMP/j3.json"
check "3: the spare $SPARE took node rank 1, $VICTIM excluded" \
    jqt --arg s "$SPARE" --arg v "$VICTIM" '([.data.attempts[1].nodes[] | select(.node_rank == 1) | .node] == [$s])
         and (.data.exclude | index($v) != null)' "$TMP/j3.json"
check "3: the standby process started ahead of time took over rank 1 and joined with the state of a survivor" \
    eval 'grep -q "standby: takes over rank 1 in attempt 2" "$SB" && grep -q "rank 1: re-formed as attempt 2 at step [0-9]* (state from rank [02]; joined" "$SB"'
check "3: the surviving ranks never exited (no rank_exit in attempt 1)" \
    jqt '[.data[] | select(.kind == "rank_exit" and .attempt == 1)] == []' "$TMP/ev3.json"
check "3: resumed from the survivors' memory: no step lost (lost $STEPS_LOST)" test "$STEPS_LOST" -ge 0 -a "$STEPS_LOST" -le 1
check "3: the job result: $TORCH_STEPS steps" jqt ".data.result.steps == $TORCH_STEPS" "$TMP/j3.json"
GOT=$(jq -r .data.result.params_sha256 "$TMP/j3.json")
check "3: final params_sha256 equals the uninterrupted run's" same "$GOT" "$BASE"
check "3: no Slurm job of the test left" wait_for 20 eval '[ -z "$(squeue -h 2>/dev/null)" ]'
check "3: no trainer left on any node" wait_for 10 eval '[ -z "$(ft_trainers_left)" ]'
echo "# 3: part 3 took $(( ($(now_ms) - T3) / 1000 )) s"
done_testing
