"""A stock PyTorch DDP training script (nothing dtctl-specific in it).

Launched by torchrun or by dtagent: reads RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR / MASTER_PORT from the environment (init_method="env://"),
trains a small MLP with the gloo backend on per-rank synthetic data, and
checks at the end that every replica holds identical parameters.
Exit status 0 on success.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1000 + rank)
    w_true = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))
    first = last = None
    for step in range(steps):
        x = torch.randn(64, 32, generator=gen)
        y = x @ w_true
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        last = loss.item()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    print("rank %d/%d local %s: loss %.4f -> %.4f, replicas identical: %s"
          % (rank, world, os.environ.get("LOCAL_RANK"), first, last, same), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0 if same and last < first else 1)


if __name__ == "__main__":
    main()
