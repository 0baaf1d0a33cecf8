#!/bin/bash
# t0604-dttrain-cuda: the CUDA backend trains the same models (MLP and
# transformer) as the CPU backend (20 steps: losses and parameters agree to
# float tolerance), and is bit-reproducible run to run; two local ranks on
# one GPU fail clearly.  Skips (77) where dttrain was built without CUDA or
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
args="--data $data --steps 20 --global-batch 64 --hidden 256 --context 32 --embed 16"

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
# Two local ranks and one GPU: a clear error, not NCCL's.
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" = 1 ]; then
    run 2 onegpu $targs --backend auto --comm-timeout 5
    check "2 local ranks, 1 GPU: rank 1 fails" test "$(cat $TMP/onegpu.1.rc)" != 0
    check "... saying why" grep -q "LOCAL_RANK=1 but this node has 1 CUDA device" "$TMP/onegpu.1.err"
fi
finish
