#!/usr/bin/env python3
"""A real PyTorch DDP job that keeps the preemption contract of docs/dlsubmit.md.

One process per rank, started by ``dlsubmit`` (one srun task per instance: ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` come from the batch script) or by
``torchrun`` (the same variables from its rendezvous). Backend gloo on CPU, nccl when CUDA is
there (``--backend``). It trains a small MLP (``features → hidden → 1``, ReLU, dropout, Adam)
on synthetic regression data made from the seed and the step alone (no downloads, no data loader
state): the global batch of step ``s`` is drawn from a generator seeded with ``(seed, s)`` and
rank ``r`` takes rows ``r::WORLD_SIZE``.

The checkpoint contract (:func:`checkpoint`, :func:`resume`):

* on the checkpoint signal (``--signal``, USR2 by default; the batch script forwards it to every
  task) a rank only sets a flag; at the end of every step the ranks all-reduce that flag with the
  step's loss, so all of them stop **at the same step boundary**;
* every rank's RNG state is gathered, rank 0 writes model, optimizer, step and RNG states to
  ``$DL_CHECKPOINT_DIR/ddp-ckpt.pt`` atomically (temporary file, fsync, rename, fsync of the
  directory), and every rank waits at a barrier until it is written, then exits with 3
  (preempted: the batch script waits for the requeue);
* a requeued attempt (any attempt that finds the checkpoint) loads it in every rank and resumes
  at the next step, so no step is trained twice or skipped and the run is bitwise the same as an
  uninterrupted one (same world size; ``torch.set_num_threads(1)`` keeps CPU reductions in one order).

Output, one stdout line each (rank 0 unless noted): ``[ddp] start rank=R world=W addr=A
master=M:P attempt=N`` (every rank), ``[ddp] resume step=S``, ``[ddp] step S loss L`` (the mean
loss over all ranks, ``repr`` of the float: every bit), ``[ddp] checkpoint step=S``, ``[ddp]
done steps=N sha256=H`` (H over the final weights' bytes, :func:`weights_digest`); the final
weights go to ``--out`` (default ``$DL_CHECKPOINT_DIR/ddp-final.pt``).
Exit status: 0 finished, 2 bad arguments or unusable checkpoint, 3 checkpointed on the signal.
"""


import argparse
import datetime
import fcntl
import hashlib
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT_NAME = "ddp-ckpt.pt"
EXIT_OK, EXIT_USAGE, EXIT_PREEMPTED = 0, 2, 3
_SIOCGIFADDR = 0x8915


def log(text: str) -> None:
    print(f"[ddp] {text}", flush=True)


def make_model(features: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, 1))


def batch(seed: int, step: int, rank: int, world: int, size: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s share (rows ``rank::world``) of step ``step``'s global batch of ``size``
    rows: inputs ``(size/world, features)`` and targets ``(size/world, 1)`` from a fixed teacher."""
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(features, 1, generator=teacher)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, features, generator=g)
    y = torch.sin(x @ w) + 0.1 * torch.randn(size, 1, generator=g)
    return x[rank::world], y[rank::world]


def weights_digest(model: nn.Module) -> str:
    """sha256 over the bytes of every tensor of ``model.state_dict()`` in its order."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def save_atomically(obj: object, path: Path) -> None:
    """``torch.save(obj)`` to ``path`` so that a reader, or a restart after a kill at any moment,
    sees the old file or the new one: temporary file beside it, fsync, rename, fsync of the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint(path: Path, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    """Every rank calls this at the same step boundary: the ranks' RNG states are gathered,
    rank 0 writes model, optimizer, step and RNG states atomically, and no rank returns before
    the file is there (the barrier)."""
    rng = [None] * dist.get_world_size()
    dist.all_gather_object(rng, torch.get_rng_state())
    if dist.get_rank() == 0:
        save_atomically({"step": step, "world_size": dist.get_world_size(), "model": model.state_dict(),
                         "optimizer": opt.state_dict(), "rng": rng}, path)
        log(f"checkpoint step={step}")
    dist.barrier()


def resume(path: Path, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Load the checkpoint at ``path`` into this rank (model, optimizer, its own RNG state);
    returns the steps done (0 without a checkpoint). Raises ``ValueError`` for a checkpoint of
    another world size."""
    if not path.exists():
        return 0
    state = torch.load(path, weights_only=True)
    if state["world_size"] != dist.get_world_size():
        raise ValueError(f"{path} was written by {state['world_size']} ranks, this run has "
                         f"{dist.get_world_size()}; keep the spec's instances, or delete the checkpoint")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"][dist.get_rank()])
    return int(state["step"])


def per_parameter_allreduce(_state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the mean of each parameter's gradient over the ranks, one
    all-reduce per parameter. A float sum over more than two ranks depends on the order of its
    terms, and a ring all-reduce orders them by an element's position in the buffer; DDP lays
    its buckets out again after the first iteration (in the order gradients became ready), so a
    resumed run, whose first iteration lays them out afresh, would reduce that step's gradients
    in another order than an uninterrupted run. Per parameter, the position never changes."""
    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size())
    offset = 0
    for param in bucket.parameters():
        dist.all_reduce(buffer[offset:offset + param.numel()])
        offset += param.numel()
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future


def local_address(master_addr: str, master_port: int) -> str:
    """This node's address on the route to the master (no packet is sent: a UDP socket's connect
    only picks the route)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((master_addr, master_port))
        return s.getsockname()[0]


def interface_of(address: str) -> str | None:
    """The network interface holding IPv4 ``address`` (``SIOCGIFADDR`` on each), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == address:
                return name
    return None


def pin_interface(master_addr: str, master_port: int) -> str:
    """Point gloo and NCCL at the interface that reaches the master, unless the user set
    ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME``: by default gloo binds the address the
    host name resolves to, often 127.0.0.1, which no other node reaches. Returns the address."""
    addr = local_address(master_addr, master_port)
    name = interface_of(addr)
    if name:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", name)
    return addr


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="optimizer steps in all (default 40)")
    p.add_argument("--step-s", type=float, default=0.0, help="seconds to wait after each step (pacing for demos)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=64, help="global batch size, a multiple of WORLD_SIZE (default 64)")
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--signal", default="USR2", help="the checkpoint signal (default USR2, dlsubmit's)")
    p.add_argument("--backend", choices=["gloo", "nccl"], help="default nccl when CUDA is there, else gloo")
    p.add_argument("--timeout-s", type=float, default=120.0, help="collective timeout (default 120 s)")
    p.add_argument("--checkpoint-dir", type=Path, default=os.environ.get("DL_CHECKPOINT_DIR"),
                   help="default $DL_CHECKPOINT_DIR")
    p.add_argument("--out", type=Path, help="final weights (default CHECKPOINT_DIR/ddp-final.pt)")
    args = p.parse_args(argv)
    if args.checkpoint_dir is None:
        p.error("--checkpoint-dir: give one, or run under dlsubmit (DL_CHECKPOINT_DIR)")
    if args.steps < 1:
        p.error(f"--steps {args.steps}: must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    flag = {"stop": False}
    try:
        signum = signal.Signals[f"SIG{args.signal.upper().removeprefix('SIG')}"]
    except KeyError:
        print(f"ddp_train: --signal {args.signal!r}: not a signal name (USR2, USR1, ...)", file=sys.stderr)
        return EXIT_USAGE
    signal.signal(signum, lambda *_: flag.update(stop=True))
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if args.batch % world:
        print(f"ddp_train: --batch {args.batch}: must be a multiple of WORLD_SIZE {world}", file=sys.stderr)
        return EXIT_USAGE
    cuda = torch.cuda.is_available()
    backend = args.backend or ("nccl" if cuda else "gloo")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    addr = pin_interface(*master)
    attempt = os.environ.get("DL_RESTART_COUNT", os.environ.get("SLURM_RESTART_COUNT", "0"))
    log(f"start rank={rank} world={world} addr={addr} master={master[0]}:{master[1]} attempt={attempt} backend={backend}")
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        return train(args, rank, world, device, flag)
    finally:
        dist.destroy_process_group()


def train(args: argparse.Namespace, rank: int, world: int, device: torch.device, flag: dict[str, bool]) -> int:
    torch.manual_seed(args.seed)                    # the same initial weights in every rank
    model = make_model(args.features, args.hidden).to(device)
    torch.manual_seed(args.seed * 1_000_003 + 7919 * (rank + 1))   # each rank its own dropout stream
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(None, per_parameter_allreduce)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    path = args.checkpoint_dir / CHECKPOINT_NAME
    try:
        step = resume(path, model, opt)
    except (ValueError, RuntimeError, KeyError) as exc:
        print(f"ddp_train: checkpoint {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if step and rank == 0:
        log(f"resume step={step}")
    while step < args.steps:
        x, y = batch(args.seed, step, rank, world, args.batch, args.features)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        step += 1
        # one collective per step: the loss summed over ranks, and whether any rank got the signal
        shared = torch.tensor([loss.item(), float(flag["stop"])], dtype=torch.float64, device=device)
        dist.all_reduce(shared)
        if rank == 0:
            log(f"step {step} loss {shared[0].item() / world!r}")
        if shared[1].item() > 0 and step < args.steps:
            checkpoint(path, model, opt, step)
            return EXIT_PREEMPTED
        if args.step_s:
            time.sleep(args.step_s)
    if rank == 0:
        save_atomically(model.state_dict(), args.out or args.checkpoint_dir / "ddp-final.pt")
        log(f"done steps={step} sha256={weights_digest(model)}")
    dist.barrier()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
