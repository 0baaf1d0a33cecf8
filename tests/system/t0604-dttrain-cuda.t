#!/bin/bash
# t0604-dttrain-cuda: the CUDA backend trains the same models (MLP and
# transformer) as the CPU backend (20 steps: losses and parameters agree to
# float tolerance), and is bit-reproducible run to run; the transformer's
# flash attention (the default on a GPU) agrees with the simple path; bf16
# GEMMs (--precision bf16) train (the loss falls) and end near the fp32
# run; two local ranks on one GPU fail clearly.  With two GPUs or more, the
# layouts on NCCL: tp2 and pp2 match the 1-rank CUDA run, dp2's gradient
# all-reduces queued behind events during the backward pass are
# bit-identical to those after it, and a hung pipeline stage is an error
# naming it (NCCL refuses two ranks on one GPU: with one, it says so);
# and the NCCL re-form: a 2-rank dp job (one node, a GPU per rank) with
# restart.reform under dtctld's local launcher, rank 1 killed: the
# survivor aborts its NCCL communicators and re-forms with the restarted
# rank (path reform), ending with the uninterrupted run's params_crc32c.
# Skips (77) where dttrain was built without CUDA or
# the machine has no NVIDIA device; on a machine with one, a CUDA backend
# that does not start is a failure.
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
if ! "$DTTRAIN" --data "$data" --steps 0 --backend cuda >/dev/null 2>"$TMP/probe.err"; then
    why=$(tail -1 "$TMP/probe.err")
    case $why in *"built without CUDA"*) skip_all "$why" ;; esac
    ls /dev/nvidia[0-9]* >/dev/null 2>&1 || skip_all "no NVIDIA device ($why)"
    fail "the CUDA backend starts on this machine with an NVIDIA device: $why"
    finish
fi
args="--model mlp --data $data --steps 20 --global-batch 64 --hidden 256 --context 32 --embed 16"

run 1 cpu $args --backend cpu --dump-params "$TMP/pc"; check "cpu run: exit 0" test $? -eq 0
run 1 gpu $args --backend cuda --dump-params "$TMP/pg"; check "cuda run: exit 0" test $? -eq 0
run 1 gpu2 $args --backend cuda; check "cuda run again: exit 0" test $? -eq 0
check "cuda backend used" test "$(summary gpu backend)" = cuda
lc=$(summary cpu train_loss); lg=$(summary gpu train_loss)
echo "# train loss after 20 steps: cpu $lc, cuda $lg"
check "cpu and cuda losses agree (1e-3 relative)" \
    $PY -c "import sys; sys.exit(0 if abs($lc-$lg) <= 1e-3*abs($lc) else 1)"
check "cpu and cuda params agree (1e-3 relative)" params_close "$TMP/pc" "$TMP/pg" 1e-3
check "cuda: same params_crc32c run to run" \
    same "$(summary gpu params_crc32c)" "$(summary gpu2 params_crc32c)"

# The transformer: the same, on both backends.
targs="--model transformer --data $data --steps 20 --global-batch 32 --context 64 --width 64 --heads 4 --layers 2"
run 1 tcpu $targs --backend cpu --dump-params "$TMP/tc"; check "transformer cpu run: exit 0" test $? -eq 0
run 1 tgpu $targs --backend cuda --dump-params "$TMP/tg"; check "transformer cuda run: exit 0" test $? -eq 0
run 1 tgpu2 $targs --backend cuda; check "transformer cuda run again: exit 0" test $? -eq 0
lc=$(summary tcpu train_loss); lg=$(summary tgpu train_loss)
echo "# transformer train loss after 20 steps: cpu $lc, cuda $lg"
check "transformer: cpu and cuda losses agree (1e-3 relative)" \
    $PY -c "import sys; sys.exit(0 if abs($lc-$lg) <= 1e-3*abs($lc) else 1)"
check "transformer: cpu and cuda params agree (1e-3 relative)" params_close "$TMP/tc" "$TMP/tg" 1e-3
check "transformer cuda: same params_crc32c run to run" \
    same "$(summary tgpu params_crc32c)" "$(summary tgpu2 params_crc32c)"
check "transformer cuda: flash attention by default" test "$(summary tgpu attention)" = flash

# Flash attention against the simple path (which keeps the scores), on a
# context longer than a tile and heads of 64.
fargs="--data $data --steps 20 --global-batch 8 --context 200 --width 128 --heads 2 --layers 2 --backend cuda"
run 1 fsimple $fargs --attention simple --dump-params "$TMP/fs"
check "simple attention on cuda: exit 0" test $? -eq 0
run 1 fflash $fargs --attention flash --dump-params "$TMP/ff"
check "flash attention on cuda: exit 0" test $? -eq 0
check "... it ran flash" test "$(summary fflash attention)" = flash
lc=$(summary fsimple train_loss); lg=$(summary fflash train_loss)
echo "# train loss after 20 steps: simple $lc, flash $lg"
check "flash vs simple: losses agree (1e-4 relative)" \
    $PY -c "import sys; sys.exit(0 if abs($lc-$lg) <= 1e-4*abs($lc) else 1)"
check "flash vs simple: params agree (1e-3 relative, as cpu vs cuda)" params_close "$TMP/fs" "$TMP/ff" 1e-3

# bf16 GEMMs, fp32 master weights: the loss falls over 60 steps, and ends
# near the fp32 run (bf16 keeps 8 bits of mantissa: each GEMM input is
# rounded by up to 0.4%; a wrong layout or a lost scale would be far off).
bargs="--data $data --steps 60 --global-batch 32 --context 64 --width 64 --heads 4 --layers 2 --backend cuda --log-every 10"
run 1 b32 $bargs --dump-params "$TMP/b32"; check "fp32 run: exit 0" test $? -eq 0
run 1 b16 $bargs --precision bf16 --dump-params "$TMP/b16"; check "bf16 run: exit 0" test $? -eq 0
check "... it ran bf16" test "$(summary b16 precision)" = bf16
l0=$(sed -n 's/.*step 10\/60 loss \([0-9.]*\).*/\1/p' "$TMP/b16.0.err" | head -1)
l32=$(summary b32 train_loss); l16=$(summary b16 train_loss)
echo "# bf16: loss at step 10 $l0, at step 60 $l16; fp32 at step 60 $l32"
check "bf16: the loss falls (step 10 -> 60)" $PY -c "import sys; sys.exit(0 if $l16 < $l0 - 0.2 else 1)"
check "bf16 vs fp32: final losses within 5%" \
    $PY -c "import sys; sys.exit(0 if abs($l16-$l32) <= 0.05*abs($l32) else 1)"
check "bf16 vs fp32: params within 0.1 (relative L2 and max)" params_close "$TMP/b32" "$TMP/b16" 0.1
# Two local ranks and one GPU: a clear error, not NCCL's.
# (whole GPUs: a MIG device's lines start with spaces and "MIG")
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" = 1 ]; then
    run 2 onegpu $targs --backend auto --comm-timeout 5
    check "2 local ranks, 1 GPU: rank 1 fails" test "$(cat $TMP/onegpu.1.rc)" != 0
    check "... saying why" grep -q "LOCAL_RANK=1 but this node has 1 CUDA device" "$TMP/onegpu.1.err"
fi

# Layouts on NCCL (the groups split from the world communicator, the
# pipeline's sends over one-way links): one GPU per rank (LOCAL_RANK).
# The tolerance against the 1-rank run is 10x the CPU test's (t0606),
# since cuBLAS picks its kernels by shape and the split GEMMs have other
# shapes: not yet measured on a GPU.
if [ "$ngpu" -ge 2 ]; then
    largs="--model transformer --data $data --steps 20 --global-batch 32 --context 64 --width 64 --heads 4 --layers 2 --warmup-steps 5 --backend cuda"
    run 1 l1 $largs --dump-params "$TMP/l1"; check "layouts: 1-rank cuda run: exit 0" test $? -eq 0
    run 2 ltp2 $largs --tp 2 --dump-params "$TMP/ltp2"; check "tp2 on cuda: exit 0" test $? -eq 0
    run 2 lpp2 $largs --pp 2 --micro-batch 4 --dump-params "$TMP/lpp2"
    check "pp2 on cuda: exit 0" test $? -eq 0
    check "tp2 on cuda says its layout and backend" \
        test "$(summary ltp2 tp) $(summary ltp2 backend)" = "2 cuda"
    check "... over NCCL" grep -q "backend cuda, comm nccl" "$TMP/ltp2.0.err"
    check "pp2 on cuda: the stages' sends are counted" \
        $PY -c "import sys; sys.exit(0 if $(summary lpp2 pp_bytes) > 0 else 1)"
    check "tp2 vs 1 rank on cuda: params within 1e-4" params_close "$TMP/l1" "$TMP/ltp2" 1e-4
    check "pp2 vs 1 rank on cuda: params within 1e-4" params_close "$TMP/l1" "$TMP/lpp2" 1e-4
    ob="$largs --steps 10 --bucket-mb 0.004"
    run 2 ldpov $ob --overlap; check "dp2 on cuda, all-reduces overlapped: exit 0" test $? -eq 0
    run 2 ldpno $ob --no-overlap; check "dp2 on cuda, not overlapped: exit 0" test $? -eq 0
    check "... it overlapped" grep -q "gradient buckets overlapped with backward" "$TMP/ldpov.0.err"
    check "... params_crc32c bit-identical with and without overlap" \
        test "$(summary ldpov params_crc32c)" = "$(summary ldpno params_crc32c)"
    if [ "$ngpu" -ge 4 ]; then
        run 4 ltp2pp2 $largs --tp 2 --pp 2 --micro-batch 4 --dump-params "$TMP/ltp2pp2"
        check "tp2 x pp2 on cuda: exit 0" test $? -eq 0
        check "tp2 x pp2 vs 1 rank on cuda: params within 1e-4" \
            params_close "$TMP/l1" "$TMP/ltp2pp2" 1e-4
    else
        echo "# tp2 x pp2 on cuda: skipped ($ngpu GPUs; it needs 4)"
    fi
    # A hung stage: its neighbour gives up within --comm-timeout, naming it.
    launch 2 lhang $largs --steps 50 --pp 2 --micro-batch 4 --inject-hang 1:5 --comm-timeout 5
    set -- $LAUNCHED
    p0=$1 p1=$2
    deadline=$((SECONDS + 90))
    while kill -0 "$p0" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$p0" 2>/dev/null; then
        fail "pp2 on cuda: stage 0 gave up on the hung stage 1"
        kill -9 "$p0"
    else
        wait "$p0"; rc=$?
        check "pp2 on cuda: stage 0 gave up on the hung stage 1 with exit 5 (rc $rc)" test $rc -eq 5
        check "... naming it and saying it timed out" \
            sh -c "grep -q 'stage 1 (rank 1)' $TMP/lhang.0.err && grep -qi 'timed out' $TMP/lhang.0.err"
    fi
    kill -9 "$p1" 2>/dev/null; wait "$p1" 2>/dev/null
else
    echo "# layouts on cuda (tp2, pp2, dp2 overlap): skipped: $ngpu GPU(s); NCCL refuses two ranks on one GPU, they need 2 or more"
fi

# The NCCL re-form under dtctld (local launcher): one node, two ranks
# (LOCAL_RANK 0 and 1: a GPU each), dp 2, restart.reform; rank 1 killed
# mid-run.  The survivor's collective waits on the lost peer (over NVLink
# or PCIe NCCL does not report it), the watch thread flags the
# communicators, the main thread aborts them (ncclCommAbort), opens a
# communicator under the new attempt's key prefix with the restarted rank
# and sends it the state (ncclBroadcast).  It runs in a subshell with the
# fault-tolerance tests' library (dtctld, agents, their cleanup), whose
# test points are then counted here; what it lacks (dtctld not built,
# munged, jq) makes it a skip, said why.
reform_part () {
    (
        export FT_STEPS=120
        . "$(dirname "$0")/ft-lib.sh"
        MODEL_ARGS="$MODEL_ARGS --backend cuda"
        write_conf "LocalNodes=1" "AdminUsers=root"
        start_fg || bail "dtctld did not start: $(cat "$TMP/ctld.log")"
        BASE=$(baseline 2) || bail "the uninterrupted 2-rank cuda run failed"
        echo "# uninterrupted 2-rank cuda run: params_crc32c $BASE"
        # (rank 0 200 times slower than its compute: the tiny model takes
        # well under a millisecond a step on a GPU, and the kill must come
        # mid-run; 120 steps then take seconds)
        submit "$(dttrain_spec cureform 1 "--inject-slow 0:200" \
            '{"ranks_per_node": 2, "restart": {"reform": true}}')" || bail "submit failed"
        check "the 2-rank cuda job runs past step 20" wait_step "$ID" 20 120
        PID=$(rank_pid "$ID" 1)
        check "kill -9 rank 1 (pid $PID)" kill -9 "$PID"
        check "the job completes" wait_state "$ID" completed 180
        api GET "/v1/jobs/$ID" > "$TMP/j.json"
        check "attempt 2 re-formed in place (restart path reform)" \
            jqt '(.data.attempts | length) == 2 and .data.attempts[1].restart_path == "reform"' "$TMP/j.json"
        check "the job ran on cuda" jqt '.data.result.backend == "cuda"' "$TMP/j.json"
        f0=$(find "$TMP/users" -path "*/job-$ID.*" -name "rank-0*.err")
        f1=$(find "$TMP/users" -path "*/job-$ID.*" -name "rank-1.a2.err")
        grep -h "peer lost\|aborting\|NCCL\|re-formed" $f0 $f1 2>/dev/null | sed 's/^/# /'
        check "rank 0 never exited: it re-formed as attempt 2 with the state checked" \
            eval 'test "$(echo "$f0" | wc -w)" = 1 && grep -q "rank 0: re-formed as attempt 2 at step [0-9]* (state from rank 0, .*fingerprint" "$f0"'
        check "the restarted rank 1 joined and received the state from rank 0" \
            grep -q "rank 1: re-formed as attempt 2 at step [0-9]* (state from rank 0; joined" "$f1"
        GOT=$(jq -r .data.result.params_crc32c "$TMP/j.json")
        check "params_crc32c $GOT equals the uninterrupted run's $BASE" test "$GOT" = "$BASE"
        finish
    ) > "$TMP/reform.tap" 2>&1
}
if [ "$ngpu" -ge 2 ]; then
    reform_part
    why=$(sed -n 's/^1\.\.0 # SKIP //p; s/^Bail out! //p' "$TMP/reform.tap" | head -1)
    while IFS= read -r line; do
        case $line in
            "ok "*) ok "re-form on cuda: ${line#ok * - }" ;;
            "not ok "*) fail "re-form on cuda: ${line#not ok * - }" ;;
            "#"*) echo "$line" ;;
        esac
    done < "$TMP/reform.tap"
    if grep -q '^Bail out!' "$TMP/reform.tap"; then
        fail "re-form on cuda: $why"
        tail -20 "$TMP/reform.tap" | diag
    elif [ -n "$why" ]; then
        echo "# re-form on cuda: skipped: $why"
    fi
else
    echo "# re-form on cuda: skipped: $ngpu GPU(s); it needs 2 (a rank per GPU: NCCL refuses two ranks on one GPU)"
fi
finish
