"""dtclient.torch: dtctl's fault-tolerance cycle for PyTorch trainers.

A stock DDP script under dtagent gets liveness only.  With a handful of
added lines it gets what dttrain gets: checkpoints that the controller
commits in two phases (each rank's shard written atomically, reported with
its size and CRC32C), resume from the checkpoint dtctl names, the
just-in-time checkpoint of the survivors when a peer dies, step reports for
the straggler score, and collectives marked so that a hang is blamed on the
rank that stopped, not on the ranks waiting for it.

    import dtclient.torch as dtt

    ddp = DDP(model)
    with dtt.Session(ddp, opt, scheduler=sched, seed=SEED) as ft:
        sampler = dtt.StepSampler(len(data), batch, seed=SEED)
        for step in ft.steps(total_steps):
            idx = sampler.indices(step)
            loss = ...; opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            ft.step_done(loss, samples=len(idx))
        ft.finish({"steps": total_steps, "params_sha256": dtt.state_hash(ddp)})

What a Session does:
- at start, loads the checkpoint in DT_RESUME_DIR (model, optimizer, LR
  scheduler, the step, torch/CUDA/Python RNG states, the sampler's state),
  verified against the controller's manifest (size and CRC32C): a shard that
  fails is named on standard error ("checkpoint shard PATH: ...") and the
  process exits 3, so that the controller marks that checkpoint bad and
  resumes from the one before;
- marks the rank as waiting on its peers while it waits for the gradients'
  reduction: with two ranks on gloo DDP's own all-reduce, its wait
  bracketed by autograd callbacks; with three or more a DDP communication
  hook that all-gathers the buckets and sums them in rank order
  (ordered_reduce: the result does not depend on DDP's bucket layout,
  which a resumed process lays out differently for its first step); see
  torch_hook.py;
- at each step start, reseeds torch, CUDA and Python's random from
  (seed, step, rank); about every control_interval seconds (at a step
  every rank knows in advance) starts a small control all-reduce (its own
  gloo group) by which the ranks agree on the controller's checkpoint and
  stop requests, and waits for it one step later, when it is done;
- in step_done, reports the step (loss, samples, compute and communication
  time) to the agent's shared page (no system call: about a microsecond),
  polls the controller's commands (the same page), and
  checkpoints every DT_CHECKPOINT_EVERY steps, when the controller asks,
  on a stop (the controller's, SIGTERM, or Slurm's SIGUSR1 time-limit
  warning: then it exits 0 once the shard is durable) and at the end;
- every DT_INTEGRITY_EVERY steps (the job's integrity.every_steps; 50
  without it, 0: never), reports the fingerprint of the module's state
  dict (fingerprint(): dttrain's, a CRC32C per tensor and the CRC32C of
  those) through the client's integrity(), group "dp", with the loss when
  it is not finite: the controller votes across the replicas;
- saves asynchronously, pipelined: on the training thread only what the
  next forward and backward passes may change (buffers, the LR scheduler,
  the sampler, RNG states, the optimizer's hyper-parameters) is copied;
  the parameters and the optimizer's per-parameter state, which only the
  optimizer's step changes, are copied to the host on a writer thread
  (which also walks the state dicts when they are Module's and
  Optimizer's own)
  while the next step's forward and backward run, and optimizer.step()
  (wrapped: torch 1.13 has no optimizer step hooks) waits for that copy
  if it is not done yet; then serialization, CRC32C, tmp + fsync +
  rename + directory fsync and the report on the same thread.  So a
  shard holds exactly the state after its step.  Code that changes the
  parameters or the optimizer's state other than through
  optimizer.step() calls wait_snapshot() first.  Without an optimizer,
  or with async_save=False, the whole copy is made on the training
  thread;
- when a collective fails because a peer died, writes every rank's shard of
  the last completed step (DDP replicas are identical; each rank's RNG state
  is a function of (seed, step, rank)) into jit-<S>-r<rank>/, reads each
  back to verify it, reports them as just-in-time shards and exits 6; the
  controller commits the first complete set newer than its last committed
  checkpoint, as for dttrain.

NCCL: the same code runs (the control exchange keeps a gloo group of
its own), but it was tested with gloo on CPU only.  NCCL reports a dead
peer only when the process group's timeout expires (pass a short timeout
to init_process_group), and with NCCL_ASYNC_ERROR_HANDLING=1 its watchdog
ends the process instead of raising, so no just-in-time checkpoint is
written then: the next attempt resumes from the last committed one.

FSDP: Debian's torch 1.13 (python3-torch, Python 3.11) cannot import
torch.distributed.fsdp at all (its sharded-tensor metadata dataclass has a
mutable default, which Python 3.11 refuses), and it is built without NCCL;
so sharded state dicts are not supported and a Session refuses an FSDP
model.  With a torch where FSDP imports, each rank's SHARDED_STATE_DICT
would be its shard as here, but a just-in-time checkpoint is then
impossible (a dead rank's parameter shard dies with it).
"""

import io
import json
import math
import os
import random
import shutil
import signal
import struct
import sys
import threading
import time
import types

import torch
import torch.distributed as dist

import dtclient
from dtclient import torch_numerics as _numerics
from dtclient.torch_hook import HookMixin
from dtclient.torch_reform import Reformer, client as _client, init_process_group, \
    reform_process_group, restore_state, settle_process_group
from dtclient.torch_shard import (FORMAT, _MAGIC, _TRAILER, _Writer, _cpu_copy, _encode, _log,
                                  _write_atomic, live_buffers, live_model, live_optimizer,
                                  live_param_groups)

__all__ = ["Session", "StepSampler", "state_hash", "fingerprint", "reform_process_group",
           "init_process_group", "settle_process_group",
           "EXIT_CKPT_CORRUPT", "EXIT_CKPT_MISMATCH", "EXIT_COMM", "EXIT_JIT"]

# Exit statuses, as dttrain's: the controller reads 3 with the shard named
# on standard error as "this checkpoint is bad".
EXIT_CKPT_CORRUPT = 3
EXIT_CKPT_MISMATCH = 4
EXIT_COMM = 5
EXIT_JIT = 6


_cpu = time.thread_time
_perf = time.perf_counter
_Tensor = torch.Tensor
# Python's global RNG and its C seeding: random.seed(int) is this plus
# gauss_next = None, after type checks in Python (about 1.5 us a call).
_PY_RNG = random.seed.__self__
_PY_SEED = type(_PY_RNG).__mro__[1].seed


_M64 = 0xFFFFFFFFFFFFFFFF


def _mix_from(h, x):
    """One splitmix64 step of _mix: h absorbs x."""
    h = ((h ^ (int(x) & _M64)) + 0x9E3779B97F4A7C15) & _M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)


def _mix(*xs):
    """A 63-bit seed from integers (splitmix64 steps): a pure function."""
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = _mix_from(h, x)
    return h & 0x7FFFFFFFFFFFFFFF


class StepSampler:
    """The sample indices rank `rank` trains on at step `step`: a pure
    function of (seed, step, rank), so a resumed run, or a survivor
    writing a dead rank's shard, knows the data position from the step
    alone.  The global batch of step s is positions [s*B*W, (s+1)*B*W) of an
    endless sequence of epochs, each a permutation of range(n) seeded by
    (seed, epoch); rank r takes its B-sized slice."""

    def __init__(self, n, batch_per_rank, rank=None, world=None, seed=0):
        if n <= 0 or batch_per_rank <= 0:
            raise ValueError("StepSampler: n and batch_per_rank must be positive")
        if rank is None:
            rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))
        if world is None:
            world = (dist.get_world_size() if dist.is_initialized()
                     else int(os.environ.get("WORLD_SIZE", 1)))
        self.n, self.batch, self.rank, self.world, self.seed = n, batch_per_rank, rank, world, seed
        self._epoch, self._perm = None, None

    def _perm_of(self, epoch):
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(_mix(self.seed, epoch, 0x5A3))
            self._perm, self._epoch = torch.randperm(self.n, generator=g), epoch
        return self._perm

    def indices(self, step):
        gb = self.batch * self.world
        start = step * gb + self.rank * self.batch
        out, pos, left = [], start, self.batch
        while left > 0:
            e, off = divmod(pos, self.n)
            take = min(left, self.n - off)
            out.append(self._perm_of(e)[off:off + take])
            pos, left = pos + take, left - take
        return torch.cat(out) if len(out) > 1 else out[0]

    def state_dict(self):
        return {"n": self.n, "batch": self.batch, "world": self.world, "seed": self.seed}

    def load_state_dict(self, sd):
        for k in ("n", "batch", "world", "seed"):
            if sd.get(k) != getattr(self, k):
                raise ValueError("StepSampler: checkpoint has %s=%s, this run %s"
                                 % (k, sd.get(k), getattr(self, k)))


def state_hash(model):
    """SHA-256 (hex) over the model's state dict, in key order: equal
    exactly when the parameters and buffers are bit-identical."""
    import hashlib
    m = getattr(model, "module", model)
    h = hashlib.sha256()
    for k, v in sorted(m.state_dict().items()):
        h.update(k.encode())
        t = v.detach().to("cpu").contiguous()
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def fingerprint(model):
    """The parameter fingerprint dttrain reports (trainer/integrity.c), for
    a PyTorch module: the CRC32C of each tensor of the state dict (its
    bytes as held, in state-dict order: parameters and buffers, which DDP
    replicas hold bit-identical), and the CRC32C of those CRCs as
    little-endian u32s.  Returns (fingerprint, {name: crc}), both as
    8 hex digits."""
    m = getattr(model, "module", model)
    names, crcs = [], []
    for k, v in m.state_dict().items():
        if not torch.is_tensor(v):
            continue
        t = v.detach().to("cpu").contiguous()
        names.append(k)
        crcs.append(dtclient.crc32c(t.view(torch.uint8).numpy()) if t.numel() else 0)
    fp = dtclient.crc32c(struct.pack("<%dI" % len(crcs), *crcs))
    return "%08x" % fp, {k: "%08x" % c for k, c in zip(names, crcs)}


def _is_comm_error(e):
    t = str(e)
    return isinstance(e, RuntimeError) and any(
        s in t for s in ("gloo", "Gloo", "NCCL", "Connection closed", "Connection reset",
                         "Broken pipe", "Timed out", "timed out", "peer", "Socket"))


class Session(HookMixin):
    """The fault-tolerance cycle of one PyTorch trainer process (see the
    module's text).  model: the DDP-wrapped model (or a plain module for a
    single process); optimizer, scheduler: theirs or None; sampler: an
    object with state_dict/load_state_dict (a StepSampler) or None; seed:
    the run's seed (RNG reseeding and the sampler); checkpoint_dir,
    every: override DT_CHECKPOINT_DIR and DT_CHECKPOINT_EVERY;
    async_save: write shards on a background thread (default); extra: a
    dict of more picklable state saved and restored as is, available as
    .extra after resume; it must be the same on every rank (a survivor's
    just-in-time checkpoint copies its own into every rank's shard);
    control_interval: about how often (seconds) the ranks exchange their
    requests (the controller's checkpoint and stop, a signal): every N
    steps, N agreed by the ranks from their step time, at least 2; a
    request is acted on within about two intervals plus two steps
    (periodic checkpoints and the end do not need it); ordered_reduce:
    reduce each gradient bucket by an all-gather and a sum in rank
    order (bit-identical results whatever DDP's bucket layout, which a
    resumed run rebuilds differently; it moves world/2 times the data of
    a ring all-reduce), instead of an all-reduce; default: with 3 ranks
    or more (two-way sums do not depend on the order);
    jit_prewrite_after: after this many seconds blocked in one gradient
    collective, write the just-in-time shards ahead (reported only if
    the collective then fails; 0: never)."""

    def __init__(self, model, optimizer=None, scheduler=None, sampler=None, seed=0,
                 checkpoint_dir=None, every=None, async_save=True, extra=None, client=None,
                 reseed=True, control_interval=1.0, ordered_reduce=None,
                 jit_prewrite_after=1.0):
        if type(model).__name__ == "FullyShardedDataParallel":
            raise NotImplementedError(
                "dtclient.torch: FSDP models are not supported (Debian's torch 1.13 cannot "
                "import torch.distributed.fsdp under Python 3.11; see the module's text)")
        self.model, self.optimizer, self.scheduler, self.sampler = model, optimizer, scheduler, sampler
        self.seed, self.reseed, self.extra = int(seed), reseed, extra if extra is not None else {}
        self._seed_h = _mix_from(0x9E3779B97F4A7C15, self.seed)    # _mix(seed, ...)'s first step
        if not float(control_interval) >= 0:
            raise ValueError("dtclient.torch: control_interval must be >= 0 seconds")
        self.control_interval = float(control_interval)
        self.client = client or _client()
        self._report_numerics(model)
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else int(os.environ.get("RANK", 0))
        self.world = dist.get_world_size() if self.distributed else 1
        self._inv_world = 1.0 / self.world
        self.job = os.environ.get("DT_JOB", "")
        self.ckpt_dir = checkpoint_dir or os.environ.get("DT_CHECKPOINT_DIR") or None
        self.every = int(every if every is not None else os.environ.get("DT_CHECKPOINT_EVERY") or 0)
        # Parameter fingerprints every N steps (the controller's
        # integrity.every_steps; 0: none; dttrain's default without one).
        self.integrity_every = int(os.environ.get("DT_INTEGRITY_EVERY") or 50)
        self.integrity_s = 0.0      # training-thread time spent on fingerprints
        self.integrity_count = 0
        self.step = 0               # completed steps
        self.start_step = 0
        self.total = None
        self.stopped = False
        self.nckpt = 0
        self.stall_s = 0.0          # training-thread time spent on checkpoints (wall)
        self.stall_cpu_s = 0.0      # the same, CPU time of the training thread
        # CPU time of this module's own work otherwise: on the training
        # thread, and in the collectives' completion callbacks (on the
        # process group's threads).  CPU time, not wall time: on a loaded
        # machine a wall-clock measure of a few microseconds of work is
        # mostly the time the thread waited for a core.  (Two sums: the
        # callbacks run on another thread.)
        self._own_s = self._cb_s = 0.0
        # The gradient collectives' launches (the process group's own
        # call, which DDP makes the same way without a hook), apart.
        self._launch_s = 0.0
        self._scale_s = 0.0         # (of _own_s: the buckets' scaling pass)
        self.last_saved = 0
        self._ckpt_req = self._stop_req = 0     # this rank's requests
        self._ckpt_done = 0
        # The ranks' agreement on requests: an all-reduce (MAX) of
        # [checkpoint step, stop step, proposed period] launched at step
        # _ctl_next, waited for one step later (by then it is done), its
        # result acted on by every rank at the same step.
        self._ctl = None            # the control all-reduce in flight
        self._ctl_buf = None
        self._ctl_wait = -1         # the step whose step_done waits for it
        self._ctl_next = 0          # the step that launches the next one
        self._ctl_count = 0
        self._agreed_ckpt = self._agreed_stop = 0
        self._step_ewma = 0.0       # seconds per step, smoothed
        self._t_prev = None
        self._gather = {}           # bucket index -> the all-gather's outputs
        # Gradient collectives launched / ended / ended well, since when one
        # is pending, the just-in-time pre-write's (step, shards).
        self._n_launch = self._n_end = self._n_ok = 0
        self._pending_since = 0.0
        self._jit_pre = None
        self._jit_lock = threading.Lock()
        self._jit_done = False
        self._signal = 0
        self._t0 = None
        self._comm_failed = None
        self._lock = threading.Lock()
        self._last_launch = self._last_done = 0.0
        self._in_bwd = False        # a backward pass's reduction is under way
        self._wmark = None          # the page's waiting counter (DDP's own reduction)
        self._seed_tab, self._seed_base = [], 0     # steps' seeds, computed ahead
        self._ctl_group = self._hook = self._reform = None
        self._redo = False
        if self.distributed and self.world > 1:
            # A gloo group of its own for the control exchange: host
            # tensors, no device sync, also when the gradients go over NCCL.
            self._ctl_group = (dist.new_group(backend="gloo")
                               if dist.get_backend() != "gloo" else dist.group.WORLD)
            if ordered_reduce is None:
                ordered_reduce = self.world >= 3
        self._writer = _Writer(self) if async_save else None
        # The pipelined snapshot: set while no host copy is pending.
        self._copied = threading.Event()
        self._copied.set()
        self.copy_waits = 0         # optimizer steps that waited for a copy
        self._test_copy_delay = 0.0     # tests: the writer's copy starts late
        self._pipelined = bool(async_save and optimizer is not None)
        if self._pipelined:
            self._guard_optimizer()
        self.jit_prewrite_after = float(jit_prewrite_after or 0)
        if self._ctl_group is not None and self.ckpt_dir and self.jit_prewrite_after > 0:
            threading.Thread(target=self._prewrite_loop, name="dtclient-torch-jit",
                             daemon=True).start()
        self._snap = None           # the last host snapshot (reused)
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            try:
                signal.signal(sig, self._on_signal)
            except ValueError:      # not the main thread
                pass
        self._reform = Reformer(self)       # (restart.reform: see torch_reform.py)
        if self._ctl_group is not None and hasattr(model, "register_comm_hook"):
            self._reduction(model, ordered_reduce)      # (see torch_hook.py)
        if self._reform.joining:
            self._reform.sync()
        else:
            self._resume()
        self._ctl_next = self.step
        if self._ctl_group is not None:
            # Every rank loaded (busy meanwhile): start the first step together
            # (a slow loader is not blamed for the others; they wait for it).
            self.client.collective(True)
            try:
                dist.barrier(group=self._ctl_group)
            finally:
                self.client.collective(False)

    @property
    def self_s(self):
        """CPU seconds of this module's own per-step work (not checkpoints
        nor integrity reports): the training thread's and its callbacks'.
        Not the gradient collectives' launches: see launch_s."""
        return self._own_s + self._cb_s

    @property
    def launch_s(self):
        """CPU seconds the hook spent in the process group's call that
        starts each gradient collective (ProcessGroup.allreduce, the
        call DDP makes in C++ without a hook: the collective's cost, not
        this module's)."""
        return self._launch_s

    @property
    def scale_s(self):
        """Of self_s: the CPU seconds of the buckets' scaling pass (a pass
        over the gradients; DDP without a hook folds it into its copy)."""
        return self._scale_s

    # -- context: a failed collective becomes a just-in-time checkpoint -----
    def _report_numerics(self, model):
        """What this rank computes with, once (torch_numerics.py): the
        controller pins it for the job's later attempts."""
        try:
            p = next(iter(model.parameters()), None)
            self.numerics = _numerics.identity(p.device if p is not None else None)
            self.client.numerics(self.numerics)
        except (dtclient.DTClientError, OSError, RuntimeError, ValueError) as e:
            sys.stderr.write("dtclient.torch: numerics not reported: %s\n" % e)

    def __enter__(self):
        return self

    def __exit__(self, etype, e, tb):
        if e is None or isinstance(e, (SystemExit, KeyboardInterrupt)):
            return False
        if self._comm_failed is not None or _is_comm_error(e):
            _log("rank %d: a collective failed after step %d: %s"
                 % (self.rank, self.step, str(e).splitlines()[0] if str(e) else etype.__name__))
            # Only a failure of one of our own collectives (a gradient
            # bucket: before the optimizer step; the control exchange:
            # after step_done counted the step) says that the state is
            # exactly that of self.step; anything else gets no checkpoint.
            # (DDP's own reduction raises out of the backward pass: a
            # comm error while it is under way is the buckets'.)
            if self._comm_failed is None and self._in_bwd:
                self._comm_failed = e
            code = self._jit() if self._comm_failed is not None else EXIT_COMM
            # Not sys.exit: a group with a dead peer may block its destructors.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return False

    def _on_signal(self, sig, frame):
        self._signal = sig

    def _poll(self):
        if self._signal and not self._stop_req:
            _log("rank %d: %s: stopping after step %d with a checkpoint"
                 % (self.rank, signal.Signals(self._signal).name, self.step + 1))
            self._stop_req = self.step + 1
        while True:
            cmd = self.client.poll()
            if cmd is None:
                return
            if cmd.kind == dtclient.CMD_CHECKPOINT:
                self._ckpt_req = max(self._ckpt_req, cmd.step)
            elif cmd.kind == dtclient.CMD_STOP:
                self._stop_req = cmd.step if cmd.step > 0 else self.step + 1
            elif cmd.kind == dtclient.CMD_REFORM and self._reform is not None:
                self._reform.pending = max(self._reform.pending, cmd.step)  # (lost peer)
            elif cmd.kind == dtclient.CMD_ABORT:
                _log("rank %d: abort requested at step %d" % (self.rank, self.step))
                os._exit(1)

    # -- gradient collectives in flight, and the just-in-time pre-write ----------
    def _prewrite_loop(self):
        """While the training thread has waited on one gradient collective
        for more than jit_prewrite_after seconds (a peer stopped, or dead
        and not yet noticed), write the just-in-time shards of the last
        completed step now, without reporting them: if the collective then
        fails, only the report is left to do, which beats the controller's
        just-in-time window even on a loaded machine.  The state cannot
        move while the collective is pending (the optimizer steps after
        it); a set whose copy overlapped its completion is discarded."""
        while True:
            time.sleep(min(0.25, self.jit_prewrite_after / 2))
            with self._lock:
                pending = self._n_launch > self._n_end
                since, ok0 = self._pending_since, self._n_ok
            step = self.step
            if (not pending or time.perf_counter() - since < self.jit_prewrite_after
                    or step <= self.start_step
                    or (self._jit_pre is not None and self._jit_pre[0] == step)):
                continue
            with self._jit_lock:
                if self._jit_done:
                    return
                try:
                    shards = self._jit_write(step, lambda: self._n_ok == ok0 and self.step == step)
                except (OSError, RuntimeError) as e:
                    _log("rank %d: just-in-time pre-write of step %d: %s" % (self.rank, step, e))
                    shards = None
                self._jit_pre = (step, shards)
                if shards:
                    _log("rank %d: blocked in a gradient collective for %.1f s: just-in-time shards "
                         "of step %d written ahead" % (self.rank, time.perf_counter() - since, step))

    def _jit_drop_stale(self):
        """The training went on after a pre-write: its shards are stale."""
        pre, self._jit_pre = self._jit_pre, None
        if pre is not None and pre[1]:
            shutil.rmtree(os.path.dirname(pre[1][0][1]), ignore_errors=True)

    # -- the step loop ---------------------------------------------------------
    def steps(self, total):
        """Step numbers from the resumed step to total-1.  Each iteration
        reseeds the RNGs from (seed, step, rank) and starts the control
        exchange; the loop body must end with step_done()."""
        self.total = int(total)
        s = self.step
        # (the loop's own references in the generator's frame: no attribute
        # lookups a step)
        client = self.client
        cmd = client.command_counter()      # (client.pending(), inline)
        py_seed, py_rng, torch_seed = _PY_SEED, _PY_RNG, torch.default_generator.manual_seed
        tc, perf = torch.cuda, time.perf_counter
        while s < self.total and not self.stopped:
            c0 = _cpu()
            if self.reseed:     # (_reseed, inline)
                i = s - self._seed_base
                if not 0 <= i < len(self._seed_tab):
                    self._seeds_ahead(s)
                    i = 0
                x = self._seed_tab[i]
                py_seed(py_rng, x)      # random.seed(x)
                py_rng.gauss_next = None
                torch_seed(x)
                # (is_initialized() is a Python function: its flag first)
                if tc._initialized and tc.is_initialized():
                    tc.manual_seed_all(x)
            if self._signal or (cmd is not None and cmd[0] > client._last_cmd):
                self._poll()
            if s == self._ctl_next and self._ctl_group is not None and self._ctl is None:
                try:
                    self._ctl_launch(s)
                except Exception as e:
                    self._reform_or_exit(e)     # (raises without restart.reform)
                    self._ctl_launch(s)
            self._last_launch = self._last_done = 0.0
            if self._in_bwd:
                self._bwd_reset()
            self._t0 = perf()
            self._own_s += _cpu() - c0
            yield s
            if self.step != s + 1 and not self._redo:
                raise RuntimeError("dtclient.torch: step %d ended without step_done()" % s)
            s, self._redo = self.step, False

    def _reform_or_exit(self, e):
        """restart.reform, a peer lost (e): return once the group is re-formed,
        else the just-in-time checkpoint and exit.  Without it: raise e."""
        if self._reform is None or not self._reform.on:
            raise e
        self._comm_failed = e
        if self._reform.wait_and_reform(e):
            self._reform.failed = self._comm_failed = None
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self._jit())

    def _ctl_launch(self, s):
        """Start the ranks' exchange of requests at step s (every rank
        launches it at the same step: the schedule is agreed)."""
        period = 2
        if self._step_ewma > 0 and self.control_interval > 0:
            period = max(2, min(100000, int(self.control_interval / self._step_ewma)))
        self._ctl_buf = torch.tensor([self._ckpt_req, self._stop_req, period], dtype=torch.int64)
        try:
            self._ctl = dist.all_reduce(self._ctl_buf, op=dist.ReduceOp.MAX,
                                        group=self._ctl_group, async_op=True)
        except Exception as e:     # a peer already gone: the state is self.step's
            self._comm_failed = e
            raise
        self._ctl_wait = s + 1
        self._ctl_count += 1

    def _ctl_finish(self):
        """Wait for the exchange in flight (marked: blocked on peers) and
        take its result: the requests every rank now acts on, and the
        step that launches the next exchange."""
        t = time.perf_counter()
        self.client.collective(True)
        try:
            self._ctl.wait()
        except Exception as e:
            self._comm_failed = e
            raise
        finally:
            self.client.collective(False)
        creq, sreq, period = (int(v) for v in self._ctl_buf.tolist())
        self._ctl = None
        self._agreed_ckpt = max(self._agreed_ckpt, creq)
        if sreq > 0 and (self._agreed_stop == 0 or sreq < self._agreed_stop):
            self._agreed_stop = sreq
        # this step_done belongs to step self._ctl_wait (self.step = it + 1)
        self._ctl_next = self._ctl_wait - 1 + period
        return time.perf_counter() - t

    def _seed_of(self, step):
        """The RNGs' seed at step `step`: _mix(seed, step, rank)."""
        return _mix_from(_mix_from(self._seed_h, step), self.rank) & 0x7FFFFFFFFFFFFFFF

    def _seeds_ahead(self, step):
        """The seeds of the next 64 steps from `step`, in one go (a loop
        that runs warm, not a step at a time after the backward pass has
        evicted it)."""
        self._seed_tab = [self._seed_of(t) for t in range(step, step + 64)]
        self._seed_base = step

    def _reseed(self, step):
        """As steps() does at each step start."""
        x = self._seed_of(step)
        _PY_SEED(_PY_RNG, x)        # random.seed(x)
        _PY_RNG.gauss_next = None
        # torch.manual_seed costs ~100 us (CUDA's lazy seeding); the CPU
        # generator alone ~1 us, CUDA's only once CUDA is in use
        # (is_initialized(): false without CUDA, and is_available() costs
        # a few microseconds a call).
        torch.default_generator.manual_seed(x)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(x)

    def step_done(self, loss=0.0, samples=0):
        """The step's optimizer update is done: agree on requests, report,
        checkpoint or stop as needed."""
        ref = self._reform
        if ref.failed is not None:
            self._redo = True       # the step's update was skipped: redone re-formed
            return self._reform_or_exit(ref.failed)
        self.step = step = self.step + 1
        t_in, c_in = _perf(), _cpu()
        if self._jit_pre is not None:
            self._jit_drop_stale()
        lossf = loss.item() if isinstance(loss, _Tensor) else float(loss)
        # Communication not hidden behind the backward pass: from the last
        # bucket's launch to its completion, plus the control exchange.
        t = self._last_launch
        comm = max(0.0, self._last_done - t) if t else 0.0
        if self._ctl_group is None:
            creq, sreq = self._ckpt_req, self._stop_req
        else:
            # Requests are acted on as agreed, by every rank at the same step.
            if self._ctl is not None and step - 1 >= self._ctl_wait:
                try:
                    comm += self._ctl_finish()
                except Exception as e:
                    self._reform_or_exit(e)     # (the state is this step's)
            creq, sreq = self._agreed_ckpt, self._agreed_stop
        wall = _perf() - self._t0
        t = self._t_prev
        if t is not None:
            t = t_in - t
            self._step_ewma = t if self._step_ewma == 0 else 0.8 * self._step_ewma + 0.2 * t
        self._t_prev = t_in
        if ref.on:              # (a re-form command unread when a step is reported may
            self._poll()        # be replaced by the agent's next command)
        self.client.step(step, lossf, samples, max(0.0, wall - comm), comm)
        want = step == self.total or (self.every and step % self.every == 0)
        if creq > self._ckpt_done and step >= creq:
            # (a request for a step already saved, e.g. a periodic one the
            # ranks took by themselves, needs nothing more)
            want, self._ckpt_done = want or self.last_saved < creq, creq
        if sreq > 0 and step >= sreq:
            want = self.stopped = True
        self._own_s += _cpu() - c_in
        if self.integrity_every > 0 and step % self.integrity_every == 0:
            self._integrity(lossf)  # (its time in integrity_s)
        if want and self.ckpt_dir and self.last_saved != self.step:
            self.save()
        if self.stopped:
            self._ctl_drain()
            self.flush()
            _log("rank %d: stopped at step %d (checkpoint written)" % (self.rank, self.step))
            sys.stdout.flush()
            sys.exit(0)

    def _ctl_drain(self):
        """The exchange in flight, if any, completed (every rank launched
        it at the same step, so every rank can wait for it)."""
        if self._ctl is not None:
            self._ctl_finish()

    def _integrity(self, lossf):
        """Report this rank's parameter fingerprint of the step just done
        (group "dp": every DDP rank is a replica of the whole model), and
        its loss if that is not finite (every rank reports each step, as
        the controller judges a step once all of them have)."""
        t = time.perf_counter()
        fp, tensors = fingerprint(self.model)
        rep = {"step": self.step, "group": "dp", "fingerprint": fp, "tensors": tensors}
        if not math.isfinite(lossf):
            rep["nonfinite"] = {"skipped": False, "loss": "nan" if math.isnan(lossf) else
                                "inf" if lossf > 0 else "-inf",
                                "local_loss_finite": False}
        if len(json.dumps(rep)) > 60 * 1024:
            del rep["tensors"]      # the summary alone fits the protocol's 64 KiB
        try:
            self.client.integrity(rep)
        except dtclient.DTClientError as e:
            _log("rank %d: integrity report of step %d: %s" % (self.rank, self.step, e))
        self.integrity_s += time.perf_counter() - t
        self.integrity_count += 1

    # -- checkpoints ------------------------------------------------------------
    def _module(self):
        return getattr(self.model, "module", self.model)

    def _state(self, shard_rank=None, keep_vars=False, walk=True):
        """This rank's state (or, for a just-in-time shard, rank
        shard_rank's: the same replica, its RNG state derived); keep_vars:
        the model's parameters as themselves (Parameter objects); walk:
        False leaves the model's and the optimizer's state dicts out."""
        own = shard_rank is None or shard_rank == self.rank
        st = {
            "format": FORMAT, "job": self.job, "step": self.step,
            "rank": self.rank if shard_rank is None else shard_rank,
            "world_size": self.world, "seed": self.seed,
            "model": self._module().state_dict(keep_vars=keep_vars) if walk else None,
            "optimizer": self.optimizer.state_dict() if self.optimizer and walk else None,
            "scheduler": self.scheduler.state_dict() if self.scheduler else None,
            "sampler": self.sampler.state_dict() if self.sampler is not None else None,
            "extra": self.extra,
            "rng": None,
        }
        if own:
            st["rng"] = {"python": random.getstate(), "torch": torch.get_rng_state(),
                         "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available()
                         else None}
        return st

    def shard_path(self, step, rank=None, jit_by=None):
        r = self.rank if rank is None else rank
        if jit_by is not None:
            return os.path.join(self.ckpt_dir, "jit-%d-r%d" % (step, jit_by), "rank-%d.ckpt" % r)
        return os.path.join(self.ckpt_dir, "step-%d" % step, "rank-%d.ckpt" % r)

    def save(self):
        """Checkpoint the state after the current step: a host copy here
        (pipelined: of what the next forward and backward may change), the
        rest on the writer thread (or here, with async_save=False)."""
        if not self.ckpt_dir:
            raise RuntimeError("dtclient.torch: no checkpoint directory (DT_CHECKPOINT_DIR)")
        t, c0 = time.perf_counter(), _cpu()
        self.client.set_busy(True)
        try:
            if self._writer is not None:
                self._writer.wait()     # the previous shard first: one in flight
            path = self.shard_path(self.step)
            if self._pipelined:
                # the host copy on the writer thread (see _state_live)
                self._copied.clear()
                self._writer.submit(self.step, path, self._state_live(), live=True)
            else:
                # The previous snapshot is written: its tensors are reused.
                state = self._snap = _cpu_copy(self._state(), self._snap)
                if self._writer is not None:
                    self._writer.submit(self.step, path, state)
                else:
                    self._write_shard(self.step, path, state)
        finally:
            self.client.set_busy(False)
        self.stall_s += time.perf_counter() - t
        self.stall_cpu_s += _cpu() - c0
        self.nckpt += 1
        self.last_saved = self.step

    def _state_live(self):
        """The state of this step for the pipelined copy: the parameters
        and the optimizer's per-parameter state (only the optimizer's step
        changes them) by reference, copied on the writer thread before the
        next optimizer step; the rest copied now (buffers: a forward pass
        may update them; the scheduler, the sampler).  The RNG states are
        new objects already.  The state dicts' walks are left to the
        writer thread when they are Module's and Optimizer's own: only the
        buffers and the hyper-parameters are copied here (see
        live_buffers, live_model)."""
        module = self._module()
        bufs = live_buffers(module)
        groups = live_param_groups(self.optimizer) if bufs is not None else None
        if groups is not None:
            st = self._state(walk=False)
            for k in ("scheduler", "sampler", "extra"):
                st[k] = _cpu_copy(st[k])
            st["_live"] = (module, bufs, groups)
            return st
        st = self._state(keep_vars=True)
        P = torch.nn.Parameter
        st["model"] = {k: v if isinstance(v, P) else _cpu_copy(v) for k, v in st["model"].items()}
        o = st["optimizer"]
        if o is not None:
            st["optimizer"] = {k: ({i: dict(ps) for i, ps in v.items()} if k == "state"
                                   else _cpu_copy(v)) for k, v in o.items()}
        for k in ("scheduler", "sampler", "extra"):
            st[k] = _cpu_copy(st[k])
        return st

    def _copy_live(self, state):
        """On the writer thread: the host copy of a _state_live() state
        (into the previous snapshot's tensors), then the training thread's
        optimizer step may go on."""
        try:
            if self._test_copy_delay:
                time.sleep(self._test_copy_delay)
            live = state.pop("_live", None)
            if live is not None:
                state["model"] = live_model(live[0], live[1])
                state["optimizer"] = live_optimizer(self.optimizer, live[2])
            snap = self._snap = _cpu_copy(state, self._snap)
        finally:
            self._copied.set()
        return snap

    def _guard_optimizer(self):
        """optimizer.step() waits for a pending host copy first.  torch 1.13
        has no optimizer step hooks (register_step_pre_hook came in 2.0):
        the instance's step is wrapped, as the LR schedulers do; the
        schedulers' step counter (their wrapper's _with_counter mark) still
        works whether the scheduler was created before or after."""
        inner, wait, copied = self.optimizer.step, self.wait_snapshot, self._copied
        self._unguarded_step = inner

        def step(opt, *args, **kwargs):
            if not copied.is_set():
                wait()
            return inner(*args, **kwargs)
        if hasattr(inner, "_with_counter"):
            step._with_counter = True
        self.optimizer.step = types.MethodType(step, self.optimizer)

    def wait_snapshot(self):
        """Block until the pending checkpoint's host copy is made (the
        training-thread time counted as checkpoint stall).  optimizer.step()
        does it by itself; call it before changing the parameters or the
        optimizer's state any other way."""
        if self._copied.is_set():
            return
        t, c0 = time.perf_counter(), _cpu()
        self._copied.wait()
        self.stall_s += time.perf_counter() - t
        self.stall_cpu_s += _cpu() - c0
        self.copy_waits += 1

    def _write_shard(self, step, path, state):
        data, crc = _encode(state)
        _write_atomic(path, data)
        self.client.shard_written(step, path, len(data), crc)

    def flush(self):
        """Wait until the shard being written is durable and reported (a
        checkpoint in progress for the hang detector meanwhile)."""
        if self._writer is not None:
            self.client.set_busy(True)
            try:
                self._writer.wait()
            finally:
                self.client.set_busy(False)

    def finish(self, result=None):
        """End of training: the last shard durable, then a barrier of all
        ranks (marked: a rank done first waits for the others' last writes
        without being taken for hung); rank 0 reports the result."""
        self.flush()
        self._ctl_drain()
        if self._ctl_group is not None:
            self.client.collective(True)
            try:
                dist.barrier(group=self._ctl_group)
            finally:
                self.client.collective(False)
        if result is not None and self.rank == 0:
            self.client.result(result)

    # -- the just-in-time checkpoint -----------------------------------------------
    def _jit(self):
        """After a failed collective: every rank's shard of the last
        completed step into jit-<S>-r<rank>/, each read back and checked,
        then reported.  Returns the exit status (EXIT_JIT or EXIT_COMM)."""
        if (self.world < 2 or not self.ckpt_dir or not self.client.connected
                or self.step <= self.start_step):
            return EXIT_COMM
        t0 = time.perf_counter()
        self.client.set_busy(True)
        ahead = ""
        try:
            self.flush()
            with self._jit_lock:    # (a pre-write in progress finishes first)
                self._jit_done = True
                pre = self._jit_pre
                if pre is not None and pre[0] == self.step and pre[1]:
                    shards, ahead = pre[1], ", written ahead"
                else:
                    shards = self._jit_write(self.step)
            for k, path, n, crc in shards:
                self.client.shard_written_jit(self.step, k, path, n, crc)
        except (OSError, RuntimeError, dtclient.DTClientError) as e:
            _log("rank %d: just-in-time checkpoint of step %d: %s" % (self.rank, self.step, e))
            return EXIT_COMM
        finally:
            self.client.set_busy(False)
        _log("rank %d: just-in-time checkpoint of step %d written to %s (%d shards%s, %.1f ms)"
             % (self.rank, self.step, os.path.dirname(self.shard_path(self.step, 0, self.rank)),
                self.world, ahead, (time.perf_counter() - t0) * 1e3))
        return EXIT_JIT

    def _jit_write(self, step, still_valid=None):
        """Every rank's shard of step (the state now) into
        jit-<step>-r<rank>/, each read back and checked: [(rank, path,
        bytes, crc)].  still_valid(): called once the state is copied;
        False discards the set (returns None)."""
        states = [_cpu_copy(self._state(shard_rank=k)) for k in range(self.world)]
        if still_valid is not None and not still_valid():
            return None
        out = []
        for k, st in enumerate(states):
            data, crc = _encode(st)
            path = self.shard_path(step, k, jit_by=self.rank)
            _write_atomic(path, data)
            with open(path, "rb") as f:
                back = f.read()
            if len(back) != len(data) or dtclient.crc32c(back) != crc:
                raise OSError("shard %s did not read back as written" % path)
            out.append((k, path, len(data), crc))
        return out

    # -- resume -------------------------------------------------------------------
    def _resume(self):
        d = os.environ.get("DT_RESUME_DIR")
        want = int(os.environ.get("DT_RESUME_STEP") or 0)
        if not d or want <= 0:
            return
        path = os.path.join(d, "rank-%d.ckpt" % self.rank)
        self.client.set_busy(True)
        try:
            st = self._read_shard(d, path)
        finally:
            self.client.set_busy(False)
        if st.get("format") != FORMAT:
            self._fail(EXIT_CKPT_MISMATCH, "checkpoint shard %s: not a %s shard" % (path, FORMAT))
        if st["world_size"] != self.world or st["step"] != want:
            self._fail(EXIT_CKPT_MISMATCH,
                       "checkpoint shard %s: step %s of world size %s, expected step %d of %d"
                       % (path, st["step"], st["world_size"], want, self.world))
        restore_state(self, st)
        rng = st.get("rng")
        if rng:
            random.setstate(rng["python"])
            torch.set_rng_state(rng["torch"])
            if rng.get("cuda") and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])
        elif self.reseed:
            self._reseed(want)      # a just-in-time shard of a lost rank
        self.step = self.start_step = self.last_saved = want
        if self.rank == 0:
            _log("resumed from %s: step %d" % (d, want))

    def _fail(self, code, text):
        _log(text)
        sys.exit(code)

    def _read_shard(self, d, path):
        """The shard's state, verified: against the manifest's size and
        CRC32C when the controller wrote one, and its own trailer."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            self._fail(EXIT_CKPT_CORRUPT, "checkpoint shard %s: %s" % (path, e.strerror))
        try:
            with open(os.path.join(d, "manifest.json")) as f:
                man = json.load(f)
        except FileNotFoundError:
            man = None
        except (OSError, ValueError) as e:
            self._fail(EXIT_CKPT_CORRUPT, "checkpoint shard %s: manifest: %s" % (path, e))
        if man is not None:
            rows = [s for s in man.get("shards", []) if s.get("rank") == self.rank]
            if not rows:
                self._fail(EXIT_CKPT_CORRUPT,
                           "checkpoint shard %s: not in the manifest" % path)
            want_bytes, want_crc = int(rows[0]["bytes"]), int(str(rows[0]["crc32c"]), 16)
            got = dtclient.crc32c(data)
            if len(data) != want_bytes or got != want_crc:
                self._fail(EXIT_CKPT_CORRUPT,
                           "checkpoint shard %s: %d bytes, CRC32C %08x; the manifest says "
                           "%d bytes, %08x" % (path, len(data), got, want_bytes, want_crc))
        if len(data) < _TRAILER.size:
            self._fail(EXIT_CKPT_CORRUPT, "checkpoint shard %s: truncated" % path)
        magic, ver, pcrc = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
        payload = memoryview(data)[:len(data) - _TRAILER.size]
        if magic != _MAGIC or ver != 1 or dtclient.crc32c(payload) != pcrc:
            self._fail(EXIT_CKPT_CORRUPT, "checkpoint shard %s: CRC32C mismatch" % path)
        return torch.load(io.BytesIO(payload), map_location="cpu")
