#!/usr/bin/python3
"""torch_tfm_ref.py: dttrain's transformer in PyTorch (CPU, float32) - the speed reference.

Same model (tests/system/tfm-oracle.py checks the two agree to float32
rounding), same shapes, same data sampling (splitmix64 of seed, step,
sample index), AdamW with the same schedule and clipping; --threads
intra-op threads.  One process, or data parallel under DDP (gloo, CPU)
when RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT are set: rank r takes the
contiguous slice [B r / W, B (r+1) / W) of each global batch, as dttrain's
dp does.  Prints one JSON line (rank 0): steps, tokens_per_s (of the
global batch), model_gflops_per_s (dttrain's FLOP count), train_loss, torch.
Use /usr/bin/python3 (Debian's torch).
"""
import argparse, json, math, sys, time

import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

M64 = (1 << 64) - 1


def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


class Block(nn.Module):
    def __init__(self, E, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.qkv, self.o = nn.Linear(E, 3 * E), nn.Linear(E, E)
        self.w1, self.w2 = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)

    def forward(self, x):
        B, T, E = x.shape
        D = E // self.NH
        q, k, v = self.qkv(self.ln1(x)).split(E, dim=-1)
        q, k, v = (t.reshape(B, T, self.NH, D).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        a = s.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(B, T, E))
        return x + self.w2(F.gelu(self.w1(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self, C, E, NH, L):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(256, E), nn.Embedding(C, E)
        self.blocks = nn.ModuleList(Block(E, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(E)
        self.head = nn.Linear(E, 256, bias=False)

    def forward(self, tok):
        x = self.wte(tok) + self.wpe(torch.arange(tok.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.lnf(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    for k, v in (("steps", 20), ("global-batch", 64), ("context", 32), ("width", 64),
                 ("heads", 4), ("layers", 2), ("warmup-steps", 20), ("seed", 1234),
                 ("threads", 1), ("lr-ref-batch", 64)):
        ap.add_argument("--" + k, type=int, default=v)
    for k, v in (("lr", 3e-3), ("weight-decay", 0.01), ("clip", 1.0), ("val-frac", 0.1),
                 ("min-lr-frac", 0.1)):
        ap.add_argument("--" + k, type=float, default=v)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(a.seed)
    data = open(a.data, "rb").read()
    train_len = len(data) - int(len(data) * a.val_frac)
    buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    C, B, E, L = a.context, a.global_batch, a.width, a.layers
    model = Model(C, E, a.heads, L)
    lo, hi = B * rank // world, B * (rank + 1) // world
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "wte" not in n and "wpe" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "wte" not in n and "wpe" not in n)]
    peak = a.lr * B / a.lr_ref_batch
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=peak, eps=1e-8)
    nmat = L * 12 * E * E + E * 256
    flops_per_sample = C * (6.0 * nmat + 12.0 * L * C * E)
    idx = torch.arange(C + 1)
    t0, loss = None, float("nan")
    for s in range(a.steps + 1):           # step 0 is a warm-up, not timed
        if s == 1:
            t0 = time.perf_counter()
        st = s if s else 0
        pos = torch.tensor([splitmix(splitmix(splitmix(a.seed) ^ st) ^ i) % (train_len - C)
                            for i in range(lo, hi)])
        w = buf[pos[:, None] + idx].long()
        logits = model(w[:, :C])
        l = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        l.backward()
        nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        if st < a.warmup_steps:
            lr = peak * (st + 1) / a.warmup_steps
        else:
            p = min(1.0, (st - a.warmup_steps) / max(1, a.steps - a.warmup_steps))
            lr = peak * a.min_lr_frac + 0.5 * peak * (1 - a.min_lr_frac) * (1 + math.cos(math.pi * p))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        loss = l.item()
    wall = time.perf_counter() - t0
    if world > 1:
        dist.destroy_process_group()
    if rank:
        return 0
    print(json.dumps({"steps": a.steps, "tokens_per_s": a.steps * B * C / wall,
                      "model_gflops_per_s": a.steps * B * flops_per_sample / wall / 1e9,
                      "train_loss": loss, "wall_s": wall, "threads": a.threads, "world_size": world,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    sys.exit(main())
