# bench_parts.sh: the parts of bench/run (sourced by it; uses its helpers
# rec, note, jget, start_ctld, wait_for, calc and its variables B SRC TMP
# REPS MODEL STEPS ...).  Each part records samples with 'rec KEY VALUE';
# bench/summarize.py turns them into the table.

# --- 6. libdtclient: cost of one step report ------------------------------------------
part_dtclient () {
    say "libdtclient: cost per dtclient_step (bench_dtclient, 7 runs of 1M calls) x $REPS"
    for rep in $(seq "$REPS"); do
        "$B/bench/bench_dtclient" 1000000 7 > "$TMP/dtclient.$rep" 2>&1
        rec dtclient.step_ns "$(awk '/^dtclient_step\(agent\)/ {print $3}' "$TMP/dtclient.$rep")"
        rec dtclient.noagent_ns "$(awk '/^dtclient_step\(no-agent\)/ {print $3}' "$TMP/dtclient.$rep")"
    done
}

# --- 1. controller ingest ----------------------------------------------------------------
# poll_status URL SECONDS RATE OUT: GET URL at RATE/s over one keep-alive
# connection (curl --rate), one time_total (s) per line in OUT.
poll_status () {
    local url=$1 secs=$2 rate=$3 out=$4 i
    for i in $(seq $((secs * rate))); do printf 'url = "%s"\noutput = "/dev/null"\n' "$url"; done > "$out.cfg"
    # -m 2: a request that takes longer counts as 2 s (a lower bound); timeout:
    # a stalled controller must not stretch the run (stdbuf: keep the lines
    # curl printed before it was stopped).
    timeout $((secs + 3)) stdbuf -oL curl -s -m 2 --rate "$rate/s" -K "$out.cfg" \
        -w '%{time_total} %{http_code} %{size_download}\n' > "$out" 2>/dev/null
}
# pct FILE P: the P-th percentile (0..100) of column 1 of FILE, times 1000 (ms).
pct () { sort -g "$1" | awk -v p="$2" '{v[NR]=$1} END {if (NR == 0) exit; i = int(p / 100 * (NR - 1)) + 1; printf "%.3f\n", v[i] * 1000}'; }
# db_bytes DIR: bytes of the database's files; db_pages DIR: its logical size
# (page_count x page_size, the WAL's committed pages included).
db_bytes () { du -cb "$1"/state/dtctld.db* 2>/dev/null | awk 'END {print $1}'; }
db_pages () { sqlite3 "$1/state/dtctld.db" 'pragma page_count' 'pragma page_size' 2>/dev/null | awk 'NR == 1 {c = $1} NR == 2 {print c * $1}'; }

# sched_ns PID: "CPU_NS WAIT_NS", the process's time on a CPU and its time
# runnable but waiting for one, summed over its threads (schedstat).
sched_ns () { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{c += $1; w += $2} END {printf "%.0f %.0f\n", c, w}'; }

# Each size runs in each mode of BENCH_INGEST_TREE (default "0 256"): 0 is
# direct connections (keys ingest.RATE.*), W > 0 the fan-in tree of width
# W (keys ingesttree.RATE.*: the generator plays relays and leaves, the
# controller sees W relays per attempt, each POSTing its subtree's
# heartbeats to /v1/agent/relay once a second).
part_ingest () {
    local agents_list=${BENCH_INGEST_AGENTS:-"125 1250 10000 20000 40000"}
    local trees=${BENCH_INGEST_TREE:-"0 256"} TW K
    local W=${BENCH_INGEST_WARMUP:-2} D=${BENCH_INGEST_SECONDS:-6} A d njobs per j id toks tok
    [ -x "$LOADGEN" ] || { note ingest "loadgen not built: part skipped"; return; }
    # The descriptors the service unit gives the controller (LimitNOFILE=65536,
    # config/dtctld.service): 40,000 agents registering at once need one
    # each, at the controller and in the generator (a hard limit of 20,000
    # left no attempt of 40,000 agents able to complete its rendezvous).
    local nofile=65536
    if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt $nofile ]; then
        ulimit -Hn $nofile 2>/dev/null \
            || note ingest "descriptor hard limit $(ulimit -Hn), not raised to $nofile here (no CAP_SYS_RESOURCE): the controller holds fewer connections than that, and direct agents beyond it are refused"
    fi
    ulimit -Sn "$(ulimit -Hn)"
    for A in $agents_list; do
    for TW in $trees; do
        local rate=$((A * 8)) rep
        if [ "$TW" = 0 ]; then K=ingest.$rate; else K=ingesttree.$rate; fi
        say "ingest: $A simulated agents x 8 ranks at 1 Hz = $rate rank-heartbeats/s offered, $([ "$TW" = 0 ] && echo direct || echo "tree of width $TW"), ${D}s x $REPS (+${W}s warm-up each)"
        d=$TMP/ingest-$A-t$TW
        # Between runs the simulated agents are silent: long node and hang
        # timeouts keep their attempts alive across the pause.
        CTLD_LOGLEVEL=notice start_ctld "$d" external HeartbeatInterval=1s NodeTimeout=180s \
            HangTimeoutFloor=10m RendezvousTimeout=600s || return
        # One attempt holds at most 65536 ranks (SPEC_MAX_WORLD): more agents
        # are split over several jobs, which the generator drives together.
        njobs=$(( (rate + 65535) / 65536 )); per=$(( A / njobs )); toks=
        for j in $(seq "$njobs"); do
            id=$(curl -s -X POST "$URL/v1/jobs" -d "{\"name\":\"loadgen$j\",\"nodes\":$per,\"ranks_per_node\":8,
                 \"command\":[\"true\"],\"heartbeat\":{\"interval_ms\":1000}}" | jq -r .data.id)
            # The external launcher hands the token over in a file (the
            # database holds only its hash).
            wait_for 10 test -s "$d/state/external/job-$id.1.token" \
                || { note ingest "job $id: no attempt token in $d/state/external"; stop_ctld; return; }
            tok=$(cat "$d/state/external/job-$id.1.token")
            toks=${toks:+$toks,}$tok
        done
        local size0 size1 t_load=0 t_grow=0 aport
        # The simulated agents dial the agents' listener (AgentPort), as
        # real agents do, not the users' (limited per address).
        aport=$(curl -s "$URL/healthz" | jq -r .data.agent_url | sed 's/.*://')
        size0=$(db_pages "$d")
        for rep in $(seq "$REPS"); do
            # Growth is measured after the first run: the first fills the
            # per-rank and per-node rows once; what grows after that is what
            # an hour of the same load adds.  The controller writes at most
            # 2,500 such rows a second (a bounded flush), so the first fill
            # may end after the first run: wait until the rank rows stop
            # growing (3 s apart; 90 s at most, within NodeTimeout).
            if [ "$rep" = 2 ]; then
                local c0=-1 c1 waited=0
                while [ $waited -lt 90 ]; do
                    c1=$(sqlite3 "$d/state/dtctld.db" 'select count(*) from ranks' 2>/dev/null)
                    [ "$c1" = "$c0" ] && break
                    c0=$c1; sleep 3; waited=$((waited + 3))
                done
                [ $waited -ge 90 ] && note "ingest.$rate" "rank rows still growing 90 s after the first run: growth includes the rest"
                size0=$(db_pages "$d")
            fi
            [ "$rep" -ge 2 ] && t_grow=$((t_grow + W + D))
            # The status pollers start with the measurement (after registration
            # and warm-up): loadgen creates the mark file then.
            local mark=$d/measuring.$rep
            ( wait_for 130 test -e "$mark" && poll_status "$URL/v1/jobs" "$D" 10 "$d/st-list.$rep" ) &
            local p1=$!
            ( wait_for 130 test -e "$mark" && poll_status "$URL/v1/jobs/1" "$D" 10 "$d/st-show.$rep" ) &
            local p2=$!
            # The controller's CPU time and its time runnable but waiting for
            # a core (schedstat, every thread) over the measurement: on a
            # shared machine the second is what its latency is made of.
            ( wait_for 130 test -e "$mark" && sched_ns "$CTLD_PID" > "$d/sched0.$rep" ) &
            local p3=$!
            "$LOADGEN" --port "$aport" --token "$toks" --agents "$((per * njobs))" --ranks 8 \
                --hz 1 --duration "$D" --warmup "$W" --register-timeout 120 --mark "$mark" \
                --tree-width "$TW" > "$d/lg.$rep" 2> "$d/lg.$rep.err"
            touch "$mark"
            wait $p3
            sched_ns "$CTLD_PID" > "$d/sched1.$rep"
            wait $p1 $p2
            t_load=$((t_load + W + D))
            local f=$d/lg.$rep
            rec "$K.achieved" "$(jget "$f" .achieved_rank_hb_per_s)"
            rec "$K.p50" "$(jget "$f" .lat_ms.p50)"
            rec "$K.p99" "$(jget "$f" .lat_ms.p99)"
            rec "$K.p999" "$(jget "$f" .lat_ms.p999)"
            rec "$K.failed" "$(jget "$f" '.errors + .non2xx + .unanswered')"
            # Where the latency came from: the generator's own lag (due to
            # sent), the answer (sent to answered), the generator's CPU per
            # offered rank-heartbeat, and the controller's CPU and run-queue
            # wait per second of the measurement.
            rec "$K.lag_p99" "$(jget "$f" .send_lag_ms.p99)"
            rec "$K.answer_p50" "$(jget "$f" .answer_ms.p50)"
            rec "$K.answer_p99" "$(jget "$f" .answer_ms.p99)"
            rec "$K.lg_cpu_us" "$(calc "$(jget "$f" .cpu_s) * 1e6 / ($rate * $D)")"
            if [ -s "$d/sched0.$rep" ] && [ -s "$d/sched1.$rep" ]; then
                rec "$K.ctld_cpu_ms_s" "$(calc "($(cut -d' ' -f1 "$d/sched1.$rep") - $(cut -d' ' -f1 "$d/sched0.$rep")) / 1e6 / $D")"
                rec "$K.ctld_wait_ms_s" "$(calc "($(cut -d' ' -f2 "$d/sched1.$rep") - $(cut -d' ' -f2 "$d/sched0.$rep")) / 1e6 / $D")"
                rec "$K.ctld_cpu_us" "$(calc "($(cut -d' ' -f1 "$d/sched1.$rep") - $(cut -d' ' -f1 "$d/sched0.$rep")) / 1e3 / ($rate * $D)")"
            fi
            rec "$K.load1" "$(cut -d' ' -f1 /proc/loadavg)"
            rec "$K.registered" "$(jget "$f" .registered)"
            rec "$K.register_s" "$(jget "$f" .register_s)"
            rec "$K.list_p50" "$(pct "$d/st-list.$rep" 50)"
            rec "$K.list_p99" "$(pct "$d/st-list.$rep" 99)"
            rec "$K.show_p50" "$(pct "$d/st-show.$rep" 50)"
            rec "$K.show_p99" "$(pct "$d/st-show.$rep" 99)"
            rec "$K.show_bytes" "$(awk 'END {print $3 + 0}' "$d/st-show.$rep")"
            printf '   rep %d: %s\n' "$rep" "$(jq -c '{achieved_rank_hb_per_s, registered, register_s, errors, non2xx, gone_410, unanswered, lat_ms, send_lag_ms, answer_ms, cpu_s}' "$f" 2>/dev/null || cat "$d/lg.$rep.err")" >&2
            if [ "$(jget "$f" .gone_410)" -gt 0 ] 2>/dev/null; then
                note "$K" "rep $rep: the controller ended the attempt(s) (410 to $(jget "$f" .gone_410) agents): $(sqlite3 "$d/state/dtctld.db" "select 'job ' || job_id || ' attempt ' || attempt || ': ' || state || ' ' || ifnull(cause, '') || ' ' || substr(ifnull(detail, ''), 1, 120) from attempts" | tr '\n' ';')"
                break
            fi
        done
        size1=$(db_pages "$d")
        rec "$K.db_bytes" "$(db_bytes "$d")"
        [ "$t_grow" -gt 0 ] && rec "$K.db_growth_per_h" "$(calc "($size1 - $size0) / $t_grow * 3600")"
        sqlite3 "$d/state/dtctld.db" "select 'metrics', count(*) from metrics; select 'events', count(*) from events;
            select 'ranks', count(*) from ranks; select 'attempt_nodes', count(*) from attempt_nodes;
            select 'metrics_stride', group_concat(metrics_stride) from jobs;" > "$d/rows" 2>/dev/null
        note "$K" "after ${t_load}s of load at $rate rank-hb/s: database files $(( $(db_bytes "$d") / 1024 )) KiB, logical $(( size1 / 1024 )) KiB; rows: $(tr '|\n' '= ' < "$d/rows")"
        grep -v '"POST /v1/agent' "$d/ctld.log" | grep -iE 'error|warn' | grep -v AuthType=none | tail -n 3 > "$d/ctld.warn"
        [ -s "$d/ctld.warn" ] && note "$K" "controller log: $(tr '\n' ' ' < "$d/ctld.warn" | cut -c1-300)"
        # The longest pass of the controller's loop (it logs each new
        # longest over 50 ms; 0 recorded: none over 50 ms) and its peak memory.
        local stall hwm
        stall=$(grep -a 'event loop: a pass took' "$d/ctld.log" | tail -n 1 | sed 's/.*took \([0-9]*\) ms.*/\1/')
        rec "$K.stall_ms" "${stall:-0}"
        # ... and the CPU time of that pass: the rest of it the controller
        # waited for a core (the machine's load) or the disk.
        stall=$(grep -a 'event loop: a pass took' "$d/ctld.log" | tail -n 1 | sed -n 's/.*(\([0-9]*\) ms of CPU).*/\1/p')
        rec "$K.stall_cpu_ms" "${stall:-0}"
        hwm=$(awk '/^VmHWM/ {print $2 * 1024}' "/proc/$CTLD_PID/status" 2>/dev/null)
        rec "$K.ctld_hwm_bytes" "$hwm"
        rec "$K.refused_503" "$(jget "$d/lg.1" ".refused_503 // 0")"
        stop_ctld
    done
    done
}

# --- 3. checkpoints -------------------------------------------------------------------------
# dd_rate ARGS...: bytes/s of a 256 MiB sequential write in $TMP (dd), the
# file system the checkpoints go to.
dd_rate () {
    dd if=/dev/zero of="$TMP/dd.bin" bs=4M count=64 "$@" 2>&1 | awk '/bytes/ {print $1 / $(NF-3)}' | head -n 1
    rm -f "$TMP/dd.bin"
}
part_ckpt () {
    local steps=30 every=10 rep d base ck n shard
    say "checkpoints: dttrain (model above) $steps steps, checkpoint every $every, vs none; dd on the same file system before and after; x $REPS"
    for rep in $(seq "$REPS"); do
        d=$TMP/ckpt.$rep; mkdir -p "$d"
        # dd oflag=direct before and after the trainer's runs: the disk is
        # shared, its bandwidth drifts; the mean of the two is the reference.
        dd_rate oflag=direct > "$d/dd"
        rec ckpt.disk_fsync_Bps "$(dd_rate conv=fsync)"
        RANK=0 WORLD_SIZE=1 "$DTTRAIN" "${MODEL[@]}" --steps $steps --quiet > "$d/base.json" 2> "$d/base.err"
        RANK=0 WORLD_SIZE=1 "$DTTRAIN" "${MODEL[@]}" --steps $steps --quiet --job bench \
            --checkpoint-dir "$d/ck" --checkpoint-every $every > "$d/ck.json" 2> "$d/ck.err"
        base=$d/base.json; ck=$d/ck.json
        n=$(jget "$ck" .checkpoints)
        shard=$(find "$d/ck" -name 'rank-0.ckpt' | head -n 1)
        dd_rate oflag=direct >> "$d/dd"
        rec ckpt.disk_direct_Bps "$(awk '{s += $1} END {if (NR) print s / NR}' "$d/dd")"
        if [ -z "$n" ] || [ "$n" = 0 ] || [ -z "$shard" ]; then
            note ckpt "rep $rep: no checkpoint written ($(tail -n 2 "$d/ck.err" | tr '\n' ' '))"; continue
        fi
        local step_s stall snap write bytes
        step_s=$(calc "$(jget "$base" .wall_s) / $(jget "$base" .steps_run)")
        stall=$(calc "$(jget "$ck" .ckpt_stall_s) / $n")
        snap=$(calc "$(jget "$ck" '.ckpt_snapshot_s // 0') / $n")
        write=$(calc "$(jget "$ck" .ckpt_write_s) / $n")
        bytes=$(stat -c %s "$shard")
        rec ckpt.step_ms "$(calc "$step_s * 1000")"
        rec ckpt.bytes "$bytes"
        rec ckpt.async_stall_ms "$(calc "$stall * 1000")"
        rec ckpt.async_stall_frac "$(calc "$stall / $step_s")"
        # The stall is what the step loop waited: starting the writer, and
        # at the next optimizer update whatever is left of the snapshot copy
        # (the writer thread copies during that step's forward, backward and
        # allreduce).  The copy + CRC32C itself, in the background:
        rec ckpt.snapshot_ms "$(calc "$snap * 1000")"
        # dttrain has one (asynchronous) writer: a synchronous checkpoint
        # blocks for the snapshot copy plus the whole write, both measured here.
        rec ckpt.sync_stall_ms "$(calc "($stall + $snap + $write) * 1000")"
        rec ckpt.sync_stall_frac "$(calc "($stall + $snap + $write) / $step_s")"
        # What the background write really costs the step loop on 2 shared
        # cores: the wall-time difference per checkpoint.
        rec ckpt.async_wall_frac "$(calc "($(jget "$ck" .wall_s) - $(jget "$base" .wall_s)) / $n / $step_s")"
        # write_s: open to directory fsync'd (O_DIRECT writes, ftruncate,
        # fsync, rename, directory fsync), against dd in the same repetition.
        rec ckpt.write_Bps "$(calc "$bytes / $write")"
        rec ckpt.write_frac_disk "$(calc "$bytes / $write / $(awk '{s += $1} END {print s / NR}' "$d/dd")")"
        rm -rf "$d/ck"
    done
}

# --- 4. trainer throughput ----------------------------------------------------------------
# run_ranks W OUTPREFIX CMD...: W ranks of CMD on this machine (RANK/WORLD_SIZE
# + torch's variables + a private rendezvous dir), waits for all.
run_ranks () {
    local w=$1 out=$2 r port rdv pids=; shift 2
    port=$(free_port); rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
    for r in $(seq 0 $((w - 1))); do
        RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            DT_RENDEZVOUS_DIR=$rdv "$@" > "$out.$r" 2> "$out.$r.err" &
        pids="$pids $!"
    done
    wait $pids   # not a bare wait: a controller may be our child too
}
part_train () {
    local shapes l rep s1 s2 d
    shapes="$BATCH $HID $((CTX * EMB))"
    for l in $(seq 2 "$LAYERS"); do shapes="$shapes $BATCH $HID $HID"; done
    shapes="$shapes $BATCH 256 $HID"
    say "trainer: B=$BATCH C=$CTX E=$EMB H=$HID L=$LAYERS, $STEPS steps; dttrain vs PyTorch DDP (gloo, CPU) on 1 and 2 ranks; SGEMM on the model's shapes before and after; x $REPS"
    for rep in $(seq "$REPS"); do
        d=$TMP/train.$rep; mkdir -p "$d"
        "$B/bench/bench_sgemm" --reps 3 $shapes > "$d/sgemm1" 2>&1
        run_ranks 1 "$d/dt1" "$DTTRAIN" "${MODEL[@]}" --steps "$STEPS" --quiet
        run_ranks 1 "$d/pt1" "$PY" "$SRC/bench/torch_ddp_ref.py" "${MODEL[@]}" --steps "$STEPS"
        run_ranks 2 "$d/dt2" "$DTTRAIN" "${MODEL[@]}" --steps "$STEPS" --quiet
        run_ranks 2 "$d/pt2" "$PY" "$SRC/bench/torch_ddp_ref.py" "${MODEL[@]}" --steps "$STEPS"
        "$B/bench/bench_sgemm" --reps 3 $shapes > "$d/sgemm2" 2>&1
        s1=$(jget "$d/sgemm1" .sgemm_gflops); s2=$(jget "$d/sgemm2" .sgemm_gflops)
        rec train.sgemm_gflops "$(calc "($s1 + $s2) / 2")"
        rec train.dt1_gflops "$(jget "$d/dt1.0" .model_gflops_per_s)"
        rec train.frac_sgemm "$(calc "$(jget "$d/dt1.0" .model_gflops_per_s) / (($s1 + $s2) / 2)")"
        for w in 1 2; do
            local dt pt
            dt=$(jget "$d/dt$w.0" .tokens_per_s); pt=$(jget "$d/pt$w.0" .tokens_per_s)
            rec "train.dt$w" "$dt"; rec "train.pt$w" "$pt"
            [ -n "$dt" ] && [ -n "$pt" ] && rec "train.ratio$w" "$(calc "$dt / $pt")"
        done
        TORCH_VERSION=$(jget "$d/pt1.0" .torch)
        echo "$TORCH_VERSION" > "$TMP/torch_version"
        printf '   rep %d: sgemm %s GFLOP/s; tokens/s dttrain %s/%s, torch %s/%s (1/2 ranks)\n' "$rep" \
            "$(calc "($s1 + $s2) / 2")" "$(jget "$d/dt1.0" .tokens_per_s)" "$(jget "$d/dt2.0" .tokens_per_s)" \
            "$(jget "$d/pt1.0" .tokens_per_s)" "$(jget "$d/pt2.0" .tokens_per_s)" >&2
    done
}

# --- 4b. the transformer: vs PyTorch, vs SGEMM, bits per byte vs the MLP ------------------
part_transformer () {
    local d=$TMP/tfm
    mkdir -p "$d"
    say "transformer: dttrain vs PyTorch (same model, 1 thread), model FLOP/s vs SGEMM, val bits/byte after ${TFM_BUDGET:-60} CPU s vs the MLP; x $REPS"
    REPS=$REPS BUDGET=${TFM_BUDGET:-60} "$SRC/bench/bench_transformer.sh" "$B" > "$d/out" 2>&1
    sed 's/^/   /' "$d/out" | grep -v '^   {' >&2
    grep '"bench_transformer": "speed"' "$d/out" | while read -r l; do
        local dt pt df s
        dt=$(echo "$l" | jq .dttrain_tokens_per_s); pt=$(echo "$l" | jq .torch_tokens_per_s)
        df=$(echo "$l" | jq .dttrain_gflops); s=$(echo "$l" | jq .sgemm_gflops)
        rec tfm.dt_tps "$dt"; rec tfm.pt_tps "$pt"; rec tfm.ratio "$(calc "$dt / $pt")"
        rec tfm.dt_gflops "$df"; rec tfm.sgemm_gflops "$s"; rec tfm.frac_sgemm "$(calc "$df / $s")"
    done
    rec tfm.bpb_mlp "$(grep '"model": "mlp"' "$d/out" | jq .val_bpb)"
    rec tfm.bpb_tfm "$(grep '"model": "transformer"' "$d/out" | jq .val_bpb)"
}

# --- 5. orchestration overhead ------------------------------------------------------------
# job_ended ID: job ID of the controller at $URL is in a final state.
job_ended () {
    curl -s "$URL/v1/jobs/$1" | jq -e '.data.state | IN("completed","failed","cancelled")' >/dev/null
}
# wait_job_quietly DIR ID SECONDS: wait for job ID to end without taking CPU
# from its ranks (the bare run's ranks share the machine with nothing but a
# 'wait').  One 'sh -c "curl | jq"' costs ~30 ms of CPU: polled at 10 Hz
# during the run, that took a quarter of one of the 2 cores from the job and
# was the whole measured "overhead" (0.80; the same poller beside a bare run
# costs it as much, and dtagent + dtctld use ~30 ms of CPU per run).  So
# while the ranks train, only shell builtins look for rank 0's summary line
# (read -t on a FIFO sleeps without a fork), and the controller is asked
# every 5 s in case the job ends without one; once the ranks are done, the
# end is polled at 10 Hz as before, for the submit-to-completed time.
wait_job_quietly () {
    local d=$1 id=$2 n=$(( $3 * 10 )) f fd
    rm -f "$d/tick"; mkfifo "$d/tick" && exec {fd}<> "$d/tick" || { wait_for "$3" job_ended "$id"; return; }
    while [ $n -gt 0 ]; do
        for f in "$d"/users/*/agents/job-"$id".1/*/*/rank-0.log; do
            [ -s "$f" ] && break 2
        done
        [ $((n % 50)) -eq 0 ] && job_ended "$id" && break
        read -r -t 0.1 -u "$fd"
        n=$((n - 1))
    done
    exec {fd}<&-
    wait_for "$3" job_ended "$id"
}
part_overhead () {
    # Steady state: a run of a few seconds mostly measures the start, when
    # the agent registers and the controller starts the job on the same 2
    # cores; a training run lasts hours.  The start is reported apart
    # (submit to completed vs start to exit).
    local d=$TMP/overhead rep id t0 t1 log spec STEPS=${OVERHEAD_STEPS:-$((STEPS * 5))}
    say "orchestration: dttrain 2 ranks, $STEPS steps, through dtctld + dtagent (local launcher) vs bare, alternating; x $REPS"
    start_ctld "$d" local HeartbeatInterval=1s NodeTimeout=10s || return
    mkdir -p "$d/rdv"
    chmod 1777 "$d/rdv"     # the controller's agents may run as nobody (start_ctld)
    # --rendezvous-dir as for the bare run (same bootstrap on both sides; see
    # bench_recovery.sh about the kv store).
    spec=$(jq -cn --arg dt "$DTTRAIN" --arg data "$CORPUS" --argjson steps "$STEPS" \
        --arg b "$BATCH" --arg c "$CTX" --arg e "$EMB" --arg h "$HID" --arg l "$LAYERS" --arg w "$d" --arg core "${OPENBLAS_CORETYPE:-}" \
        '{name:"overhead", nodes:1, ranks_per_node:2, workdir:$w,
          command:[$dt,"--model","mlp","--data",$data,"--steps",($steps|tostring),"--global-batch",$b,"--context",$c,
                   "--embed",$e,"--hidden",$h,"--layers",$l,"--quiet","--rendezvous-dir",($w + "/rdv")],
          env:({OPENBLAS_NUM_THREADS:"1", OMP_NUM_THREADS:"1"} + (if $core != "" then {OPENBLAS_CORETYPE:$core} else {} end)),
          checkpoint:{every_steps:0}, heartbeat:{interval_ms:1000}}')
    for rep in $(seq "$REPS"); do
        t0=$(date +%s.%N)
        run_ranks 2 "$d/bare.$rep" "$DTTRAIN" "${MODEL[@]}" --steps "$STEPS" --quiet
        t1=$(date +%s.%N)
        local bare_wall; bare_wall=$(calc "$t1 - $t0")
        t0=$(date +%s.%N)
        id=$(curl -s -X POST "$URL/v1/jobs" -d "$spec" | jq -r .data.id)
        wait_job_quietly "$d" "$id" 180
        t1=$(date +%s.%N)
        local state; state=$(curl -s "$URL/v1/jobs/$id" | jq -r .data.state)
        log=$(find "$d/users" -path "*job-$id.1*" -name 'rank-0.log' | head -n 1)
        if [ "$state" != completed ] || [ -z "$log" ]; then
            note overhead "rep $rep: job $id ended $state; log ${log:-none}"; continue
        fi
        local via bare
        via=$(jget "$log" .tokens_per_s); bare=$(jget "$d/bare.$rep.0" .tokens_per_s)
        rec overhead.bare "$bare"; rec overhead.via "$via"
        rec overhead.ratio "$(calc "$via / $bare")"
        rec overhead.bare_wall_s "$bare_wall"; rec overhead.via_wall_s "$(calc "$t1 - $t0")"
        printf '   rep %d: bare %s tokens/s (%.1fs start to exit), through dtctld %s tokens/s (%.1fs submit to completed)\n' \
            "$rep" "$bare" "$bare_wall" "$via" "$(calc "$t1 - $t0")" >&2
    done
    stop_ctld
}

. "$SRC/bench/bench_local.sh"
. "$SRC/bench/bench_recovery.sh"
. "$SRC/bench/bench_integrity.sh"
. "$SRC/bench/bench_ui.sh"
. "$SRC/bench/bench_layouts_part.sh"
