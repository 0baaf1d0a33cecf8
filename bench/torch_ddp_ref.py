#!/usr/bin/python3
"""torch_ddp_ref.py: the dttrain model in PyTorch DDP (gloo, CPU) - the reference for benchmark 2.

Same model (byte embeddings -> L x [Linear + GELU(tanh)] -> Linear(256)),
same data sampling (splitmix64 of seed, step, sample index over the
training part of the file), same global batch split in contiguous slices
over ranks, AdamW with the same schedule and clipping.  Launch like dttrain:
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the environment (or none for
one rank).  Prints one JSON line (rank 0): steps, tokens_per_s, train_loss.
Use /usr/bin/python3 (Debian's torch).
"""
import argparse, json, math, os, sys, time

import torch
import torch.distributed as dist
import torch.nn as nn

M64 = (1 << 64) - 1


def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", choices=["mlp"], default="mlp")  # dttrain's MLP only
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--embed", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--lr-ref-batch", type=int, default=64)
    ap.add_argument("--warmup-steps", type=int, default=20)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--val-frac", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)

    raw = open(a.data, "rb").read()
    train_len = len(raw) - int(len(raw) * a.val_frac)
    data = torch.tensor(list(raw[:train_len]), dtype=torch.long)
    C, B = a.context, a.global_batch
    nwin = train_len - C

    torch.manual_seed(a.seed)
    layers = [nn.Embedding(256, a.embed), nn.Flatten()]
    width = C * a.embed
    for _ in range(a.layers):
        layers += [nn.Linear(width, a.hidden), nn.GELU(approximate="tanh")]
        width = a.hidden
    layers.append(nn.Linear(width, 256))
    model = nn.Sequential(*layers)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "0.weight" not in n[-8:]]
    other = [p for n, p in model.named_parameters() if not any(p is q for q in decay)]
    peak = a.lr * B / a.lr_ref_batch
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=peak, eps=1e-8)

    def lr_at(s):
        if s < a.warmup_steps:
            return peak * (s + 1) / a.warmup_steps
        rest = a.steps - a.warmup_steps
        p = min(1.0, (s - a.warmup_steps) / rest) if rest > 0 else 0
        return 0.1 * peak + 0.5 * 0.9 * peak * (1 + math.cos(math.pi * p))

    lo, hi = B * rank // world, B * (rank + 1) // world
    offs = torch.arange(C + 1)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    step_log = os.environ.get("BENCH_STEP_LOG") == "1" and rank == 0
    t0 = time.time()
    loss_val = float("nan")
    for s in range(a.steps):
        hs = splitmix(splitmix(a.seed) ^ s)
        pos = torch.tensor([splitmix(hs ^ i) % nwin for i in range(lo, hi)], dtype=torch.long)
        win = data[pos[:, None] + offs[None, :]]
        x, y = win[:, :C], win[:, C]
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad(set_to_none=False)
        # sum over our slice / global batch: DDP averages over ranks, so scale by world
        loss = loss_fn(model(x), y) * (world / B)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        loss_val = loss.item() / world
        if world > 1:
            t = torch.tensor([loss_val])
            dist.all_reduce(t)
            loss_val = t.item()
        if step_log:
            # bench/run's torchrun restart benchmark: wall-clock time of each step.
            print("%.3f step %d loss %.4f restart %s" % (time.time(), s + 1, loss_val,
                  os.environ.get("TORCHELASTIC_RESTART_COUNT", "-")), file=sys.stderr, flush=True)
    wall = time.time() - t0
    if rank == 0:
        print(json.dumps({"impl": "torch-ddp", "torch": torch.__version__, "world_size": world,
                          "steps": a.steps, "global_batch": B, "wall_s": round(wall, 3),
                          "tokens_per_s": round(a.steps * B / wall, 1),
                          "train_loss": round(loss_val, 6)}))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
