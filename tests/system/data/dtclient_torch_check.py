"""Checks of dtclient.torch without an agent or peers (t0406): CRC32C,
the step sampler, a shard's write, verification and resume, and the exit
statuses the controller reads.  Prints TAP lines; argv[1]: a scratch dir."""
import json
import os
import struct
import subprocess
import sys

import torch

import dtclient
import dtclient.torch as dtt

n = 0
failed = 0


def check(what, cond):
    global n, failed
    n += 1
    if not cond:
        failed = 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what), flush=True)




def reform_child(rank, port):
    """One of three ranks (--reform-child RANK PORT): 3 steps of DDP, rank
    2 killed, the survivors re-form a group of two on a new prefix of the
    parent's store and go on: a line of JSON with what they saw."""
    import copy
    import datetime
    import signal
    import time
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def counts():
        return [len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))]
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=dist.PrefixStore("gen-1/", store), rank=rank,
                            world_size=3, timeout=datetime.timedelta(seconds=30))
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ddp = DDP(module)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    for step in range(3):
        ddp(torch.full((4, 8), float(rank + step))).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
    before = counts()
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.perf_counter()
    try:
        ddp(torch.ones(4, 8)).pow(2).sum().backward()
        err = None
    except RuntimeError as e:
        err = str(e).splitlines()[0]
    t1 = time.perf_counter()
    old = ddp       # still referenced, as a Session holds its model: its reducer must go
    ddp = dtt.reform_process_group(old, store, "gen-2/", rank, 2,
                                   timeout=datetime.timedelta(seconds=30))
    t2 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    x = torch.full((4, 8), float(rank + 10))
    ddp(x).pow(2).sum().backward()
    ref = copy.deepcopy(module)             # this rank's own gradient, not reduced
    ref.zero_grad(set_to_none=True)
    ref(x).pow(2).sum().backward()
    both = [None, None]
    dist.all_gather_object(both, [q.grad for q in ref.parameters()])
    grad_ok = all(torch.equal(q.grad, a.div(2) + b.div(2))
                  for q, a, b in zip(module.parameters(), both[0], both[1]))
    opt.step()
    print(json.dumps({"rank": rank, "error": err, "detect_ms": (t1 - t0) * 1e3,
                      "reform_ms": (t2 - t1) * 1e3, "world": dist.get_world_size(),
                      "grad_ok": grad_ok, "hash": dtt.state_hash(module),
                      "counts": [before, counts()]}), flush=True)
    dtt.settle_process_group()
    dist.destroy_process_group()


def bracket_child(rank, port, page):
    """One of two ranks (--bracket-child RANK PORT PAGE): a Session over
    DDP's own reduction, its client on a step page of its own (no agent).
    Rank 1 sleeps 0.5 s before step 3's backward pass while a thread of
    rank 0 samples its page's waiting count; rank 1 exits before step
    5's backward.  A line of JSON with what rank 0 saw."""
    import datetime
    import threading
    import time
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    cl = dtclient.Client()
    cl._page = dtclient.Client._map(page)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ddp = DDP(module)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    s = dtt.Session(ddp, opt, seed=3, client=cl, control_interval=0)
    waiting = lambda: struct.unpack_from("<i", cl._page, 124)[0]
    seen, at_end, stop = [], [], threading.Event()

    def sample():
        while not stop.is_set():
            seen.append(waiting())
            time.sleep(0.005)
    err = in_bwd = None
    try:
        for step in s.steps(6):
            loss = ddp(torch.full((4, 8), float(rank + step))).pow(2).sum()
            if step == 2:
                if rank == 1:
                    time.sleep(0.5)
                else:
                    th = threading.Thread(target=sample)
                    th.start()
            if step == 4 and rank == 1:
                os._exit(9)
            opt.zero_grad()
            loss.backward()
            if step == 2 and rank == 0:
                stop.set()
                th.join()
            opt.step()
            s.step_done(loss, 4)
            at_end.append(waiting())
    except RuntimeError as e:
        err, in_bwd = str(e).splitlines()[0], s._in_bwd
    print(json.dumps({"rank": rank, "max_waiting": max(seen or [-1]), "at_end": at_end,
                      "hook": s._hook is not None, "error": err, "in_bwd": in_bwd,
                      "step": s.step}), flush=True)
    os._exit(0)


if sys.argv[1] == "--reform-child":
    reform_child(int(sys.argv[2]), int(sys.argv[3]))
    sys.exit(0)
if sys.argv[1] == "--bracket-child":
    bracket_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
tmp = sys.argv[1]
# --- CRC32C: the library (ctypes) and the Python table agree, on the standard vector
data = os.urandom(100000) + b"123456789"
lib = dtclient._crc_lib()
check("libdtclient's dtclient_crc32c is loaded", bool(lib))
check("crc32c('123456789') = e3069283", dtclient.crc32c(b"123456789") == 0xE3069283)
fn, dtclient._crc_fn = dtclient._crc_fn, False
py = dtclient.crc32c(data)
dtclient._crc_fn = fn
check("the library and the Python table agree", dtclient.crc32c(data) == py
      and dtclient.crc32c(bytearray(data)) == py
      and dtclient.crc32c(data[50000:], dtclient.crc32c(data[:50000])) == py)

# --- the sampler: a pure function of (seed, step, rank)
a = dtt.StepSampler(1000, 7, rank=1, world=3, seed=5)
b = dtt.StepSampler(1000, 7, rank=1, world=3, seed=5)
check("StepSampler: the same indices from a fresh sampler, in any order of steps",
      all(torch.equal(a.indices(s), b.indices(s)) for s in (400, 3, 0, 142, 3)))
ranks = [dtt.StepSampler(1000, 7, rank=r, world=3, seed=5) for r in range(3)]
ep = torch.cat([r.indices(s) for s in range(48) for r in ranks])[:1000]
check("StepSampler: the ranks of a step are disjoint, an epoch covers every sample once",
      len(set(ep.tolist())) == 1000)
c = dtt.StepSampler(1000, 7, rank=1, world=3, seed=6)
check("StepSampler: another seed, another order", not torch.equal(a.indices(9), c.indices(9)))

# --- a shard: save, verify, resume
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, 3)
ck = os.path.join(tmp, "ckpt")
s = dtt.Session(model, opt, scheduler=sched, seed=9, checkpoint_dir=ck, every=4)
for step in s.steps(8):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    s.step_done(loss, 4)
s.finish()
h8 = dtt.state_hash(model)
shard = os.path.join(ck, "step-4", "rank-0.ckpt")
check("checkpoints of steps 4 and 8 written as step-S/rank-0.ckpt, no temporary left",
      sorted(os.listdir(ck)) == ["step-4", "step-8"] and os.listdir(os.path.join(ck, "step-4")) == ["rank-0.ckpt"])
raw = open(shard, "rb").read()
with open(os.path.join(ck, "step-4", "manifest.json"), "w") as f:
    json.dump({"shards": [{"rank": 0, "path": shard, "bytes": len(raw),
                           "crc32c": "%08x" % dtclient.crc32c(raw)}]}, f)

# A resumed run from step 4 ends with the same parameters as the run above.
script = r'''
import sys, torch, dtclient.torch as dtt
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, 3)
s = dtt.Session(model, opt, scheduler=sched, seed=9, checkpoint_dir=sys.argv[1])
for step in s.steps(8):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    s.step_done(loss, 4)
s.finish()
print(s.start_step, dtt.state_hash(model))
'''


def resume(step_dir, step):
    env = dict(os.environ, DT_RESUME_DIR=step_dir, DT_RESUME_STEP=str(step))
    return subprocess.run([sys.executable, "-c", script, os.path.join(tmp, "ckpt2")], env=env,
                          capture_output=True, text=True)


r = resume(os.path.join(ck, "step-4"), 4)
check("resumed at step 4, the parameters at step 8 equal the uninterrupted run's",
      r.returncode == 0 and r.stdout.split() == ["4", h8])
if r.returncode:
    sys.stdout.write("# " + r.stderr.replace("\n", "\n# ") + "\n")
r = resume(os.path.join(ck, "step-4"), 5)
check("a resume step the shard does not hold: exit 4", r.returncode == 4)
with open(shard, "r+b") as f:
    f.seek(len(raw) // 2)
    f.write(bytes([raw[len(raw) // 2] ^ 0xFF]))
r = resume(os.path.join(ck, "step-4"), 4)
check("a corrupt shard: exit 3, the shard named as the controller reads it",
      r.returncode == 3 and ("checkpoint shard %s:" % shard) in r.stderr)
os.unlink(os.path.join(ck, "step-4", "manifest.json"))
r = resume(os.path.join(ck, "step-4"), 4)
check("without a manifest, the shard's own trailer catches it: exit 3",
      r.returncode == 3 and ("checkpoint shard %s:" % shard) in r.stderr)

# --- the pipelined snapshot: a shard holds exactly the state after its step,
# though its host copy is made on the writer thread while the next step's
# forward and backward run (made late here: optimizer.step() must wait)
import io  # noqa: E402
import warnings  # noqa: E402


def shard_state(path):
    return torch.load(io.BytesIO(open(path, "rb").read()[:-12]))


def same(a, b):
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def pipelined_run(ck, guard=True):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (k + 1))
    s = dtt.Session(model, opt, scheduler=sched, seed=9, checkpoint_dir=ck, every=3)
    s._test_copy_delay = 0.05
    if not guard:
        opt.step = s._unguarded_step     # (the scheduler's own wrapper)
    want = {}
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        for step in s.steps(9):
            loss = model(torch.randn(4, 8)).pow(2).mean()   # (BatchNorm: buffers change in forward)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            s.step_done(loss, 4)
            if s.last_saved == s.step:
                want[s.step] = {"model": {k: v.clone() for k, v in model.state_dict().items()},
                                "optimizer": {i: {k: v.clone() for k, v in ps.items()}
                                              for i, ps in opt.state_dict()["state"].items()},
                                "scheduler": sched.state_dict()["last_epoch"],
                                "lr": [g["lr"] for g in opt.param_groups]}
    s.finish()
    got = {}
    for step in want:
        st = shard_state(os.path.join(ck, "step-%d" % step, "rank-0.ckpt"))
        got[step] = {"model": st["model"], "optimizer": st["optimizer"]["state"],
                     "scheduler": st["scheduler"]["last_epoch"],
                     "lr": [g["lr"] for g in st["optimizer"]["param_groups"]]}
    return s, want, got, [str(w.message) for w in warned]


s, want, got, warned = pipelined_run(os.path.join(tmp, "pipe"))
check("pipelined snapshot: shards of steps 3, 6, 9 hold exactly the model, optimizer, its "
      "learning rate and the scheduler's state after their step",
      sorted(want) == [3, 6, 9] and all(same(want[k], got[k]) for k in want))
check("pipelined snapshot: optimizer.step() waited for the late copies, no scheduler warning",
      s.copy_waits >= 2 and s.stall_s >= 0.05 and not [w for w in warned if "overridden" in w])
s, want, got, warned = pipelined_run(os.path.join(tmp, "pipe2"), guard=False)
check("control: with optimizer.step() not waiting, a shard holds a later state (detected)",
      s.copy_waits == 0 and sorted(want) == [3, 6, 9]
      and not all(same(want[k]["model"], got[k]["model"]) for k in want))

# --- re-forming the process group in live processes after a peer's death
# (gloo on CPU, three real processes, the store in this one)
import datetime  # noqa: E402
import torch.distributed as dist  # noqa: E402


def run_children(argvs, timeout):
    """Run this script once per argv (its arguments) at once; their
    (returncode, stdout, stderr), a child past the timeout killed."""
    procs = [subprocess.Popen([sys.executable, __file__] + a, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for a in argvs]
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        outs.append((p.returncode, o, e))
    return outs


store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=60),
                      wait_for_workers=False)
outs = run_children([["--reform-child", str(r), str(store.port)] for r in range(3)], 180)
try:
    surv = [json.loads(outs[r][1].strip().splitlines()[-1]) for r in (0, 1)]
except (ValueError, IndexError):
    surv = []
    for rc, o, e in outs:
        sys.stdout.write("# rc %s: %s %s\n" % (rc, o.strip()[-300:], e.strip()[-600:].replace("\n", "\n# ")))
check("re-form: rank 2 killed, the survivors' next all-reduce fails (%s)"
      % (surv[0]["error"] if surv else "-"),
      outs[2][0] == -9 and len(surv) == 2 and all(s_["error"] and any(
          w in s_["error"] for w in ("Connection", "closed", "reset")) for s_ in surv))
check("re-form: reform_process_group gives a group of 2 on a new prefix; the next step's "
      "gradients are reduced exactly once, the replicas stay identical",
      len(surv) == 2 and all(x["world"] == 2 and x["grad_ok"] for x in surv)
      and surv[0]["hash"] == surv[1]["hash"] and outs[0][0] == 0 and outs[1][0] == 0)
check("re-form: no file descriptor or thread left over from the old group",
      len(surv) == 2 and all(x["counts"][1][0] <= x["counts"][0][0]
                             and x["counts"][1][1] <= x["counts"][0][1] for x in surv))
if surv and failed:
    for rc, o, e in outs:
        sys.stdout.write("# rc %s: %s\n" % (rc, o.strip()[-400:]))
if surv:
    print("# re-form: failure seen after %.1f ms, re-formed in %.1f ms (rank 0)"
          % (surv[0]["detect_ms"], surv[0]["reform_ms"]))

# --- DDP's own reduction (two ranks, no communication hook), its wait
# marked for the hang watchdog; a peer lost during it is the gradients'
# failure (the just-in-time checkpoint's state is the step's)
for r in range(2):
    with open(os.path.join(tmp, "page.%d" % r), "wb") as f:
        f.write(struct.pack("<II", 0x4D485344, 1) + bytes(4088))
store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=60),
                      wait_for_workers=False)
outs = run_children([["--bracket-child", str(r), str(store.port), os.path.join(tmp, "page.%d" % r)]
                     for r in range(2)], 120)
try:
    b0 = json.loads(outs[0][1].strip().splitlines()[-1])
except (ValueError, IndexError):
    b0 = {}
    for rc, o, e in outs:
        sys.stdout.write("# rc %s: %s %s\n" % (rc, o.strip()[-300:], e.strip()[-600:].replace("\n", "\n# ")))
print("# bracket: rank 0 saw %s" % json.dumps(b0))
check("DDP's reduction: no communication hook with two ranks; rank 0 marked waiting (1) while "
      "rank 1 held back its backward pass, 0 after each step",
      b0.get("hook") is False and b0.get("max_waiting") == 1 and b0.get("at_end") == [0] * 4)
check("DDP's reduction: rank 1 lost in step 5 -> rank 0's backward pass fails with the "
      "reduction under way (its state still step 4's: the just-in-time checkpoint's)",
      outs[1][0] == 9 and b0.get("error") and b0.get("in_bwd") is True and b0.get("step") == 4)

# --- the parameter fingerprint: dttrain's (per-tensor CRC32C, then the CRC32C of those)
torch.manual_seed(0)
m1 = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1))
torch.manual_seed(0)
m2 = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1))
fp1, t1 = dtt.fingerprint(m1)
sd = m1.state_dict()
want = [dtclient.crc32c(v.contiguous().numpy().tobytes()) for v in sd.values()]
check("fingerprint: one CRC32C per state-dict tensor, in state-dict order, named by key",
      list(t1) == list(sd) and [int(x, 16) for x in t1.values()] == want)
check("fingerprint: the summary is the CRC32C of the tensors' CRCs (little-endian u32s)",
      int(fp1, 16) == dtclient.crc32c(struct.pack("<%dI" % len(want), *want)) and len(fp1) == 8)
check("fingerprint: equal for bit-identical replicas", dtt.fingerprint(m2) == (fp1, t1))
with torch.no_grad():
    w = m2[2].weight.view(-1)[3:4]
    w.copy_((w.view(torch.int32) ^ (1 << 20)).view(torch.float32))
fp2, t2 = dtt.fingerprint(m2)
check("fingerprint: one flipped bit changes the summary and only that tensor's CRC",
      fp2 != fp1 and [k for k in t1 if t1[k] != t2[k]] == ["2.weight"])


class Reports:
    """A client that keeps the integrity reports (no agent here)."""
    def __init__(self):
        self.sent = []

    def integrity(self, obj):
        self.sent.append(json.loads(json.dumps(obj)))

    def __getattr__(self, name):
        return lambda *a, **k: None


os.environ["DT_INTEGRITY_EVERY"] = "3"
cl = Reports()
s = dtt.Session(m1, seed=9, client=cl, every=0)
for step in s.steps(7):
    s.step_done(float("nan") if step == 5 else 1.0)
del os.environ["DT_INTEGRITY_EVERY"]
check("Session: DT_INTEGRITY_EVERY=3 -> reports of steps 3 and 6, group dp, the fingerprint",
      [(r["step"], r["group"], r["fingerprint"]) for r in cl.sent] == [(3, "dp", fp1), (6, "dp", fp1)]
      and cl.sent[0]["tensors"] == t1 and s.integrity_count == 2)
check("Session: a non-finite loss at a reported step is in its report",
      "nonfinite" not in cl.sent[0] and cl.sent[1].get("nonfinite", {}).get("loss") == "nan"
      and cl.sent[1]["nonfinite"]["local_loss_finite"] is False)

# --- a hot spare's standby process (DT_STANDBY=1) without a re-form in place
# exits 0 in init_process_group, before any rendezvous (its RANK is only
# the local index); with one but no agent it cannot wait for a rank.
import torch.distributed as dist  # noqa: E402
saved = dict(os.environ)
os.environ.update({"DT_STANDBY": "1", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
                   "DT_REFORM": "1"})
for k in ("DTCLIENT_TORCH_REFORM", "DT_AGENT_SOCKET", "DT_AGENT_SHM", "MASTER_ADDR", "MASTER_PORT"):
    os.environ.pop(k, None)
try:
    dtt.init_process_group("gloo")
    code = "returned"
except SystemExit as e:
    code = e.code
except Exception as e:
    code = "%s: %s" % (type(e).__name__, e)
check("standby without DTCLIENT_TORCH_REFORM=1: init_process_group exits 0, no group formed "
      "(got %s)" % code, code == 0 and not dist.is_initialized())
os.environ["DTCLIENT_TORCH_REFORM"] = "1"
try:
    dtt.init_process_group("gloo")
    code = "returned"
except SystemExit as e:
    code = "exit %s" % e.code
except RuntimeError as e:
    code = str(e)
check("standby with a re-form in place but no agent: a clear error (got %s)" % code,
      "DT_STANDBY=1 needs an agent" in code and not dist.is_initialized())
os.environ.clear()
os.environ.update(saved)
check("Client.assigned_rank() without an agent page: RANK",
      dtclient.open().assigned_rank() == int(os.environ.get("RANK", "0") or 0))
print("1..%d" % n)
sys.exit(failed)
