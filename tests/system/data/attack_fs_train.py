"""An attacking trainer, run as an ordinary user by t0770-attack-fs.t.

Attempt 1 (TORCHELASTIC_RESTART_COUNT 0), world 2: rank 0 plants links to
root's files where the controller writes or removes in the job's own
checkpoint directory (a .manifest.json.tmp of step 1, jit-*/.partial-step-*
entries), both ranks report their real shards of step 1 (the controller
commits it: it writes the manifest), then rank 0 reports root's files as
its shard of step 2 and exits 1, so the partial checkpoint is cleaned up
before attempt 2.  Attempt 2 reports a step and exits 0.

argv: VICTIM_SHARD VICTIM_MANIFEST VICTIM_JIT ROOT_DIR [ignored...]
(the ignored arguments name files for the provenance record)."""
import os
import sys
import time

import dtclient

victim_shard, victim_manifest, victim_jit, root_dir = sys.argv[1:5]
c = dtclient.open()
rank = int(os.environ["RANK"])
ck = os.environ["DT_CHECKPOINT_DIR"]
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def log(msg):
    print("rank %d: %s" % (rank, msg), file=sys.stderr, flush=True)


c.step(1, 1.0, 16, 0.01, 0.0)
if restart > 0:
    time.sleep(1.0)
    log("attempt 2 done")
    c.close()
    sys.exit(0)

s1 = os.path.join(ck, "step-1")
os.makedirs(s1, exist_ok=True)
if rank == 0:
    os.symlink(victim_manifest, os.path.join(s1, ".manifest.json.tmp"))
    os.symlink(root_dir, os.path.join(ck, "jit-9-r0"))
    os.makedirs(os.path.join(ck, "jit-8-r0"))
    os.symlink(victim_jit, os.path.join(ck, "jit-8-r0", "rank-0.ckpt"))
    os.symlink(root_dir, os.path.join(ck, ".partial-step-1-a1"))
    log("links planted")
shard = os.path.join(s1, "rank-%d.ckpt" % rank)
with open(shard, "wb") as f:
    f.write(b"x" * 64)
c.shard_written(1, shard, 64, 0)
log("shard of step 1 reported")

if rank == 1:
    time.sleep(60)      # ended by the controller with the attempt
    sys.exit(0)

# Wait for the commit of step 1 (its manifest), then the forged reports.
for _ in range(100):
    if os.path.exists(os.path.join(s1, "manifest.json")):
        break
    time.sleep(0.1)
c.shard_written(2, victim_shard, 64, 0)
c.shard_written(2, os.path.join(ck, "step-2", "..", "..", "..",
                                os.path.basename(victim_shard)), 64, 0)
log("forged shards reported")
time.sleep(1.5)         # heartbeats carry the events
sys.exit(1)
