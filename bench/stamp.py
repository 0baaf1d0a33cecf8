#!/usr/bin/python3
"""stamp.py CMD [ARGS...]: run CMD with each line of its stdout and stderr
prefixed by the wall-clock time (epoch seconds, ms), and exit as CMD did
(killed by a signal: the same signal).  bench/run's recovery benchmark wraps
dttrain in it so that the trainer's own step lines carry times.  Signals
sent to the wrapper (the agent's SIGTERM) are passed on to CMD."""
import os, signal, subprocess, sys, time

p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, lambda n, f: p.send_signal(n))
out = sys.stdout.buffer
for line in iter(p.stdout.readline, b""):
    out.write(b"%.3f " % time.time() + line)
    out.flush()
rc = p.wait()
if rc < 0:
    if -rc not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-rc, signal.SIG_DFL)
    os.kill(os.getpid(), -rc)
sys.exit(rc)
