# bench_recovery.sh: part 2 (failure detection and recovery on the Slurm
# testbed: dtctl vs Slurm's requeue vs torchrun's restart) and part 7 (the
# plot of one recovery).  Sourced by bench/run, which provides rec, note,
# say, jget, calc, wait_for, free_port and B SRC TMP REPS PY DTCTLD DTAGENT
# DTTRAIN CORPUS.
#
# The testbed is machine-wide (bridge, netns dtnode*, port 6817): this part
# takes the same flock as the system tests (tests/system/testbed-lib.sh),
# waits up to 10 minutes for it, and always tears the testbed down.

TESTBED=$SRC/scripts/slurm-testbed
DTCTL=$B/orchestrator/cli/dtctl
REC_REPS=${BENCH_RECOVERY_REPS:-$REPS}
# The job passes --rendezvous-dir (a shared directory; gloo's keys are prefixed
# by job, attempt and step), so what is measured does not depend on the
# controller's kv store: while this was written, dtctld answered 404 to
# dttrain's 5-segment kv keys "dttrain/<job>/a<n>/s<step>/rank_<r>" (since fixed
# in orchestrator/agentapi.c); drop the option to measure the kv path too.
# The recovery job's model: the part-4 model with a batch of 64 (~60 ms steps
# on 2 ranks here; --model mlp, as the PyTorch twin torch_ddp_ref.py that
# torchrun restarts), checkpoint every 50 steps.
REC_MODEL=(--model mlp --data "$CORPUS" --global-batch 64 --context 64 --embed 32 --hidden 1024 --layers 4)
REC_EVERY=50

now () { date +%s.%N; }
# step_lines FILE: "time step loss compute_ms comm_ms" for each stamped
# dttrain step line ("<epoch> dttrain[0]: step S/N loss L ... compute X ms comm Y ms")
# or gpt_train.py step line ("<epoch> rank R step S loss L time T": no
# compute and comm figures, 0 0).
step_lines () {
    sed -n -e 's/^\([0-9.]*\) dttrain\[[0-9]*\]: step \([0-9]*\)\/[0-9]* loss \([0-9.na-]*\) .* compute \([0-9.]*\) ms comm \([0-9.]*\) ms.*/\1 \2 \3 \4 \5/p' \
        -e 's/^\([0-9.]*\) rank [0-9]* step \([0-9]*\) loss \([0-9.na-]*\) time .*/\1 \2 \3 0 0/p' "$1" 2>/dev/null
}
has_step () { [ -n "$(first_step "$1")" ]; }
# log_step FILE: the highest step rank 0's log shows (dttrain prints a step
# line for the first step of an attempt and then every steps/20 steps, and a
# line per checkpoint: "checkpoint step S: ...").
log_step () {
    sed -n -e 's/.*dttrain\[0\]: \(checkpoint \)\{0,1\}step \([0-9]*\)[/:].*/\2/p' \
        -e 's/^[0-9.]* rank 0 step \([0-9]*\) loss .*/\1/p' "$1" 2>/dev/null | sort -n | tail -n 1
}
log_step_ge () { [ "$(log_step "$1")" -ge "$2" ] 2>/dev/null; }
last_step () { log_step "$1"; }
first_step () { step_lines "$1" | head -n 1; }
# att_log ID A: rank 0's log of attempt A of job ID (the agents' run dir
# is <workdir>/dt-<job>-a<attempt>).
att_log () { ls -d "$RD"/work/dt-"$1"-a"$2"-*/rank-0.log 2>/dev/null | head -n 1; }
att_has_step () { local l; l=$(att_log "$1" "$2"); [ -n "$l" ] && has_step "$l"; }
show () { "$DTCTL" --json show "$1" 2>/dev/null; }
cur_attempt () { show "$1" | jq -r '.attempts[-1].attempt // 0'; }
# first_event ID T0: "time kind" of the first failure-related event after
# epoch T0 (the controller's detection).
first_event () {
    "$DTCTL" --json events "$1" 2>/dev/null | $PY -c '
import sys, json, datetime
t0 = float(sys.argv[1])
for e in json.load(sys.stdin):
    if e["kind"] in ("agent_registered", "job_submitted", "attempt_submitted") or "checkpoint" in e["kind"] or "shard" in e["kind"]:
        continue
    t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    if t >= t0 - 0.002:
        print("%.3f %s" % (t, e["kind"])); break' "$2"
}
# group_steps ID A T_KILL: "MIN MAX" of the last steps the ranks of
# attempt A had completed: an exited rank's from its exit event (its agent
# read the step from its page), a surviving rank's that re-forms from its
# "peer lost after step S" line stamped after T_KILL.  MIN: the newest step
# every rank had completed; MAX: the newest any had.  Empty when none is
# known.
group_steps () {
    { "$DTCTL" --json events "$1" 2>/dev/null | $PY -c '
import sys, json
a = int(sys.argv[1])
for e in json.load(sys.stdin):
    d = e.get("data") or {}
    if e.get("attempt") == a and e["kind"] in ("trainer_exit", "rank_exit") and d.get("last_step") is not None:
        print(d["last_step"])' "$2"
      cat "$RD"/work/dt-"$1"-a*-*/rank-*.log 2>/dev/null \
        | awk -v t="$3" '$1 > t && match($0, /peer lost after step [0-9]+/) {
            print substr($0, RSTART + 21, RLENGTH - 21) }'
    } | sort -n | sed -n '1h; $H; ${x; s/\n/ /; p}'
}
# ns_pids NODE COMM: pids of command COMM in NODE's namespace.
ns_pids () {
    local p
    for p in $(ip netns pids "dt$1" 2>/dev/null); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = "$2" ] && echo "$p"
    done
}
# victim ID: a rank node of the current attempt that is not the batch host:
# the highest node rank (the batch host is the first node in Slurm's order,
# node rank 0), since the attempt's record may not name its batch host yet
# (it is written with the attempt's next change when the agents registered
# before the launcher's first poll), and a hot spare cannot replace the
# batch host (its loop ends with it).
victim () {
    show "$1" | jq -r '.attempts[-1] as $a | [$a.nodes[] | select((.spare | not) and .node != $a.batch_host)]
        | max_by(.node_rank) | .node // empty'
}

part_recovery () {
    if [ "${BENCH_RECOVERY:-1}" = 0 ]; then note recovery "skipped (BENCH_RECOVERY=0)"; return; fi
    REC_KINDS=${BENCH_RECOVERY_KINDS:-"rank reform node hotspare torchspare"}
    [ "${BENCH_RECOVERY_REFS:-1}" = 0 ] || rec_torchrun
    [ "$(id -u)" = 0 ] || { note recovery "dtctl and Slurm recovery skipped: the Slurm testbed needs root"; return; }
    command -v slurmctld >/dev/null || { note recovery "dtctl and Slurm recovery skipped: Slurm not installed"; return; }
    [ -x "$DTCTL" ] || { note recovery "skipped: $DTCTL not built"; return; }
    local lock=/tmp/dtctl-slurm-testbed.lock
    [ -d /run/lock ] && lock=/run/lock/dtctl-slurm-testbed.lock
    say "recovery: waiting for the Slurm testbed lock ($lock)"
    exec 8>"$lock"
    flock -w "${BENCH_LOCK_WAIT:-180}" 8 \
        || { note recovery "skipped: the testbed lock was busy for ${BENCH_LOCK_WAIT:-180} s (another test run)"; exec 8>&-; return; }
    RD=$TMP/recovery; mkdir -p "$RD/work" "$RD/ckpt" "$RD/state" "$RD/rdv"
    export DT_TESTBED_DIR=$RD/testbed SLURM_CONF=$RD/testbed/etc/slurm.conf
    TESTBED_UP=1
    say "recovery: Slurm testbed up (6 nodes)"
    if "$TESTBED" up 6 > "$RD/testbed.log" 2>&1; then
        [ "${BENCH_RECOVERY_REFS:-1}" = 0 ] || rec_slurm
        rec_dtctl
    else
        note recovery "testbed up failed: $(tail -n 2 "$RD/testbed.log" | tr '\n' ' ')"
    fi
    [ -n "${REC_CTLD:-}" ] && kill "$REC_CTLD" 2>/dev/null && wait "$REC_CTLD" 2>/dev/null
    "$TESTBED" down > /dev/null 2>&1
    TESTBED_UP=
    exec 8>&-
    rec_plot
}

# --- dtctl: rank kill and node kill ------------------------------------------------------
rec_dtctl () {
    local port id
    port=$(free_port)
    REC_URL=http://10.77.0.1:$port
    cat > "$RD/dtctld.conf" <<EOF
ListenAddress=10.77.0.1
ListenPort=$port
ControllerURL=$REC_URL
StateDir=$RD/state
UserDir=$RD/users
Launcher=slurm
AuthType=munge
DtagentPath=$DTAGENT
CheckpointRoot=$RD/ckpt
HeartbeatInterval=500ms
NodeTimeout=3s
RendezvousTimeout=60s
LogLevel=info
EOF
    "$DTCTLD" -c "$RD/dtctld.conf" --foreground > "$RD/dtctld.log" 2>&1 &
    REC_CTLD=$!
    PIDS="$PIDS $REC_CTLD"
    wait_for 20 curl -sf "$REC_URL/healthz" -o /dev/null || { note recovery "dtctld did not start on the testbed"; return; }
    export DTCTL_CONTROLLER=$REC_URL
    note recovery "dtctld: HeartbeatInterval=500ms NodeTimeout=3s; job: 2 nodes x 1 rank, checkpoint every $REC_EVERY steps; testbed SlurmdTimeout=5"
    REC_BROKEN=
    # rank: the ordinary restart in place (a new step, a just-in-time
    # checkpoint); reform: the same kill with restart.reform (the survivor
    # never exits); node: a node kill; hotspare: a node kill in a job with a
    # hot spare and restart.reform (one job per kill: a job has one spare);
    # torchspare: the same with the PyTorch example through dtclient.torch.
    for kind in $REC_KINDS; do
        if [ -n "$REC_BROKEN" ]; then
            note "recovery.$kind" "not measured: the first job never trained (see the rank-kill note)"; continue
        fi
        if [ "$kind" = hotspare ] || [ "$kind" = torchspare ]; then
            rec_hotspare "$kind"; continue
        fi
        id=$(rec_submit "$kind") || { note "recovery.$kind" "submit failed: $id"; continue; }
        [ "$kind" = node ] && REC_PLOT_JOB=$id
        for rep in $(seq "$REC_REPS"); do
            rec_kill "$id" "$kind" "$rep" || break
        done
        # The controller's step metrics (one point per heartbeat) for the plot.
        [ "$kind" = node ] && "$SRC/tests/system/dtcurl" -s \
            "$REC_URL/v1/jobs/$id/metrics" > "$TMP/recovery.metrics.json"
        "$DTCTL" cancel "$id" > /dev/null 2>&1
        wait_for 20 sh -c "'$DTCTL' --json show $id | jq -e '.state == \"cancelled\"' >/dev/null"
    done
}

# hotspare, torchspare: per kill a new job of 2 nodes and 1 hot spare
# (heartbeats every 100 ms, node timeout 1 s: below the survivors' 3 s wait
# for the re-form command); the killed node is started again afterwards.
# torchspare: examples/pytorch/gpt_train.py (its default model, a step line
# per step) with DTCLIENT_TORCH_REFORM=1; the kill waits until the spare's
# standby process said it is warm (importing torch takes seconds).
rec_hotspare () {
    local id rep kind=${1:-hotspare}
    if [ "$kind" = torchspare ]; then
        /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null \
            || { note recovery.torchspare "skipped: /usr/bin/python3 has no torch with gloo"; return; }
        note recovery.torchspare "job: examples/pytorch/gpt_train.py (width 64, 2 layers, context 32, batch 8 per rank; gloo, one thread), 2 nodes x 1 rank + 1 hot spare, restart.reform, DTCLIENT_TORCH_REFORM=1, heartbeat 100 ms, node timeout 1 s; one job per kill"
    else
        note recovery.hotspare "job: 2 nodes x 1 rank + 1 hot spare, restart.reform, heartbeat 100 ms, node timeout 1 s; one job per kill"
    fi
    # (the node row left its killed nodes down)
    local n
    for n in $(sinfo -h -N -t down,no_respond -o %N 2>/dev/null | sort -u); do
        "$TESTBED" start-node "$n" > /dev/null 2>&1
    done
    for rep in $(seq "$REC_REPS"); do
        id=$(rec_submit "$kind") || { note "recovery.$kind" "submit failed: $id"; return; }
        REC_VICTIM=
        [ "$kind" = torchspare ] && ! wait_for 90 sh -c "grep -qs 'warm, waiting' '$RD'/work/dt-$id-a1-*/standby-0.log" \
            && note recovery.torchspare "rep $rep: the spare's standby process never said it is warm (the kill hits a cold spare)"
        rec_kill "$id" "$kind" "$rep"
        "$DTCTL" cancel "$id" > /dev/null 2>&1
        wait_for 20 sh -c "'$DTCTL' --json show $id | jq -e '.state == \"cancelled\" or .state == \"completed\" or .state == \"failed\"' >/dev/null"
        [ -n "$REC_VICTIM" ] && "$TESTBED" start-node "$REC_VICTIM" > /dev/null 2>&1
        wait_for 30 sh -c "[ \$(sinfo -h -t idle -o %D 2>/dev/null | awk '{s+=\$1} END {print s+0}') -ge 3 ]"
    done
}

rec_submit () {
    local kind=$1 excl=false reform=false spares=0 hb='{interval_ms: 500}' tenv='{}'
    local cmd=("$DTTRAIN" "${REC_MODEL[@]}" --steps 100000000 --val-every 0 --rendezvous-dir "$RD/rdv")
    [ "$kind" = node ] && excl=true
    [ "$kind" = reform ] && reform=true
    if [ "$kind" = hotspare ] || [ "$kind" = torchspare ]; then
        excl=true reform=true spares=1 hb='{interval_ms: 100, node_timeout_ms: 1000}'
    fi
    if [ "$kind" = torchspare ]; then
        cmd=(/usr/bin/python3 "$SRC/examples/pytorch/gpt_train.py" --data "$CORPUS" --steps 100000000 --log-every 1)
        tenv=$(jq -cn --arg pp "$SRC/agent/client/python" --arg ld "$B/agent/client/.libs" \
            '{PYTHONPATH: $pp, LD_LIBRARY_PATH: $ld, OMP_NUM_THREADS: "1", DTCLIENT_TORCH_REFORM: "1"}')
    fi
    printf '%s\n' "$SRC/bench/stamp.py" "${cmd[@]}" \
        | jq -R . | jq -s --arg w "$RD/work" --argjson every $REC_EVERY --argjson excl $excl --argjson reform $reform \
            --argjson spares $spares --argjson tenv "$tenv" \
            --arg core "${OPENBLAS_CORETYPE:-}" \
            '{name: "recovery", nodes: 2, spare_nodes: $spares, ranks_per_node: 1, workdir: $w, command: .,
              env: ({OPENBLAS_NUM_THREADS: "1"} + (if $core != "" then {OPENBLAS_CORETYPE: $core} else {} end) + $tenv),
              checkpoint: {every_steps: $every, keep: 2},
              restart: ({max_restarts: 20, exclude_failed_nodes: $excl} + (if $reform then {reform: true} else {} end)),
              heartbeat: '"$hb"'}' > "$RD/spec.$kind.json"
    "$DTCTL" submit "$RD/spec.$kind.json" 2>&1
}

# rec_kill ID KIND REP: wait until the current attempt has committed a
# checkpoint of its own, kill a rank (or a node), measure the recovery.
rec_kill () {
    local id=$1 kind=$2 rep=$3 a log first node pid t_kill
    if ! wait_for 90 sh -c "'$DTCTL' --json show $id | jq -e '.state == \"running\"' >/dev/null"; then
        note "recovery.$kind" "rep $rep: job $id not running: $(show "$id" | jq -c '{state, reason, failure}' | cut -c1-300)"
        [ "$rep" = 1 ] && REC_BROKEN=1; return 1
    fi
    a=$(cur_attempt "$id"); log=$(att_log "$id" "$a")
    # (a re-formed attempt has no run dir of its own: the newest rank-0 log)
    [ -n "$log" ] || log=$(ls -t "$RD"/work/dt-"$id"-a*-*/rank-0*.log 2>/dev/null | head -n 1)
    if ! wait_for 60 has_step "$log"; then
        note "recovery.$kind" "rep $rep: attempt $a never stepped: $(grep -h -i 'error' "$RD"/users/*/job-"$id"."$a".*.log 2>/dev/null | head -n 2 | tr '\n' ' ' | cut -c1-200) $(grep -h "job $id attempt $a failed" "$RD/dtctld.log" | head -n 1 | cut -c1-200)"
        [ "$rep" = 1 ] && REC_BROKEN=1; return 1
    fi
    first=$(first_step "$log" | awk '{print $2}')
    [ "$kind" = reform ] && first=$(log_step "$log")
    # Past a checkpoint this attempt committed, and a little more.
    local target=$(( (first / REC_EVERY + 1) * REC_EVERY + REC_EVERY / 2 ))
    wait_for 120 log_step_ge "$log" "$target" \
        || { note "recovery.$kind" "rep $rep: attempt $a did not reach step $target"; return 1; }
    node=$(victim "$id")
    [ -n "$node" ] || { note "recovery.$kind" "rep $rep: no node to kill"; return 1; }
    REC_VICTIM=$node
    if [ "$kind" = rank ] || [ "$kind" = reform ]; then
        pid=$(ns_pids "$node" dttrain | head -n 1)
        [ -n "$pid" ] || { note recovery.rank "rep $rep: no dttrain on $node"; return 1; }
        t_kill=$(now); kill -9 "$pid"
    else
        t_kill=$(now); "$TESTBED" kill-node "$node" > /dev/null 2>&1
    fi
    # The new attempt's first step.
    local nlog="" t_res="" ev na=0
    local shown=""
    if wait_for 120 sh -c "[ \$('$DTCTL' --json show $id | jq -r '.attempts[-1].attempt') -gt $a ]"; then
        # The controller's last step of the old attempt (rank 0's, from the
        # heartbeats: at most one heartbeat interval old); the new attempt
        # has not stepped yet.
        shown=$(show "$id" | jq -r '.last_step // empty')
        na=$(cur_attempt "$id")
        # (its run dir appears only once its agents start)
        local npath; npath=$(show "$id" | jq -r '.attempts[-1].restart_path')
        if [ "$npath" = reform ] || [ "$npath" = hot_spare ]; then
            # The same processes and run directories: the first step line
            # after the kill in any of the job's rank-0 logs (the
            # replacement's is rank-0.a<N>.log), and after rank 0's
            # "re-formed as attempt N" line when it has one (a trainer
            # that logs every step, as gpt_train.py, may log a step its
            # collective had finished before the kill).
            local t_ref=""
            if wait_for 60 reform_step "$id" "$t_kill" "$na"; then
                t_ref=$(reformed_at "$id" "$t_kill" "$na")
            else
                wait_for 5 has_step_after "$id" "$t_kill"
            fi
            nlog=$(step_after "$id" "${t_ref:-$t_kill}" | cut -d' ' -f1)
            t_res=$(step_after "$id" "${t_ref:-$t_kill}" | cut -d' ' -f2)
            rec_transfer "$id" "$t_kill" "$kind"
        else
            wait_for 120 att_has_step "$id" "$na" && nlog=$(att_log "$id" "$na") \
                && t_res=$(first_step "$nlog" | awk '{print $1}')
        fi
    fi
    ev=$(first_event "$id" "$t_kill")
    local lost_last; lost_last=$(last_step "$log")
    [ -n "$shown" ] && [ "$shown" -gt "${lost_last:-0}" ] 2>/dev/null && lost_last=$shown
    if [ -n "$ev" ]; then
        rec "recovery.$kind.detect_s" "$(calc "${ev%% *} - $t_kill")"
    fi
    if [ -n "$t_res" ]; then
        local nfirst; nfirst=$(step_lines "$nlog" | awk -v t="$t_res" '$1 >= t {print $2; exit}')
        rec "recovery.$kind.resume_s" "$(calc "$t_res - $t_kill")"
        rec_phases "$id" "$kind" "$a" "$na" "$t_kill" "$t_res"
        # Steps lost: steps the whole group had completed that the new
        # attempt runs again (the newest step every rank of the failed
        # attempt had completed - the step it resumed from); steps redone:
        # from the newest step any rank had completed, the killed one's
        # included (a step only it completed was never the group's: its
        # peers had not applied it).  (The old figure, from rank 0's log
        # and the controller's last step read after the new attempt
        # appeared, could count the new attempt's own first step.)  Both clamped at 0 by summarize.py (a
        # just-in-time checkpoint resumes past the last step the log showed).
        local gs glast gmax
        gs=$(group_steps "$id" "$a" "$t_kill")
        glast=${gs%% *} gmax=${gs##* }
        [ -n "$gs" ] || glast=$lost_last gmax=$lost_last
        rec "recovery.$kind.steps_lost" "$(( glast - (nfirst - 1) ))"
        rec "recovery.$kind.steps_redone" "$(( gmax - (nfirst - 1) ))"
        printf '   %s kill %d (%s, attempt %d): detected %s s (%s), first step of attempt %d at %s s, steps lost %d (every rank had completed %d, resumed at %d), redone %d (newest step of any rank %d)\n' \
            "$kind" "$rep" "$node" "$a" "$(calc "${ev%% *} - $t_kill")" "${ev#* }" "$na" "$(calc "$t_res - $t_kill")" \
            "$(( glast - (nfirst - 1) ))" "$glast" "$((nfirst - 1))" "$(( gmax - (nfirst - 1) ))" "$gmax" >&2
        if [ "$kind" = node ] && [ -z "${REC_PLOT_DONE:-}" ]; then
            REC_PLOT_DONE=1
            echo "$t_kill ${ev%% *} $t_res $id $a $na" > "$TMP/recovery.marks"
            cp "$log" "$TMP/recovery.old.log"; cp "$nlog" "$TMP/recovery.new.log"
        fi
        return 0
    fi
    note "recovery.$kind" "rep $rep: killed $node at attempt $a; detection: ${ev:-none}; no step of a new attempt within 240 s: $(show "$id" | jq -c '{state, reason, failure, attempts: [.attempts[] | {attempt, state, cause}]}' | cut -c1-400)"
    if [ "$kind" = node ] && [ -z "${REC_PLOT_DONE:-}" ]; then
        REC_PLOT_DONE=1
        echo "$t_kill ${ev%% *} - $id $a -" > "$TMP/recovery.marks"
        cp "$log" "$TMP/recovery.old.log"
    fi
    return 1
}

# step_after ID T: "LOG TIME" of the first step line stamped after epoch T
# in the job's rank-0 logs (any attempt's run dir, a replacement's log too).
step_after () {
    local f best="" bt=""
    for f in "$RD"/work/dt-"$1"-a*-*/rank-0*.log; do
        [ -f "$f" ] || continue
        local t; t=$(step_lines "$f" | awk -v t="$2" '$1 > t {print $1; exit}')
        [ -n "$t" ] || continue
        if [ -z "$bt" ] || [ "$(calc "$t < $bt")" = 1 ]; then bt=$t; best=$f; fi
    done
    [ -n "$bt" ] && echo "$best $bt"
}
has_step_after () { step_after "$@" > /dev/null; }
# reformed_at ID T A: the time of the first "re-formed as attempt A" line
# stamped after epoch T in the job's rank-0 logs (empty: none).
reformed_at () {
    cat "$RD"/work/dt-"$1"-a*-*/rank-0*.log 2>/dev/null \
        | awk -v t="$2" -v a="re-formed as attempt $3 " '$1 > t && index($0, a) {print $1}' | sort -n | head -n 1
}
reform_step () { local t; t=$(reformed_at "$@"); [ -n "$t" ] && has_step_after "$1" "$t"; }
# rec_transfer ID T: the re-formed group's state transfer after epoch T
# (dttrain's "re-formed as attempt ... in X ms" line of rank 0).
rec_transfer () {
    local f ms
    for f in "$RD"/work/dt-"$1"-a*-*/rank-0*.log; do
        ms=$(awk -v t="$2" '$1 > t && match($0, /MB in [0-9.]+ ms/) {
            print substr($0, RSTART + 6, RLENGTH - 9); exit }' "$f" 2>/dev/null)
        [ -n "$ms" ] && { rec "recovery.${3:-reform}.transfer_s" "$(calc "$ms / 1000")"; return; }
    done
}

# rec_phases ID KIND A NA T_KILL T_RES: the phases of one recovery from
# the controller's record of attempts A (failed) and NA (the restart):
# detection (kill to the failure first seen), stop (to the end of A: the
# just-in-time window and the step's end), decision (to NA's submission:
# the restart decision and backoff), start (to NA starting: a new step or
# Slurm job, the agents), first step (to NA's first step: rendezvous,
# checkpoint load); and NA's restart_path, as a note.
rec_phases () {
    local out
    out=$(show "$1" | $PY -c '
import sys, json, datetime
j = json.load(sys.stdin); a, na, tk, tr = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
at = {x["attempt"]: x for x in j.get("attempts", [])}
def s(t):
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp() if t else None
o, n = at.get(a, {}), at.get(na, {})
pts = [tk, s(o.get("fail_time")), s(o.get("end_time")), s(n.get("submit_time")), s(n.get("start_time")), tr]
names = ["detect_phase_s", "stop_s", "decision_s", "start_s", "first_step_s"]
for k in range(5):
    if pts[k] is not None and pts[k + 1] is not None:
        print("%s %.6g" % (names[k], pts[k + 1] - pts[k]))
print("path %s" % (n.get("restart_path") or "none"))' "$3" "$4" "$5" "$6" 2>/dev/null)
    local k v
    while read -r k v; do
        case $k in
            path) REC_PATH=$v ;;
            *) rec "recovery.$2.$k" "$v" ;;
        esac
    done <<< "$out"
    printf '   %s: restart_path %s; phases: %s\n' "$2" "${REC_PATH:-?}" "$(echo "$out" | grep -v '^path' | tr '\n' ' ')" >&2
    [ -n "${REC_PATH:-}" ] && [ -z "$(eval echo "\${REC_PATH_NOTED_$2:-}")" ] && {
        note "recovery.$2" "restart_path of the restarts after a $2 kill: $REC_PATH"; eval "REC_PATH_NOTED_$2=1"; }
}

# --- Slurm's own handling of the same node kill ----------------------------------------------
# A plain batch job (--requeue, the testbed's settings) whose tasks print a
# stamped line every 0.1 s; kill a node that is not the batch host.
rec_slurm () {
    local rep sj node out t_kill t_rq t_rs i
    for rep in $(seq "$REC_REPS"); do
        out=$RD/slurm.$rep.out
        sj=$(sbatch --parsable -N2 --requeue --open-mode=append -o "$out" -J bench-requeue \
             --wrap "srun -N2 --ntasks-per-node=1 bash -c 'while :; do echo \$(date +%s.%N) \$(hostname) \${SLURM_RESTART_COUNT:-0}; sleep 0.1; done'" 2>&1) \
            || { note recovery.slurm "sbatch failed: $sj"; return; }
        if ! wait_for 60 sh -c "[ \$(awk '\$1 ~ /^[0-9.]+\$/ {print \$2}' '$out' 2>/dev/null | sort -u | wc -l) -ge 2 ]"; then
            note recovery.slurm "rep $rep: Slurm job $sj never ran on 2 nodes"; scancel "$sj"; return
        fi
        local bh; bh=$(scontrol -o show job "$sj" | sed -n 's/.*BatchHost=\([^ ]*\).*/\1/p')
        node=$(awk -v bh="$bh" '$1 ~ /^[0-9.]+$/ && $2 != bh {print $2; exit}' "$out")
        t_kill=$(now); "$TESTBED" kill-node "$node" > /dev/null 2>&1
        t_rq=; t_rs=
        for i in $(seq 1200); do
            if [ -z "$t_rq" ] && scontrol -o show job "$sj" 2>/dev/null | grep -q 'Restarts=[1-9]'; then t_rq=$(now); fi
            t_rs=$(awk '$1 ~ /^[0-9.]+$/ && $3 + 0 >= 1 {print $1; exit}' "$out")
            [ -n "$t_rs" ] && break
            sleep 0.1
        done
        [ -n "$t_rq" ] && rec recovery.slurm.requeue_s "$(calc "$t_rq - $t_kill")"
        [ -n "$t_rs" ] && rec recovery.slurm.restart_s "$(calc "$t_rs - $t_kill")"
        printf '   Slurm node kill %d (%s): requeued after %s s, restarted after %s s (from the beginning: no checkpoint)\n' \
            "$rep" "$node" "${t_rq:+$(calc "$t_rq - $t_kill")}" "${t_rs:+$(calc "$t_rs - $t_kill")}" >&2
        [ -z "$t_rs" ] && note recovery.slurm "rep $rep: no restart within 120 s ($(scontrol -o show job "$sj" | grep -o 'JobState=[^ ]*\|Reason=[^ ]*' | tr '\n' ' '))"
        scancel "$sj" 2>/dev/null
        "$TESTBED" start-node "$node" > /dev/null 2>&1
    done
    # The nodes come back (ReturnToService=2) while dtctl's part starts.
    wait_for 30 sh -c "[ -z \"\$(sinfo -h -t down,no_respond -o %N)\" ]"
}

# --- torchrun's restart of the same worker kill ---------------------------------------------
rec_torchrun () {
    local rep d=$TMP/torchrun port pid t_kill t_rs last w
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null \
        || { note recovery.torchrun "skipped: /usr/bin/python3 has no torch"; return; }
    mkdir -p "$d"
    for rep in $(seq "$REC_REPS"); do
        port=$(free_port)
        # --redirects 1 --tee 1: torch 1.13 on Python 3.11 fails with the
        # defaults (shared/notes/toolchain.md section 4).  Step lines go to stderr.
        BENCH_STEP_LOG=1 setsid /usr/bin/python3 -m torch.distributed.run --nnodes 1 --nproc_per_node 2 \
            --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" --max_restarts 3 --redirects 1 --tee 1 \
            --log_dir "$d/logs.$rep" "$SRC/bench/torch_ddp_ref.py" "${REC_MODEL[@]}" --steps 100000000 \
            > "$d/run.$rep" 2>&1 &
        pid=$!
        PIDS="$PIDS $pid"
        if ! wait_for 60 sh -c "[ \$(grep -c ' restart 0\$' '$d/run.$rep' 2>/dev/null) -ge 30 ] 2>/dev/null"; then
            note recovery.torchrun "rep $rep: no steps ($(tail -n 2 "$d/run.$rep" | tr '\n' ' ' | cut -c1-200))"
            kill -9 -- -"$pid" 2>/dev/null; return
        fi
        w=
        for p in $(pgrep -s "$pid" -f torch_ddp_ref.py); do
            tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'LOCAL_RANK=1' && w=$p
        done
        [ -n "$w" ] || { note recovery.torchrun "rep $rep: worker of local rank 1 not found"; kill -9 -- -"$pid"; return; }
        t_kill=$(now); kill -9 "$w"
        t_rs=
        wait_for 120 sh -c "grep -q ' restart 1\$' '$d/run.$rep'" && t_rs=$(awk '$NF == "1" && $2 == "step" {print $1; exit}' "$d/run.$rep")
        last=$(awk -v t="$t_kill" '$NF == "0" && $2 == "step" && $1 <= t {s = $3} END {print s + 0}' "$d/run.$rep")
        if [ -n "$t_rs" ]; then
            rec recovery.torchrun.restart_s "$(calc "$t_rs - $t_kill")"
            rec recovery.torchrun.steps_lost "$last"
            printf '   torchrun worker kill %d: first step of the restarted workers after %s s; steps lost %d (the script does not checkpoint)\n' \
                "$rep" "$(calc "$t_rs - $t_kill")" "$last" >&2
        else
            note recovery.torchrun "rep $rep: no restart within 120 s ($(tail -n 3 "$d/run.$rep" | tr '\n' ' ' | cut -c1-300))"
        fi
        kill -TERM -- -"$pid" 2>/dev/null; sleep 1; kill -9 -- -"$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    note recovery.torchrun "torchrun: 1 node x 2 workers on the host, --max_restarts 3, default monitor interval; same model as the dtctl job, no checkpointing in the script (torchrun restarts from the script's start)"
}

# --- 7. the plot ----------------------------------------------------------------------------------
rec_plot () {
    [ -f "$TMP/recovery.marks" ] || { note plot "no node-kill recovery recorded: no plot"; return; }
    command -v gnuplot >/dev/null || { note plot "gnuplot not installed: no plot"; return; }
    local t_kill t_det t_res
    read -r t_kill t_det t_res _ < "$TMP/recovery.marks"
    # From the controller's metrics API: time since the kill (s), step, loss,
    # step time (compute + comm, ms), one block per attempt (old, then new).
    read -r _ _ _ _ a_old a_new < "$TMP/recovery.marks"
    $PY - "$TMP/recovery.metrics.json" "$t_kill" "$a_old" "$a_new" > "$TMP/recovery.dat" <<'PYEOF' || true
import datetime, json, sys
pts = json.load(open(sys.argv[1])).get("data") or {}
pts = pts.get("points", pts) if isinstance(pts, dict) else pts
t0 = float(sys.argv[2])
def ts(v):
    if isinstance(v, (int, float)):
        return v / 1000.0
    return datetime.datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
for a in (sys.argv[3], sys.argv[4]):
    for p in sorted((p for p in pts if str(p.get("attempt")) == a), key=lambda p: ts(p["time"])):
        t = ts(p["time"]) - t0
        if -60 < t < 60:
            st = (p.get("compute_ms") or 0) + (p.get("comm_ms") or 0)
            print("%.3f %d %s %.2f" % (t, p["step"], p.get("loss"), st))
    print("\n")
PYEOF
    local det=NaN res=NaN after=0
    [ -s "$TMP/recovery.new.log" ] && after=1
    [ -n "$t_det" ] && [ "$t_det" != - ] && det=$(calc "$t_det - $t_kill")
    [ -n "$t_res" ] && [ "$t_res" != - ] && res=$(calc "$t_res - $t_kill")
    gnuplot > "$TMP/gnuplot.log" 2>&1 <<EOF
set terminal pngcairo size 1000,700 noenhanced font ",10"
set output "$TMP/recovery.png"
set multiplot layout 2,1 title "dttrain on 2 Slurm testbed nodes: node killed at t = 0 (dtctl; detection at $det s, first step of the new attempt at $res s)"
set grid
set xrange [*:*]
set style line 1 lc rgb "red" lw 2
set style line 2 lc rgb "orange" lw 2 dt 2
set style line 3 lc rgb "forest-green" lw 2 dt 3
set arrow 1 from 0, graph 0 to 0, graph 1 nohead ls 1
set label 1 "node killed" at 0, graph 0.95 offset 0.5,0 tc rgb "red"
if ("$det" ne "NaN") { set arrow 2 from $det, graph 0 to $det, graph 1 nohead ls 2; set label 2 "detected" at $det, graph 0.85 offset 0.5,0 tc rgb "orange" }
if ("$res" ne "NaN") { set arrow 3 from $res, graph 0 to $res, graph 1 nohead ls 3; set label 3 "resumed" at $res, graph 0.75 offset 0.5,0 tc rgb "forest-green" }
set ylabel "training loss (rank 0)"
if ($after) { plot "$TMP/recovery.dat" index 0 using 1:3 with lines lw 1.5 title "attempt before", "" index 1 using 1:3 with lines lw 1.5 title "attempt after" } else { plot "$TMP/recovery.dat" index 0 using 1:3 with lines lw 1.5 title "attempt before (no new attempt)" }
set ylabel "step time (ms)"
set xlabel "wall-clock time since the node kill (s)"
set logscale y
if ($after) { plot "$TMP/recovery.dat" index 0 using 1:4 with points pt 7 ps 0.4 title "attempt before", "" index 1 using 1:4 with points pt 7 ps 0.4 title "attempt after" } else { plot "$TMP/recovery.dat" index 0 using 1:4 with points pt 7 ps 0.4 title "attempt before" }
unset multiplot
EOF
    [ -s "$TMP/recovery.png" ] || note plot "gnuplot failed: $(tail -n 3 "$TMP/gnuplot.log" | tr '\n' ' ')"
}
