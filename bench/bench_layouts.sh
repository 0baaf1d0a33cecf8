#!/bin/bash
# bench_layouts.sh: dttrain's parallel layouts (numbers, not asserts).
#  (1) tokens/s of the transformer in each layout at 1, 2, 4 and 8 ranks
#      (dp, tp, pp and their combinations), with each dimension's exposed
#      communication (tp_exposed_s, pp_exposed_s, dp_exposed_s of the
#      summary) as a fraction of the wall time;
#  (2) the pipeline bubble: for pp 2 and M micro-batches per step, the
#      share of the stages' time in the pipeline phase of the step that no
#      pass used, and stage 0's time blocked on its neighbour, against the
#      theory (P - 1) / (M + P - 1),
#      where it went (each run traced with DT_PP_TRACE and replayed by
#      bench/pp_trace.py), and with BGLOO=1 the same over gloo
#      (DT_PP_TRANSPORT=gloo) against the default shared memory, interleaved;
#  (3) communication overlap: a model whose backward pass takes longer
#      than its gradient all-reduce (dp 2), every bucket size of BUCKETS,
#      with and without the comm thread: the all-reduce time (without) and
#      the part the step still waited for (with); hidden = 1 - exposed with
#      / all-reduce without (goal >= 80%); zero1's all-gather with and
#      without overlap; and the exposed share of the step per layout
#      (dp2, dp2 x tp2) before and after overlap;
#  (4) dp tokens/s against PyTorch DDP (gloo) on the same transformer
#      (bench/torch_tfm_ref.py), 2 ranks, same shapes, data and threads
#      (goal >= 1.2x).
# Caveat: every rank is a process; with more ranks than cores (the project's
# 2-core machine) the ranks share cores, so tokens/s at 4 and 8 ranks
# measure the scheduler as much as the layout, the bubble includes waiting
# for a core, and the comm thread competes with the ranks for the cores.
# Usage: bench/bench_layouts.sh [BUILDDIR]   (default: the current directory)
# Env: STEPS (10), BATCH (32), CTX (64), WIDTH (128), HEADS (4), LAYERS (4),
#      RANKS ("1 2 4 8"), MBS ("1 2 4 8": micro-batches per step for (2)),
#      BWIDTH (384), BLAYERS (12), BBATCH (64), BSTEPS (6): (2)'s model,
#      BGLOO (0; 1: (2) also over gloo's TCP pair, interleaved),
#      OV_WIDTH (256), OV_LAYERS (4), OV_BATCH (16), OV_STEPS (6), BUCKETS ("1 4 16")
#      for (3) and (4), BENCH_NICE (-10: the niceness of (2)'s and (3)'s
#      ranks and of their scheduling groups when run as root; 0: none),
#      REPS (3), SECTIONS ("1 2 3 4": which of (1)-(4) to
#      run), LAYOUTS_OUT (a directory: layouts.md and
#      layouts.json are written there), LAYOUTS_REC (a file: "key value"
#      lines for bench/run).
# Prints the tables and one JSON line per figure at the end.
set -u
B=$(cd "${1:-.}" && pwd)
SRC=${BENCH_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
DTTRAIN=$B/trainer/dttrain
STEPS=${STEPS:-10} BATCH=${BATCH:-32} CTX=${CTX:-64} WIDTH=${WIDTH:-128} HEADS=${HEADS:-4}
LAYERS=${LAYERS:-4} RANKS=${RANKS:-"1 2 4 8"} MBS=${MBS:-"1 2 4 8"}
BWIDTH=${BWIDTH:-384} BLAYERS=${BLAYERS:-12} BBATCH=${BBATCH:-64} BSTEPS=${BSTEPS:-6} BGLOO=${BGLOO:-0}
OV_WIDTH=${OV_WIDTH:-256} OV_LAYERS=${OV_LAYERS:-4} OV_BATCH=${OV_BATCH:-16} OV_STEPS=${OV_STEPS:-6}
BUCKETS=${BUCKETS:-"1 4 16"} REPS=${REPS:-3} SECTIONS=${SECTIONS:-"1 2 3 4"}
PY=/usr/bin/python3
[ -x "$DTTRAIN" ] || { echo "bench_layouts: $DTTRAIN not built" >&2; exit 1; }
TMP=$(mktemp -d /tmp/bench-layouts.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cat "$SRC"/man/*.in "$SRC"/schemas/*.md "$SRC"/trainer/*.c > "$TMP/corpus.txt"
common="--data $TMP/corpus.txt --model transformer --warmup-steps 2 --val-samples 0 --quiet --backend cpu"
model="$common --global-batch $BATCH --context $CTX --width $WIDTH --heads $HEADS --layers $LAYERS --steps $STEPS"
# (2)'s model: 6 blocks per stage, so that the last stage's extra work (the
# final LayerNorm, the head and the loss: 2V / (24E + 4C) of a block, 5% at
# E = 384, V = 256) is 1% of a stage and the stages are as equal as the
# theory assumes; with the small model (E = 128, 2 blocks per stage) it is
# 7%, and the bubble measures that imbalance more than the schedule
bmodel="$common --global-batch $BBATCH --context $CTX --width $BWIDTH --heads $HEADS --layers $BLAYERS --steps $BSTEPS"
ovmodel="$common --global-batch $OV_BATCH --context $CTX --width $OV_WIDTH --heads $HEADS --layers $OV_LAYERS --steps $OV_STEPS"
LINES=$TMP/lines.jsonl
: > "$LINES"

# run W NAME args...: W ranks standalone (gloo over loopback), each under
# $NICE (a command prefix, e.g. "nice -n -10"); rank 0's summary in $TMP/NAME.json
NICE=
run () {
    local W=$1 name=$2 r pids=""
    shift 2
    rm -rf "$TMP/rdv-$name"
    mkdir -p "$TMP/rdv-$name"
    for r in $(seq 0 $((W - 1))); do
        RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r LOCAL_WORLD_SIZE=$W $NICE "$DTTRAIN" \
            --rendezvous-dir "$TMP/rdv-$name" "$@" >"$TMP/$name.$r.out" 2>"$TMP/$name.$r.err" &
        pids="$pids $!"
    done
    local rc=0
    for p in $pids; do wait "$p" || rc=1; done
    [ $rc = 0 ] || { tail -2 "$TMP/$name.0.err" >&2; return 1; }
    tail -n 1 "$TMP/$name.0.out" > "$TMP/$name.json"
}
# fig NAME KEYS...: append rank 0's summary of run NAME, with extra keys, to LINES
fig () {
    local name=$1
    shift
    $PY - "$TMP/$name.json" "$@" >> "$LINES" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    d[k] = int(v) if k in ("ranks", "micro_batches", "rep") else v
print(json.dumps(d))
PYEOF
}
free_port () { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== $(date -u +%FT%TZ), $(OMP_NUM_THREADS= nproc) cores usable ($(getconf _NPROCESSORS_ONLN) online), load $(cut -d' ' -f1-3 /proc/loadavg)"
# (2) and (3) measure a schedule on cores of its own: as root, each rank
# runs in a session of its own (setsid) whose scheduling group (Linux's
# autogroup: a session's processes share one group, and plain nice only
# ranks processes within their group) has nice BENCH_NICE (-10), so that
# other work on the machine yields its cores to the ranks for these short
# runs (the core share in (2) says how far it did; without it, on the
# shared 2-core machine, the stages got 0.2 to 0.3 of a core and the
# bubble and the skew between the ranks measured the scheduler).
MYNICE=
if [ "$(id -u)" = 0 ] && [ "${BENCH_NICE:--10}" != 0 ]; then
    printf '#!/bin/sh\nn=$1; shift\necho "$n" > /proc/self/autogroup 2>/dev/null\nexec nice -n "$n" "$@"\n' \
        > "$TMP/nice.sh"
    chmod +x "$TMP/nice.sh"
    MYNICE="setsid -w $TMP/nice.sh ${BENCH_NICE:--10}"
fi
want () { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
want 1 && {
echo "== (1) tokens/s per layout (C$CTX E$WIDTH H$HEADS L$LAYERS, batch $BATCH, $STEPS steps)"
for W in $RANKS; do
    for lay in "1 1" "2 1" "4 1" "1 2" "1 4" "2 2" "2 4" "4 2"; do
        set -- $lay
        tp=$1 pp=$2
        [ $((W % (tp * pp))) = 0 ] || continue
        [ $((HEADS % tp)) = 0 ] && [ $((LAYERS % pp)) = 0 ] || continue
        name="w$W-tp$tp-pp$pp"
        run "$W" "$name" $model --tp $tp --pp $pp || { echo "# $name failed"; continue; }
        fig "$name" fig=layout ranks=$W
    done
done
}

want 2 && {
echo "== (2) pipeline bubble, pp 2 on 2 ranks: the stages' idle share vs (P-1)/(M+P-1), x $REPS"
# add_trace PREFIX: the run's trace replayed (bench/pp_trace.py), its
# figures added as trace_* to the last line of the results
add_trace () {
    $PY "$SRC/bench/pp_trace.py" "$1" > "$TMP/trace.json" &&
        $PY - "$LINES" "$TMP/trace.json" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
d = json.loads(lines[-1])
d.update({"trace_" + k: v for k, v in json.load(open(sys.argv[2])).items()})
lines[-1] = json.dumps(d)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PYEOF
}

NICE=$MYNICE
for rep in $(seq "$REPS"); do
    for M in $MBS; do
        [ $((BBATCH % M)) = 0 ] || continue
        DT_PP_TRACE=$TMP/trace-$M run 2 "bubble-$M" $bmodel --pp 2 --micro-batch $((BBATCH / M)) ||
            continue
        fig "bubble-$M" fig=bubble micro_batches=$M rep=$rep nice="${NICE:+${BENCH_NICE:--10}}"
        # where the bubble went: the run's trace replayed (bench/pp_trace.py)
        add_trace "$TMP/trace-$M"
        # the same over gloo's TCP pair (DT_PP_TRANSPORT), interleaved
        [ "$BGLOO" = 1 ] || continue
        DT_PP_TRANSPORT=gloo DT_PP_TRACE=$TMP/trace-$M run 2 "bubble-gloo-$M" $bmodel --pp 2 \
            --micro-batch $((BBATCH / M)) || continue
        fig "bubble-gloo-$M" fig=bubble_gloo micro_batches=$M rep=$rep
        add_trace "$TMP/trace-$M"
    done
done
NICE=
}

want 3 && {
echo "== (3) overlap: dp 2, E$OV_WIDTH L$OV_LAYERS batch $OV_BATCH, buckets $BUCKETS MiB, x $REPS"
NICE=$MYNICE
for rep in $(seq "$REPS"); do
    for bm in $BUCKETS; do
        for ov in no-overlap overlap; do
            run 2 "ov-$bm-$ov" $ovmodel --bucket-mb "$bm" --$ov || continue
            fig "ov-$bm-$ov" fig=overlap bucket_mb="$bm" mode=$ov rep=$rep nice="${NICE:+${BENCH_NICE:--10}}"
        done
    done
    for ov in no-overlap overlap; do
        run 2 "z1-$ov" $ovmodel --parallel zero1 --$ov || continue
        fig "z1-$ov" fig=zero1 mode=$ov rep=$rep
    done
    for lay in "2 1" "1 2"; do
        set -- $lay
        for ov in no-overlap overlap; do
            run 4 "lay-tp$1-$ov" $ovmodel --tp "$1" --pp "$2" --$ov || continue
            fig "lay-tp$1-$ov" fig=exposed layout="dp2 x tp$1 x pp$2" mode=$ov rep=$rep
        done
    done
done
NICE=
}

want 4 && {
echo "== (4) dp 2: dttrain vs PyTorch DDP (gloo) on the same transformer, x $REPS"
for rep in $(seq "$REPS"); do
    run 2 "dt-dp2" $ovmodel || continue
    fig "dt-dp2" fig=ddp who=dttrain rep=$rep
    port=$(free_port) pids=""
    for r in 0 1; do
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 \
            $PY "$SRC/bench/torch_tfm_ref.py" --data "$TMP/corpus.txt" --global-batch "$OV_BATCH" \
            --context "$CTX" --width "$OV_WIDTH" --heads "$HEADS" --layers "$OV_LAYERS" \
            --steps "$OV_STEPS" --warmup-steps 2 > "$TMP/ddp.$r.out" 2>"$TMP/ddp.$r.err" &
        pids="$pids $!"
    done
    ok=1
    for p in $pids; do wait "$p" || ok=0; done
    [ $ok = 1 ] || { tail -2 "$TMP/ddp.0.err" >&2; continue; }
    tail -n 1 "$TMP/ddp.0.out" > "$TMP/ddp.json"
    fig ddp fig=ddp who=torch rep=$rep
done
}

CTX=$CTX BWIDTH=$BWIDTH HEADS=$HEADS BLAYERS=$BLAYERS BBATCH=$BBATCH BSTEPS=$BSTEPS $PY - "$LINES" "${LAYOUTS_OUT:-}" "${LAYOUTS_REC:-}" "$(getconf _NPROCESSORS_ONLN)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, os, statistics, sys, time
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, recf, ncpu, load = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
md, rec = [], []
def p(s=""):
    print(s); md.append(s)
def stat(v):
    v = [x for x in v if x is not None]
    if not v:
        return None, "n/a"
    m = statistics.median(v)
    return m, ("%.3g" % m) if len(v) == 1 else "%.3g [%.3g..%.3g]" % (m, min(v), max(v))
ex = lambda d: d["tp_exposed_s"] + d["pp_exposed_s"] + d["dp_exposed_s"]

p("# dttrain parallel layouts (bench/bench_layouts.sh)")
p()
p("%s, %s cores, load average at the end %s. Medians [min..max] over the repetitions." %
  (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), ncpu, load))
p("Caveat: each rank is a process; on this %s-core machine, shared with other work, 4 and 8 ranks "
  "share the cores, so their tokens/s measure the scheduler as much as the layout." % ncpu)
p()
if any(d["fig"] == "layout" for d in rows):
    p("## (1) tokens/s per layout (one run each)")
    p()
    p("| ranks | layout | tokens/s | tp exposed | pp exposed | dp exposed | (share of wall time) |")
    p("|---|---|---|---|---|---|---|")
    for d in rows:
        if d["fig"] != "layout":
            continue
        w = d["wall_s"] or 1
        p("| %d | tp%d x pp%d x dp%d | %.0f | %.1f%% | %.1f%% | %.1f%% | |" % (
            d["ranks"], d["tp"], d["pp"], d["dp"], d["tokens_per_s"], 100 * d["tp_exposed_s"] / w,
            100 * d["pp_exposed_s"] / w, 100 * d["dp_exposed_s"] / w))
        rec.append(("layouts.tps.w%d.tp%dpp%d" % (d["ranks"], d["tp"], d["pp"]), d["tokens_per_s"]))
    p()
if any(d["fig"] == "bubble" for d in rows):
    p("## (2) pipeline bubble, pp 2 (the share of the stages' time in the pipeline that no pass used)")
    p()
    C, E, L = (int(os.environ[k]) for k in ("CTX", "BWIDTH", "BLAYERS"))
    # the head's multiply-adds per token over a stage's (V = 256: bytes)
    head = 2 * 256 / (24 * E + 4 * C) / (L / 2)
    p("Model: C%d E%d H%s L%d, batch %s, %s steps (%g blocks per stage: the last stage's final "
      "LayerNorm, head and loss add %.0f%% to its work, 2V / (24E + 4C) of a block; the theory "
      "assumes equal stages; with 2 blocks of E = 128 per stage they add 7%%, and the bubble "
      "measures that imbalance more than the schedule)." % (
          C, E, os.environ["HEADS"], L, os.environ["BBATCH"], os.environ["BSTEPS"], L / 2,
          100 * head))
    p()
    p("pipeline, measured: 1 - the stages' pass time (pp_stage_pass_s, summed over the stages) / "
      "(P x the pipeline phase of the steps). The phase is stage 0's forward/backward phase "
      "(pp_stage_phase_s[0]: the optimizer step, which no bubble touches, is left out; the first "
      "stage starts each step's pipeline and ends it, so its phase is the pipeline's); the sends' "
      "copies and the receives' waits count as bubble. This is the bubble of the theory "
      "(P-1)/(M+P-1), which assumes equal stages, free transfers and a core per stage, and gives "
      "every stage that share idle. stage 0, measured: stage 0's time blocked on its neighbour "
      "(pp_exposed_s) over the same phase: with unequal stages the faster stage waits the "
      "difference M times and the slower one does not, so one stage's share moves with which "
      "stage was slower in the run.")
    p()
    p("stages as they ran: with W_p the wall time of stage p's passes (pp_stage_pass_s, "
      "core sharing included), 1F1B's steady state runs at the pace of the slowest stage: a step "
      "lasts sum W_p + (M - 1) max W_p (per micro-batch); stage p is idle 1 - M W_p / that, and "
      "the pipeline the mean of that over the stages. "
      "The difference between it and the measurement is what the transfers cost, and the slots in "
      "which the other stage was the slower one because the scheduler held it back (on shared cores "
      "the pace of each slot is the slower stage's in that slot, and the mean of that maximum exceeds "
      "the maximum of the means). CPU: the same from the passes' CPU times (pp_stage_pass_cpu_s, "
      "which other load hardly changes): the bubble with a core per stage, the last stage's head and "
      "loss included.")
    p()
    p("core share: the CPU time of stage 0's passes over their wall time (1 when the stage had a "
      "core to itself); pass ms: one micro-batch's forward + backward pass on stage 0, wall and CPU.")
    p()
    p("| micro-batches M | pipeline, measured | theory (P-1)/(M+P-1) | relative difference | goal within 10% | pipeline, stages as they ran | stage 0, measured | relative difference | stage 0, stages as they ran | measured vs it | theory, CPU | measured vs it | core share | pass ms wall | pass ms CPU |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    def phase0(d):
        ph = d.get("pp_stage_phase_s")
        return ph[0] if ph else d["compute_s"]
    # 1F1B at the slowest stage's pace: stage 0's idle share, or the mean
    # over the stages (pipeline)
    def ran(S, M, pipeline=False):
        if not S or len(S) < 2 or not max(S):
            return None
        own = sum(S) / len(S) if pipeline else S[0]
        return 1 - M * own / (sum(S) + (M - 1) * max(S))
    # the pipeline's bubble: the share of the P stages' time in the step's
    # pipeline phase (stage 0's, which spans it) that no pass used
    def pipe(d):
        W, ph = d.get("pp_stage_pass_s"), phase0(d)
        return 1 - sum(W) / (len(W) * ph) if W and ph else None
    def rel(a, b):
        return None if a is None or not b else (a - b) / b
    pct = lambda x: "n/a" if x is None else "%+.0f%%" % (100 * x)
    for M in sorted({d["micro_batches"] for d in rows if d["fig"] == "bubble"}):
        sel = [d for d in rows if d["fig"] == "bubble" and d["micro_batches"] == M and phase0(d)]
        P = sel[0]["pp"] if sel else 2
        th = (P - 1) / (M + P - 1)
        m0, s0 = stat([d["pp_exposed_s"] / phase0(d) for d in sel])
        m, s = stat([pipe(d) for d in sel])
        err = rel(m, th)
        pr = stat([ran(d.get("pp_stage_pass_s"), M, pipeline=True) for d in sel])
        share = stat([d["pp_pass_cpu_s"] / d["pp_pass_s"] for d in sel if d.get("pp_pass_s")])
        pw = stat([1e3 * d["pp_pass_s"] / (d["steps_run"] * M) for d in sel if d.get("pp_pass_s")])
        pc = stat([1e3 * d["pp_pass_cpu_s"] / (d["steps_run"] * M) for d in sel if d.get("pp_pass_s")])
        r0 = stat([ran(d.get("pp_stage_pass_s"), M) for d in sel])
        thu = stat([ran(d.get("pp_stage_pass_cpu_s"), M) for d in sel])
        p("| %d | %s | %.3f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
          M, s, th, pct(err), "n/a" if err is None else "met" if abs(err) <= 0.10 else "NOT met",
          pr[1], s0, pct(rel(m0, th)), r0[1], pct(rel(m0, r0[0])), thu[1], pct(rel(m0, thu[0])),
          share[1], pw[1], pc[1]))
        for k, v in (("bubble_theory_unequal", thu[0]), ("bubble_core_share", share[0]),
                     ("bubble_theory_ran", r0[0]), ("bubble_pipeline_theory_ran", pr[0]),
                     ("bubble_stage0", m0)):
            if v is not None:
                rec.append(("layouts.%s.M%d" % (k, M), v))
        if m is not None:
            rec += [("layouts.bubble.M%d" % M, m), ("layouts.bubble_theory.M%d" % M, th),
                    ("layouts.bubble_err.M%d" % M, err)]
    p()
    tr = [d for d in rows if d["fig"] == "bubble" and "trace_bubble_equal" in d]
    if tr:
        p("Where the bubble went (bench/pp_trace.py: each run's DT_PP_TRACE replayed, the order of "
          "passes, sends and receives each stage ran and their dependencies kept, adding one cost at a "
          "time; each column is stage 0's bubble with the costs up to it): schedule = both stages' "
          "passes at the mean CPU time of either, transfers free (the theory, a check of the replay); "
          "stage CPU = each stage's passes at its own mean CPU time (the last stage's head and loss, "
          "the cores' speed); pass CPU = each pass at its CPU time; cores' sharing = each pass at its "
          "wall time (other processes, gloo's loop threads); sends = + the sender's time in the send "
          "(the copy into the socket, in the training thread); measured (trace) = stage 0's blocked "
          "time over its phase: the rest is the receive side's latency. Latency: median time from a "
          "send's start to the receive's return when the receiver was already waiting.")
        p()
        p("| M | schedule | + stage CPU | + pass CPU | + cores' sharing | + sends | measured (trace) | receive latency (rest) | latency us activations / gradients | send us wall / CPU | stage CPU s 0 / 1 |")
        p("|---|---|---|---|---|---|---|---|---|---|---|")
        for M in sorted({d["micro_batches"] for d in tr}):
            sel = [d for d in tr if d["micro_batches"] == M]
            g = lambda k: stat([d["trace_" + k] for d in sel])
            rest = stat([d["trace_bubble_measured"] - d["trace_bubble_sends"] for d in sel])
            la, lg = g("lat_act_us"), g("lat_grad_us")
            sw, sc = g("send_wall_us"), g("send_cpu_us")
            c0 = stat([d["trace_stage_pass_cpu_s"][0] for d in sel])
            c1 = stat([d["trace_stage_pass_cpu_s"][1] for d in sel])
            p("| %d | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |" % (
              M, g("bubble_equal")[1], g("bubble_stage_cpu")[1], g("bubble_pass_cpu")[1],
              g("bubble_pass_wall")[1], g("bubble_sends")[1], g("bubble_measured")[1], rest[1],
              la[1], lg[1], sw[1], sc[1], c0[1], c1[1]))
            for k in ("stage_cpu", "pass_cpu", "pass_wall", "sends", "measured"):
                v = g("bubble_" + k)[0]
                if v is not None:
                    rec.append(("layouts.bubble_trace_%s.M%d" % (k, M), v))
        p()
if any(d["fig"] == "bubble_gloo" for d in rows):
    p("The stages' transport, shared memory (the default on one node) against gloo's TCP pair "
      "(DT_PP_TRANSPORT=gloo), the runs interleaved: stage 0's bubble (measured as above); "
      "transfers = measured (trace) - the cores' sharing column, what the sends and receives "
      "added; paired: shared memory over gloo, per repetition.")
    p()
    p("| M | bubble, shared memory | bubble, gloo | paired shm / gloo | shm lower in | transfers, shm | transfers, gloo | send us wall, shm / gloo | latency us act. / grad., shm | gloo |")
    p("|---|---|---|---|---|---|---|---|---|---|")
    for M in sorted({d["micro_batches"] for d in rows if d["fig"] == "bubble_gloo"}):
        sh = {d["rep"]: d for d in rows if d["fig"] == "bubble" and d["micro_batches"] == M}
        gl = {d["rep"]: d for d in rows if d["fig"] == "bubble_gloo" and d["micro_batches"] == M}
        b = lambda d: d["pp_exposed_s"] / d["pp_stage_phase_s"][0]
        tx = lambda d: d["trace_bubble_measured"] - d["trace_bubble_pass_wall"]
        ps = [b(sh[k]) / b(gl[k]) for k in gl if k in sh and b(gl[k])]
        f = lambda sel, k: stat([d["trace_" + k] for d in sel.values() if d.get("trace_" + k) is not None])[1]
        p("| %d | %s | %s | %s | %d of %d | %s | %s | %s / %s | %s / %s | %s / %s |" % (
          M, stat([b(d) for d in sh.values()])[1], stat([b(d) for d in gl.values()])[1], stat(ps)[1],
          sum(x < 1 for x in ps), len(ps), stat([tx(d) for d in sh.values() if "trace_bubble_measured" in d])[1],
          stat([tx(d) for d in gl.values() if "trace_bubble_measured" in d])[1],
          f(sh, "send_wall_us"), f(gl, "send_wall_us"), f(sh, "lat_act_us"), f(sh, "lat_grad_us"),
          f(gl, "lat_act_us"), f(gl, "lat_grad_us")))
        if ps:
            rec.append(("layouts.bubble_shm_over_gloo.M%d" % M, statistics.median(ps)))
    p()
if any(d["fig"] == "overlap" for d in rows):
    p("## (3) communication overlap, dp 2 (gradient all-reduce on a comm thread during the backward pass)")
    p()
    p("hidden: 1 - exposed / all-reduce time, both of the run with overlap (the comm thread's "
      "all-reduce time against what the step still waited for); across runs: 1 - exposed with "
      "overlap / all-reduce time of the run without (paired by repetition; noisier on a shared machine).")
    p()
    p("hidden (last rank): the same from dp_exposed_min_s and dp_comm_min_s, each step's minimum over "
      "the two ranks: the rank that finished its backward pass last waits for communication only, "
      "the other also for it (time that measures the imbalance between the ranks on shared cores, "
      "not communication); across runs: 1 - its exposed with / its all-reduce without.")
    p()
    p("| bucket MiB | buckets | forward+backward s / all-reduce s (without) | all-reduce s (without) | all-reduce s (with) | exposed s (with) | hidden | goal >= 80% | hidden across runs | hidden (last rank) | across runs (last rank) | step s without | step s with |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for bm in sorted({d["bucket_mb"] for d in rows if d["fig"] == "overlap"}, key=float):
        no = [d for d in rows if d["fig"] == "overlap" and d["bucket_mb"] == bm and d["mode"] == "no-overlap"]
        yes = [d for d in rows if d["fig"] == "overlap" and d["bucket_mb"] == bm and d["mode"] == "overlap"]
        nb = no[0].get("dp_buckets", 0) if no else 0
        ratio = stat([d["compute_s"] / d["dp_comm_s"] for d in no if d["dp_comm_s"]])
        ar = stat([d["dp_comm_s"] for d in no])
        xs = stat([d["dp_exposed_s"] for d in yes])
        ary = stat([d["dp_comm_s"] for d in yes])
        hid = stat([1 - d["dp_exposed_s"] / d["dp_comm_s"] for d in yes if d["dp_comm_s"]])
        byrep = {d["rep"]: d for d in no}
        hx = stat([1 - y["dp_exposed_s"] / byrep[y["rep"]]["dp_comm_s"] for y in yes
                   if y["rep"] in byrep and byrep[y["rep"]]["dp_comm_s"]])
        hm = stat([1 - d["dp_exposed_min_s"] / d["dp_comm_min_s"] for d in yes
                   if d.get("dp_comm_min_s", 0) > 0])
        hmx = stat([1 - y["dp_exposed_min_s"] / byrep[y["rep"]]["dp_comm_min_s"] for y in yes
                    if y["rep"] in byrep and byrep[y["rep"]].get("dp_comm_min_s", 0) > 0])
        sn = stat([d["wall_s"] / d["steps_run"] for d in no])
        sy = stat([d["wall_s"] / d["steps_run"] for d in yes])
        pc = lambda st: "n/a" if st[0] is None else "%.0f%%" % (100 * st[0])
        p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            bm, nb, ratio[1], ar[1], ary[1], xs[1], pc(hid),
            "n/a" if hid[0] is None else "met" if hid[0] >= 0.8
            else "met by the last rank" if hm[0] is not None and hm[0] >= 0.8 else "NOT met", pc(hx),
            pc(hm) if hm[0] is None else "%s [%.0f..%.0f%%]" % (pc(hm), 100 * min(
                1 - d["dp_exposed_min_s"] / d["dp_comm_min_s"] for d in yes if d.get("dp_comm_min_s", 0) > 0),
                100 * max(1 - d["dp_exposed_min_s"] / d["dp_comm_min_s"] for d in yes if d.get("dp_comm_min_s", 0) > 0)),
            pc(hmx), sn[1], sy[1]))
        if hm[0] is not None:
            rec.append(("layouts.hidden_last_rank.b%s" % bm, hm[0]))
        if hmx[0] is not None:
            rec.append(("layouts.hidden_last_rank_across.b%s" % bm, hmx[0]))
        if hid[0] is not None:
            rec += [("layouts.hidden.b%s" % bm, hid[0]), ("layouts.allreduce_s.b%s" % bm, ary[0]),
                    ("layouts.exposed_ov_s.b%s" % bm, xs[0])]
        if hx[0] is not None:
            rec.append(("layouts.hidden_across.b%s" % bm, hx[0]))
    p()
    p("Exposed time split, and the step with and without overlap: rank 0's exposed time (with "
      "overlap) is its wait for communication plus its wait for the other rank to finish its "
      "backward pass (skew: dp_exposed_s - dp_exposed_min_s, summed over the steps; on 2 cores shared "
      "by 2 ranks, 2 comm threads and other work, whichever rank the scheduler held back is the "
      "slower one); communication only: dp_exposed_min_s. with / without: the step time of the "
      "run with overlap over that of the run without, paired by repetition (below 1: overlap faster).")
    p()
    p("| bucket MiB | rank 0 exposed s (with) | of it skew s | communication only s | hidden, communication only | step s without | step s with | with / without (paired) |")
    p("|---|---|---|---|---|---|---|---|")
    for bm in sorted({d["bucket_mb"] for d in rows if d["fig"] == "overlap"}, key=float):
        no = [d for d in rows if d["fig"] == "overlap" and d["bucket_mb"] == bm and d["mode"] == "no-overlap"]
        yes = [d for d in rows if d["fig"] == "overlap" and d["bucket_mb"] == bm and d["mode"] == "overlap"]
        byrep = {d["rep"]: d for d in no}
        xs = stat([d["dp_exposed_s"] for d in yes])
        sk = stat([d["dp_exposed_s"] - d["dp_exposed_min_s"] for d in yes if d.get("dp_exposed_min_s", -1) >= 0])
        cm = stat([d["dp_exposed_min_s"] for d in yes if d.get("dp_exposed_min_s", -1) >= 0])
        hm = stat([1 - d["dp_exposed_min_s"] / d["dp_comm_min_s"] for d in yes
                   if d.get("dp_comm_min_s", 0) > 0])
        sn = stat([d["wall_s"] / d["steps_run"] for d in no])
        sy = stat([d["wall_s"] / d["steps_run"] for d in yes])
        rr = stat([(y["wall_s"] / y["steps_run"]) / (byrep[y["rep"]]["wall_s"] / byrep[y["rep"]]["steps_run"])
                   for y in yes if y["rep"] in byrep])
        p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (bm, xs[1], sk[1], cm[1],
          "n/a" if hm[0] is None else "%.0f%%" % (100 * hm[0]), sn[1], sy[1], rr[1]))
        if rr[0] is not None:
            rec.append(("layouts.overlap_step_ratio.b%s" % bm, rr[0]))
        if sk[0] is not None:
            rec.append(("layouts.overlap_skew_s.b%s" % bm, sk[0]))
    p()
    p("zero1, dp 2, default bucket size: the parameter all-gather after the sharded optimizer step, "
      "at once after it (without) or piece by piece during the next forward pass (with); exposed: "
      "what the step waited for, gradient all-reduce and all-gather together.")
    p()
    p("| zero1 | dp comm s (all-reduce + all-gather) | dp exposed s | hidden | hidden (last rank) | step s |")
    p("|---|---|---|---|---|---|")
    for mode in ("no-overlap", "overlap"):
        sel = [d for d in rows if d["fig"] == "zero1" and d["mode"] == mode]
        if not sel:
            continue
        c = stat([d["dp_comm_s"] for d in sel])
        x = stat([d["dp_exposed_s"] for d in sel])
        h = stat([1 - d["dp_exposed_s"] / d["dp_comm_s"] for d in sel if d["dp_comm_s"]])
        hm = stat([1 - d["dp_exposed_min_s"] / d["dp_comm_min_s"] for d in sel
                   if d.get("dp_comm_min_s", 0) > 0])
        st = stat([d["wall_s"] / d["steps_run"] for d in sel])
        p("| %s | %s | %s | %s | %s | %s |" % ("with" if mode == "overlap" else "without", c[1], x[1],
          "n/a" if h[0] is None else "%.0f%%" % (100 * h[0]),
          "n/a" if hm[0] is None else "%.0f%%" % (100 * hm[0]), st[1]))
        if h[0] is not None:
            rec.append(("layouts.zero1_hidden.%s" % mode, h[0]))
    p()
    p("Exposed communication as a share of the step, per layout, before and after overlap "
      "(in a pipeline the buckets are reduced during the last micro-batch's backward pass):")
    p()
    p("| layout | exposed share without | with | tp exposed s | pp exposed s | dp exposed s without | with |")
    p("|---|---|---|---|---|---|---|")
    for d0 in [d for d in rows if d["fig"] == "overlap" and d["bucket_mb"] == "4" and d["mode"] == "no-overlap"][:1] + \
              list({d["layout"]: d for d in rows if d["fig"] == "exposed" and d["mode"] == "no-overlap"}.values()):
        lay = "dp2" if d0["fig"] == "overlap" else d0["layout"]
        sel = lambda mode: [d for d in rows if (d["fig"] == "overlap" and lay == "dp2" and d["bucket_mb"] == "4"
                            or d["fig"] == "exposed" and d.get("layout") == lay) and d["mode"] == mode]
        a = stat([ex(d) / d["wall_s"] for d in sel("no-overlap")])
        b = stat([ex(d) / d["wall_s"] for d in sel("overlap")])
        t = stat([d["tp_exposed_s"] for d in sel("overlap")])
        pq = stat([d["pp_exposed_s"] for d in sel("overlap")])
        da = stat([d["dp_exposed_s"] for d in sel("no-overlap")])
        db = stat([d["dp_exposed_s"] for d in sel("overlap")])
        p("| %s | %s | %s | %s | %s | %s | %s |" % (lay, a[1], b[1], t[1], pq[1], da[1], db[1]))
        if a[0] is not None and b[0] is not None:
            key = lay.replace(" ", "")
            rec += [("layouts.exposed_share.%s.without" % key, a[0]), ("layouts.exposed_share.%s.with" % key, b[0])]
    p()
if any(d["fig"] == "ddp" for d in rows):
    p("## (4) dp 2: dttrain (default settings) vs PyTorch DDP (gloo), same transformer, data, threads")
    p()
    dt = stat([d["tokens_per_s"] for d in rows if d["fig"] == "ddp" and d["who"] == "dttrain"])
    pt = stat([d["tokens_per_s"] for d in rows if d["fig"] == "ddp" and d["who"] == "torch"])
    pairs = {}
    for d in rows:
        if d["fig"] == "ddp":
            pairs.setdefault(d["rep"], {})[d["who"]] = d["tokens_per_s"]
    rat = stat([v["dttrain"] / v["torch"] for v in pairs.values() if "dttrain" in v and "torch" in v])
    p("| dttrain tokens/s | DDP tokens/s | ratio (per repetition) | goal >= 1.2 |")
    p("|---|---|---|---|")
    p("| %s | %s | %s | %s |" % (dt[1], pt[1], rat[1],
      "n/a" if rat[0] is None else "met" if rat[0] >= 1.2 else "NOT met"))
    if rat[0] is not None:
        rec += [("layouts.ddp.dttrain_tps", dt[0]), ("layouts.ddp.torch_tps", pt[0]), ("layouts.ddp.ratio", rat[0])]
if out:
    open(out + "/layouts.md", "w").write("\n".join(md) + "\n")
    json.dump({"rows": rows, "load": load, "cores": int(ncpu)}, open(out + "/layouts.json", "w"), indent=1)
if recf:
    with open(recf, "a") as f:
        for k, v in rec:
            f.write("%s %.6g\n" % (k, v))
PYEOF

