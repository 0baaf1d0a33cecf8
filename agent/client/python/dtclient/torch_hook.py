"""dtclient.torch's gradient reduction, marked for the hang watchdog (the
rank waits on its peers) and timed.  Two ways:

- DDP's own (the default with two ranks): no communication hook, so the
  reducer scales each gradient by 1/world in its copy into the bucket and
  launches each bucket's all-reduce in C++, as in a script without
  dtclient.torch; the wait is bracketed by two autograd final callbacks
  around the reducer's own (the one that waits for the all-reduces at the
  end of the backward pass), queued from a hook on one parameter's
  gradient.  A communication hook in torch 1.13 would cost a pass of its
  own over the gradients (the reducer's copy is plain then), a future and
  a callback per bucket;
- a communication hook (ordered_reduce; restart.reform, which needs a
  failed bucket to leave the backward pass without an error;
  find_unused_parameters; a process group other than gloo): each bucket's
  collective launched here, marked from its launch to its completion.

A mixin of dtclient.torch.Session, which holds the state it uses: the
client, the model's process group (_pg), the world size, the re-form
state (_reform), the counters of collectives in flight (_lock, _n_launch,
_n_end, _n_ok, _pending_since, _last_launch, _last_done, _in_bwd) and the
CPU time sums (_own_s, _cb_s, _launch_s, _scale_s)."""

import functools
import time

import torch
import torch.distributed as dist

_cpu = time.thread_time
_perf = time.perf_counter


def _first(value, buf):
    return value[0]


_queue = torch.autograd.Variable._execution_engine.queue_callback


class HookMixin:
    def _reduction(self, model, ordered):
        """Set up the gradient reduction of DDP model (see the module's
        text): DDP's own, bracketed, or a communication hook where that
        cannot serve."""
        self._pg = getattr(model, "process_group", None) or dist.group.WORLD
        # (find_unused_parameters: the parameter below may get no gradient
        # in a step; NCCL: the reducer's wait returns before the transfer
        # is done, so its end would not be the collective's)
        if (ordered or self._reform.on or getattr(model, "find_unused_parameters", False)
                or dist.get_backend(self._pg) != "gloo"):
            self._hook = self._ordered_hook if ordered else self._allreduce_hook
            model.register_comm_hook(None, self._hook)
            return
        params = [p for p in self._module().parameters() if p.requires_grad]
        # The marks below are the training thread's alone (no hook, no
        # completion callback on another thread): the page's counter is
        # written directly, without the client's lock and method calls.
        self._wmark = self.client.waiting_counter()
        self._wait_begin_cb, self._wait_end_cb = self._wait_begin, self._wait_end
        if params:
            # DDP buckets the parameters in reverse order, expecting their
            # gradients in about that order: the last one's comes first,
            # before any bucket's launch.  (A hook on a parameter's
            # gradient runs before its accumulation, whose DDP hook may be
            # the one that queues the reducer's final callback.)
            params[-1].register_hook(self._bwd_started)

    def _bwd_started(self, grad):
        """A backward pass reached the gradients (the hook of one
        parameter's): the reduction's bracket queued, to run once the
        backward pass is done, before the reducer's final callback."""
        c0 = _cpu()
        if self.model.require_backward_grad_sync:   # (not under no_sync())
            self._in_bwd = True
            _queue(self._wait_begin_cb)
        self._own_s += _cpu() - c0

    def _bwd_reset(self):
        """A step begins after a backward pass that raised (the script
        went on): its mark, if the wait had begun, is taken back."""
        self._in_bwd = False
        with self._lock:
            if self._n_launch > self._n_end:
                self._n_end += 1
                if self._wmark is not None:
                    self._wmark[0] -= 1

    def _wait_begin(self):
        """The backward pass is done; the reducer waits for the buckets'
        all-reduces next (waiting on peers): marked, and the end queued
        after the reducer's callback."""
        c0 = _cpu()
        t = self._last_launch = _perf()
        w = self._wmark
        if w is not None:
            w[0] += 1           # (client.collective(True), lock-free: see _reduction)
        # The counters without the lock too: this thread is their only
        # writer here, and the pre-write thread, which reads them, sees
        # the start time before the count that makes it pending, and
        # below the end counted before the success (a read between the
        # two sees no pending collective; a pre-write overlapping the
        # end is stale by the next step_done, which drops it).
        self._pending_since = t
        self._n_launch += 1
        _queue(self._wait_end_cb)
        self._own_s += _cpu() - c0

    def _wait_end(self):
        """The reducer's wait is over, the gradients averaged (not run if
        it raised: a failed all-reduce leaves _in_bwd set)."""
        c0 = _cpu()
        self._last_done = _perf()
        w = self._wmark
        if w is not None:
            w[0] -= 1
        self._in_bwd = False
        self._n_end += 1        # (lock-free: see _wait_begin)
        self._n_ok += 1
        self._own_s += _cpu() - c0

    def _bracketed(self, c0, cs, buf, launch, finish=None):
        """One gradient bucket's reduction, bracketed for the hang
        watchdog (waiting on peers from launch to completion) and timed:
        launch(buf) starts the collective on the model's process group
        (the ProcessGroup's own method: torch.distributed's wrappers cost
        tens of microseconds of Python per call), finish(value, buf)
        turns its completed result into the reduced bucket (None: the
        all-reduce's value, the bucket itself).  A failure of either is
        kept for the just-in-time checkpoint (the state is still
        self.step's).  c0, cs: the hook's start and the end of its
        scaling pass (CPU time).  Kept short: it runs for every bucket;
        the launch itself, the call DDP makes without a hook, is timed
        apart (launch_s).  The rank is marked waiting before the launch,
        which may block (NCCL's can)."""
        ref = self._reform
        if ref.failed is not None and ref.on:
            return ref.skipped(buf)     # the group is broken: the step is redone
        t = time.perf_counter()
        self.client.collective(True)
        self._last_launch = t
        with self._lock:
            if self._n_launch == self._n_end:
                self._pending_since = t
            self._n_launch += 1
        c1 = _cpu()
        try:
            fut = launch(buf).get_future()
        except Exception as e:     # a peer already gone
            self.client.collective(False)
            with self._lock:
                self._n_end += 1
            if ref.on:
                ref.failed = e
                return ref.skipped(buf)
            self._comm_failed = e
            raise
        c2 = _cpu()
        if finish is None and not ref.on:
            fut = fut.then(self._done_first)    # (a bound method: no closure a bucket)
        else:
            fut = fut.then(functools.partial(self._done, buf, finish or _first))
        self._launch_s += c2 - c1
        self._scale_s += cs - c0
        self._own_s += (c1 - c0) + (_cpu() - c2)
        return fut

    def _done_first(self, f):
        """A gradient all-reduce completed (on the process group's thread):
        the bucket, now reduced; waiting on peers ends."""
        d0 = _cpu()
        self._last_done = time.perf_counter()
        self.client.collective(False)
        try:
            out = f.value()[0]
        except Exception as e:
            self._comm_failed = e
            with self._lock:
                self._n_end += 1
            raise
        with self._lock:
            self._n_end += 1
            self._n_ok += 1
            self._cb_s += _cpu() - d0
        return out

    def _done(self, buf, finish, f):
        """As _done_first, for an all-gather (finish sums the parts) and
        for restart.reform (a failure is kept, the step skipped and redone
        in the re-formed group)."""
        d0 = _cpu()
        self._last_done = time.perf_counter()
        self.client.collective(False)
        ok = False
        ref = self._reform
        try:
            out = finish(f.value(), buf)
            ok = True
            return out
        except Exception as e:
            if ref.on:
                ref.failed = ref.failed or e
                return buf
            self._comm_failed = e
            raise
        finally:
            with self._lock:
                self._n_end += 1
                self._n_ok += ok
                self._cb_s += _cpu() - d0

    def _allreduce_hook(self, state, bucket):
        """Each bucket's gradients averaged: multiplied by 1/world, as DDP
        does without a hook (a multiplication costs half a division; the
        same result with 2 ranks, 1/2 being exact), then all-reduced."""
        c0 = _cpu()
        buf = bucket.buffer()
        buf.mul_(self._inv_world)
        return self._bracketed(c0, _cpu(), buf, self._allreduce_one)

    def _allreduce_one(self, buf):
        return self._pg.allreduce([buf])

    def _ordered_hook(self, state, bucket):
        """As _allreduce_hook, but each rank's (scaled) bucket is gathered
        and the parts are summed in rank order, element by element: a
        ring all-reduce over three ranks or more sums an element in an
        order that depends on its offset in the bucket, and DDP lays its
        buckets out anew after the first step of each process (by the
        order the gradients became ready), so a resumed run would reduce
        its first step with other boundaries than the uninterrupted one."""
        c0 = _cpu()
        buf = bucket.buffer()
        buf.mul_(self._inv_world)
        parts = self._gather.get(bucket.index())
        if parts is None or parts[0].shape != buf.shape or parts[0].dtype != buf.dtype:
            parts = [torch.empty_like(buf) for _ in range(self.world)]
            self._gather[bucket.index()] = parts

        def finish(value, buf):
            buf.copy_(parts[0])
            for p in parts[1:]:
                buf.add_(p)
            return buf
        return self._bracketed(c0, _cpu(), buf, lambda b: self._pg.allgather([parts], [b]), finish)
