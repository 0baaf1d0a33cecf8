#!/bin/bash
# t0604-dttrain-cuda: the CUDA backend trains the same models (MLP and
# transformer) as the CPU backend (20 steps: losses and parameters agree to
# float tolerance), and is bit-reproducible run to run; the transformer's
# flash attention (the default on a GPU) agrees with the simple path; bf16
# GEMMs (--precision bf16) train (the loss falls) and end near the fp32
# run; two local ranks on one GPU fail clearly.  Skips (77) where dttrain was built without CUDA or
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
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" = 1 ]; then
    run 2 onegpu $targs --backend auto --comm-timeout 5
    check "2 local ranks, 1 GPU: rank 1 fails" test "$(cat $TMP/onegpu.1.rc)" != 0
    check "... saying why" grep -q "LOCAL_RANK=1 but this node has 1 CUDA device" "$TMP/onegpu.1.err"
fi
finish
