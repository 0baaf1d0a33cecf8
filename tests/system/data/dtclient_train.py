"""A Python trainer that uses the dtclient module (standard library only):
rendezvous of all ranks through the kv store, 40 reported steps, a shard
written when asked, and the run's result from rank 0.  Arguments: the
steps (40), and the seconds of set-up after connecting to the agent and
before the first step (0: a model being built, a checkpoint loaded)."""
import os
import sys
import time

import dtclient

c = dtclient.open()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print("rank %d/%d: pid %d, agent %s" % (rank, world, os.getpid(),
      "connected" if c.connected else "none"), file=sys.stderr, flush=True)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
c.kv_set("pytrain/rank-%d" % rank, str(os.getpid()))
c.collective(True)     # blocked on the peers (the hang detector's hint)
peers = [int(c.kv_wait("pytrain/rank-%d" % r, 30)) for r in range(world)]
c.collective(False)
print("rank %d: peers %s" % (rank, peers), file=sys.stderr, flush=True)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
for step in range(1, steps + 1):
    t0 = time.monotonic()
    time.sleep(0.05)
    c.step(step, 1.0 / step, 16, time.monotonic() - t0, 0.0)
    cmd = c.poll()
    if cmd is not None:
        print("rank %d: command %s" % (rank, cmd), file=sys.stderr, flush=True)
time.sleep(0.5)   # let a heartbeat carry the last step
if rank == 0:
    c.result({"steps": steps, "trainer": "dtclient_train.py", "peers": len(peers)})
print("rank %d: done" % rank, file=sys.stderr, flush=True)
c.close()
