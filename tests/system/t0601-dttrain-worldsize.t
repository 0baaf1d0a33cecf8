#!/bin/bash
# t0601-dttrain-worldsize: the same global batch on 1, 2 and 4 ranks (gloo
# over loopback) gives the same parameters after 50 steps (1e-5 relative);
# dp and zero1 agree (1e-6; in fact bit for bit); zero1 shards the optimizer.
# The MLP (--model mlp): t0605 checks the same of the default model, the
# transformer, and the MLP must keep its promises too.
. "$(dirname "$0")/dttrain-lib.sh"
data=$(corpus)
args="--model mlp --data $data --steps 50 --global-batch 32 --hidden 64 --context 16 --embed 8 --warmup-steps 5"

run 1 w1 $args --dump-params "$TMP/p1"; check "1 rank: exit 0" test $? -eq 0
run 2 w2 $args --dump-params "$TMP/p2"; check "2 ranks dp: exit 0" test $? -eq 0
run 4 w4 $args --dump-params "$TMP/p4"; check "4 ranks dp: exit 0" test $? -eq 0
# (zero1's all-gather on the comm thread, piece by piece, during the next
# forward pass: a copy, so still bit for bit dp's)
run 2 z2 $args --parallel zero1 --overlap --bucket-mb 0.02 --dump-params "$TMP/z2"
check "2 ranks zero1, all-gather overlapped with the next forward pass: exit 0" test $? -eq 0
( LAUNCH_KV=1; run 4 z4 $args --parallel zero1 --micro-batch 3 --dump-params "$TMP/z4" )
check "4 ranks zero1, micro-batches of 3, bootstrap via libdtclient kv: exit 0" test $? -eq 0

# Gradient buckets reduced during the backward pass (comm thread) or after
# it: same bucket boundaries and order, so the same bits.
run 2 ov $args --overlap --bucket-mb 0.02 --micro-batch 5 --dump-params "$TMP/ov"
check "2 ranks, 7 buckets overlapped with backward: exit 0" test $? -eq 0
check "overlap is on" grep -q "overlapped with backward" "$TMP/ov.0.err"
run 2 nov $args --no-overlap --bucket-mb 0.02 --micro-batch 5
check "2 ranks, 7 buckets after backward: exit 0" test $? -eq 0
check "overlap and no overlap: same params_crc32c" \
    same "$(summary ov params_crc32c)" "$(summary nov params_crc32c)"
check "1 rank vs 2 ranks overlapped: params within 1e-5" params_close "$TMP/p1" "$TMP/ov" 1e-5

check "1 vs 2 ranks: params within 1e-5" params_close "$TMP/p1" "$TMP/p2" 1e-5
check "1 vs 4 ranks: params within 1e-5" params_close "$TMP/p1" "$TMP/p4" 1e-5
check "1 rank vs 4 ranks zero1 (accumulation): within 1e-5" params_close "$TMP/p1" "$TMP/z4" 1e-5
check "2 ranks: dp vs zero1 within 1e-6" params_close "$TMP/p2" "$TMP/z2" 1e-6
check "2 ranks: dp and zero1 params_crc32c equal" \
    same "$(summary w2 params_crc32c)" "$(summary z2 params_crc32c)"
# Each run ends with a cross-rank params CRC check (non-zero exit if the
# replicas diverged), so "exit 0" above already covers every rank.
ob_dp=$(summary w4 opt_state_bytes_per_rank)
ob_z=$(summary z4 opt_state_bytes_per_rank)
echo "# optimizer state per rank: dp $ob_dp bytes, zero1 (4 ranks) $ob_z bytes"
check "zero1 on 4 ranks: optimizer state per rank falls by 4" \
    $PY -c "import sys; sys.exit(0 if $ob_dp > 0 and abs($ob_z * 4 - $ob_dp) <= 64 else 1)"
finish
