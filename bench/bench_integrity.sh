# bench_integrity.sh: part "integrity" of bench/run (sourced by
# bench_parts.sh; uses rec, note, say, start_ctld, stop_ctld, wait_for, calc,
# B, TMP, REPS, PY, DTTRAIN, CORPUS, MODEL, STEPS).
#
# What dttrain's silent-error guards cost and how fast they act:
#   - the fingerprint (CRC32C per tensor of the parameters, a device copy
#     first on a GPU): seconds per check from dttrain's own result
#     (fingerprint_s / fingerprints, measured with a check every step, 2
#     ranks), against the step time of the same run, as a fraction of a
#     step at the default interval (integrity.every_steps 50; goal < 0.5%),
#     for the part-3 MLP (~5.5 M parameters) and a small transformer; and
#     the NaN/Inf scan of each rank's own gradient, which runs every step
#     with data parallelism (grad_scan_s; without it the gradient norm's
#     own pass says whether the rank's gradient is finite), as a fraction
#     of a step;
#   - detection latency in steps and recovery time, with the local launcher
#     (3 nodes x 1 rank, the tests' small MLP slowed to ~25 ms steps): a
#     bit flip in rank 1 before step 45, fingerprints every 10 steps,
#     integrity.action rollback: the divergence is seen at step 50 (latency
#     5 steps, at most every_steps - 1 + the reports' travel); from the
#     replica_divergence event to the first step of the re-run, and from
#     the (estimated) injection time to it.
INTEG_DEFAULT_EVERY=50

# integ_cost NAME args...: one run of 2 ranks (gloo through a directory)
# with a fingerprint every step; rank 0's result.
integ_cost () {
    local name=$1 out=$TMP/integ.$1.json rdv=$TMP/integ.rdv.$1.$RANDOM r pids=""; shift
    mkdir -p "$rdv"
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 OPENBLAS_NUM_THREADS=1 "$DTTRAIN" "$@" --rendezvous-dir "$rdv" \
            --integrity-every 1 --quiet --val-samples 16 > "$out.$r" 2> "$TMP/integ.$name.err.$r" &
        pids="$pids $!"
    done
    for r in $pids; do wait "$r" || { note integrity "$name: dttrain failed: $(tail -1 "$TMP/integ.$name.err.0")"; return; }; done
    cp "$out.0" "$out"
    local per step scan
    per=$(jget "$out" '.fingerprint_s / .fingerprints')
    step=$(jget "$out" '.wall_s / .steps_run')
    scan=$(jget "$out" '.grad_scan_s / .steps_run')
    rec "integrity.fp_ms_$name" "$(calc "$per * 1000")"
    rec "integrity.step_ms_$name" "$(calc "$step * 1000")"
    # the step without this run's per-step fingerprint
    rec "integrity.fp_frac_$name" "$(calc "100.0 * $per / ($INTEG_DEFAULT_EVERY * ($step - $per))")"
    # the NaN/Inf scan of the rank's own gradient runs every step
    rec "integrity.scan_frac_$name" "$(calc "100.0 * $scan / ($step - $per)")"
}

part_integrity () {
    local d=$TMP/integrity rep id spec base
    say "integrity: fingerprint cost per check (MLP ~5.5 M, transformer), detection latency and recovery x $REPS"
    for rep in $(seq "$REPS"); do
        integ_cost mlp "${MODEL[@]}" --steps "$STEPS"
        integ_cost tfm --data "$CORPUS" --model transformer --context 64 --width 128 --heads 4 \
            --layers 4 --global-batch 32 --steps "$STEPS"
    done
    start_ctld "$d" local HeartbeatInterval=100ms || return
    for rep in $(seq "$REPS"); do
        spec=$(jq -cn --arg t "$DTTRAIN" --arg c "$d/ckpt" --arg data "$CORPUS" '{name: "integrity", nodes: 3,
            ranks_per_node: 1,
            command: [$t, "--data", $data, "--steps", "100", "--global-batch", "32", "--model", "mlp", "--hidden", "64",
                      "--layers", "2", "--val-samples", "16", "--quiet", "--inject-slow", "0:25",
                      "--inject-bitflip", "1:45:w0:3"],
            env: {OPENBLAS_NUM_THREADS: "1"},
            checkpoint: {dir: $c, every_steps: 20, keep: 5}, heartbeat: {interval_ms: 100},
            integrity: {every_steps: 10, action: "rollback"}}')
        id=$(curl -s -X POST "$URL/v1/jobs" -d "$spec" | jq -r .data.id)
        wait_for 120 loc_ended "$id"
        curl -s "$URL/v1/jobs/$id/events" > "$d/ev.$rep"
        curl -s "$URL/v1/jobs/$id/metrics" > "$d/mt.$rep"
        if [ "$(loc_state "$id")" != completed ]; then
            note integrity "rep $rep: the bit-flip job $id did not complete ($(loc_state "$id"))"
            continue
        fi
        "$PY" - "$d/ev.$rep" "$d/mt.$rep" > "$d/fig.$rep" <<'PYEOF'
import json, sys, datetime
ev = json.load(open(sys.argv[1]))["data"]
mt = json.load(open(sys.argv[2]))["data"]["points"]
def ms(t):
    return datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000
div = [e for e in ev if e["kind"] == "replica_divergence"]
first = [e for e in ev if e["kind"] == "first_step" and e["attempt"] == 2]
if div and first:
    # the injection (before step 45): its time estimated from attempt 1's
    # step metrics (the nearest sampled steps around 44)
    a1 = sorted((p["step"], ms(p["time"])) for p in mt if p["attempt"] == 1)
    inj = None
    for (s0, t0), (s1, t1) in zip(a1, a1[1:]):
        if s0 <= 44 <= s1 and s1 > s0:
            inj = t0 + (t1 - t0) * (44 - s0) / (s1 - s0)
    print("latency_steps", div[0]["data"]["step"] - 45)
    print("detect_to_good_ms", ms(first[0]["time"]) - ms(div[0]["time"]))
    if inj:
        print("inject_to_good_ms", ms(first[0]["time"]) - inj)
PYEOF
        rec integrity.latency_steps "$(awk '$1 == "latency_steps" {print $2}' "$d/fig.$rep")"
        rec integrity.detect_to_good_ms "$(awk '$1 == "detect_to_good_ms" {print $2}' "$d/fig.$rep")"
        rec integrity.inject_to_good_ms "$(awk '$1 == "inject_to_good_ms" {print $2}' "$d/fig.$rep")"
    done
    stop_ctld
}
