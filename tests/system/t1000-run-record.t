#!/bin/bash
# t1000-run-record: the run record (provenance, goodput) with real agents and a real
# libdtclient trainer (steptrainer), local launcher.
#
# Job A fails once: attempt 1's ranks exit at step F (after reporting steps
# up to F-1; a step takes 250 ms and heartbeats come every 100 ms, so the
# controller has seen step F-1); attempt 2 resumes from the newest committed
# checkpoint.  Checks: the report's parts add up to the wall time within
# 1%; lost work = (F-1) - the resumed checkpoint's step; the failure is
# counted by cause and node; the provenance of both attempts is stored and
# shown (version, trainer and data-file hashes, spec, env, machine) and the
# second names the checkpoint it resumed from (step and manifest sha256);
# every manifest carries the provenance of the attempt that committed it.
#
# Job B runs without failure: no lost work, no failure, ETTR in (0, 1].
#
# How fast (ETTR close to 1, step times of 250 ms, samples per second, lost
# work time) is measured by bench/run (part local, bench/bench_local.sh), not asserted
# here: this test checks what the report says, not the machine's speed.
. "$(dirname "$0")/ctld-lib.sh"
STEPTRAINER=$TOP_BUILDDIR/tests/system/steptrainer
DTCTL=$TOP_BUILDDIR/orchestrator/cli/dtctl
[ -x "$STEPTRAINER" ] || skip_all "steptrainer not built"
command -v sha256sum >/dev/null || skip_all "sha256sum not installed"

write_conf "MetricsPerJob=yes"
start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"

F=11            # attempt 1 exits at step F (steps 1..F-1 are reported)
STEPS=20
head -c 100000 /dev/urandom > "$TMP/data.bin"       # a "data file" named in the command

# --- job A: one injected failure ---------------------------------------------
SPEC=$(jq -n --arg t "$STEPTRAINER" --arg c "$TMP/ckpt" --arg d "$TMP/data.bin" \
          --argjson f $F --argjson s $STEPS '{
    name: "runrecord", nodes: 2, ranks_per_node: 1,
    command: ["sh", "-c", "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" --steps \($s) --step-ms 250 --fail-at \($f):7; else exec \"$0\" --steps \($s) --step-ms 250; fi", $t, $d],
    env: {RUN_RECORD_TEST: "yes"},
    checkpoint: {dir: $c, every_steps: 4, keep: 5},
    restart: {max_restarts: 2},
    heartbeat: {interval_ms: 100}}')
api POST /v1/jobs -d "$SPEC" > "$TMP/s.json"
check "job A: submit 201" test "$(status)" = 201
A=$(jq -r .data.id "$TMP/s.json")

# --- job B: no failure, run alongside job A (its steps sleep: the two do not
# slow each other down) -----------------------------------------------------------
SPEC=$(jq -n --arg t "$STEPTRAINER" --arg c "$TMP/ckpt" '{
    name: "clean", nodes: 2, ranks_per_node: 1,
    command: [$t, "--steps", "24", "--step-ms", "250"],
    checkpoint: {dir: $c, every_steps: 8, keep: 2},
    heartbeat: {interval_ms: 100}}')
api POST /v1/jobs -d "$SPEC" > "$TMP/sb.json"
check "job B: submit 201" test "$(status)" = 201
B=$(jq -r .data.id "$TMP/sb.json")

# While it runs: the report is live, and /metrics has its gauges.
wait_for 30 eval "curl -s $URL/v1/jobs/$A | jqt '.data.state == \"running\" and (.data.step // 0) >= 2'"
api GET /v1/jobs/$A/report > "$TMP/live.json"
check "live report: 200, not final" jqt '.data.final == false and .data.state == "running"' "$TMP/live.json"
curl -s "$URL/metrics" > "$TMP/metrics.txt"
check "/metrics: dtctld_job_ettr and dtctld_job_lost_steps of the running job" \
    sh -c "grep -q '^dtctld_job_ettr{job=\"$A\"} ' $TMP/metrics.txt && grep -q '^dtctld_job_lost_steps{job=\"$A\"} ' $TMP/metrics.txt"
if command -v promtool >/dev/null; then
    check "promtool check metrics (with the goodput gauges)" sh -c "promtool check metrics < $TMP/metrics.txt"
else
    ok "promtool check metrics # SKIP promtool not installed"
fi

check "job A completes" wait_for 90 sh -c "test \"\$(curl -s $URL/v1/jobs/$A | jq -r .data.state)\" = completed"
check "its last attempt succeeds" wait_for 20 sh -c "test \"\$(curl -s $URL/v1/jobs/$A | jq -r '.data.attempts[-1].state')\" = succeeded"
api GET /v1/jobs/$A > "$TMP/a.json"
api GET /v1/jobs/$A/report > "$TMP/ra.json"
check "report: 200" test "$(status)" = 200
jq .data "$TMP/ra.json" > "$TMP/ra"
R=$(jq -r '.data.attempts[1].resume_step' "$TMP/a.json")
check "two attempts; attempt 2 resumed from a checkpoint (step $R)" \
    jqt '.data.attempt == 2 and .data.attempts[0].state == "failed" and (.data.attempts[1].resume_step | type) == "number"' "$TMP/a.json"

# Parts add up to the wall time (within 1%), and each part is its own figure.
check "the parts add up to the wall time within 1%" jqt '
    ([.breakdown | to_entries[] | select(.key != "unaccounted_s") | .value] | add) as $sum
    | .wall_s > 0 and (($sum - .wall_s) | fabs) <= 0.01 * .wall_s' "$TMP/ra"
check "wall time = end - submission of the job" jqt '
    (.wall_s - (((.end_time | sub("\\.[0-9]+Z$"; "Z") | fromdate) - (.submit_time | sub("\\.[0-9]+Z$"; "Z") | fromdate)))) | fabs < 1.5' "$TMP/ra"
# (detection may round to 0: the agent reports a rank's exit at once)
check "kept training, lost work and restart are > 0, detection >= 0" jqt '
    .breakdown.kept_training_s > 0 and .breakdown.lost_work_s > 0
    and .breakdown.detection_s >= 0 and .breakdown.restart_s > 0' "$TMP/ra"
check "final report" jqt '.final == true and .state == "completed"' "$TMP/ra"

# Lost work = steps between the resumed checkpoint and the failure.
check "attempt 1 reached step $((F - 1)) (its last reported step)" \
    jqt ".attempts[0].last_step == $((F - 1))" "$TMP/ra"
check "lost steps = $((F - 1)) - $R = $((F - 1 - R))" \
    jqt ".lost_steps == $((F - 1 - R)) and .attempts[0].lost_steps == $((F - 1 - R)) and .attempts[1].lost_steps == 0" "$TMP/ra"
check "kept steps = $STEPS (the final lineage: 1..$R then $((R + 1))..$STEPS)" \
    jqt ".kept_steps == $STEPS and .steps_reached == $STEPS" "$TMP/ra"
check "failures: 1, trainer_exit, on a local node; MTBF given" jqt '
    .failures.count == 1 and .failures.by_cause.trainer_exit == 1
    and ((.failures.by_node | to_entries[0].key) | startswith("local"))
    and .failures.mtbf_s > 0 and .failures.list[0].step_reached == '$((F - 1))'
    and .failures.list[0].next_resume_step == '"$R" "$TMP/ra"
check "ETTR = kept / wall since first start, in (0, 1)" jqt '
    .ettr > 0 and .ettr < 1 and ((.ettr - .breakdown.kept_training_s / .wall_since_start_s) | fabs) < 1e-6' "$TMP/ra"
check "step times of both attempts: 0 < p50 <= p90 <= p99" jqt '
    (.attempts | length) == 2 and all(.attempts[]; (.step_ms_p50 | type) == "number" and .step_ms_p50 > 0
        and .step_ms_p50 <= .step_ms_p90 and .step_ms_p90 <= .step_ms_p99)' "$TMP/ra"
check "throughput: a samples per second figure" jqt '(.throughput.samples_per_s | type) == "number" and .throughput.samples_per_s > 0' "$TMP/ra"

# Provenance of both attempts, stored in SQLite and shown per attempt.
DB=$TMP/state/dtctld.db
check "provenance stored in SQLite for both attempts" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM attempts WHERE job_id = $A AND json_extract(provenance, '\$.spec_sha256') IS NOT NULL AND json_extract(provenance, '\$.machine.nodes') IS NOT NULL")" = 2
VERSION=$("$DTCTLD" --version)
check "provenance: dtctl version and source revision of the build" jqt --arg v "$VERSION" '
    (.data.attempts | length) == 2 and all(.data.attempts[]; .provenance.version == $v and (.provenance.source_revision | length) > 0
        and .provenance.dtctl_version == ($v | split(" ")[1]))' "$TMP/a.json"
SHPATH=$(jq -r '.data.attempts[0].provenance.trainer.path' "$TMP/a.json")
check "provenance: the trainer command and the sha256 of its binary ($SHPATH)" jqt --arg h "$(sha256sum < "$SHPATH" | cut -d' ' -f1)" '
    (.data.attempts | length) == 2 and all(.data.attempts[]; .provenance.command == .provenance.spec.command and .provenance.trainer.sha256 == $h
        and .provenance.trainer.hash == "sha256")' "$TMP/a.json"
check "provenance: sha256 of the files named in the command (steptrainer, data.bin)" jqt \
    --arg t "$(sha256sum < "$STEPTRAINER" | cut -d' ' -f1)" --arg d "$(sha256sum < "$TMP/data.bin" | cut -d' ' -f1)" '
    (.data.attempts | length) == 2 and all(.data.attempts[]; ([.provenance.files[].sha256] | index($t) != null and index($d) != null))' "$TMP/a.json"
check "provenance: the spec as stored, and the env set for the trainers" jqt \
    --argjson spec "$(jq .data.spec "$TMP/a.json")" '
    (.data.attempts | length) == 2 and all(.data.attempts[]; .provenance.spec == $spec and .provenance.env.RUN_RECORD_TEST == "yes"
        and .provenance.env_set_by_agent.WORLD_SIZE == "2"
        and .provenance.env_set_by_agent.TORCHELASTIC_RUN_ID == "dt-\(.job)-a\(.attempt)")' "$TMP/a.json"
check "provenance: the machine (2 nodes with CPU model, cores, memory)" jqt '
    (.data.attempts | length) == 2 and all(.data.attempts[]; (.provenance.machine.nodes | length) == 2
        and all(.provenance.machine.nodes[]; (.cpu_model | length) > 0 and .cores >= 1 and .mem_mb > 0)
        and .provenance.machine.launcher == "local")' "$TMP/a.json"
check "provenance: attempt 1 resumed from nothing" jqt '.data.attempts[0].provenance.resumed_from == null' "$TMP/a.json"
M=$TMP/ckpt/$A/step-$R/manifest.json
check "provenance: attempt 2 names the checkpoint it resumed from (step $R, manifest sha256)" jqt \
    --arg h "$(sha256sum < "$M" | cut -d' ' -f1)" --argjson r "$R" '
    .data.attempts[1].provenance.resumed_from.step == $r and .data.attempts[1].provenance.resumed_from.manifest_sha256 == $h' "$TMP/a.json"
# every_manifest_has_provenance: there is at least one manifest, and each
# names its spec, machine and trainer.
every_manifest_has_provenance () {
    local m found=no
    for m in "$TMP/ckpt/$A"/step-*/manifest.json; do
        jqt '.provenance.spec_sha256 != null and .provenance.machine.nodes != null and .provenance.trainer.sha256 != null' "$m" \
            || return 1
        found=yes
    done
    [ $found = yes ]
}
check "every committed manifest carries the provenance of the attempt that wrote it" every_manifest_has_provenance

if [ -x "$DTCTL" ]; then
    "$DTCTL" --controller "$URL" report "$A" > "$TMP/report.txt" 2>&1
    check "dtctl report prints ETTR and the breakdown" sh -c "grep -q '^ETTR' $TMP/report.txt && grep -q 'lost_work_s' $TMP/report.txt"
fi

# --- job B (submitted with job A, above): no failure -----------------------------
check "job B completes" wait_for 60 sh -c "test \"\$(curl -s $URL/v1/jobs/$B | jq -r .data.state)\" = completed"
api GET /v1/jobs/$B/report | jq .data > "$TMP/rb"
check "job B: no lost work, no failure, no restart" jqt '
    .lost_steps == 0 and .breakdown.lost_work_s == 0 and .failures.count == 0
    and .breakdown.restart_s == 0 and .breakdown.detection_s == 0 and .kept_steps == 24' "$TMP/rb"
check "job B: the parts add up to the wall time within 1%" jqt '
    ([.breakdown | to_entries[] | select(.key != "unaccounted_s") | .value] | add) as $sum
    | (($sum - .wall_s) | fabs) <= 0.01 * .wall_s' "$TMP/rb"
check "job B: ETTR in (0, 1] ($(jq .ettr "$TMP/rb"))" jqt '.ettr > 0 and .ettr <= 1' "$TMP/rb"
check "job B: start-up, shutdown and kept training are figures within the wall time" jqt '
    .breakdown.kept_training_s > 0 and .breakdown.startup_s >= 0 and .breakdown.shutdown_s >= 0
    and .breakdown.kept_training_s + .breakdown.startup_s + .breakdown.shutdown_s <= .wall_since_start_s + 0.01' "$TMP/rb"
check "job B: its provenance names the steptrainer binary itself" jqt --arg h "$(sha256sum < "$STEPTRAINER" | cut -d' ' -f1)" \
    '.data.attempts[0].provenance.trainer.sha256 == $h and .data.attempts[0].provenance.script == null' <(api GET /v1/jobs/$B)
echo "# job A: $(jq -c '{wall_s, ettr, lost_steps, breakdown}' "$TMP/ra")"
echo "# job B: $(jq -c '{wall_s, ettr, breakdown}' "$TMP/rb")"

api GET /v1/jobs/999999/report >/dev/null
check "a report of an unknown job: 404" test "$(status)" = 404
kill -TERM "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null
check "PRAGMA integrity_check" test "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok
done_testing
