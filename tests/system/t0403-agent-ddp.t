#!/bin/bash
# t0403-agent-ddp: a stock PyTorch DDP script (data/ddp_train.py: gloo,
# init_method="env://", nothing dtctl-specific) runs to completion under
# dtagent, 2 nodes x 2 ranks with the local launcher: the torchrun
# environment is enough, all replicas end identical, the job completes.
# Debian's torch is only visible to /usr/bin/python3.
. "$(dirname "$0")/agent-lib.sh"

/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null \
    || skip_all "no torch.distributed for /usr/bin/python3 (apt-get install python3-torch)"

ctld_start
JOB=$(submit "{\"name\": \"t0403\", \"nodes\": 2, \"ranks_per_node\": 2,
  \"command\": [\"/usr/bin/python3\", \"$TOP_SRCDIR/tests/system/data/ddp_train.py\", \"20\"],
  \"workdir\": \"$T/work\", \"restart\": {\"max_restarts\": 0},
  \"heartbeat\": {\"interval_ms\": 500, \"node_timeout_ms\": 10000, \"hang_timeout_ms\": 60000}}")
check "job submitted" test -n "$JOB"
ended () { case $(job_state "$JOB") in completed|failed|cancelled) return 0;; esac; return 1; }
check "the job ended" wait_for 180 ended
check "the job completed" test "$(job_state "$JOB")" = completed
for r in 0 1 2 3; do
    f=$(find "$T/users" -name "rank-$r.log" | head -1)
    check "rank $r trained and its replica matches the others" \
        grep -q "^rank $r/4 local $((r % 2)): loss .* replicas identical: True" "$f"
    [ $failed = 0 ] || { diag < "$f"; diag < "${f%.log}.err"; }
done
no_procs () { test -z "$(test_pids)"; }
check "every agent and rank exited" wait_for 10 no_procs
finish
