"""dtclient: talk to the dtctl node agent (dtagent) from a Python trainer.

Standard library only.  The same calls as the C library libdtclient
(agent/client/dtclient.h), speaking the same protocol
(schemas/dtclient-protocol.md): step reports go to a shared-memory page
(no system call per step), everything else is one framed message over the
agent's Unix socket.  Without an agent (DT_AGENT_SOCKET unset) the client is
a no-op, so the trainer also runs standalone; its kv calls then use files in
DT_RENDEZVOUS_DIR when that is set.

    import dtclient
    c = dtclient.open()
    for step in range(start, steps):
        ...
        c.step(step, loss, samples, compute_s, comm_s)
        cmd = c.poll()               # None, or a Command(kind, step, seq)
        if cmd and cmd.kind == dtclient.CMD_STOP: ...
    c.result({"steps": steps})
    c.close()

Like the C library, a connected client watches the agent's socket from a
daemon thread and ends the process (and its process group, when it leads
one) if the agent goes away.

PyTorch trainers: dtclient.torch (imported only by its own name, so this
module never imports torch) adds checkpoints, the just-in-time checkpoint,
collective marking and step reports on top of these calls.
"""

import builtins
import collections
import ctypes
import errno
import json
import mmap
import os
import re
import select
import signal
import socket
import struct
import sys
import threading
import time

__all__ = [
    "open", "Client", "Command", "DTClientError", "crc32c",
    "CMD_NONE", "CMD_CHECKPOINT", "CMD_STOP", "CMD_ABORT", "CMD_REFORM",
    "CAP_REFORM", "REFORM_WAITING",
    "OK", "ERR_NOAGENT", "ERR_IO", "ERR_PROTO", "ERR_TIMEOUT", "ERR_INVAL", "ERR_NOTFOUND",
]

# dtclient_err_t
OK, ERR_NOAGENT, ERR_IO, ERR_PROTO, ERR_TIMEOUT, ERR_INVAL, ERR_NOTFOUND = range(7)
_ERR_TEXT = {
    OK: "success", ERR_NOAGENT: "no agent and no DT_RENDEZVOUS_DIR",
    ERR_IO: "connection to the agent lost", ERR_PROTO: "protocol error",
    ERR_TIMEOUT: "timed out", ERR_INVAL: "invalid argument", ERR_NOTFOUND: "key not found",
}

# dtclient_cmd_kind_t
CMD_NONE, CMD_CHECKPOINT, CMD_STOP, CMD_ABORT, CMD_REFORM = range(5)

# Capabilities a trainer declares (declare(); dtclient_declare's
# DTCLIENT_CAP_REFORM and DTCLIENT_REFORM_WAITING).
CAP_REFORM, REFORM_WAITING = 1, 2

Command = collections.namedtuple("Command", "kind step seq")

# ---- the wire format (dtproto.h) ----------------------------------------
_VERSION = 1
_HDR = struct.Struct("<3sBHHI")       # magic "DTC", version, type, flags, length
_FIELD = struct.Struct("<HI")         # tag, length
_MAX_PAYLOAD = 128 * 1024
_MAX_VALUE = 64 * 1024
_MAX_KEY = 200

HELLO, SHARD, SHARD_FAILED, RESULT, KV_SET, KV_GET, REPLY, INTEGRITY, PERF, CAPS, NUMERICS = \
    range(1, 12)
T_RANK, T_PID, T_STEP, T_PATH, T_BYTES, T_CRC32C, T_TEXT, T_KEY, T_VALUE, T_STATUS, T_JSON, \
    T_JIT = range(1, 13)
_INT_TAGS = {T_RANK, T_PID, T_STEP, T_BYTES, T_CRC32C, T_STATUS, T_JIT}
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/-")

# ---- the shared page (struct dtshm_page) ---------------------------------
_SHM_SIZE = 4096
_SHM_MAGIC = 0x4D485344
_REPORT_OFF = 64                      # struct dtshm_report, seqlock first
_REPORT = struct.Struct("<qdqddqi")   # step loss samples compute_ms comm_ms nreports busy
_STEP = struct.Struct("<qdqddq")      # the same but busy: a step report
_WAITING_OFF = 124                    # report.waiting: a counter outside the seqlock
_I32 = struct.Struct("<i")
_RANK_OFF = 8                         # page.rank: the rank the agent assigned (its)
_CMD_READ_OFF = 16                    # page.cmd_read: the newest cmd_seq read (ours)
_CMD_OFF = 128                        # struct dtshm_cmd, seqlock first
_CMD = struct.Struct("<QQiiq")        # seq cmd_seq kind pad step
_CMD_SEQ_OFF = _CMD_OFF + 8           # cmd_seq
_U64 = struct.Struct("<Q")


class DTClientError(Exception):
    """A request failed; .code is one of the ERR_* values."""

    def __init__(self, code, text=None):
        self.code = code
        super().__init__(text or _ERR_TEXT.get(code, "unknown error"))


def _encode(mtype, fields):
    parts = []
    for tag, val in fields:
        if tag in _INT_TAGS:
            b = struct.pack("<q", val)
        elif isinstance(val, str):
            b = val.encode()
        else:
            b = bytes(val)
        parts.append(_FIELD.pack(tag, len(b)) + b)
    payload = b"".join(parts)
    if len(payload) > _MAX_PAYLOAD:
        raise DTClientError(ERR_INVAL, "message larger than %d bytes" % _MAX_PAYLOAD)
    return _HDR.pack(b"DTC", _VERSION, mtype, 0, len(payload)) + payload


def _decode_fields(payload):
    out, off = {}, 0
    while off < len(payload):
        if len(payload) - off < _FIELD.size:
            raise DTClientError(ERR_PROTO, "truncated field header")
        tag, n = _FIELD.unpack_from(payload, off)
        off += _FIELD.size
        if n > len(payload) - off:
            raise DTClientError(ERR_PROTO, "truncated field")
        v = payload[off:off + n]
        off += n
        if tag in _INT_TAGS:
            if n != 8:
                raise DTClientError(ERR_PROTO, "integer field of %d bytes" % n)
            v = struct.unpack("<q", v)[0]
        out[tag] = v
    return out


def _key_ok(key):
    return isinstance(key, str) and 1 <= len(key) <= _MAX_KEY and set(key) <= _KEY_CHARS


class Client:
    """One connection to the agent (or the no-op client).  Use open()."""

    def __init__(self):
        self._sock = None
        self._page = None
        self._lock = threading.Lock()
        self._waiting_lock = threading.Lock()
        self._views = []
        self._last_cmd = 0
        self._nreports = 0
        self._wake = None
        self._watcher = None
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self._rdv = os.environ.get("DT_RENDEZVOUS_DIR") or None
        path = os.environ.get("DT_AGENT_SOCKET")
        if not path:
            return
        shm = os.environ.get("DT_AGENT_SHM")
        if shm:
            self._page = self._map(shm)
            if self._page is not None:
                self._nreports = _REPORT.unpack_from(self._page, _REPORT_OFF + 8)[5]
        try:
            # A file in the agent's private directory only (an abstract
            # name has no permissions), and the agent must be this user.
            if not path.startswith("/"):
                raise OSError(errno.EINVAL, "not an absolute path")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock = s
            s.connect(path)
            _, uid, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         struct.calcsize("3i")))
            if uid != os.geteuid():
                raise OSError(errno.EPERM, "the socket belongs to uid %d, not to this user" % uid)
            self._request(HELLO, [(T_RANK, self.rank), (T_PID, os.getpid())])
        except (OSError, DTClientError) as e:
            sys.stderr.write("dtclient: connect to the agent at DT_AGENT_SOCKET=%s: %s\n" % (path, e))
            if self._sock:
                self._sock.close()
            self._sock = None
            return
        self._wake = os.pipe()
        self._watcher = threading.Thread(target=self._watch, name="dtclient-watcher", daemon=True)
        self._watcher.start()

    @staticmethod
    def _map(path):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            sys.stderr.write("dtclient: DT_AGENT_SHM=%s: %s\n" % (path, e))
            return None
        try:
            m = mmap.mmap(fd, _SHM_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as e:
            sys.stderr.write("dtclient: mmap DT_AGENT_SHM=%s: %s\n" % (path, e))
            return None
        finally:
            os.close(fd)
        magic, version = struct.unpack_from("<II", m, 0)
        if magic != _SHM_MAGIC or version != _VERSION:
            sys.stderr.write("dtclient: DT_AGENT_SHM=%s: not a dtclient page of version 1\n" % path)
            m.close()
            return None
        return m

    def _watch(self):
        # Hang-up only (POLLRDHUP), never POLLIN: replies are the main thread's.
        p = select.poll()
        p.register(self._sock.fileno(), getattr(select, "POLLRDHUP", 0x2000))
        p.register(self._wake[0], select.POLLIN)
        gone = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0x2000)
        while True:
            events = p.poll()
            # close() wakes us before it closes the socket.  A socket closed
            # in this process (POLLNVAL: by close(), or by the garbage
            # collector at interpreter exit) is never the agent's doing.
            if any(fd == self._wake[0] or ev & select.POLLNVAL for fd, ev in events):
                return
            if any(ev & gone for _, ev in events):
                os.write(2, b"dtclient: the agent's socket closed: exiting\n")
                if os.getpgrp() == os.getpid():
                    os.kill(0, signal.SIGKILL)
                os._exit(1)

    # -- state ---------------------------------------------------------------
    @property
    def connected(self):
        return self._sock is not None

    def close(self):
        if self._wake:
            os.write(self._wake[1], b"x")
            # As the C library does: the watcher is gone before the socket
            # is closed, so it never mistakes our own close for the agent's.
            if self._watcher is not None and self._watcher is not threading.current_thread():
                self._watcher.join(timeout=5)
            self._watcher = None
        if self._sock:
            self._sock.close()
            self._sock = None
        if self._page is not None:
            for v in self._views:       # (exported views keep a mapping open)
                v.release()
            self._views = []
            self._page.close()
            self._page = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- shared page: step, busy, poll --------------------------------------
    # CPython gives no memory fences, but each struct write below is one
    # memcpy into the mapping and x86 keeps stores in order; the agent's
    # seqlock read then sees either the old or the new report whole.
    def _report_write(self, **kw):
        m = self._page
        seq = _U64.unpack_from(m, _REPORT_OFF)[0]
        _U64.pack_into(m, _REPORT_OFF, seq + 1)
        step, loss, samples, cms, wms, nrep, busy = _REPORT.unpack_from(m, _REPORT_OFF + 8)
        step = kw.get("step", step)
        loss = kw.get("loss", loss)
        samples = kw.get("samples", samples)
        cms = kw.get("compute_ms", cms)
        wms = kw.get("comm_ms", wms)
        nrep = kw.get("nreports", nrep)
        busy = kw.get("busy", busy)
        _REPORT.pack_into(m, _REPORT_OFF + 8, step, loss, samples, cms, wms, nrep, busy)
        _U64.pack_into(m, _REPORT_OFF, seq + 2)

    def step(self, step, loss=0.0, samples=0, compute_s=0.0, comm_s=0.0):
        """Report the step just finished (no system call).  Every field
        but busy, written in one struct write inside the seqlock: this
        runs at every step, so it reads nothing back but the sequence."""
        m = self._page
        if m is None:
            return
        self._nreports = n = self._nreports + 1
        seq = _U64.unpack_from(m, _REPORT_OFF)[0]
        _U64.pack_into(m, _REPORT_OFF, seq + 1)
        _STEP.pack_into(m, _REPORT_OFF + 8, int(step), float(loss), int(samples),
                        compute_s * 1000.0, comm_s * 1000.0, n)
        _U64.pack_into(m, _REPORT_OFF, seq + 2)

    def set_busy(self, busy):
        """Checkpoint save/load in progress: the hang detector waits."""
        if self._page is not None:
            self._report_write(busy=1 if busy else 0)

    def collective(self, enter):
        """A thread enters (True) or leaves (False) a collective: blocked on
        its peers.  A stalled step is then blamed on the rank that is not
        waiting.  The page keeps a count; threads may call it at once."""
        if self._page is None:
            return
        with self._waiting_lock:
            n = _I32.unpack_from(self._page, _WAITING_OFF)[0]
            _I32.pack_into(self._page, _WAITING_OFF, n + (1 if enter else -1))

    def waiting_counter(self):
        """The page's waiting counter as a one-element memoryview of ints
        (None without a page), for a caller that is the only thread
        entering and leaving collectives: c[0] += 1 and c[0] -= 1 are
        collective(True) and collective(False) without the lock and the
        method calls (a hot path runs them every step).  close() releases
        it."""
        return self._view(_WAITING_OFF, "i")

    def command_counter(self):
        """The page's command number as a one-element memoryview (None
        without a page): pending() is c[0] > the number of the last
        command poll() returned, without a method call.  close()
        releases it."""
        return self._view(_CMD_SEQ_OFF, "Q")

    def _view(self, off, fmt):
        """A one-element memoryview of the page at off (None without a
        page), kept for close() to release."""
        if self._page is None:
            return None
        base = memoryview(self._page)
        view = base[off:off + struct.calcsize(fmt)].cast(fmt)
        self._views += [view, base]
        return view

    def pending(self):
        """Whether poll() may have a command (a cheap test, no system
        call: the command's number alone)."""
        m = self._page
        return m is not None and _U64.unpack_from(m, _CMD_SEQ_OFF)[0] > self._last_cmd

    def poll(self):
        """The newest command not yet returned, or None (no system call).
        The command's number alone is read first, outside the seqlock:
        when it is not new (nearly always) nothing more is read; a torn
        read can only delay a new command to the next poll."""
        m = self._page
        if m is None or _U64.unpack_from(m, _CMD_SEQ_OFF)[0] <= self._last_cmd:
            return None
        for _ in range(1000):
            seq, cmd_seq, kind, _pad, step = _CMD.unpack_from(m, _CMD_OFF)
            if seq & 1:
                continue
            if _U64.unpack_from(m, _CMD_OFF)[0] != seq:
                continue
            if cmd_seq <= self._last_cmd:
                return None
            self._last_cmd = cmd_seq
            _U64.pack_into(self._page, _CMD_READ_OFF, cmd_seq)     # (read: the agent may replace it)
            return Command(kind, step, cmd_seq)
        return None

    def assigned_rank(self):
        """The rank the agent has assigned to this process now (its shared
        page; no system call), as dtclient_assigned_rank: it differs from
        RANK only for a standby process of a hot spare (DT_STANDBY=1),
        which learns the rank it takes over from this call once CMD_REFORM
        arrives (the agent writes the rank before the command).  RANK when
        no agent page is mapped."""
        if self._page is None:
            return self.rank
        return _I32.unpack_from(self._page, _RANK_OFF)[0]

    # -- messages ------------------------------------------------------------
    def _recv(self, n):
        b = bytearray()
        while len(b) < n:
            chunk = self._sock.recv(n - len(b))
            if not chunk:
                raise DTClientError(ERR_IO)
            b += chunk
        return bytes(b)

    def _request(self, mtype, fields):
        if self._sock is None:
            raise DTClientError(ERR_IO)
        frame = _encode(mtype, fields)
        with self._lock:
            try:
                self._sock.sendall(frame)
                magic, ver, rtype, flags, n = _HDR.unpack(self._recv(_HDR.size))
                if magic != b"DTC" or ver != _VERSION or rtype != REPLY or flags or n > _MAX_PAYLOAD:
                    raise DTClientError(ERR_PROTO, "bad reply header from the agent")
                f = _decode_fields(self._recv(n))
            except OSError as e:
                raise DTClientError(ERR_IO, str(e))
        status = f.get(T_STATUS, ERR_PROTO)
        if status != OK:
            text = f.get(T_TEXT)
            raise DTClientError(status, text.decode(errors="replace") if text else None)
        return f

    def shard_written(self, step, path, nbytes, crc32c):
        """A checkpoint shard is durable."""
        if not path or step < 0 or nbytes < 0 or not 0 <= crc32c <= 0xFFFFFFFF:
            raise DTClientError(ERR_INVAL)
        if self._sock is not None:
            self._request(SHARD, [(T_STEP, step), (T_PATH, str(path)), (T_BYTES, nbytes),
                                  (T_CRC32C, crc32c)])

    def shard_written_jit(self, step, shard_rank, path, nbytes, crc32c):
        """A just-in-time shard is durable: after a peer was lost, this
        rank wrote shard 'shard_rank' of the last completed step (into
        jit-<step>-r<this rank>/) and verified it by reading it back."""
        if not path or step < 0 or shard_rank < 0 or nbytes < 0 or \
                not 0 <= crc32c <= 0xFFFFFFFF:
            raise DTClientError(ERR_INVAL)
        if self._sock is not None:
            self._request(SHARD, [(T_STEP, step), (T_PATH, str(path)), (T_BYTES, nbytes),
                                  (T_CRC32C, crc32c), (T_RANK, shard_rank), (T_JIT, 1)])

    def shard_failed(self, step, reason=""):
        if step < 0:
            raise DTClientError(ERR_INVAL)
        if self._sock is not None:
            self._request(SHARD_FAILED, [(T_STEP, step), (T_TEXT, str(reason)[:4096])])

    def result(self, obj):
        """The run's final result: a dict (or a JSON object as text)."""
        text = obj if isinstance(obj, str) else json.dumps(obj)
        if not text.lstrip().startswith("{") or len(text) > _MAX_VALUE:
            raise DTClientError(ERR_INVAL, "result: not a JSON object")
        if self._sock is not None:
            self._request(RESULT, [(T_JSON, text)])

    def integrity(self, obj):
        """An integrity report: a dict (or JSON object text) with an integer
        'step' and e.g. 'fingerprint' (8 hex digits), 'group', 'tensors'
        (schemas/agent-api.md, "Integrity reports")."""
        text = obj if isinstance(obj, str) else json.dumps(obj)
        if not text.lstrip().startswith("{") or len(text) > _MAX_VALUE:
            raise DTClientError(ERR_INVAL, "integrity: not a JSON object")
        if self._sock is not None:
            self._request(INTEGRITY, [(T_JSON, text)])

    def perf(self, model_flops, peak_flops=0.0, peak_source=None):
        """Once, at start: the model FLOPs of this rank's share of one step
        (the controller sums the ranks), the peak FLOP/s it is measured
        against (0: unknown) and where that peak came from (a word of
        [a-z0-9_.-], at most 31): the controller computes the model FLOP
        utilisation from them and the step times (dtclient_perf)."""
        if not (1 <= model_flops <= 1e24) or not (0 <= peak_flops <= 1e24) or (
                peak_source is not None and not re.fullmatch(r"[a-z0-9_.-]{1,31}", peak_source)):
            raise DTClientError(ERR_INVAL, "perf: model_flops in [1, 1e24], peak_flops in [0, 1e24]")
        obj = {"model_flops": float(model_flops), "peak_flops": float(peak_flops)}
        if peak_source:
            obj["peak_source"] = peak_source
        if self._sock is not None:
            self._request(PERF, [(T_JSON, json.dumps(obj))])

    def numerics(self, obj):
        """Once, at start: what this rank computes with (a dict of strings
        and numbers, plus "pin_env", the environment variables that
        reproduce it), as dtclient_numerics does: the controller pins the
        job's first report for later attempts and records an event
        "numerics_changed" when a later one differs."""
        text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True)
        if not text.lstrip().startswith("{") or len(text) > 4096:
            raise DTClientError(ERR_INVAL, "numerics: a JSON object of at most 4 KiB")
        if self._sock is not None:
            self._request(NUMERICS, [(T_JSON, text)])

    def declare(self, caps):
        """Declare capabilities (CAP_* ored), as dtclient_declare does:
        CAP_REFORM: on a peer's loss this rank keeps its state and waits
        for CMD_REFORM (the new attempt in cmd.step) or a stop, then
        re-forms its group in place; the controller re-forms a job
        (restart.reform) only when every rank of the attempt declared it.
        CAP_REFORM | REFORM_WAITING: this rank lost a peer and waits now
        (the agent then reports at once and often)."""
        if not isinstance(caps, int) or caps & ~(CAP_REFORM | REFORM_WAITING):
            raise DTClientError(ERR_INVAL, "declare: CAP_REFORM, optionally with REFORM_WAITING")
        obj = ({"reform": True, "waiting": True} if caps & REFORM_WAITING
               else {"reform": True} if caps & CAP_REFORM else {})
        if self._sock is not None:
            self._request(CAPS, [(T_JSON, json.dumps(obj))])

    # -- key-value store -----------------------------------------------------
    def _rdv_path(self, key):
        return os.path.join(self._rdv, key.replace("/", "%2F"))

    def kv_set(self, key, value):
        """Store bytes (or str) under key in the attempt's kv store."""
        if isinstance(value, str):
            value = value.encode()
        if not _key_ok(key) or len(value) > _MAX_VALUE:
            raise DTClientError(ERR_INVAL)
        if self._sock is not None:
            self._request(KV_SET, [(T_KEY, key), (T_VALUE, value)])
        elif self._rdv:
            path = self._rdv_path(key)
            tmp = "%s.tmp.%d" % (path, os.getpid())
            with builtins.open(tmp, "wb") as f:
                f.write(value)
            os.rename(tmp, path)
        else:
            raise DTClientError(ERR_NOAGENT)

    def kv_get(self, key):
        """The bytes under key; DTClientError(ERR_NOTFOUND) if absent."""
        if not _key_ok(key):
            raise DTClientError(ERR_INVAL)
        if self._sock is not None:
            return bytes(self._request(KV_GET, [(T_KEY, key)]).get(T_VALUE, b""))
        if self._rdv:
            try:
                with builtins.open(self._rdv_path(key), "rb") as f:
                    return f.read()
            except FileNotFoundError:
                raise DTClientError(ERR_NOTFOUND)
        raise DTClientError(ERR_NOAGENT)

    def kv_wait(self, key, timeout_s=None):
        """kv_get, polling until the key exists or timeout_s passes."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        delay = 0.005
        while True:
            try:
                return self.kv_get(key)
            except DTClientError as e:
                if e.code != ERR_NOTFOUND:
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                raise DTClientError(ERR_TIMEOUT)
            left = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(left)
            delay = min(delay * 2, 0.1)


# ---- CRC32C ---------------------------------------------------------------
# libdtclient's dtclient_crc32c (the hardware instruction) when the library
# can be loaded (installed, or on LD_LIBRARY_PATH; DT_LIBDTCLIENT names it
# explicitly), else a table in Python, correct but about a thousand times
# slower: fine for small shards and tests of the module alone.
_crc_fn = None
_crc_table = None


def _crc_lib():
    global _crc_fn
    if _crc_fn is None:
        _crc_fn = False
        for name in (os.environ.get("DT_LIBDTCLIENT"), "libdtclient.so.0", "libdtclient.so"):
            if not name:
                continue
            try:
                f = ctypes.CDLL(name).dtclient_crc32c
            except (OSError, AttributeError):
                continue
            f.restype = ctypes.c_uint32
            f.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
            _crc_fn = f
            break
    return _crc_fn


def crc32c(data, crc=0):
    """CRC32C (Castagnoli) of a bytes-like object, extending crc (0 to start)."""
    f = _crc_lib()
    if f and isinstance(data, bytes):
        return f(crc, data, len(data))
    mv = memoryview(data).cast("B")
    if f:
        if mv.readonly:
            buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv) if len(mv) else None
        else:
            buf = (ctypes.c_char * len(mv)).from_buffer(mv) if len(mv) else None
        return f(crc, ctypes.addressof(buf) if buf is not None else None, len(mv))
    global _crc_table
    if _crc_table is None:
        t = []
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            t.append(c)
        _crc_table = t
    t = _crc_table
    c = crc ^ 0xFFFFFFFF
    for b in mv:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def open():  # noqa: A001 - mirrors dtclient_open
    """Open the client from the environment (never fails: no agent → no-op)."""
    return Client()
