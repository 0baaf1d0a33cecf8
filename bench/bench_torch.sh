# bench_torch.sh: part "torch" of bench/run: dtclient.torch (PyTorch DDP
# trainers under dtctl) on its example, examples/pytorch/gpt_train.py,
# 2 ranks, gloo on CPU.  Sourced by bench/run, which provides rec, note,
# say, jget, calc, wait_for, free_port, start_ctld, stop_ctld, run_ranks
# and B SRC TMP REPS PY.
#   1. per-step cost: the same script with and without dtclient.torch
#      (--plain), as dtctl jobs (local launcher, 1 node x 2 ranks, no
#      checkpoints), alternating: step time = the trainer's training wall
#      time / steps, CPU time per step of rank 0's process (all its
#      threads: steadier than wall time on a loaded machine), and the
#      library's own CPU time per step, as it measures it (the gradient
#      all-reduce's launch apart: the process group's call, which DDP
#      makes the same way without a hook; of it, the buckets' scaling
#      pass, which grows with the model, and the rest, which does not;
#      both 0 with two ranks on gloo, where dtclient.torch leaves the
#      reduction to DDP and brackets its wait);
#   2. checkpoint stall per checkpoint (training-thread time), asynchronous
#      (host copy, then a writer thread) and synchronous (--sync-save),
#      without an agent, a checkpoint every 10 steps; as a fraction of a
#      step;
#   3. kill -9 of rank 1 mid-run: kill to the first new step and the steps
#      lost, dtctl (local launcher, 2 nodes x 1 rank, checkpoint every 20
#      steps, just-in-time checkpoint) against torchrun --max_restarts 1 on
#      the same script (torchrun restarts it from its start).

TORCH_TRAIN=$SRC/examples/pytorch/gpt_train.py
TORCH_ENV=(PYTHONPATH="$SRC/agent/client/python" LD_LIBRARY_PATH="$B/agent/client/.libs")
TORCH_STEPS=${TORCH_STEPS:-200}
# the wider model of the per-step cost's second measurement
TORCH_WIDE=${TORCH_WIDE:---width 192 --layers 4}
# the measurements of the part (a subset for a quicker run)
TORCH_FIGURES=${TORCH_FIGURES:-"cost wide stall recovery"}

# torch_log_times FILE: "step time" of each "rank 0 step S ... time T" line.
torch_log_times () { sed -n 's/^.*rank 0 step \([0-9]*\) loss [^ ]* time \([0-9.]*\)$/\1 \2/p' "$1" 2>/dev/null; }

# torch_job_log D ID A: rank 0's log of attempt A of job ID (local launcher).
torch_job_log () { find "$1" -path "*job-$2.$3/*" -name 'rank-0.log' 2>/dev/null | head -n 1; }
torch_job_err () { find "$1" -path "*job-$2.$3/*" -name 'rank-0.err' 2>/dev/null | head -n 1; }

torch_spec () {  # torch_spec NODES RANKS_PER_NODE WORKDIR EVERY ARGS...
    local n=$1 r=$2 w=$3 e=$4; shift 4
    jq -cn --argjson n "$n" --argjson r "$r" --arg w "$w" --argjson e "$e" --arg py "$PY" \
        --arg t "$TORCH_TRAIN" --arg pp "$SRC/agent/client/python" --arg ld "$B/agent/client/.libs" \
        --argjson a "$(printf '%s\n' "$@" | jq -R . | jq -cs .)" '{name: "torch", nodes: $n, ranks_per_node: $r, workdir: $w,
          command: ([$py, $t] + $a),
          env: {PYTHONPATH: $pp, LD_LIBRARY_PATH: $ld, OMP_NUM_THREADS: "1"},
          checkpoint: {every_steps: $e, keep: 2}, restart: {max_restarts: 2},
          heartbeat: {interval_ms: 200, hang_timeout_ms: 60000}}'
}

# torch_step_cost DIR [KEY MODEL_ARGS...]: KEY (default torch) names the
# figures; MODEL_ARGS change the example's model (the wider one: a longer
# step, for the step time from which the fixed cost is under 1%).
torch_step_cost () {
    local d=$1 k=${2:-torch} rep v id log ms cpu plain lib pcpu lcpu self launch scale
    shift; [ $# -gt 0 ] && shift
    local model=("$@")
    for rep in $(seq "$REPS"); do
        for v in plain lib; do
            local extra=()
            [ $v = plain ] && extra=(--plain)
            id=$(curl -s -X POST "$URL/v1/jobs" -d "$(torch_spec 1 2 "$d" 0 --data "$CORPUS" \
                --steps "$TORCH_STEPS" "${model[@]}" "${extra[@]}")" | jq -r .data.id)
            wait_for 300 job_ended "$id"
            log=$(torch_job_log "$d" "$id" 1)
            ms=$(jget "$log" '1000 * .wall_s / .steps')
            cpu=$(jget "$log" '1000 * .cpu_s / .steps')
            if [ -z "$ms" ] || [ "$ms" = null ]; then
                note torch "step cost rep $rep ($v): job $id $(curl -s "$URL/v1/jobs/$id" | jq -r .data.state), no result in ${log:-no log}"
                continue 2
            fi
            if [ $v = plain ]; then plain=$ms; pcpu=$cpu; else lib=$ms; lcpu=$cpu; fi
            [ $v = lib ] && self=$(jget "$log" .dtclient_ms_per_step) \
                && launch=$(jget "$log" '.dtclient_launch_ms_per_step // 0') \
                && scale=$(jget "$log" '.dtclient_scale_ms_per_step // 0')
        done
        rec $k.plain_step_ms "$plain"; rec $k.lib_step_ms "$lib"
        rec $k.step_overhead_frac "$(calc "($lib - $plain) / $plain")"
        rec $k.plain_cpu_ms "$pcpu"; rec $k.lib_cpu_ms "$lcpu"
        rec $k.cpu_overhead_frac "$(calc "($lcpu - $pcpu) / $pcpu")"
        rec $k.self_ms "$self"; rec $k.self_frac "$(calc "$self / $pcpu")"
        rec $k.launch_ms "$launch"; rec $k.scale_ms "$scale"
        rec $k.fixed_frac "$(calc "($self - $scale) / $pcpu")"
        printf '   %s rep %d: step %.2f ms plain, %.2f ms with dtclient.torch (%+.2f%%); CPU/step %.2f ms plain, %.2f ms with it (%+.2f%%); its own CPU %.3f ms/step (%.2f%%)\n' \
            "$k" "$rep" "$plain" "$lib" "$(calc "100 * ($lib - $plain) / $plain")" "$pcpu" "$lcpu" \
            "$(calc "100 * ($lcpu - $pcpu) / $pcpu")" "$self" "$(calc "100 * $self / $pcpu")" >&2
    done
}

torch_stall () {
    local d=$1 rep mode out step_ms
    for rep in $(seq "$REPS"); do
        for mode in none async sync; do
            out=$d/stall.$rep.$mode
            local env=() extra=()
            case $mode in
                none) ;;
                async) env=(DT_CHECKPOINT_DIR="$d/ck.$rep.$mode" DT_CHECKPOINT_EVERY=10) ;;
                sync) env=(DT_CHECKPOINT_DIR="$d/ck.$rep.$mode" DT_CHECKPOINT_EVERY=10); extra=(--sync-save) ;;
            esac
            run_ranks 2 "$out" env "${TORCH_ENV[@]}" "${env[@]}" OMP_NUM_THREADS=1 \
                "$PY" "$TORCH_TRAIN" --data "$CORPUS" --steps "$TORCH_STEPS" "${extra[@]}"
            rm -rf "$d/ck.$rep.$mode"
        done
        step_ms=$(jget "$d/stall.$rep.none.0" '1000 * .wall_s / .steps')
        [ -n "$step_ms" ] && [ "$step_ms" != null ] || { note torch "stall rep $rep: no result"; continue; }
        local a s
        a=$(jget "$d/stall.$rep.async.0" '.ckpt_stall_ms / .checkpoints')
        s=$(jget "$d/stall.$rep.sync.0" '.ckpt_stall_ms / .checkpoints')
        rec torch.ckpt_step_ms "$step_ms"
        rec torch.ckpt_async_stall_ms "$a"; rec torch.ckpt_sync_stall_ms "$s"
        rec torch.ckpt_async_stall_cpu_ms "$(jget "$d/stall.$rep.async.0" '.ckpt_stall_cpu_ms / .checkpoints')"
        rec torch.ckpt_async_stall_frac "$(calc "$a / $step_ms")"
        # pipelined copy: optimizer steps that waited for it, per checkpoint;
        # and the whole run's wall time per checkpoint against no checkpoints
        # (the writer thread's share of the cores included; noisy)
        rec torch.ckpt_async_waits "$(jget "$d/stall.$rep.async.0" '.ckpt_copy_waits / .checkpoints')"
        rec torch.ckpt_async_wall_ms "$(calc "($(jget "$d/stall.$rep.async.0" '1000 * .wall_s') - 1000 * $(jget "$d/stall.$rep.none.0" '.wall_s')) / $(jget "$d/stall.$rep.async.0" '.checkpoints')")"
        rec torch.ckpt_sync_stall_frac "$(calc "$s / $step_ms")"
        printf '   rep %d: step %.2f ms; stall per checkpoint %.2f ms async, %.2f ms sync\n' \
            "$rep" "$step_ms" "$a" "$s" >&2
    done
}

# torch_kill_figures KEY LOG_BEFORE LOG_AFTER T_KILL: records KEY's "kill
# to first new step s" and "steps lost".  The first new step is the first
# step line of LOG_AFTER after the kill, or, when both logs are one file
# (torchrun's), the first line after the kill whose step number went down
# (the restarted script); the last step is the highest one the killed
# generation logged (a step finishing just after the kill is still lost).
torch_kill_figures () {
    local key=$1 before=$2 after=$3 tk=$4 last first ft
    if [ "$before" = "$after" ]; then
        read -r last first ft < <(torch_log_times "$before" | awk -v t="$tk" '
            { if ($2 > t && seen && $1 <= prev) { print max, $1, $2; found = 1; exit }
              if ($1 > max) max = $1; prev = $1; seen = 1 }
            END { if (!found) print max + 0 }')
    else
        last=$(torch_log_times "$before" | awk '$1 > m {m = $1} END {print m + 0}')
        read -r first ft < <(torch_log_times "$after" | awk -v t="$tk" '$2 > t {print; exit}')
    fi
    [ -n "$first" ] || { note torch "$key: no step after the kill"; return; }
    rec "$key.first_step_s" "$(calc "$ft - $tk")"
    # A restart at step S0 logs S0+1 first: lost = last done - S0.
    rec "$key.steps_lost" "$((last - (first - 1)))"
    printf '   %s: last step of the killed generation %d, first new step %d, %.2f s after the kill\n' \
        "$key" "$last" "$first" "$(calc "$ft - $tk")" >&2
}

torch_recovery () {
    local d=$1 rep id pid tk log1 log2 tr
    for rep in $(seq "$REPS"); do
        # dtctl
        id=$(curl -s -X POST "$URL/v1/jobs" -d "$(torch_spec 2 1 "$d" 20 --data "$CORPUS" \
            --steps 400 --sleep-ms 30 --log-every 1)" | jq -r .data.id)
        wait_for 120 sh -c "test \"\$(curl -s $URL/v1/jobs/$id | jq -r '.data.step // 0')\" -ge 50" \
            || { note torch "recovery rep $rep: job $id did not reach step 50"; continue; }
        pid=$(curl -s "$URL/v1/jobs/$id/ranks" | jq -r '.data[] | select(.rank == 1) | .pid')
        tk=$(date +%s.%N); kill -9 "$pid"
        wait_for 300 job_ended "$id"
        torch_kill_figures torch.dtctl "$(torch_job_err "$d" "$id" 1)" "$(torch_job_err "$d" "$id" 2)" "$tk"
        # torchrun, same script (no checkpoint directory: it starts over)
        # (--redirects 1 --tee 1: torch 1.13 on Python 3.11 fails with the
        # defaults, see bench_recovery.sh; the step lines are on stderr)
        tr=$d/torchrun.$rep
        mkdir -p "$tr"
        ( cd "$tr" && exec env "${TORCH_ENV[@]}" OMP_NUM_THREADS=1 setsid "$PY" -m torch.distributed.run \
            --nnodes 1 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(free_port)" \
            --max_restarts 1 --redirects 1 --tee 1 --log_dir "$tr/logs" \
            "$TORCH_TRAIN" --data "$CORPUS" --steps 400 --sleep-ms 30 --log-every 1 ) \
            > "$tr/out" 2> "$tr/err" &
        local trpid=$!
        PIDS="$PIDS $trpid"
        wait_for 120 sh -c "[ \"\$(sed -n 's/^.*rank 0 step \([0-9]*\) .*/\1/p' '$tr/err' | tail -n 1)\" -ge 50 ] 2>/dev/null" \
            || { note torch "recovery rep $rep: torchrun did not reach step 50 ($(tail -n 2 "$tr/err" | tr '\n' ' ' | cut -c1-200))"
                 kill -9 -- -"$trpid" 2>/dev/null; wait "$trpid"; continue; }
        pid=$(for p in $(pgrep -f -- "$TORCH_TRAIN"); do
                  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx RANK=1 && echo "$p"
              done | head -n 1)
        tk=$(date +%s.%N); kill -9 "$pid"
        wait_for 120 sh -c "sed -n 's/^.*rank 0 step \\([0-9]*\\) .*/\\1/p' '$tr/err' | awk '\$1 < p {f = 1} {p = \$1} END {exit !f}'"
        kill -TERM -- -"$trpid" 2>/dev/null; sleep 1; kill -9 -- -"$trpid" 2>/dev/null
        wait "$trpid" 2>/dev/null
        torch_kill_figures torch.torchrun "$tr/err" "$tr/err" "$tk"
    done
}

part_torch () {
    local d=$TMP/torch
    "$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null \
        || { note torch "no torch.distributed for $PY (python3-torch): part skipped"; return; }
    mkdir -p "$d"
    chmod 1777 "$d"     # the controller's agents may run as nobody (start_ctld)
    say "dtclient.torch: examples/pytorch/gpt_train.py, 2 ranks gloo; per-step cost, checkpoint stall, kill -9 recovery vs torchrun; x $REPS"
    start_ctld "$d" local HeartbeatInterval=200ms NodeTimeout=10s || return
    case " $TORCH_FIGURES " in *" cost "*) torch_step_cost "$d" ;; esac
    case " $TORCH_FIGURES " in *" wide "*) torch_step_cost "$d" torch.wide $TORCH_WIDE ;; esac
    case " $TORCH_FIGURES " in *" stall "*) torch_stall "$d" ;; esac
    case " $TORCH_FIGURES " in *" recovery "*) torch_recovery "$d" ;; esac
    stop_ctld
}
