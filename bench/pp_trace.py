#!/usr/bin/python3
"""pp_trace.py: where a pp 2 run's pipeline bubble went, from dttrain's
DT_PP_TRACE files (PREFIX.0 and PREFIX.1, see trainer/pipeline.c).

Replays each step's 1F1B schedule (the order of passes, sends and receives
each stage actually ran, and the dependencies between them: a receive
waits for the matching send) with durations taken from the trace, each
replay adding one cost to the previous one, and prints one JSON object:

  bubble_equal       both stages' passes at the mean CPU time of a pass of
                     either stage, transfers free: the schedule's own bubble
                     (checks the replay against (P-1)/(M+P-1));
  bubble_stage_cpu   each stage's passes at its own mean CPU time per pass
                     (forward and backward apart): + the stages' unequal work
                     (the last stage's head and loss) and CPU speed;
  bubble_pass_cpu    each pass at its own CPU time: + the passes' variation;
  bubble_pass_wall   each pass at its wall time: + the cores' sharing
                     (other processes, gloo's loop threads, the other stage);
  bubble_sends       + the sender's time in dt_comm_send (the copy into the
                     socket, in the training thread);
  bubble_measured    stage 0's blocked time over its phase, from the trace:
                     what is left over bubble_sends is the receive side's
                     latency (the loop thread's wake-up and read, the
                     training thread's wake-up).

Each bubble is 1 - stage 0's pass time / its phase, both summed over the
steps.  Also: lat_*_us, the median time from a send's start to the
receive's return when the receiver was already waiting (activations and
gradients), send_wall_us / send_cpu_us (medians), and the stages' pass CPU
seconds.  Usage: pp_trace.py PREFIX"""
import json
import statistics
import sys


def load(path):
    ev = []
    with open(path) as f:
        for line in f:
            ns, cpu, kind, j = line.split()
            ev.append((int(ns), float(cpu), int(kind), int(j)))
    return ev


def steps(ev):
    out, cur = [], None
    for e in ev:
        if e[2] == 1:
            cur = []
        if cur is not None:
            cur.append(e)
        if e[2] == 2 and cur is not None:
            out.append(cur)
            cur = None
    return out


def ops(step):
    """The stage's ops in order: (kind, index, wall us, cpu us)."""
    o, begin = [], {}
    for ns, cpu, k, j in step:
        if k in (10, 12, 20, 30):
            begin[(k, j)] = (ns, cpu)
        elif k in (11, 13, 21, 31):
            ns0, cpu0 = begin[(k - 1, j)]
            o.append((k - 1, j, (ns - ns0) / 1e3, (cpu - cpu0) * 1e6))
    return o


def replay(o0, o1, pass_dur, send_dur):
    """Stage 0's busy and phase time (us) when the two stages run their op
    sequences with these durations and free transfers."""
    t, ready, pos, busy0 = [0.0, 0.0], {}, [0, 0], 0.0
    seqs = [o0, o1]
    while pos[0] < len(o0) or pos[1] < len(o1):
        moved = False
        for s in (0, 1):
            while pos[s] < len(seqs[s]):
                op = seqs[s][pos[s]]
                k, j = op[0], op[1]
                if k == 12:
                    if (s, j) not in ready:
                        break
                    t[s] = max(t[s], ready[(s, j)])
                elif k in (20, 30):
                    d = pass_dur(s, op)
                    t[s] += d
                    busy0 += d if s == 0 else 0
                elif k == 10:
                    t[s] += send_dur(op)
                    ready[(1 - s, j)] = t[s]
                pos[s] += 1
                moved = True
        if not moved:
            raise SystemExit("pp_trace: the trace's schedule does not replay (deadlock)")
    return busy0, t[0]


def main():
    pre = sys.argv[1]
    S = [steps(load(pre + ".0")), steps(load(pre + ".1"))]
    n = min(len(S[0]), len(S[1]))
    if n == 0:
        raise SystemExit("pp_trace: no steps in %s.0 / %s.1" % (pre, pre))
    acc = {k: [0.0, 0.0] for k in ("equal", "stage_cpu", "pass_cpu", "pass_wall", "sends")}
    meas_busy = meas_phase = 0.0
    lat = {"act": [], "grad": []}
    send_w, send_c, cpu = [], [], [0.0, 0.0]
    for i in range(n):
        o = [ops(S[0][i]), ops(S[1][i])]
        mean = {}
        for s in (0, 1):
            for k in (20, 30):
                mean[(s, k)] = statistics.mean(c for kk, j, w, c in o[s] if kk == k)
                cpu[s] += sum(c for kk, j, w, c in o[s] if kk == k) / 1e6
        both = {k: (mean[(0, k)] + mean[(1, k)]) / 2 for k in (20, 30)}
        zero = lambda op: 0.0
        runs = {
            "equal": (lambda s, op: both[op[0]], zero),
            "stage_cpu": (lambda s, op: mean[(s, op[0])], zero),
            "pass_cpu": (lambda s, op: op[3], zero),
            "pass_wall": (lambda s, op: op[2], zero),
            "sends": (lambda s, op: op[2], lambda op: op[2]),
        }
        for k, (pd, sd) in runs.items():
            b, ph = replay(o[0], o[1], pd, sd)
            acc[k][0] += b
            acc[k][1] += ph
        s0 = S[0][i]
        meas_phase += (s0[-1][0] - s0[0][0]) / 1e3
        meas_busy += sum(w for k, j, w, c in o[0] if k in (20, 30))
        first = [{}, {}]
        for r in (0, 1):
            for ns, c, k, j in S[r][i]:
                first[r].setdefault((k, j), (ns, c))
        for r in (0, 1):
            for (k, j), (ns, c) in first[r].items():
                if k != 10:
                    continue
                send_w.append((first[r][(11, j)][0] - ns) / 1e3)
                send_c.append((first[r][(11, j)][1] - c) * 1e6)
                w = first[1 - r].get((12, j))
                if w and w[0] < ns and (13, j) in first[1 - r]:
                    lat["grad" if j % 2 else "act"].append((first[1 - r][(13, j)][0] - ns) / 1e3)
    med = lambda v: statistics.median(v) if v else None
    out = {"bubble_" + k: 1 - b / ph for k, (b, ph) in acc.items()}
    out.update(bubble_measured=1 - meas_busy / meas_phase, steps=n,
               lat_act_us=med(lat["act"]), lat_grad_us=med(lat["grad"]),
               lat_n=len(lat["act"]) + len(lat["grad"]),
               send_wall_us=med(send_w), send_cpu_us=med(send_c),
               stage_pass_cpu_s=cpu)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
