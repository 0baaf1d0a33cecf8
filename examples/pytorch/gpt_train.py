"""A small GPT-style byte-level language model trained with PyTorch DDP on
the project's documentation, under dtctl's fault-tolerance cycle through
dtclient.torch.  gloo on CPU, NCCL on GPU, the same code.

    torchrun --nproc_per_node 2 gpt_train.py --data README.md --steps 200
    dtctl submit job.json     # command: /usr/bin/python3 gpt_train.py ...

The lines that dtclient.torch adds to a plain DDP script are marked
"# dtctl".  --plain runs the same script without them (for comparison).

Deterministic on CPU: one thread per process (torch.set_num_threads(1)),
torch.use_deterministic_algorithms(True), the same initial weights on every
rank (seeded before building the model), the data order a pure function of
(seed, step, rank) (dtclient.torch.StepSampler) and the RNGs (dropout)
reseeded from (seed, step, rank) at every step; gloo's all-reduce sums in a
fixed order for a given world size.  So a run interrupted, resumed from a
checkpoint (regular or just-in-time) and finished ends with the parameters
of an uninterrupted run, bit for bit (the result's params_sha256), for the
same world size.
"""
import argparse
import contextlib
import datetime
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(-1), self.dropout,
                        self.training)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, context, width, heads, layers, dropout):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, 256, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def params_sha256(model):
    """SHA-256 of the parameters and buffers, in key order."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode() + v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", required=True, help="text files to train on")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--sleep-ms", type=float, default=0,
                    help="sleep in each step (tests: long enough steps to hit mid-run)")
    ap.add_argument("--log-every", type=int, default=0,
                    help="log 'rank R step S loss L time T' every N steps (default steps/10, rank 0)")
    ap.add_argument("--control-interval", type=float, default=1.0,
                    help="seconds between the ranks' exchanges of the controller's requests")
    ap.add_argument("--sync-save", action="store_true", help="checkpoint on the training thread")
    ap.add_argument("--plain", action="store_true", help="without dtclient.torch")
    ap.add_argument("--inject-bitflip", metavar="R:S", default=None,
                    help="tests: flip one bit of rank R's first parameter before step S "
                         "(first attempt only): a silent error for the integrity checks")
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    # What does not depend on the rank comes before the process group: a
    # hot spare's standby process (DT_STANDBY=1) builds it ahead of time and
    # waits in dtt.init_process_group for the rank it takes over.
    text = b"".join(open(f, "rb").read() for f in a.data)
    data = torch.tensor(list(text), dtype=torch.long)
    torch.manual_seed(a.seed)
    model = GPT(a.context, a.width, a.heads, a.layers, a.dropout).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps))))
    n = len(data) - a.context - 1

    world_env = int(os.environ.get("WORLD_SIZE", "1"))
    if world_env > 1:
        if a.plain:
            dist.init_process_group("nccl" if cuda else "gloo", init_method="env://",
                                    timeout=datetime.timedelta(seconds=120))
        else:   # dtctl: the same, or joining a group re-formed in place (restart.reform)
            import dtclient.torch as dtt                                      # dtctl
            dtt.init_process_group("nccl" if cuda else "gloo", datetime.timedelta(seconds=120))
    rank = dist.get_rank() if world_env > 1 else 0
    world = dist.get_world_size() if world_env > 1 else 1
    ddp = DDP(model, broadcast_buffers=False) if world > 1 else model

    if a.plain:
        g = torch.Generator().manual_seed(a.seed + rank)
        ft, steps = None, range(a.steps)
    else:
        import dtclient.torch as dtt                                          # dtctl
        sampler = dtt.StepSampler(n, a.batch, seed=a.seed)                    # dtctl
        ft = dtt.Session(ddp, opt, scheduler=sched, sampler=sampler,          # dtctl
                         seed=a.seed, async_save=not a.sync_save,             # dtctl
                         control_interval=a.control_interval)                 # dtctl
        steps = ft.steps(a.steps)                                             # dtctl
    flip = [int(x) for x in a.inject_bitflip.split(":")] if a.inject_bitflip else None
    if flip and int(os.environ.get("DT_ATTEMPT") or 1) > 1:
        flip = None
    if a.plain and world > 1:
        dist.barrier()      # the ranks start together, as a Session's do
    t_start, cpu_start, loss = time.perf_counter(), time.process_time(), None
    with ft or contextlib.nullcontext():   # dtctl: a failed collective -> just-in-time checkpoint
        for step in steps:
            if a.plain:
                idx = torch.randint(0, n, (a.batch,), generator=g)
            else:
                idx = sampler.indices(step)                                   # dtctl
            if flip and flip[0] == rank and flip[1] == step + 1:
                if ft:      # a change outside opt.step(): after the checkpoint's host copy
                    ft.wait_snapshot()
                with torch.no_grad():   # bit 20 of element 3: a mantissa bit, as dttrain's
                    w = next(model.parameters()).view(-1)[3:4]
                    w.copy_((w.view(torch.int32) ^ (1 << 20)).view(torch.float32))
                print("rank %d: injected a bit flip before step %d" % (rank, step + 1),
                      file=sys.stderr, flush=True)
            pos = idx.unsqueeze(1) + torch.arange(a.context + 1)
            batch = data[pos].to(dev)
            logits = (ft.model if ft else ddp)(batch[:, :-1])   # dtctl: re-wrapped on a re-form
            loss = F.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if a.sleep_ms:
                time.sleep(a.sleep_ms / 1000)
            if ft:
                ft.step_done(loss, samples=len(idx))                          # dtctl
                if ft.step != step + 1:     # dtctl: a peer was lost in this step: redone re-formed
                    continue
            if (a.log_every or rank == 0) and (step + 1) % (a.log_every or max(1, a.steps // 10)) == 0:
                print("rank %d step %d loss %.4f time %.3f" % (rank, step + 1, loss.item(), time.time()),
                      file=sys.stderr, flush=True)
    wall, cpu = time.perf_counter() - t_start, time.process_time() - cpu_start
    res = {"steps": a.steps, "loss": loss.item() if loss is not None else None,
           "params_sha256": params_sha256(model), "world_size": world,
           "start_step": ft.start_step if ft else 0, "wall_s": wall, "cpu_s": cpu,
           "checkpoints": ft.nckpt if ft else 0,
           "ckpt_stall_ms": ft.stall_s * 1e3 if ft else 0.0,
           "ckpt_stall_cpu_ms": ft.stall_cpu_s * 1e3 if ft else 0.0,
           "ckpt_copy_waits": ft.copy_waits if ft else 0,
           "dtclient_ms_per_step": ft.self_s * 1e3 / max(1, a.steps - ft.start_step) if ft else 0.0,
           "dtclient_launch_ms_per_step":
               ft.launch_s * 1e3 / max(1, a.steps - ft.start_step) if ft else 0.0,
           "dtclient_scale_ms_per_step":
               ft.scale_s * 1e3 / max(1, a.steps - ft.start_step) if ft else 0.0,
           "fingerprints": ft.integrity_count if ft else 0,
           "fingerprint_ms": ft.integrity_s * 1e3 / max(1, ft.integrity_count) if ft else 0.0}
    if ft:
        ft.finish(res)                                                        # dtctl
    if rank == 0:
        print(json.dumps(res), flush=True)
    if world > 1:
        if not ft:
            dist.barrier()
        time.sleep(0.02)   # torch 1.13: see dtclient.torch.settle_process_group
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
