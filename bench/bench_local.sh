# bench_local.sh: part "local" of bench/run (sourced by bench_parts.sh; uses
# rec, note, say, start_ctld, stop_ctld, wait_for, calc, B, TMP, REPS).
#
# The speed figures the system tests no longer assert, each measured with
# the local launcher and the tests' own trainer (tests/system/steptrainer,
# 2 nodes x 1 rank, steps of 250 ms, heartbeats every 100 ms) and reported
# against its goal by summarize.py:
#   - the run record of a job without failure (t1000's job B): ETTR, ETTR
#     without start-up and shutdown, step time p50, samples per second;
#   - of a job whose attempt 1 exits at step 11 (t1000's job A): the lost
#     work time against lost steps x 250 ms;
#   - detection (t0400-t0402's setups, 2 nodes x 2 ranks, steps of 50 ms):
#     kill -9 of a rank to its trainer_exit event, SIGSTOP of a rank to its
#     hang event (hang timeout 3 s), kill -9 of an agent to its trainers'
#     end.

# loc_ms ISO: epoch milliseconds of the controller's "2026-...T...Z".
loc_ms () { date -d "$1" +%s%3N 2>/dev/null; }
loc_now () { date +%s%3N; }
# loc_event_ms ID KIND [RANK]: the time of job ID's first KIND event.
loc_event_ms () {
    local t
    t=$(curl -s "$URL/v1/jobs/$1/events" \
        | jq -r --arg k "$2" --arg r "${3:-}" \
            '[.data[] | select(.kind == $k and ($r == "" or (.rank | tostring) == $r))][0].time // empty')
    [ -n "$t" ] && loc_ms "$t"
}
loc_state () { curl -s "$URL/v1/jobs/$1" | jq -r '.data.state // empty'; }
# loc_ended ID: job ID is in a final state.
loc_ended () { case "$(loc_state "$1")" in completed|failed|cancelled) return 0 ;; esac; return 1; }
# loc_rank_pid ID R: the pid of rank R of job ID's live attempt.
loc_rank_pid () { curl -s "$URL/v1/jobs/$1/ranks" | jq -r --argjson r "$2" '.data[] | select(.rank == $r) | .pid // empty'; }
loc_alive () { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && return 0; done; return 1; }

part_local () {
    local ST=$B/tests/system/steptrainer d=$TMP/local rep id spec kind
    [ -x "$ST" ] || { note local "$ST not built (make -C $B/tests/system steptrainer): part skipped"; return; }
    say "local launcher: run record (2 x 250 ms-step jobs) and detection (rank kill, hang, agent kill) x $REPS"
    start_ctld "$d" local HeartbeatInterval=100ms NodeTimeout=3s || return
    for rep in $(seq "$REPS"); do
        # --- job B: no failure, 24 steps -----------------------------------------
        spec=$(jq -cn --arg t "$ST" --arg c "$d/ckpt" '{name: "clean", nodes: 2, ranks_per_node: 1,
            command: [$t, "--steps", "24", "--step-ms", "250"], checkpoint: {dir: $c, every_steps: 8, keep: 2},
            heartbeat: {interval_ms: 100}}')
        id=$(curl -s -X POST "$URL/v1/jobs" -d "$spec" | jq -r .data.id)
        wait_for 90 loc_ended "$id"
        if [ "$(loc_state "$id")" = completed ]; then
            curl -s "$URL/v1/jobs/$id/report" | jq .data > "$d/rb.$rep"
            rec local.ettr "$(jq '.ettr' "$d/rb.$rep")"
            rec local.ettr_steady "$(jq '.breakdown.kept_training_s / (.wall_since_start_s - .breakdown.startup_s - .breakdown.shutdown_s)' "$d/rb.$rep")"
            rec local.step_p50_ms "$(jq '.attempts[0].step_ms_p50' "$d/rb.$rep")"
            rec local.samples_per_s "$(jq '.throughput.samples_per_s' "$d/rb.$rep")"
        else
            note local "rep $rep: the failure-free job $id did not complete ($(loc_state "$id"))"
        fi
        # --- job A: attempt 1 exits at step 11, resumes from a checkpoint --------
        spec=$(jq -cn --arg t "$ST" --arg c "$d/ckpt" '{name: "runrecord", nodes: 2, ranks_per_node: 1,
            command: ["sh", "-c", "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exec \"$0\" --steps 20 --step-ms 250 --fail-at 11:7; else exec \"$0\" --steps 20 --step-ms 250; fi", $t],
            checkpoint: {dir: $c, every_steps: 4, keep: 5}, restart: {max_restarts: 2},
            heartbeat: {interval_ms: 100}}')
        id=$(curl -s -X POST "$URL/v1/jobs" -d "$spec" | jq -r .data.id)
        wait_for 120 loc_ended "$id"
        if [ "$(loc_state "$id")" = completed ]; then
            curl -s "$URL/v1/jobs/$id/report" | jq .data > "$d/ra.$rep"
            rec local.lost_work_ratio "$(jq 'if .lost_steps > 0 then .breakdown.lost_work_s / (.lost_steps * 0.25) else empty end' "$d/ra.$rep")"
        else
            note local "rep $rep: the job with a failure $id did not complete ($(loc_state "$id"))"
        fi
        # --- detection: kill -9 of a rank, SIGSTOP of a rank, kill -9 of an agent --
        for kind in kill hang agent; do
            spec=$(jq -cn --arg t "$ST" --arg k "$kind" '{name: ("detect-" + $k), nodes: 2, ranks_per_node: 2,
                command: [$t, "--steps", "100000", "--step-ms", "50"], restart: {max_restarts: 0},
                heartbeat: {interval_ms: 300, node_timeout_ms: 3000,
                            hang_timeout_ms: (if $k == "hang" then 3000 else 30000 end)}}')
            id=$(curl -s -X POST "$URL/v1/jobs" -d "$spec" | jq -r .data.id)
            if ! wait_for 30 eval '[ -n "$(loc_rank_pid "$id" 3)" ] && [ -n "$(loc_rank_pid "$id" 2)" ]'; then
                note local "rep $rep: $kind: the ranks of job $id did not start"
                curl -s -X POST "$URL/v1/jobs/$id/cancel" >/dev/null; continue
            fi
            sleep 1     # a few steps reported
            local p3 p2 t0 t1 agent
            p3=$(loc_rank_pid "$id" 3); p2=$(loc_rank_pid "$id" 2)
            case $kind in
            kill)
                t0=$(loc_now); kill -9 "$p3"
                wait_for 20 eval '[ -n "$(loc_event_ms "$id" trainer_exit 3)" ]' \
                    && rec local.detect_kill_ms "$(( $(loc_event_ms "$id" trainer_exit 3) - t0 ))" ;;
            hang)
                t0=$(loc_now); kill -STOP "$p3"
                wait_for 20 eval '[ -n "$(loc_event_ms "$id" hang 3)" ]' \
                    && rec local.detect_hang_over_ms "$(( $(loc_event_ms "$id" hang 3) - t0 - 3000 ))" ;;
            agent)
                # The agent of rank 3's node (not always local2: a node
                # that failed in earlier jobs is avoided).
                local node3
                node3=$(curl -s "$URL/v1/jobs/$id/ranks" | jq -r '.data[] | select(.rank == 3) | .node')
                agent=$(pgrep -f -- "dtagent .*--node $node3 .*--state-dir $d/" | head -n 1)
                [ -n "$agent" ] || { note local "rep $rep: agent of rank 3's node ($node3) not found"; continue; }
                t0=$(loc_now); kill -9 "$agent"
                wait_for 20 eval '! loc_alive "$p2" "$p3"' && t1=$(loc_now) \
                    && rec local.agent_kill_gone_ms "$((t1 - t0))" ;;
            esac
            curl -s -X POST "$URL/v1/jobs/$id/cancel" >/dev/null
            wait_for 20 loc_ended "$id"
        done
    done
    stop_ctld
}
