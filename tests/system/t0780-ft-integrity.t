#!/bin/bash
# t0780-ft-integrity (local launcher): silent errors.  Each job runs with
# integrity.action rollback, fingerprints every 10 steps and checkpoints
# every 20; faults come from dttrain's injection flags.
# 1. a bit flip in rank 1's parameters before step 45 (3 replicas): the
#    divergence is seen at step 50, rank 1 on local2 named by majority, the
#    job rolls back to step 40 (checkpoints after it marked bad); the
#    controller is killed and restarted before the re-run, which passes
#    step 50 cleanly -> the hardware (the fault awaiting its re-run was
#    read back from the database): local2 gets a
#    node-health failure and is excluded; the job completes with the
#    parameters of an uninterrupted run.
# 2. a NaN in rank 1's gradient of step 45 (first attempt only): detected
#    at 45, the update skipped, rolled back to 40, not reproduced -> the
#    hardware; the re-run then loses rank 1 at step 65: rank 0's
#    just-in-time checkpoint records its fingerprint, verified at the
#    resume (a copy with a forged one is refused); completes identical to
#    an uninterrupted run.
# 3. a corrupted batch at step 70 (every attempt) with skip_bad_batches: a
#    loss spike at 70, rolled back, reproduced at 70 -> the data; rolled
#    back once more (to a checkpoint before 70) and step 70 skipped; completes identical to a run that
#    skips it; the report says so.
# 4. integrity checks off, a bit flip before step 25, then a crash at 50
#    (no just-in-time checkpoint: a survivor would save its own replica):
#    the restart refuses the checkpoint written after the divergence (40)
#    by its fingerprints and resumes from 20.
# The MLP: its loss on the corrupted batch stands far above the window's
# spread at exactly one step (the small transformer's spike may spill into
# the next steps and trip the rule twice).  t0787 runs the transformer.
FT_MODEL="--model mlp --hidden 64 --layers 2"
. "$(dirname "$0")/ft-lib.sh"

FT_STEPS=100
MODEL_ARGS="--data $CORPUS --steps $FT_STEPS --global-batch 32 $FT_MODEL --val-samples 16 --quiet"
SLOW="--inject-slow 0:25"
P=$(free_port)
write_conf "ListenPort=$P"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
BASE3=$(baseline 3) || bail "the baseline run (3 ranks) failed"
BASE2=$(baseline 2) || bail "the baseline run (2 ranks) failed"
echo "# uninterrupted runs: params_crc32c $BASE3 (3 ranks), $BASE2 (2 ranks)"
INTEG='{"integrity": {"every_steps": 10, "action": "rollback"}, "checkpoint": {"keep": 5}}'

# run NAME NODES 'dttrain args' [merge]: submit, wait for completion, save
# the job, its events and checkpoints in $TMP/NAME.{job,ev,ck}.json.
run () { run_spec "$1" "$(dttrain_spec "$1" "$2" "$SLOW $3" "${4:-$INTEG}")"; }
# run_spec NAME SPEC: the same for a spec of its own.
run_spec () { submit "$2" && finish_job "$1"; }
# finish_job NAME: wait for the job $ID and save its records.
finish_job () {
    wait_state "$ID" completed 120 || { api GET "/v1/jobs/$ID" | jq -c '.data | {state, failure}' | sed 's/^/# /'; return 1; }
    wait_att "$ID" succeeded 20
    api GET "/v1/jobs/$ID" > "$TMP/$1.job.json"
    api GET "/v1/jobs/$ID/events" > "$TMP/$1.ev.json"
    api GET "/v1/jobs/$ID/checkpoints" > "$TMP/$1.ck.json"
    jq -c '[.data.attempts[] | {attempt, cause, resume_step}]' "$TMP/$1.job.json" | sed 's/^/# /'
    jq -c '.data[] | select(.kind | test("divergence|nonfinite|spike|integrity|checkpoint_bad")) | [.attempt, .kind, .rank, .node, .detail]' \
        "$TMP/$1.ev.json" | sed 's/^/#   /'
}
ev () { jq "[.data[] | select(.kind == \"$2\")$3] | length" "$TMP/$1.ev.json"; }
# pending_is ID STEP:NODE: the fault of job ID awaiting its re-run, as the
# controller's database holds it ("" none).
pending_is () {
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT json_extract(state, '\$.pending.step') || ':' ||
        json_extract(state, '\$.pending.node') FROM job_integrity WHERE job_id = $1")" = "$2"
}

# 1. bit flip; the controller is killed (SIGKILL) after the rollback, before
# the re-run starts (its ranks wait for $TMP/go), and restarted
SPEC=$(dttrain_spec flip 3 "" "$INTEG" |
    jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS $SLOW --inject-bitflip 1:45:w0:3" --arg go "$TMP/go" \
    '.command = ["sh", "-c", "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then while [ ! -e \($go | @sh) ]; do sleep 0.1; done; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "bitflip: rolled back, the fault awaiting its re-run is in the database" \
    wait_for 60 pending_is "$ID" 50:local2
wait_for 30 sh -c "test \"\$(curl -s $URL/v1/jobs/$ID | jq '.data.attempts | length')\" = 2"
kill -9 "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "bitflip: dtctld killed (SIGKILL) and restarted on port $P" start_fg
touch "$TMP/go"
check "bitflip: the job completes" finish_job flip
check "bitflip: divergence seen at step 50, rank 1 on local2 named" \
    test "$(ev flip replica_divergence '| select(.attempt == 1 and .rank == 1 and .node == "local2" and .data.step == 50 and .data.majority != .data.fingerprints["1"])')" = 1
check "bitflip: attempt 1 rolled back, attempt 2 resumed from step 40" \
    jqt '.data.attempts[0].cause == "integrity_rollback" and .data.attempts[1].resume_step == 40' "$TMP/flip.job.json"
check "bitflip: no checkpoint after step 40 is committed (marked bad where one was)" \
    jqt '[.data[] | select(.attempt == 1 and .step > 40 and .state == "committed")] | length == 0' "$TMP/flip.ck.json"
check "bitflip: attributed to the hardware of local2, which is excluded" \
    jqt '.data.exclude | index("local2") != null' "$TMP/flip.job.json"
check "bitflip: the attribution event says hardware" \
    test "$(ev flip integrity_attributed '| select(.data.cause == "hardware" and .node == "local2")')" = 1
check "bitflip: nothing awaits a re-run any more" pending_is "$ID" ""
check "bitflip: local2 has a silent_data_corruption failure" \
    test "$(sqlite3 "$TMP/state/dtctld.db" "SELECT count(*) FROM node_health WHERE node = 'local2' AND kind = 'silent_data_corruption'")" -ge 1
GOT=$(jq -r .data.result.params_crc32c "$TMP/flip.job.json")
check "bitflip: final params_crc32c $GOT equals the uninterrupted run's $BASE3" same_params "$ID" "$GOT" "$BASE3"

# 2. NaN once; the re-run then loses rank 1 at step 65, and rank 0 writes a
# just-in-time checkpoint
SPEC=$(dttrain_spec nan 2 "" "$INTEG" |
    jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS $SLOW --inject-nan 1:45" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then exec \"$0\" \($a) --inject-crash 1:65; fi; exec \"$0\" \($a)", $t]')
check "nan: the job completes" run_spec nan "$SPEC"
check "nan: detected at step 45 on rank 1 (local2), the update skipped" \
    test "$(ev nan nonfinite '| select(.attempt == 1 and .rank == 1 and .node == "local2" and .data.step == 45)')" = 1
check "nan: rolled back to step 40 and attributed to the hardware" \
    jqt '.data.attempts[0].cause == "integrity_rollback" and .data.attempts[1].resume_step == 40
         and (.data.exclude | index("local2") != null)' "$TMP/nan.job.json"
JIT=$(jq -r '.data.attempts[2].resume_step' "$TMP/nan.job.json")
check "nan: attempt 2 lost rank 1, attempt 3 resumed from the just-in-time checkpoint of step $JIT" \
    jqt --slurpfile m "$TMP/ckpt/$ID/step-$JIT/manifest.json" \
        '.data.attempts[2].resume_step > 60 and $m[0].kind == "jit"' "$TMP/nan.job.json"
# Its shards (both written by rank 0) record rank 0's parameter fingerprint,
# which the resume verified; a copy whose recorded fingerprint is not that
# of its parameters is refused at load.
FPS=$(cat "$TMP/ckpt/$ID/step-$JIT"/rank-*.ckpt | grep -a -o 'params_fingerprint=dp:[0-9a-f]*' | sort -u)
check "nan: the just-in-time shards record one fingerprint ($FPS)" \
    test "$(echo "$FPS" | grep -c .)" = 1
cp -r "$TMP/ckpt/$ID/step-$JIT" "$TMP/jit-forged"
python3 -c 'import sys
for f in sys.argv[2:]:
    b = open(f, "rb").read(); open(f, "wb").write(b.replace(sys.argv[1].encode(), b"params_fingerprint=dp:00000000"))' \
    "$FPS" "$TMP/jit-forged"/rank-*.ckpt
rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 OPENBLAS_NUM_THREADS=1 \
        "$DTTRAIN" --rendezvous-dir "$rdv" $MODEL_ARGS --resume "$TMP/jit-forged" > /dev/null 2> "$TMP/forged.$r.err" &
    eval "P$r=\$!"
done
wait "$P0"; RC0=$?; wait "$P1"
check "nan: a forged copy is refused at load by its fingerprint (exit $RC0)" \
    sh -c "test $RC0 = 3 && grep -q 'loaded parameters have fingerprint' $TMP/forged.0.err"
GOT=$(jq -r .data.result.params_crc32c "$TMP/nan.job.json")
check "nan: final params_crc32c $GOT equals the uninterrupted run's $BASE2" same_params "$ID" "$GOT" "$BASE2"

# 3. corrupted data, skipped
SKIP=$(MODEL_ARGS="$MODEL_ARGS --inject-bad-batch 70 --skip-steps 70" baseline 2) || bail "the skip baseline failed"
check "data: the job completes" run data 2 "--inject-bad-batch 70" \
    '{"integrity": {"every_steps": 10, "action": "rollback", "skip_bad_batches": true}, "checkpoint": {"keep": 5}}'
check "data: a loss spike at step 70 in attempts 1 and 2" \
    test "$(ev data loss_spike '| select(.data.step == 70 and .attempt <= 2)')" = 2
check "data: attributed to the data (reproduced), batch positions recorded" \
    test "$(ev data integrity_attributed '| select(.data.cause == "data" and .data.step == 70 and (.data.batch.positions | length) > 0)')" = 1
check "data: rolled back twice, attempt 3 skipped step 70 and succeeded" \
    jqt '[.data.attempts[] | .cause] == ["integrity_rollback", "integrity_rollback", null]
         and .data.attempts[2].resume_step >= 60 and .data.attempts[2].resume_step < 70
         and .data.result.skipped_updates == 1
         and (.data.exclude | length) == 0' "$TMP/data.job.json"
api GET "/v1/jobs/$ID/report" > "$TMP/data.report.json"
check "data: the report lists the attribution" \
    jqt '[.data.integrity[]? | select(.kind == "integrity_attributed" and .data.cause == "data")] | length == 1' "$TMP/data.report.json"
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
"$DTCTL" --controller "$URL" show "$ID" > "$TMP/data.show.txt" 2>&1
check "data: dtctl show lists the spikes and the attribution" \
    sh -c "grep -q '^Integrity:' $TMP/data.show.txt && grep -q 'loss_spike  *70' $TMP/data.show.txt && grep -q 'integrity_attributed.*the data' $TMP/data.show.txt"
"$DTCTL" --controller "$URL" report "$ID" > "$TMP/data.report.txt" 2>&1
check "data: dtctl report lists the integrity events" \
    sh -c "grep -q '^integrity:' $TMP/data.report.txt && grep -q 'integrity_attributed' $TMP/data.report.txt"
curl -s "$URL/metrics" > "$TMP/metrics.txt"
# (counted since the controller's restart in case 1: the NaN and the data)
check "/metrics counts the detections and rollbacks" \
    sh -c "grep -q '^dtctld_integrity_detections_total{kind=\"loss_spike\"} 2$' $TMP/metrics.txt && grep -q '^dtctld_integrity_detections_total{kind=\"nonfinite\"} 1$' $TMP/metrics.txt && grep -q '^dtctld_integrity_rollbacks_total 3$' $TMP/metrics.txt"
GOT=$(jq -r .data.result.params_crc32c "$TMP/data.job.json")
check "data: final params_crc32c $GOT equals a run skipping step 70 ($SKIP)" same_params "$ID" "$GOT" "$SKIP"

# 4. a checkpoint written after an undetected divergence
SPEC=$(dttrain_spec late 2 "$SLOW" '{"integrity": {"every_steps": 0}, "checkpoint": {"keep": 5}}' |
    jq --arg t "$DTTRAIN" --arg a "$MODEL_ARGS $SLOW" '.command = ["sh", "-c",
  "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" \($a) --inject-bitflip 1:25:w0:3 --inject-crash 0:50 --no-jit; fi; exec \"$0\" \($a)", $t]')
submit "$SPEC" || bail "submit failed"
check "late: the job completes" wait_state "$ID" completed 150
wait_att "$ID" succeeded 20
api GET "/v1/jobs/$ID" > "$TMP/late.job.json"
api GET "/v1/jobs/$ID/events" > "$TMP/late.ev.json"
jq -c '[.data.attempts[] | {attempt, cause, resume_step, exit: .evidence.exit_code}]' "$TMP/late.job.json" | sed 's/^/# /'
check "late: the checkpoint of step 40 was refused at load (exit 3, fingerprint)" \
    jqt '[.data.attempts[1] | .evidence.exit_code == 3 and (.evidence.stderr_tail | test("fingerprint"))] == [true]
         and [.data.attempts[1,2] | .resume_step] == [40, 20]' "$TMP/late.job.json"
# (the steps the checkpoint_bad events name: each rank that refused a
# checkpoint may report it, so their number is not the point)
check "late: it was marked bad" test "$(sqlite3 "$TMP/state/dtctld.db" \
    "SELECT group_concat(s) FROM (SELECT DISTINCT json_extract(data, '\$.step') AS s FROM events
     WHERE job_id = $ID AND kind = 'checkpoint_bad' ORDER BY s)")" = "40"
GOT=$(jq -r .data.result.params_crc32c "$TMP/late.job.json")
check "late: final params_crc32c $GOT equals the uninterrupted run's $BASE2" same_params "$ID" "$GOT" "$BASE2"
done_testing
