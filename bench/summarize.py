#!/usr/bin/python3
"""summarize.py: bench/run's samples -> one table (stdout), latest.json, latest.md.

Each figure is the median over the run's repetitions with its spread
[min..max]; a ratio against a reference is the median of the per-repetition
ratios (both sides measured in the same repetition)."""
import argparse, json, os, platform, re, statistics, subprocess, time

ap = argparse.ArgumentParser()
for a in ("samples", "notes", "tmp", "build", "src", "json", "md"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--reps", type=int, default=0)
ap.add_argument("--elapsed", type=int, default=0)
args = ap.parse_args()

samples = {}
for line in open(args.samples):
    try:
        s = json.loads(line)
        # loadgen's -1: nothing measured in that run (no answer at all); the
        # run still counts through its 'failed' and 'achieved' samples.
        if s["key"].startswith("ingest") and float(s["v"]) < 0:
            continue
        # Steps lost = the newest step every rank had completed - resume
        # step (steps redone: from the newest step any rank had completed);
        # a just-in-time checkpoint resumes at the last completed step, past
        # what a log showed: below 0 means none.
        if (s["key"].endswith(".steps_lost") or s["key"].endswith(".steps_redone")) \
                and float(s["v"]) < 0:
            s["v"] = 0
        samples.setdefault(s["key"], []).append(float(s["v"]))
    except (ValueError, KeyError, TypeError):
        pass
notes = [json.loads(l) for l in open(args.notes) if l.strip()]


def stat(key):
    v = samples.get(key)
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v), "samples": v}


def fmt(st, scale=1.0, digits=None):
    if not st:
        return "n/a"
    def f(x):
        x *= scale
        if digits is not None:
            return "%.*f" % (digits, x)
        a = abs(x)
        return "%.0f" % x if a >= 100 else "%.1f" % x if a >= 10 else "%.2f" % x if a >= 0.1 else "%.3g" % x
    if st["n"] == 1 or st["min"] == st["max"]:
        return f(st["median"])
    return "%s [%s..%s]" % (f(st["median"]), f(st["min"]), f(st["max"]))


rows = []      # (part, figure, dtctl, reference, ratio, goal, verdict)
figures = {}   # key -> stat, for the JSON


def row(part, figure, key, scale=1.0, ref=None, ref_key=None, ref_scale=1.0, ratio_key=None,
        goal="", ok=None, digits=None):
    st = stat(key)
    figures[key] = st
    rst = stat(ref_key) if ref_key else None
    if ref_key:
        figures[ref_key] = rst
    rat = stat(ratio_key) if ratio_key else None
    if ratio_key:
        figures[ratio_key] = rat
    verdict = ""
    if ok is not None:
        r = ok(st, rst, rat)
        verdict = "n/a" if r is None else "met" if r else "NOT met"
    rows.append((part, figure, fmt(st, scale, digits),
                 ("%s: %s" % (ref, fmt(rst, ref_scale, digits))) if ref else "",
                 fmt(rat, 1.0, 3) if rat else "", goal, verdict))


med = lambda st: st["median"] if st else None

# 1. controller ingest
rates = sorted({int(m.group(1)) for k in samples for m in [re.match(r"ingest\.(\d+)\.", k)] if m})
for r in rates:
    k = "ingest.%d." % r
    top = r == max(rates) and r >= 80000
    row("1 ingest", "%d rank-hb/s offered: achieved rank-hb/s" % r, k + "achieved",
        ratio_key=None, goal=">= 99% of offered" if top else "",
        ok=(lambda st, a, b, r=r: None if not st else st["median"] >= 0.99 * r) if top else None)
    row("1 ingest", "%d/s: registration of all agents s (agents registered as reference)" % r,
        k + "register_s", ref="registered", ref_key=k + "registered", digits=None)
    row("1 ingest", "%d/s: heartbeat latency p50 ms" % r, k + "p50")
    # No latency sample at all: no heartbeat was answered in the window.
    row("1 ingest", "%d/s: heartbeat latency p99 ms" % r, k + "p99", goal="< 20 ms" if top else "",
        ok=(lambda st, a, b: False if not st else st["median"] < 20) if top else None)
    row("1 ingest", "%d/s: heartbeat latency p99.9 ms" % r, k + "p999")
    row("1 ingest", "%d/s: failed, unanswered or unsent heartbeats per run" % r, k + "failed", digits=0)
    row("1 ingest", "%d/s: GET /v1/jobs p99 ms (p50 as reference)" % r, k + "list_p99",
        ref="p50", ref_key=k + "list_p50", goal="< 10 ms" if top else "",
        ok=(lambda st, a, b: None if not st else st["median"] < 10) if top else None)
    row("1 ingest", "%d/s: GET /v1/jobs/{id} p99 ms (answer bytes as reference)" % r, k + "show_p99",
        ref="bytes", ref_key=k + "show_bytes", goal="< 10 ms" if top else "",
        ok=(lambda st, a, b: None if not st else st["median"] < 10) if top else None)
    row("1 ingest", "%d/s: database MiB after the run (growth MiB/h as reference)" % r, k + "db_bytes",
        scale=1 / 1048576, ref="MiB/h", ref_key=k + "db_growth_per_h", ref_scale=1 / 1048576)

# 1b. every ingest mode: the controller's longest loop pass, its memory, and
# (fan-in tree) the same figures through relays.
for pre, mode in (("ingest", "direct"), ("ingesttree", "tree")):
    trates = sorted({int(m.group(1)) for k in samples
                     for m in [re.match(r"%s\.(\d+)\." % pre, k)] if m})
    for r in trates:
        k = "%s.%d." % (pre, r)
        if pre == "ingesttree":
            row("1 ingest (tree)", "%d rank-hb/s offered: achieved rank-hb/s" % r, k + "achieved",
                goal=">= 99% of offered",
                ok=lambda st, a, b, r=r: None if not st else st["median"] >= 0.99 * r)
            row("1 ingest (tree)", "%d/s: registration of all agents s (agents registered as reference)" % r,
                k + "register_s", ref="registered", ref_key=k + "registered", digits=None)
            row("1 ingest (tree)", "%d/s: relay request latency p50 ms" % r, k + "p50")
            row("1 ingest (tree)", "%d/s: relay request latency p99 ms" % r, k + "p99", goal="< 20 ms",
                ok=lambda st, a, b: False if not st else st["median"] < 20)
            row("1 ingest (tree)", "%d/s: failed, unanswered or unsent relay requests per run" % r,
                k + "failed", digits=0)
            row("1 ingest (tree)", "%d/s: GET /v1/jobs/{id} p99 ms (answer bytes as reference)" % r,
                k + "show_p99", ref="bytes", ref_key=k + "show_bytes", goal="< 10 ms",
                ok=lambda st, a, b: None if not st else st["median"] < 10)
        row("1 ingest (%s)" % mode, "%d/s: longest event-loop pass ms (0: none over 50; its CPU ms as reference)" % r,
            k + "stall_ms", ref="CPU", ref_key=k + "stall_cpu_ms", goal="< 200 ms",
            ok=lambda st, a, b: None if not st else st["median"] < 200)
        row("1 ingest (%s)" % mode, "%d/s: controller peak memory MiB (503 answers as reference)" % r,
            k + "ctld_hwm_bytes", scale=1 / 1048576, ref="503s", ref_key=k + "refused_503")
        # Where the latency comes from: the generator's own lag before a
        # send, the answer after it, the CPU each side spends per offered
        # rank-heartbeat, and the controller's time waiting for a core.
        row("1 ingest (%s)" % mode, "%d/s: generator's lag, due to sent, p99 ms (sent to answered p99 as reference)" % r,
            k + "lag_p99", ref="answer", ref_key=k + "answer_p99")
        row("1 ingest (%s)" % mode, "%d/s: controller CPU us per rank-heartbeat (generator's as reference)" % r,
            k + "ctld_cpu_us", ref="generator", ref_key=k + "lg_cpu_us")
        row("1 ingest (%s)" % mode, "%d/s: controller CPU ms per s (ms per s runnable, waiting for a core, as reference)" % r,
            k + "ctld_cpu_ms_s", ref="waiting", ref_key=k + "ctld_wait_ms_s")

# 2. recovery (dtctl vs Slurm requeue vs torchrun)
for kind, label in (("rank", "rank kill, no spare (in place)"),
                    ("reform", "rank kill, no spare (re-form: survivors never exit)"),
                    ("node", "node kill, no spare (new Slurm job)"),
                    ("hotspare", "node kill, hot spare (re-form: survivors never exit)"),
                    ("torchspare", "PyTorch node kill, hot spare (dtclient.torch re-form)")):
    k = "recovery.%s." % kind
    row("2 recovery", "%s: detection s (dtctl)" % label, k + "detect_s")
    row("2 recovery", "%s: kill to first step of new attempt s (dtctl)" % label, k + "resume_s",
        ref="torchrun" if kind in ("rank", "reform") else "Slurm requeue to restart",
        ref_key="recovery.torchrun.restart_s" if kind in ("rank", "reform") else "recovery.slurm.restart_s",
        goal="<= 1 s" if kind in ("reform", "hotspare", "torchspare") else "",
        ok=(lambda st, a, b: None if not st else st["median"] <= 1.0) if kind in ("reform", "hotspare", "torchspare") else None)
    row("2 recovery", "%s: steps lost (dtctl)" % label, k + "steps_lost",
        ref="torchrun (no checkpoint in the script)" if kind in ("rank", "reform") else None,
        ref_key="recovery.torchrun.steps_lost" if kind in ("rank", "reform") else None, digits=0)
    # (a step only the killed rank had completed: run again, never lost)
    row("2 recovery", "%s: steps redone (dtctl)" % label, k + "steps_redone", digits=0)
    # The phases from the controller's record (bench_recovery.sh, rec_phases).
    for ph, plabel in (("detect_phase_s", "detection"), ("stop_s", "stop"), ("decision_s", "decision"),
                       ("start_s", "start"), ("first_step_s", "first step")):
        row("2 recovery", "%s: phase %s s (dtctl)" % (label, plabel), k + ph)
    if kind in ("reform", "hotspare", "torchspare"):  # (the group's state transfer, inside its first step phase)
        row("2 recovery", "%s: state transfer s (%s)" % (label, "dtclient.torch" if kind == "torchspare" else "dttrain"),
            k + "transfer_s")
row("2 recovery", "Slurm node kill: time to requeue s", "recovery.slurm.requeue_s")

# 3. checkpoints
row("3 ckpt", "async stall per checkpoint, fraction of a step", "ckpt.async_stall_frac",
    ref="sync (copy + write)", ref_key="ckpt.sync_stall_frac", goal="< 0.01",
    ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("3 ckpt", "async stall per checkpoint ms (step ms as reference)", "ckpt.async_stall_ms",
    ref="step", ref_key="ckpt.step_ms")
row("3 ckpt", "async: wall-time cost per checkpoint, fraction of a step", "ckpt.async_wall_frac")
row("3 ckpt", "async: snapshot copy + CRC32C ms per checkpoint (writer thread)", "ckpt.snapshot_ms")
row("3 ckpt", "checkpoint write MB/s (one shard, fsync'd)", "ckpt.write_Bps", scale=1e-6,
    ref="dd oflag=direct", ref_key="ckpt.disk_direct_Bps", ref_scale=1e-6,
    ratio_key="ckpt.write_frac_disk", goal="> 80% of disk",
    ok=lambda st, a, b: None if not (st and a) else
    (b["median"] if b else st["median"] / a["median"]) > 0.8)
row("3 ckpt", "disk: dd conv=fsync MB/s (buffered + fsync)", "ckpt.disk_fsync_Bps",
    scale=1e-6)
row("3 ckpt", "shard MB", "ckpt.bytes", scale=1e-6)

# 4. trainer throughput
row("4 train", "dttrain 1 rank model GFLOP/s", "train.dt1_gflops", ref="OpenBLAS SGEMM same shapes",
    ref_key="train.sgemm_gflops", ratio_key="train.frac_sgemm")
row("4 train", "dttrain 1 rank tokens/s", "train.dt1", ref="PyTorch", ref_key="train.pt1",
    ratio_key="train.ratio1")
row("4 train", "dttrain 2 ranks tokens/s (gloo)", "train.dt2", ref="PyTorch DDP gloo", ref_key="train.pt2",
    ratio_key="train.ratio2")

# 4b. the transformer
row("4b transformer", "dttrain transformer 1 thread tokens/s", "tfm.dt_tps", ref="PyTorch same model",
    ref_key="tfm.pt_tps", ratio_key="tfm.ratio", goal="ratio >= 1.2",
    ok=lambda st, a, b: None if not b else b["median"] >= 1.2)
row("4b transformer", "dttrain transformer model GFLOP/s", "tfm.dt_gflops",
    ref="OpenBLAS SGEMM same shapes", ref_key="tfm.sgemm_gflops", ratio_key="tfm.frac_sgemm",
    goal=">= 60% of SGEMM", ok=lambda st, a, b: None if not b else b["median"] >= 0.6)
row("4b transformer", "val bits/byte after the same CPU time: transformer", "tfm.bpb_tfm",
    ref="MLP", ref_key="tfm.bpb_mlp", goal="transformer lower",
    ok=lambda st, a, b: None if not (st and a) else st["median"] < a["median"])

# 5. orchestration overhead
row("5 overhead", "dttrain 2 ranks via dtctld+dtagent tokens/s", "overhead.via", ref="bare",
    ref_key="overhead.bare", ratio_key="overhead.ratio", goal="ratio >= 0.99",
    ok=lambda st, a, b: None if not b else b["median"] >= 0.99)
row("5 overhead", "submit to completed s (bare: start to exit)", "overhead.via_wall_s", ref="bare",
    ref_key="overhead.bare_wall_s")

# 7. local launcher: the run record and detection (timings the system tests
# t1000 and t0400-t0402 check only for presence)
row("7 local", "failure-free 6 s job: ETTR", "local.ettr", goal="> 0.75",
    ok=lambda st, a, b: None if not st else st["median"] > 0.75)
row("7 local", "failure-free job: ETTR without start-up and shutdown", "local.ettr_steady", goal="> 0.95",
    ok=lambda st, a, b: None if not st else st["median"] > 0.95)
row("7 local", "step time p50 ms (steps of 250 ms)", "local.step_p50_ms", goal="250 +- 10%",
    ok=lambda st, a, b: None if not st else 225 < st["median"] < 275)
row("7 local", "samples per second (2 ranks x 32 / 0.25 s = 256)", "local.samples_per_s", goal="200..300",
    ok=lambda st, a, b: None if not st else 200 < st["median"] < 300)
row("7 local", "lost work time / (lost steps x 250 ms)", "local.lost_work_ratio", goal="1 +- 50%",
    ok=lambda st, a, b: None if not st else 0.5 < st["median"] < 1.5)
row("7 local", "kill -9 of a rank to trainer_exit recorded ms", "local.detect_kill_ms", goal="<= 1000",
    ok=lambda st, a, b: None if not st else st["max"] <= 1000, digits=0)
row("7 local", "SIGSTOP of a rank: hang recorded, ms after the 3 s hang timeout", "local.detect_hang_over_ms",
    goal="<= 1000", ok=lambda st, a, b: None if not st else st["max"] <= 1000, digits=0)
row("7 local", "kill -9 of an agent to its trainers gone ms", "local.agent_kill_gone_ms", goal="<= 2000",
    ok=lambda st, a, b: None if not st else st["max"] <= 2000, digits=0)

# 8. integrity (bench_integrity.sh)
row("8 integrity", "fingerprint ms per check, MLP ~5.5 M params", "integrity.fp_ms_mlp",
    ref="step ms", ref_key="integrity.step_ms_mlp")
row("8 integrity", "fingerprint cost, % of a step at every 50 steps (MLP)", "integrity.fp_frac_mlp",
    goal="< 0.5", ok=lambda st, a, b: None if not st else st["max"] < 0.5)
row("8 integrity", "fingerprint ms per check, transformer", "integrity.fp_ms_tfm",
    ref="step ms", ref_key="integrity.step_ms_tfm")
row("8 integrity", "fingerprint cost, % of a step at every 50 steps (transformer)",
    "integrity.fp_frac_tfm", goal="< 0.5", ok=lambda st, a, b: None if not st else st["max"] < 0.5)
row("8 integrity", "NaN/Inf scan of a rank's gradient, % of every step (MLP)", "integrity.scan_frac_mlp",
    goal="< 0.5", ok=lambda st, a, b: None if not st else st["max"] < 0.5)
row("8 integrity", "NaN/Inf scan of a rank's gradient, % of every step (transformer)",
    "integrity.scan_frac_tfm", goal="< 0.5", ok=lambda st, a, b: None if not st else st["max"] < 0.5)
row("8 integrity", "bit flip to detection, steps (checks every 10)", "integrity.latency_steps",
    goal="<= 10", ok=lambda st, a, b: None if not st else st["max"] <= 10, digits=0)
row("8 integrity", "detection to first good step after the rollback ms", "integrity.detect_to_good_ms",
    digits=0)
row("8 integrity", "injection to first good step after the rollback ms", "integrity.inject_to_good_ms",
    digits=0)

# 9. the web page with a long run (bench_ui.sh): 100,000 metric points
row("9 ui", "GET /ui/job.html ms", "ui.page_ms", ref="/ui/lib/chart.js (Chart.js, 200 KB)",
    ref_key="ui.chartjs_ms")
row("9 ui", "GET metrics?max_points=1000 ms (every point as reference)", "ui.data_ms",
    ref="every point", ref_key="ui.full_ms", goal="< 50 ms",
    ok=lambda st, a, b: None if not st else st["median"] < 50)
row("9 ui", "first GET metrics?max_points=N after a change ms (kept answer as reference)",
    "ui.data_cold_ms", ref="kept answer", ref_key="ui.data_ms")
row("9 ui", "metrics?max_points=1000 answer KB (every point as reference)", "ui.data_bytes",
    scale=1 / 1000, ref="every point", ref_key="ui.full_bytes", ref_scale=1 / 1000, goal="< 200 KB",
    ok=lambda st, a, b: None if not st else st["max"] < 200000)

# 6. libdtclient
row("6 dtclient", "dtclient_step ns per call (agent attached)", "dtclient.step_ns", ref="no agent",
    ref_key="dtclient.noagent_ns")

# 8. dtclient.torch (bench_torch.sh): examples/pytorch/gpt_train.py, 2 ranks gloo
row("8 torch", "step ms with dtclient.torch (jobs, 1 node x 2 ranks)", "torch.lib_step_ms",
    ref="same script without it", ref_key="torch.plain_step_ms")
row("8 torch", "per-step cost of dtclient.torch (fraction of a step)", "torch.step_overhead_frac",
    goal="< 0.01", ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "CPU ms per step (rank 0's process) with dtclient.torch", "torch.lib_cpu_ms",
    ref="same script without it", ref_key="torch.plain_cpu_ms")
row("8 torch", "per-step CPU cost of dtclient.torch (fraction of a step's CPU)", "torch.cpu_overhead_frac",
    goal="< 0.01", ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "dtclient.torch's own CPU time / step (its threads and callbacks)", "torch.self_frac",
    ref="ms", ref_key="torch.self_ms", goal="< 0.01",
    ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "of it, the buckets' scaling pass (grows with the model; 0: DDP's own, no hook) ms / step", "torch.scale_ms")
row("8 torch", "of it, the fixed part (all but the scaling pass) / step", "torch.fixed_frac",
    goal="< 0.01", ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "the gradient all-reduce's launch ms / step (a hook's call to the process group; 0: DDP's own, in C++)",
    "torch.launch_ms")
row("8 torch", "wider model (bench_torch.sh TORCH_WIDE): step ms with dtclient.torch", "torch.wide.lib_step_ms",
    ref="same script without it", ref_key="torch.wide.plain_step_ms")
row("8 torch", "wider model: per-step cost (fraction of a step)", "torch.wide.step_overhead_frac",
    goal="< 0.01", ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "wider model: per-step CPU cost (fraction of a step's CPU)", "torch.wide.cpu_overhead_frac",
    goal="< 0.01", ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "wider model: dtclient.torch's own CPU time / step", "torch.wide.self_frac",
    ref="ms", ref_key="torch.wide.self_ms", goal="< 0.01",
    ok=lambda st, a, b: None if not st else st["median"] < 0.01)
row("8 torch", "wider model: of it, the buckets' scaling pass ms / step", "torch.wide.scale_ms")
row("8 torch", "wider model: the all-reduce's launch ms / step", "torch.wide.launch_ms")
row("8 torch", "checkpoint stall per checkpoint ms, async", "torch.ckpt_async_stall_ms",
    ref="sync", ref_key="torch.ckpt_sync_stall_ms")
row("8 torch", "same, CPU time of the training thread", "torch.ckpt_async_stall_cpu_ms")
row("8 torch", "checkpoint stall / step, async", "torch.ckpt_async_stall_frac", ref="sync",
    ref_key="torch.ckpt_sync_stall_frac", goal="< 0.05",
    ok=lambda st, a, b: None if not st else st["median"] < 0.05)
row("8 torch", "optimizer steps that waited for the pipelined copy, per checkpoint", "torch.ckpt_async_waits")
row("8 torch", "run wall time per checkpoint ms, async (vs no checkpoints; noisy)", "torch.ckpt_async_wall_ms")
row("8 torch", "kill -9 of a rank to first new step s", "torch.dtctl.first_step_s",
    ref="torchrun --max_restarts", ref_key="torch.torchrun.first_step_s")
row("8 torch", "steps lost", "torch.dtctl.steps_lost", ref="torchrun --max_restarts",
    ref_key="torch.torchrun.steps_lost", digits=0)

# 9. layouts (bench_layouts.sh; the per-layout tokens/s table is in layouts.md)
for M in (1, 2, 4, 8):
    row("9 layouts", "pp2 bubble, M=%d micro-batches (the stages' idle share of the pipeline phase)" % M, "layouts.bubble.M%d" % M,
        ref="theory (P-1)/(M+P-1)", ref_key="layouts.bubble_theory.M%d" % M, ratio_key="layouts.bubble_err.M%d" % M,
        goal="within 10%", ok=lambda st, a, b: None if not b else abs(b["median"]) <= 0.10)
for bm in ("1", "4", "16"):
    row("9 layouts", "dp2 gradient all-reduce hidden behind backward, %s MiB buckets" % bm,
        "layouts.hidden.b%s" % bm, ref="all-reduce s (comm thread)", ref_key="layouts.allreduce_s.b%s" % bm,
        goal=">= 0.8", ok=lambda st, a, b: None if not st else st["median"] >= 0.8)
for lay in ("dp2", "dp2xtp2xpp1", "dp2xtp1xpp2"):
    row("9 layouts", "%s exposed communication share of the step, with overlap" % lay,
        "layouts.exposed_share.%s.with" % lay, ref="without", ref_key="layouts.exposed_share.%s.without" % lay)
row("9 layouts", "dp2 tokens/s, transformer", "layouts.ddp.dttrain_tps", ref="PyTorch DDP (gloo)",
    ref_key="layouts.ddp.torch_tps", ratio_key="layouts.ddp.ratio", goal=">= 1.2",
    ok=lambda st, a, b: None if not b else b["median"] >= 1.2)

# Drop rows of parts that did not run at all.
rows = [r for r in rows if not (r[2] == "n/a" and (r[3] in ("",) or r[3].endswith("n/a")))]


# --- machine description ------------------------------------------------------------------
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ""


def dpkg(p):
    return sh("dpkg-query -W -f='${Version}' %s 2>/dev/null" % p) or None


meminfo = dict(re.findall(r"^(\w+):\s+(\d+)", open("/proc/meminfo").read(), re.M))
tv = os.path.join(args.tmp, "torch_version")
machine = {
    "cpu_model": sh("lscpu | sed -n 's/^Model name: *//p'"),
    "cores": os.cpu_count(),
    "threads_per_core": sh("lscpu | sed -n 's/^Thread(s) per core: *//p'"),
    "cpu_flags_avx2_fma_avx512f": [f for f in ("avx2", "fma", "avx512f") if re.search(r"\b%s\b" % f, open("/proc/cpuinfo").read())],
    "mem_gib": round(int(meminfo.get("MemTotal", 0)) / 1048576, 1),
    "kernel": platform.release(),
    "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
    "filesystem_tmp": sh("df -hT /tmp | tail -n 1"),
    "openblas": dpkg("libopenblas0-pthread") or dpkg("libopenblas-dev"),
    "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "(auto-detected)"),
    "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    "gloo": dpkg("libgloo-dev"),
    "slurm": sh("slurmctld -V 2>/dev/null") or dpkg("slurm-wlm") or dpkg("slurmctld"),
    "torch": (open(tv).read().strip() if os.path.exists(tv) else None) or dpkg("python3-torch"),
    "python3_torch_deb": dpkg("python3-torch"),
    "sqlite3": dpkg("libsqlite3-0"),
    "libmicrohttpd": dpkg("libmicrohttpd12"),
    "gcc": sh("gcc -dumpfullversion"),
    "dtctl_commit": sh("git -C '%s' rev-parse --short HEAD 2>/dev/null" % args.src)
                    + (" (+uncommitted changes)" if sh("git -C '%s' status --porcelain 2>/dev/null | head -n 1" % args.src) else ""),
    "build_dir": args.build,
    "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
}

result = {
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "elapsed_s": args.elapsed,
    "repetitions": args.reps,
    "machine": machine,
    "figures": {k: v for k, v in figures.items() if v},
    "all_samples": samples,
    "table": [dict(zip(("part", "figure", "dtctl", "reference", "ratio", "goal", "verdict"), r)) for r in rows],
    "notes": notes,
}
with open(args.json, "w") as f:
    json.dump(result, f, indent=1)

hdr = ("part", "figure", "dtctl: median [min..max]", "reference: median [min..max]", "ratio", "goal", "")
md = ["# dtctl benchmarks (bench/run)", "",
      "%s, %d repetitions per figure, %d s. Machine: %s, %d cores, %s GiB, kernel %s; OpenBLAS %s "
      "(OPENBLAS_CORETYPE=%s), gloo %s, Slurm %s, torch %s; dtctl %s." % (
          result["date_utc"], args.reps, args.elapsed, machine["cpu_model"], machine["cores"],
          machine["mem_gib"], machine["kernel"], machine["openblas"], machine["openblas_coretype"],
          machine["gloo"], machine["slurm"], machine["torch"], machine["dtctl_commit"]), "",
      "| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
for r in rows:
    md.append("| " + " | ".join(x.replace("|", "/") for x in r) + " |")
if notes:
    md += ["", "Notes:", ""] + ["- %s: %s" % (n["key"], n["text"]) for n in notes]
if os.path.exists(os.path.join(os.path.dirname(args.md), "recovery.png")) or os.path.exists(os.path.join(args.tmp, "recovery.png")):
    md += ["", "![recovery](recovery.png)"]
with open(args.md, "w") as f:
    f.write("\n".join(md) + "\n")

w = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))] if rows else [0] * len(hdr)
print()
for r in [hdr] + rows:
    print("  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)).rstrip())
for n in notes:
    print("note %s: %s" % (n["key"], n["text"]))
