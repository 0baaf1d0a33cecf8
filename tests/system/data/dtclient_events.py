"""A Python trainer for t0772: once the file argv[1] exists, it reports six
large shard_failed events (1200 bytes of reason each) to its agent, then
creates argv[2] and exits 0."""
import os
import sys
import time

import dtclient

c = dtclient.open()
print("rank %s: agent %s" % (os.environ.get("RANK"), "connected" if c.connected else "none"),
      file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
for i in range(6):
    c.shard_failed(1000 + i, reason="%d:" % i + "x" * 1200)
open(sys.argv[2], "w").close()
print("rank %s: reported 6 events" % os.environ.get("RANK"), file=sys.stderr, flush=True)
c.close()
