#!/bin/bash
# t0406-dtclient-torch: dtclient.torch without an agent
# (data/dtclient_torch_check.py): CRC32C through libdtclient agrees with
# the standard vector and the Python table, the step sampler is a pure
# function of (seed, step, rank) covering each epoch, checkpoints are
# written as step-S/rank-R.ckpt, a resumed run ends with the parameters of
# an uninterrupted one, a bad shard or step gives the exit statuses the
# controller reads (3 naming the shard, 4), the pipelined asynchronous
# checkpoint's shards hold exactly the state of their step (and the check
# fails when optimizer.step() does not wait for the copy), three real gloo
# processes lose one and the survivors re-form their group
# (reform_process_group), two ranks leave the reduction to DDP with the
# wait marked on their step pages (a peer lost during it leaves the
# step's state), the parameter fingerprint (integrity reports every
# DT_INTEGRITY_EVERY steps) is dttrain's, and a hot spare's standby
# process (DT_STANDBY=1) without DTCLIENT_TORCH_REFORM=1 exits 0 in
# init_process_group before any rendezvous (with it but no agent: an error).
. "$(dirname "$0")/tap-lib.sh"
TOP_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${TOP_BUILDDIR:=$(cd ../.. 2>/dev/null && pwd)}"
/usr/bin/python3 -c 'import torch' 2>/dev/null || skip_all "no torch for /usr/bin/python3 (python3-torch)"
[ -e "$TOP_BUILDDIR/agent/client/.libs/libdtclient.so.0" ] || skip_all "libdtclient not built"
TMP=$(mktemp -d /tmp/t0406.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PYTHONPATH=$TOP_SRCDIR/agent/client/python LD_LIBRARY_PATH=$TOP_BUILDDIR/agent/client/.libs \
    OMP_NUM_THREADS=1 /usr/bin/python3 "$TOP_SRCDIR/tests/system/data/dtclient_torch_check.py" "$TMP"
