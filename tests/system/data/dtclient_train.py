"""A Python trainer that uses the dtclient module (standard library only):
rendezvous of all ranks through the kv store, 40 reported steps, a shard
written when asked, and the run's result from rank 0.  Arguments: the
steps (40), and the seconds of set-up after connecting to the agent and
before the first step (0: a model being built, a checkpoint loaded).
Under restart.reform (DT_REFORM=1) each rank declares that it can re-form
in place, a survivor says when the re-form command arrives, and a
replacement (DT_REFORM_JOIN=1) skips the rendezvous (its peers did it in
the first attempt)."""
import os
import sys
import time

import dtclient

c = dtclient.open()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print("rank %d/%d: pid %d, agent %s, assigned rank %d" % (rank, world, os.getpid(),
      "connected" if c.connected else "none", c.assigned_rank()), file=sys.stderr, flush=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
if os.environ.get("DT_REFORM") == "1":
    c.declare(dtclient.CAP_REFORM)
    print("rank %d: declared reform in attempt %s%s" % (
        rank, os.environ.get("DT_ATTEMPT"),
        " (joining)" if os.environ.get("DT_REFORM_JOIN") == "1" else ""),
        file=sys.stderr, flush=True)
peers = []
if os.environ.get("DT_REFORM_JOIN") != "1":
    c.kv_set("pytrain/rank-%d" % rank, str(os.getpid()))
    c.collective(True)     # blocked on the peers (the hang detector's hint)
    peers = [int(c.kv_wait("pytrain/rank-%d" % r, 30)) for r in range(world)]
    c.collective(False)
    print("rank %d: peers %s" % (rank, peers), file=sys.stderr, flush=True)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
def show(cmd):
    if cmd is not None and cmd.kind == dtclient.CMD_REFORM:
        print("rank %d: re-form as attempt %d" % (rank, cmd.step), file=sys.stderr, flush=True)
    elif cmd is not None:
        print("rank %d: command %s" % (rank, cmd), file=sys.stderr, flush=True)


for step in range(1, steps + 1):
    t0 = time.monotonic()
    # Polled every 2 ms, as a dttrain survivor waiting to re-form does:
    # the page holds one command, and a later one replaces it.
    while time.monotonic() - t0 < 0.05:
        time.sleep(0.002)
        show(c.poll())
    c.step(step, 1.0 / step, 16, time.monotonic() - t0, 0.0)
time.sleep(0.5)   # let a heartbeat carry the last step
if rank == 0:
    c.result({"steps": steps, "trainer": "dtclient_train.py", "peers": len(peers)})
print("rank %d: done" % rank, file=sys.stderr, flush=True)
c.close()
