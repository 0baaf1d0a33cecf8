# ft-lib.sh: helpers of the fault-tolerance system tests t070x-t074x (issue
# 7) with the LOCAL launcher and real dttrain jobs: a corpus, the job spec,
# an uninterrupted baseline run, waiting for steps, and the timeline of a
# failure (injected, detected, attempt ended, new attempt running, first
# new step, steps lost) printed as TAP comments.
. "$(dirname "$0")/ctld-lib.sh"
DTTRAIN=$TOP_BUILDDIR/trainer/dttrain
[ -x "$DTTRAIN" ] || skip_all "dttrain not built"
command -v python3 >/dev/null || skip_all "python3 not installed"

# The tiny model every test trains (dttrain's default, the transformer,
# sized down to a step as short as the MLP's was: 1 block of width 16 over
# 8 bytes): deterministic for (seed, world size); --inject-slow keeps each
# step long enough (tens of ms) to hit mid-run.
CORPUS=$TMP/corpus.txt
cat "$TOP_SRCDIR"/man/*.in "$TOP_SRCDIR"/schemas/agent-api.md "$TOP_SRCDIR"/trainer/*.c \
    > "$CORPUS"
: "${FT_STEPS:=120}"
# FT_MODEL: the model's options (e.g. "--model mlp --hidden 64 --layers 2"
# runs these tests on the MLP).
: "${FT_MODEL:=--context 8 --width 16 --heads 2 --layers 1}"
MODEL_ARGS="--data $CORPUS --steps $FT_STEPS --global-batch 32 $FT_MODEL --val-samples 16 --quiet"

# (bash's clock: no process to start)
now_ms () { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }

# dttrain_spec NAME NODES 'extra dttrain args' [jq-merge-object]: a job spec
# running dttrain through "sh -c" (so a test may wrap it), 1 rank per node,
# checkpoints every 20 steps; workdir $FT_WORKDIR where set.
dttrain_spec () {
    local name=$1 nodes=$2 extra=$3 merge=${4:-'{}'}
    jq -n --arg n "$name" --argjson nodes "$nodes" --arg t "$DTTRAIN" --arg a "$MODEL_ARGS $extra" \
        --arg c "$TMP/ckpt" --arg w "${FT_WORKDIR:-}" --argjson m "$merge" '({
        name: $n, nodes: $nodes, ranks_per_node: 1,
        command: ["sh", "-c", "exec \"$0\" \($a)", $t],
        env: {OPENBLAS_NUM_THREADS: "1"},
        checkpoint: {dir: $c, every_steps: 20, keep: 3},
        restart: {max_restarts: 3},
        heartbeat: {interval_ms: 200}} + (if $w != "" then {workdir: $w} else {} end)) * $m'
}

# baseline W: params_crc32c of an uninterrupted standalone run (same model,
# same world size, no agent, gloo bootstrap through a directory); its
# ranks' output in $TMP/base.R.{out,err}.  Such a run is deterministic, and
# several tests ask for the same one: its outputs are kept in the build
# tree (baseline_key: the dttrain binary and the build's libraries, the
# arguments, the corpus's content, the environment dttrain reads) and a
# later identical run is taken from there instead of training again.
BASELINE_CACHE=$TOP_BUILDDIR/tests/system/baseline-cache
baseline () {
    local W=$1 r key dir new
    key=$(baseline_key "$W")
    dir=$BASELINE_CACHE/$key
    if [ -n "$key" ] && [ -s "$dir/base.0.out" ]; then
        for r in $(seq 0 $((W - 1))); do cp "$dir/base.$r.out" "$dir/base.$r.err" "$TMP/" || return 1; done
        echo "# baseline (world $W): the identical earlier run's, from $dir" >&2
    else
        baseline_run "$W" || return 1
        if [ -n "$key" ] && mkdir -p "$BASELINE_CACHE" && new=$(mktemp -d "$BASELINE_CACHE/.new.XXXXXX"); then
            for r in $(seq 0 $((W - 1))); do cp "$TMP/base.$r.out" "$TMP/base.$r.err" "$new/"; done
            # (atomic; a concurrent identical run may have stored it first)
            mv -T "$new" "$dir" 2>/dev/null || rm -rf "$new"
        fi
    fi
    # "crc core": which numerics gave which baseline (same_params)
    python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(r["params_crc32c"], (r.get("numerics") or {}).get("blas_core") or r.get("blas_core", "-"))' \
        "$TMP/base.0.out" >> "$TMP/baseline.cores"
    tail -n 1 "$TMP/baseline.cores" | cut -d' ' -f1
}
# same_params ID GOT BASE: the job's final params_crc32c GOT equals the
# baseline's BASE, and the two computed alike: the job's pinned numerics
# (its first attempt's BLAS core type) are the baseline run's.  A
# baseline run inherits the test's environment (OPENBLAS_CORETYPE set or
# not), and so do the job's ranks, through dtctld's PassEnv.
same_params () {
    local core bcore j
    bcore=$(awk -v c="$3" '$1 == c { print $2; exit }' "$TMP/baseline.cores" 2>/dev/null)
    if j=$(curl -sf "$URL/v1/jobs/$1"); then
        core=$(jq -r '.data.numerics.blas_core // empty' <<< "$j")
        [ -n "$core" ] || { echo "# same_params: job $1 recorded no numerics"; return 1; }
        if [ -n "$bcore" ] && [ "$bcore" != - ] && [ "$core" != "$bcore" ]; then
            echo "# same_params: not like with like: job $1 computed with core $core, the baseline with $bcore"
            return 1
        fi
        echo "# job $1 and its baseline computed with OpenBLAS core ${core}"
    else
        echo "# same_params: the controller does not answer: numerics not compared"
    fi
    same "$2" "$3"
}
# baseline_key W: a hash of everything the run depends on, or nothing (no
# caching) when an argument names a path that is not a plain file.
baseline_key () {
    local a in real=$TOP_BUILDDIR/trainer/.libs/dttrain
    [ -x "$real" ] || real=$DTTRAIN
    in=$(
        echo "world $1"
        uname -n; ls /dev/nvidia* 2>/dev/null
        sha256sum "$real" $(find "$TOP_BUILDDIR" -path '*/.libs/*.so*' -type f | sort) | awk '{print $1}'
        for a in $MODEL_ARGS; do
            case $a in
                */*) [ -f "$a" ] || { echo "uncacheable"; exit 0; }
                     echo "file $(sha256sum < "$a")" ;;
                *) echo "arg $a" ;;
            esac
        done
        env | grep -E '^(DT|DTTRAIN|TORCHELASTIC|OPENBLAS|OMP|GOTO|MKL|LOCAL|MASTER|GLOO)[A-Z_]*=' \
            | grep -vE '^(DT_API_VALIDATE|DT_SUBMIT_USER|DT_PATH_NOWRAP|DT_TESTBED_DIR|DT_USER_[AB])=' | sort
    )
    case $in in *uncacheable*) return 0 ;; esac
    printf '%s\n' "$in" | sha256sum | cut -c1-32
}
baseline_run () {
    local W=$1 r rdv pids=""
    rdv=$(mktemp -d "$TMP/rdv.XXXXXX")
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 OPENBLAS_NUM_THREADS=1 \
            "$DTTRAIN" --rendezvous-dir "$rdv" $MODEL_ARGS > "$TMP/base.$r.out" 2> "$TMP/base.$r.err" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p" || { sed 's/^/# baseline: /' "$TMP"/base.*.err | tail -5; return 1; }; done
}

submit () {
    api POST /v1/jobs -d "$1" > "$TMP/submit.json"
    [ "$(status)" = 201 ] || { echo "# submit: $(status) $(cat "$TMP/submit.json")"; return 1; }
    ID=$(jq -r .data.id "$TMP/submit.json")
}

job_step () { curl -s "$URL/v1/jobs/$1" | jq -r '.data.step // -1'; }
# wait_step ID STEP SECONDS: until the job's live step reaches STEP.
wait_step () { wait_for "$3" sh -c "test \"\$(curl -s $URL/v1/jobs/$1 | jq -r '.data.step // -1')\" -ge $2"; }
wait_state () { wait_for "$3" sh -c "test \"\$(curl -s $URL/v1/jobs/$1 | jq -r .data.state)\" = $2"; }
# wait_att ID STATE SECONDS: until the latest attempt is in STATE.
wait_att () { wait_for "$3" sh -c "test \"\$(curl -s $URL/v1/jobs/$1 | jq -r '.data.attempts[-1].state')\" = $2"; }
# pid of rank R of the live attempt.
rank_pid () { curl -s "$URL/v1/jobs/$1/ranks" | jq -r ".data[] | select(.rank == $2) | .pid"; }

# timeline ID INJECT_MS [ATTEMPT]: the failure of attempt ATTEMPT (default 1)
# and the recovery by the next one, from the API, as TAP comments; exports
# T_DETECT_MS, T_FIRST_STEP_MS, STEPS_LOST.
timeline () {
    local id=$1 inj=$2 a=${3:-1}
    curl -s "$URL/v1/jobs/$id" > "$TMP/tl.job.json"
    curl -s "$URL/v1/jobs/$id/events" > "$TMP/tl.events.json"
    curl -s "$URL/v1/jobs/$id/metrics" > "$TMP/tl.metrics.json"
    python3 - "$TMP/tl.job.json" "$TMP/tl.events.json" "$TMP/tl.metrics.json" "$inj" "$a" \
        > "$TMP/tl.txt" <<'PYEOF'
import json, sys, datetime
job = json.load(open(sys.argv[1]))["data"]
ev = json.load(open(sys.argv[2]))["data"]
mt = json.load(open(sys.argv[3]))["data"]["points"]
inj = int(sys.argv[4]); a = int(sys.argv[5])
def ms(t):
    if not t: return None
    return int(datetime.datetime.strptime(t.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000)
atts = {x["attempt"]: x for x in job["attempts"]}
fa, na = atts.get(a), atts.get(a + 1)
det = ms(fa and fa.get("fail_time"))
ended = ms(fa and fa.get("end_time"))
running = ms(na and na.get("start_time"))
# last step seen in the failed attempt (events/metrics), first of the next
before = [p["step"] for p in mt if p["attempt"] == a]
resume = na.get("resume_step") if na else None
fs = [e for e in ev if e["kind"] == "first_step" and e["attempt"] == a + 1]
first = {"time": fs[0]["time"], "step": fs[0]["data"]["step"]} if fs else None
# the last step the failed attempt was seen at: metrics, and its ranks
before += [e["data"]["step"] for e in ev if e["kind"] == "first_step" and e["attempt"] == a]
# exact: the last step each exiting rank reported (its agent read its page)
before += [e["data"]["last_step"] for e in ev if e["attempt"] == a and e.get("data")
           and e["kind"] in ("trainer_exit", "rank_exit") and e["data"].get("last_step") is not None]
last = max(before) if before else None
lost = (last - (resume if resume is not None else 0)) if last is not None else None
# A stop's checkpoint is taken a little ahead of the fastest rank, after the
# last step the heartbeats sampled: nothing was lost then.
ahead = lost is not None and lost < 0
if ahead:
    lost = 0
def rel(t): return "%+.3f s" % ((t - inj) / 1000.0) if t else "n/a"
print("# timeline of attempt %d -> %d (times relative to the injection)" % (a, a + 1))
print("#   failure injected       %s" % rel(inj))
print("#   detected (first seen)  %s  cause=%s node=%s rank=%s" % (rel(det), fa and fa.get("cause"),
      fa and fa.get("cause_node"), fa and fa.get("cause_rank")))
print("#   attempt %d ended        %s" % (a, rel(ended)))
print("#   attempt %d running      %s  (resume_step %s, %s nodes)" % (a + 1, rel(running), resume,
      na and na.get("num_nodes")))
print("#   first new step         %s  (step %s)" % (rel(ms(first["time"])) if first else "n/a",
      first["step"] if first else None))
print("#   steps lost             %s  (last step seen %s, resumed from %s%s)" % (lost, last, resume,
      ": the checkpoint was ahead of it" if ahead else ""))
print("T_DETECT_MS=%s" % ((det - inj) if det else -1))
print("T_FIRST_STEP_MS=%s" % ((ms(first["time"]) - inj) if first else -1))
print("STEPS_LOST=%s" % (lost if lost is not None else -1))
PYEOF
    grep '^#' "$TMP/tl.txt"
    eval "$(grep '^[A-Z_]*=' "$TMP/tl.txt")"
}

# ft_own_procs: the live processes of this test: those whose command line
# or environment names its private directory (procs_naming: agents,
# trainers, whatever they started, also after they left their process
# group or were reparented) and that run as root or as the test's
# submitting user; never the test's shell.  Not "every process reading a
# corpus": another test's or another user's processes are left alone.
ft_own_procs () {
    local p u ok_uids
    ok_uids=" 0 ${DT_SUBMIT_USER:+$(id -u "$DT_SUBMIT_USER") }"
    for p in $(procs_naming "$TMP" $$); do
        u=$(awk '/^Uid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
        case "$ok_uids" in *" $u "*) echo "$p" ;; esac
    done
}

# first_attempt_only 'ARGS' SPEC: the job SPEC (dttrain_spec's) with ARGS
# added to dttrain's command in the first attempt only: an injected fault
# the restarted attempt must not meet again (--inject-hang R:S holds rank
# R at step S, so that a kill lands there, mid-run, however loaded the
# machine: the job cannot end while R holds, and the hang timeout's floor
# is 30 s).
first_attempt_only () {
    jq -c --arg x "$1" \
        '.command[2] |= "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then \(.) \($x); fi; \(.)"' \
        <<< "$2"
}

# Trainers of the local launcher run in their own process groups: also
# kill whatever process of this test is left (cleanup after ctld_cleanup).
ft_cleanup () {
    for p in $(ft_own_procs); do kill -9 "$p" 2>/dev/null; done
    ctld_cleanup
}
trap ft_cleanup EXIT
