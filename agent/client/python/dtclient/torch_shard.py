"""dtclient.torch's checkpoint shards: the host copy of a state, the file
format (torch.save() of a dict, then a trailer: magic, version, the
CRC32C of everything before it), the atomic write, and the writer
thread."""

import copy
import io
import os
import struct
import sys
import threading

import torch

import dtclient


FORMAT = "dtclient.torch/1"
# A shard: torch.save() of a dict, then this trailer: magic, version, the
# CRC32C of everything before it.  The controller records the CRC32C of the
# whole file (trailer included), as reported.
_TRAILER = struct.Struct("<4sII")
_MAGIC = b"DTPT"


def _log(msg):
    sys.stderr.write("dtclient.torch: %s\n" % msg)
    sys.stderr.flush()


_IMMUTABLE = (int, float, bool, str, bytes, type(None))


def _cpu_copy(obj, into=None):
    """A deep copy of a state dict with every tensor copied to the host
    (immutable values shared, not copied: this is the checkpoint's stall).
    into: a previous copy of the same structure whose tensors are reused
    (copied into, no allocation) where shape and dtype match."""
    if torch.is_tensor(obj):
        t = obj.detach()
        if torch.is_tensor(into) and into.shape == t.shape and into.dtype == t.dtype:
            return into.copy_(t)
        return t.clone() if t.device.type == "cpu" else t.to("cpu")
    if isinstance(obj, _IMMUTABLE):
        return obj
    if isinstance(obj, dict):
        old = into if isinstance(into, dict) else {}
        return {k: _cpu_copy(v, old.get(k)) for k, v in obj.items()}
    if isinstance(obj, tuple) and all(isinstance(v, _IMMUTABLE) for v in obj):
        return obj
    if isinstance(obj, (list, tuple)):
        old = into if isinstance(into, (list, tuple)) and len(into) == len(obj) else [None] * len(obj)
        return type(obj)(_cpu_copy(v, o) for v, o in zip(obj, old))
    return copy.deepcopy(obj)


# -- the pipelined snapshot's two halves: at the step boundary (training
# thread) and on the writer thread (before optimizer.step() may go on)
_MOD = torch.nn.Module
_PLAIN = {}     # module class -> its state dict is Module's own


def _plain(cls):
    ok = _PLAIN.get(cls)
    if ok is None:
        ok = _PLAIN[cls] = (cls.state_dict is _MOD.state_dict
                            and cls._save_to_state_dict is _MOD._save_to_state_dict
                            and cls.get_extra_state is _MOD.get_extra_state)
    return ok


def live_buffers(module):
    """At the step boundary: a host copy of each buffer of module's state
    dict, by its key, or None when the state dict is not Module's own
    (a state-dict hook, an overridden state_dict, _save_to_state_dict or
    get_extra_state anywhere: user code whose result may change with the
    next step, so the whole walk stays at the boundary).  The walk that
    pairs the keys with the parameters is then left to the writer thread
    (live_model)."""
    bufs = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        if m._state_dict_hooks or not _plain(type(m)):
            return None
        if m._buffers:
            dot = prefix + "." if prefix else ""
            skip = m._non_persistent_buffers_set
            for n, b in m._buffers.items():
                if b is not None and n not in skip:
                    bufs[dot + n] = _cpu_copy(b)
    return bufs


def live_model(module, bufs):
    """On the writer thread: module's state dict with its parameters by
    reference and its buffers as copied at the boundary (live_buffers).
    The keys and the parameter objects do not change with a step, nor do
    the parameters' values before the optimizer's step."""
    sd = module.state_dict(keep_vars=True)
    for k, v in sd.items():
        if k in bufs:
            sd[k] = bufs[k]
        elif not isinstance(v, torch.nn.Parameter):
            raise RuntimeError("the model's state dict changed after its step (%s)" % k)
    return sd


def live_param_groups(opt):
    """At the step boundary: the optimizer's hyper-parameters (a scheduler
    may change them before the next optimizer step) copied, with each
    group's parameters; None when the optimizer has its own state_dict."""
    if type(opt).state_dict is not torch.optim.Optimizer.state_dict:
        return None
    return [(_cpu_copy({k: v for k, v in g.items() if k != "params"}), list(g["params"]))
            for g in opt.param_groups]


def live_optimizer(opt, groups):
    """On the writer thread: optimizer.state_dict() as torch 1.13 builds
    it, from the hyper-parameters copied at the boundary and the per-
    parameter state (by reference: only the optimizer's step changes it,
    and it waits for this copy)."""
    index, start, packed = {}, 0, []
    for hp, params in groups:
        index.update({id(p): i for i, p in enumerate(params, start) if id(p) not in index})
        hp["params"] = [index[id(p)] for p in params]
        start += len(params)
        packed.append(hp)
    state = {(index[id(k)] if isinstance(k, torch.Tensor) else k): dict(v)
             for k, v in opt.state.items()}
    return {"state": state, "param_groups": packed}


def _fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(obj):
    """The bytes of a shard: payload + trailer; (bytes, crc of the file)."""
    b = io.BytesIO()
    torch.save(obj, b)
    with b.getbuffer() as payload:
        pcrc = dtclient.crc32c(payload)
    trailer = _TRAILER.pack(_MAGIC, 1, pcrc)
    b.seek(0, io.SEEK_END)
    b.write(trailer)
    data = b.getvalue()
    return data, dtclient.crc32c(trailer, pcrc)


def _write_atomic(path, data):
    """tmp + fsync + rename + directory fsync, never through a link."""
    d = os.path.dirname(path)
    os.makedirs(d, mode=0o755, exist_ok=True)
    tmp = os.path.join(d, ".%s.tmp.%d" % (os.path.basename(path), os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        mv = memoryview(data)
        while mv:
            n = os.write(fd, mv)
            mv = mv[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.rename(tmp, path)
    _fsync_dir(d)


class _Writer:
    """One background thread that writes shards, one at a time."""

    def __init__(self, session):
        self._s = session
        self._cv = threading.Condition()
        self._job = None
        self._busy = False
        self.error = None
        self._t = threading.Thread(target=self._run, name="dtclient-torch-writer", daemon=True)
        self._t.start()

    def submit(self, step, path, state, live=False):
        """live: state still refers to the training's tensors; the host
        copy is made here first (the session's copied event set once it
        is), then the shard written."""
        with self._cv:
            while self._busy:
                self._cv.wait()
            self._job, self._busy = (step, path, state, live), True
            self._cv.notify_all()

    def wait(self):
        with self._cv:
            while self._busy:
                self._cv.wait()

    def _run(self):
        while True:
            with self._cv:
                while self._job is None:
                    self._cv.wait()
                step, path, state, live = self._job
                self._job = None
            try:
                if live:
                    state = self._s._copy_live(state)
                self._s._write_shard(step, path, state)
            except Exception as e:   # reported, and the commit simply does not happen
                self.error = e
                _log("rank %d: checkpoint of step %d failed: %s" % (self._s.rank, step, e))
                try:
                    self._s.client.shard_failed(step, str(e))
                except dtclient.DTClientError:
                    pass
            with self._cv:
                self._busy = False
                self._cv.notify_all()
