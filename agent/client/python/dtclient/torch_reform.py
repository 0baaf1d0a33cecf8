"""dtclient.torch's primitive for survivors that never exit: re-forming the
process group in a live process (what torch 1.13 allows; see README.md,
"Survivors that never exit")."""

import copy
import datetime
import hashlib
import io
import os
import signal
import sys
import time
import types

import torch
import torch.distributed as dist

import dtclient
from dtclient.torch_shard import _log


def settle_process_group():
    """Let the process group's worker threads finish releasing their last
    operations before a group is destroyed or its last owner (a DDP
    reducer) is dropped.  In torch 1.13 a gloo worker releases a finished
    operation's tensors while it holds the group's lock, and a tensor that
    still carries its Python object needs the GIL for that; the group's
    destructor, run from Python, holds the GIL and waits for that lock: the
    process deadlocks (seen at exit after a re-form, about 1 run in 4).
    Sleeping releases the GIL, so a worker waiting for it finishes first.
    Call it after the last collective, before destroy_process_group()."""
    time.sleep(0.02)


def restore_state(s, st):
    """Load a Session's model, optimizer, scheduler, sampler and extra
    from a state dict of the shard format (a checkpoint or a re-form's
    transfer)."""
    s._module().load_state_dict(st["model"])
    if s.optimizer is not None and st["optimizer"] is not None:
        s.optimizer.load_state_dict(st["optimizer"])
    if s.scheduler is not None and st["scheduler"] is not None:
        s.scheduler.load_state_dict(st["scheduler"])
    if s.sampler is not None and st["sampler"] is not None:
        s.sampler.load_state_dict(st["sampler"])
    s.extra.update(st.get("extra") or {})


def reform_process_group(model, store, prefix, rank, world_size, backend="gloo",
                         timeout=None, comm_hook=None, **ddp_kwargs):
    """Re-form the default process group in this live process after a
    peer was lost, and wrap the model in a new DDP over it: what torch
    1.13 allows for survivors that keep their state in memory.

    model: the old DDP wrapper (its reducer, which holds the old group and
    has autograd hooks on the parameters, is released here: keeping it
    would reduce every gradient a second time over the dead group) or the
    plain module; store: a torch.distributed Store all members reach (a
    TCPStore, not one served by a rank that may die); prefix: a key
    prefix never used before in that store (one per generation, e.g.
    "gen-3/"): the new group's rendezvous keys cannot meet the old
    generation's; rank, world_size: this process's place in the new
    group; timeout: the group's timeout (a datetime.timedelta; gloo's
    collectives fail after it when a peer stops without closing its
    connections); comm_hook: (state, hook) to register on the new DDP;
    ddp_kwargs: for DistributedDataParallel (its constructor broadcasts
    rank 0's parameters and buffers to the new members).  Every member
    of the new group calls it with the same prefix and world_size.
    Returns the new DDP model."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    module = getattr(model, "module", model)
    settle_process_group()
    if model is not module:
        for attr in ("reducer", "logger", "process_group"):   # the old group's owners
            if hasattr(model, attr):
                delattr(model, attr)
    if dist.is_initialized():
        dist.destroy_process_group()
    if timeout is None:
        timeout = datetime.timedelta(seconds=60)
    dist.init_process_group(backend, store=dist.PrefixStore(prefix, store), rank=rank,
                            world_size=world_size, timeout=timeout)
    new = DDP(module, **ddp_kwargs)
    if comm_hook is not None:
        new.register_comm_hook(*comm_hook)
    return new


# ---- a Session's re-form in place (restart.reform, gloo) ---------------------
# The store every generation meets in: the first attempt's, served by rank
# 0 at MASTER_ADDR:MASTER_PORT (env://), under torch's "default_pg" prefix.
# A survivor of rank 0 keeps serving it (its Session holds a reference:
# destroying the group would free it); the other survivors and a
# replacement connect to it anew; a replacement of rank 0 serves a new one
# on the same address (the old listener died with the process).
_STORE = None
_CLIENT = None      # a replacement's connection, opened before its Session


def client():
    """The agent connection for a Session (the one init_process_group
    opened, if it did)."""
    return _CLIENT if _CLIENT is not None else dtclient.open()
# How long a survivor waits for the controller's word, as dttrain: the
# just-in-time window (5 s) is still open after it.
WAIT_S = 3.0


def _env_int(name, default=0):
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        return default


def _prefix(attempt):
    return "dtclient-reform-a%d/" % attempt


def _connect(client, attempt, rank, world, timeout):
    """The store of a re-formed group: rank 0 serves it (a survivor: the
    one it served from the start; a replacement: a new one on its
    MASTER_ADDR:MASTER_PORT) and says where in the new attempt's kv; the
    others connect there (the new attempt's MASTER_* are not the first
    attempt's)."""
    key = "dtclient-torch/store-a%d" % attempt
    if rank == 0:
        tcp = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                            True, timeout, wait_for_workers=False)
        client.kv_set(key, "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
        return dist.PrefixStore("default_pg", tcp)
    host, port = client.kv_wait(key, 30).decode().rsplit(":", 1)
    tcp = dist.TCPStore(host, int(port), world, False, timeout, wait_for_workers=False)
    return dist.PrefixStore("default_pg", tcp)


def enabled():
    """restart.reform (DT_REFORM=1), and the trainer opted in
    (DTCLIENT_TORCH_REFORM=1): off by default while its test fails now and then
    under heavy load (see README.md, "Survivors that never exit")."""
    return os.environ.get("DT_REFORM") == "1" and os.environ.get("DTCLIENT_TORCH_REFORM") == "1"


def joining():
    """This process replaces a lost rank of a group re-formed in place."""
    return enabled() and os.environ.get("DT_REFORM_JOIN") == "1" \
        and _env_int("DT_ATTEMPT") > 1


# How often a standby process looks at its page: the join waits at most this.
STANDBY_TICK_S = 0.002


def standby_wait():
    """A hot spare's standby process (DT_STANDBY=1): the agent of a spare
    node of a job with restart.reform started the script ahead of time,
    with no rank of its own (RANK is the local index).  Declare that this
    process can re-form (the agent reports the spare hot once all its
    standby processes did) and wait; when a node is lost the controller
    makes the spare take its place: the agent writes the rank this process
    takes over into its page and sends CMD_REFORM with the new attempt.
    The process then becomes that rank's replacement exactly as a rank
    restarted in place (DT_REFORM_JOIN=1, the new attempt in DT_ATTEMPT)
    and returns.  A stop, an abort or SIGTERM ends it with status 0.
    What the script did before (torch imported, data opened, the model
    and the optimizer built) is kept: joining costs the rendezvous and
    the state transfer only."""
    c = dtclient.open()
    if not c.connected:
        raise RuntimeError("dtclient.torch: DT_STANDBY=1 needs an agent (DT_AGENT_SOCKET)")
    world = _env_int("WORLD_SIZE", 1)
    stop = []
    old = {}
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        try:
            old[sig] = signal.signal(sig, lambda n, f: stop.append(n))
        except ValueError:      # not the main thread
            pass
    try:
        c.declare(dtclient.CAP_REFORM)     # ready: the agent may hand it a rank
        t0 = time.monotonic()
        _log("standby %d: warm, waiting for a rank to take over" % _env_int("LOCAL_RANK"))
        while True:
            if stop:
                cmd = None
                break
            cmd = c.poll()
            if cmd is None:
                time.sleep(STANDBY_TICK_S)
                continue
            if cmd.kind in (dtclient.CMD_STOP, dtclient.CMD_ABORT):
                break
            if cmd.kind == dtclient.CMD_REFORM and cmd.step > 0:
                break
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    if cmd is None or cmd.kind != dtclient.CMD_REFORM:
        _log("standby %d: stopped while waiting: exiting" % _env_int("LOCAL_RANK"))
        c.close()
        sys.stdout.flush()
        sys.exit(0)
    rank = c.assigned_rank()
    if not 0 < rank < world:
        # (rank 0 serves the group's store at the attempt's MASTER_ADDR,
        # which this process's environment, the first attempt's, does not
        # name; node rank 0 is the Slurm job's batch host, which a hot spare
        # never replaces)
        c.close()
        raise RuntimeError("dtclient.torch: standby: joining attempt %d with rank %d (world %d): "
                           "%s" % (cmd.step, rank, world,
                                   "rank 0 serves the store: not taken over by a standby process"
                                   if rank == 0 else "not a rank"))
    _log("standby: takes over rank %d in attempt %d after %.1f s ready"
         % (rank, cmd.step, time.monotonic() - t0))
    # From here on this process is that rank's replacement (a new client,
    # opened by init_process_group, says hello as that rank).
    per_node = max(1, _env_int("LOCAL_WORLD_SIZE", 1))
    os.environ.update({"RANK": str(rank), "ROLE_RANK": str(rank), "DT_ATTEMPT": str(cmd.step),
                       "GROUP_RANK": str(rank // per_node), "DT_REFORM_JOIN": "1"})
    os.environ.pop("DT_STANDBY", None)
    c.close()


def init_process_group(backend="gloo", timeout=None):
    """torch.distributed.init_process_group(backend, init_method="env://")
    for a Session's trainer; a replacement started to re-form a group in
    place (DT_REFORM_JOIN=1) joins the survivors' new group instead, under
    the new attempt's key prefix (its peers kept theirs: a fresh
    rendezvous would wait for ranks that never come).  A hot spare's
    standby process (DT_STANDBY=1) waits here for the rank it takes over
    (standby_wait), then joins as that rank's replacement: build what does
    not depend on the rank (data, model, optimizer) before calling this.
    Without restart.reform and DTCLIENT_TORCH_REFORM=1 a standby process
    exits 0 at once (the spare stays cold): the environment's RANK is only
    its local index, and a rendezvous as that rank would meet the job's."""
    global _STORE, _CLIENT
    if timeout is None:
        timeout = datetime.timedelta(seconds=120)
    if os.environ.get("DT_STANDBY") == "1":
        if not enabled() or backend != "gloo":
            _log("standby %d: no re-form in place (restart.reform, DTCLIENT_TORCH_REFORM=1, "
                 "gloo): a cold spare, exiting" % _env_int("LOCAL_RANK"))
            sys.stdout.flush()
            sys.exit(0)
        standby_wait()
    if not joining():
        dist.init_process_group(backend, init_method="env://", timeout=timeout)
        return
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE", 1)
    _CLIENT = dtclient.open()
    _STORE = _connect(_CLIENT, _env_int("DT_ATTEMPT"), rank, world, timeout)
    dist.init_process_group(backend, store=dist.PrefixStore(_prefix(_env_int("DT_ATTEMPT")),
                                                            _STORE),
                            rank=rank, world_size=world, timeout=timeout)


def _digest(s):
    """What every member must hold identically after the transfer: the
    model's and the optimizer's tensors, the scheduler, the sampler, the
    step (an int64 pair for an all-reduce check)."""
    h = hashlib.sha256()
    h.update(str(s.step).encode())
    for k, v in sorted(s._module().state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    if s.optimizer is not None:
        for i, st in sorted(s.optimizer.state_dict()["state"].items()):
            for k, v in sorted(st.items()):
                h.update(("%s.%s" % (i, k)).encode())
                h.update(v.detach().cpu().contiguous().numpy().tobytes() if torch.is_tensor(v)
                         else repr(v).encode())
    for part in (s.scheduler, s.sampler):
        if part is not None:
            h.update(repr(sorted((k, repr(v)) for k, v in part.state_dict().items())).encode())
    return int.from_bytes(h.digest()[:7], "little")     # (63 bits: its negation fits)


class Reformer:
    """A Session's side of restart.reform: declares the capability, and
    after a failed collective keeps the state, waits for the re-form
    command (or a stop), re-forms the group and takes the state from the
    lowest member at the newest step."""

    def __init__(self, s):
        self.s = s
        self.attempt = _env_int("DT_ATTEMPT", 1)
        self.on = (enabled() and s.distributed and s.world >= 2
                   and dist.get_backend() == "gloo" and s.client.connected
                   and "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ)
        self.joining = self.on and joining()
        self.failed = None      # a gradient collective failed in this step
        self.pending = 0        # a re-form command read before the failure
        self.store = None
        if not self.on:
            return
        self.sched_sd = None    # the scheduler's state before a skipped step
        if s.optimizer is not None:
            self._guard(s.optimizer)
        self.store = _STORE if _STORE is not None else \
            dist.distributed_c10d._get_default_store()
        try:
            s.client.declare(dtclient.CAP_REFORM)
        except dtclient.DTClientError as e:
            _log("rank %d: re-form capability not declared: %s" % (s.rank, e))
            self.on = self.joining = False

    def _guard(self, opt):
        """The optimizer's step() does nothing in a step whose gradients
        were not reduced (a peer was lost): the step is redone from the
        same state once the group is re-formed.  The scheduler's state is
        kept then, and restored before the re-form (the script steps it
        after the optimizer; its step() is not wrapped: a scheduler's
        state_dict is its __dict__)."""
        inner = opt.step

        def step(obj, *args, **kwargs):
            if self.failed is None:
                return inner(*args, **kwargs)
            if self.s.scheduler is not None and self.sched_sd is None:
                # (and the hyperparameters it sets in the optimizer: the lr)
                self.sched_sd = (copy.deepcopy(self.s.scheduler.state_dict()),
                                 [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
                                  for g in obj.param_groups])
            return None
        if hasattr(inner, "_with_counter"):
            step._with_counter = True
        opt.step = types.MethodType(step, opt)

    @staticmethod
    def skipped(buf):
        """A gradient bucket's hook result when it is not reduced."""
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    def wait_and_reform(self, err):
        """After a peer's loss (err): wait up to WAIT_S for the re-form
        command; True once the group is re-formed and the state agreed,
        False on a stop, a timeout or a failed re-form (the caller then
        writes its just-in-time checkpoint and exits)."""
        s = self.s
        t0 = time.monotonic()
        if self.sched_sd is not None:   # (the skipped step's scheduler step undone)
            s.scheduler.load_state_dict(self.sched_sd[0])
            for g, saved in zip(s.optimizer.param_groups, self.sched_sd[1]):
                g.update(saved)
            self.sched_sd = None
        _log("rank %d: peer lost after step %d (%s): keeping the state, waiting up to %.0f s "
             "to re-form" % (s.rank, s.step, str(err).splitlines()[0] if str(err) else
                             type(err).__name__, WAIT_S))
        try:
            s.client.declare(dtclient.CAP_REFORM | dtclient.REFORM_WAITING)
        except dtclient.DTClientError:
            pass
        s.wait_snapshot()
        if s._writer is not None:
            s._writer.wait()
        while time.monotonic() - t0 < WAIT_S:
            cmd = s.client.poll()
            if cmd is None and self.pending > self.attempt:
                cmd, self.pending = dtclient.Command(dtclient.CMD_REFORM, self.pending, 0), 0
            if cmd is None:
                time.sleep(0.002)
                continue
            if cmd.kind in (dtclient.CMD_STOP, dtclient.CMD_ABORT):
                _log("rank %d: %s while waiting to re-form" % (
                    s.rank, "stop" if cmd.kind == dtclient.CMD_STOP else "abort"))
                if cmd.kind == dtclient.CMD_ABORT:
                    os._exit(1)
                return False
            if cmd.kind != dtclient.CMD_REFORM or cmd.step <= self.attempt:
                continue
            t1 = time.monotonic()
            try:
                self._reopen(cmd.step)
                self.sync()
            except Exception as e:
                _log("rank %d: re-form as attempt %d failed: %s" % (s.rank, cmd.step, e))
                return False
            _log("rank %d: waited %.0f ms for the re-form command, re-formed in %.0f ms"
                 % (s.rank, (t1 - t0) * 1e3, (time.monotonic() - t1) * 1e3))
            return True
        _log("rank %d: no re-form command within %.0f s" % (s.rank, WAIT_S))
        return False

    def _reopen(self, attempt):
        s = self.s
        self.attempt = attempt
        if s.rank == 0:     # (the store it serves; said where for the others)
            s.client.kv_set("dtclient-torch/store-a%d" % attempt, "%s:%s" % (
                os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
        else:
            self.store = _connect(s.client, attempt, s.rank, s.world,
                                  datetime.timedelta(seconds=60))
        old = s.model
        kw = {k: getattr(old, k) for k in ("broadcast_buffers", "find_unused_parameters")
              if hasattr(old, k)}
        hook = getattr(s, "_hook", None)
        s.model = reform_process_group(old, self.store, _prefix(attempt), s.rank, s.world,
                                       comm_hook=(None, hook) if hook else None, **kw)
        s._pg = dist.group.WORLD
        s._ctl_group = dist.group.WORLD
        s._ctl = None
        s._gather = {}

    def sync(self):
        """Every member: agree on the newest completed step, take the
        state from the lowest member holding it, check that all hold the
        same (a replacement holds none: step -1)."""
        s = self.s
        t0 = time.monotonic()
        mine = -1 if self.joining else s.step
        v = torch.tensor([mine], dtype=torch.int64)
        dist.all_reduce(v, op=dist.ReduceOp.MAX)
        smax = int(v.item())
        if smax < 0:
            raise RuntimeError("re-form: no member holds the state")
        v = torch.tensor([-(s.rank if mine == smax else s.world)], dtype=torch.int64)
        dist.all_reduce(v, op=dist.ReduceOp.MAX)
        src = -int(v.item())
        if src == s.rank:
            st = s._state()
            st["rng"] = None
            st["session"] = {"last_saved": s.last_saved, "ckpt_done": s._ckpt_done,
                             "agreed_ckpt": s._agreed_ckpt, "agreed_stop": s._agreed_stop}
            buf = io.BytesIO()
            torch.save(st, buf)
            data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
            n = torch.tensor([data.numel()], dtype=torch.int64)
        else:
            n = torch.zeros(1, dtype=torch.int64)
        dist.broadcast(n, src)
        if src != s.rank:
            data = torch.empty(int(n.item()), dtype=torch.uint8)
        dist.broadcast(data, src)
        if src != s.rank:
            st = torch.load(io.BytesIO(data.numpy().tobytes()), map_location="cpu")
            restore_state(s, st)
            m = st["session"]
            s.step = st["step"]
            s.last_saved, s._ckpt_done = m["last_saved"], m["ckpt_done"]
            s._agreed_ckpt, s._agreed_stop = m["agreed_ckpt"], m["agreed_stop"]
            if self.joining:
                s.start_step = s.step
        t1 = time.monotonic()
        d = _digest(s)
        mm = torch.tensor([d, -d], dtype=torch.int64)
        dist.all_reduce(mm, op=dist.ReduceOp.MAX)
        if int(mm[0]) != -int(mm[1]):
            raise RuntimeError("re-form: the members' states differ after the transfer "
                               "(%014x here)" % d)
        s._ctl_next = s.step
        s._ctl = None
        if not self.joining:    # (a replacement's Session starts with this barrier)
            dist.barrier()
        _log("rank %d: re-formed as attempt %d at step %d (state from rank %d%s, %.1f MB in "
             "%.1f ms, digest %014x checked in %.1f ms)"
             % (s.rank, self.attempt, s.step, src, "; joined" if self.joining else "",
                n.item() / 1e6, (t1 - t0) * 1e3, d, (time.monotonic() - t1) * 1e3))
        self.joining = False
