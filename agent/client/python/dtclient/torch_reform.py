"""dtclient.torch's primitive for survivors that never exit: re-forming the
process group in a live process (what torch 1.13 allows; see README.md,
"Survivors that never exit")."""

import time

import torch.distributed as dist


def settle_process_group():
    """Let the process group's worker threads finish releasing their last
    operations before a group is destroyed or its last owner (a DDP
    reducer) is dropped.  In torch 1.13 a gloo worker releases a finished
    operation's tensors while it holds the group's lock, and a tensor that
    still carries its Python object needs the GIL for that; the group's
    destructor, run from Python, holds the GIL and waits for that lock: the
    process deadlocks (seen at exit after a re-form, about 1 run in 4).
    Sleeping releases the GIL, so a worker waiting for it finishes first.
    Call it after the last collective, before destroy_process_group()."""
    time.sleep(0.02)



def reform_process_group(model, store, prefix, rank, world_size, backend="gloo",
                         timeout=None, comm_hook=None, **ddp_kwargs):
    """Re-form the default process group in this live process after a
    peer was lost, and wrap the model in a new DDP over it: what torch
    1.13 allows for survivors that keep their state in memory.

    model: the old DDP wrapper (its reducer, which holds the old group and
    has autograd hooks on the parameters, is released here: keeping it
    would reduce every gradient a second time over the dead group) or the
    plain module; store: a torch.distributed Store all members reach (a
    TCPStore, not one served by a rank that may die); prefix: a key
    prefix never used before in that store (one per generation, e.g.
    "gen-3/"): the new group's rendezvous keys cannot meet the old
    generation's; rank, world_size: this process's place in the new
    group; timeout: the group's timeout (a datetime.timedelta; gloo's
    collectives fail after it when a peer stops without closing its
    connections); comm_hook: (state, hook) to register on the new DDP;
    ddp_kwargs: for DistributedDataParallel (its constructor broadcasts
    rank 0's parameters and buffers to the new members).  Every member
    of the new group calls it with the same prefix and world_size.
    Returns the new DDP model."""
    import datetime
    from torch.nn.parallel import DistributedDataParallel as DDP
    module = getattr(model, "module", model)
    settle_process_group()
    if model is not module:
        for attr in ("reducer", "logger", "process_group"):   # the old group's owners
            if hasattr(model, attr):
                delattr(model, attr)
    if dist.is_initialized():
        dist.destroy_process_group()
    if timeout is None:
        timeout = datetime.timedelta(seconds=60)
    dist.init_process_group(backend, store=dist.PrefixStore(prefix, store), rank=rank,
                            world_size=world_size, timeout=timeout)
    new = DDP(module, **ddp_kwargs)
    if comm_hook is not None:
        new.register_comm_hook(*comm_hook)
    return new
