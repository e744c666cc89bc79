"""A small MLP trained with DistributedDataParallel twice from the same
initial weights and data, once through libelu.torch.ELU and once through
torch.nn.ELU; prints both loss curves and exits non-zero where they
differ by more than the tolerance.

    torchrun --standalone --nproc_per_node=2 examples/python/ddp_train.py [--steps 50]

(with LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python from a build
tree). The CPU with gloo; CUDA with nccl where there are as many GPUs as
processes (--device chooses).

Why a tolerance: the forwards differ in their last bits: libelu's is within
1 ulp of the exact value, PyTorch's within about 2 (float32). And while
on CUDA the gradients are aten's elu_backward bit for bit from the same
saved input, on the CPU libelu's backward rounds once from a wider type
where aten's CPU kernel rounds each step. So the activations and their
gradients differ by an ulp or two here and there, and through the
matrix products and SGD so do the losses: on the CPU, equal in most of
the first 50 steps and within 2e-7 relative, growing as the two runs
drift apart to 3e-6 by step 200. The default tolerance, a relative 1e-4,
is well above that drift and far below what a wrong forward or gradient
gives (an alpha off by 1 % moves the first step's loss by 1.3e-4 and
later ones by up to 7e-3).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from libelu.torch import ELU


def mlp(activation, width, generator_seed):
    """In -> width -> width -> 1, with `activation` between, from weights
    that depend on the seed alone."""
    torch.manual_seed(generator_seed)
    return torch.nn.Sequential(
        torch.nn.Linear(8, width), activation(), torch.nn.Linear(width, width), activation(),
        torch.nn.Linear(width, 1))


def batches(rank, steps, batch, device):
    """This rank's share of a fixed regression task."""
    g = torch.Generator().manual_seed(1234 + rank)
    for _ in range(steps):
        x = torch.randn(batch, 8, generator=g)
        y = torch.sin(2 * x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3]
        yield x.to(device), y.to(device)


def train(activation, args, rank, device):
    """The loss of each step, averaged over the processes."""
    model = mlp(activation, args.width, 0).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                  else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    losses = []
    for x, y in batches(rank, args.steps, args.batch, device):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    return losses


def pick_device(choice, local_rank, world):
    """--device: cuda needs a GPU per process; auto takes them if there."""
    enough = torch.cuda.is_available() and torch.cuda.device_count() >= world
    if choice == "cuda" and not enough:
        sys.exit(f"--device cuda needs {world} GPUs, found {torch.cuda.device_count()}")
    if choice == "cuda" or (choice == "auto" and enough):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank), "nccl"
    return torch.device("cpu"), "gloo"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64, help="per process")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--rtol", type=float, default=1e-4,
                        help="the largest relative difference of two losses accepted")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    args = parser.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    device, backend = pick_device(args.device, local_rank, world)
    dist.init_process_group(backend)
    rank = dist.get_rank()
    ours = train(ELU, args, rank, device)
    theirs = train(torch.nn.ELU, args, rank, device)
    differences = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, theirs)]
    worst = max(differences)
    if rank == 0:
        print(f"{world} processes, {backend} on {device.type}")
        print("| step | libelu.torch.ELU | torch.nn.ELU | relative difference |")
        print("| ---: | ---: | ---: | ---: |")
        for step, (a, b, d) in enumerate(zip(ours, theirs, differences)):
            print(f"| {step} | {a:.8g} | {b:.8g} | {d:.2e} |")
        verdict = "agree" if worst <= args.rtol else "DIFFER"
        print(f"loss curves {verdict}: largest relative difference {worst:.2e} "
              f"(tolerance {args.rtol:g}); exactly equal in {differences.count(0)} "
              f"of {len(ours)} steps")
    dist.destroy_process_group()
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    status = main()
    # Out without the interpreter's teardown: there PyTorch's gloo threads
    # abort a process now and then (about one run in ten with PyTorch 2.15
    # on the CPU, torch.nn.ELU alone too), after the work is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
