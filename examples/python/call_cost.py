"""What a call costs from Python: libelu.elu(x, out=y), the same in a
context of one's own (context=c), and libelu.elu(x), libelu.torch.ELU()(x)
under torch.no_grad and with gradients (the forward, building the graph),
and the operator torch.ops.libelu.elu that ELU calls
where PyTorch must see the call, against torch.nn.functional.elu(x) and
torch.nn.ELU()(x), on PyTorch tensors of float32, on the CPU and on CUDA
where there is a GPU; and libelu.elu(a, out=b) on NumPy arrays, and on
CUDA libelu.elu(c, out=d) and libelu.elu(c) on CuPy arrays where CuPy is
installed. Prints a Markdown table of the wall time per call in
microseconds, each the median over repeats of a loop of calls (5000, or
fewer where one loop would pass the time budget; CUDA loops are
synchronized before and after; the cases' loops interleaved), with each
libelu figure's ratio to F.elu's.

    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python \\
        python3 examples/python/call_cost.py [--sizes 10,16,20,22] [--repeats 7]

At small sizes it measures each path's fixed cost (argument checks, the
tensors' metadata, an output's allocation, the dispatcher); at large ones
the kernels.
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

import libelu
import libelu.torch

try:
    import cupy
except ImportError:
    cupy = None


def loop_us(fn, calls, sync, grad):
    """One loop of `calls` calls of fn, per call, with gradients enabled or
    not (around the loop, not in it)."""
    with torch.set_grad_enabled(grad):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
    return (time.perf_counter() - start) / calls * 1e6


def calls_for(fn, budget, most, sync, grad):
    """As many calls as fit in `budget` seconds, at most `most`, from the
    time of 10 after 3 that warm up."""
    loop_us(fn, 3, sync, grad)
    one = loop_us(fn, 10, sync, grad) / 1e6
    return max(10, min(most, int(budget / max(one, 1e-9))))


def cases(device, n):
    """(label, function, grad mode) for one device and size: the peers,
    then libelu's."""
    x = torch.randn(n, device=device)
    y = torch.empty_like(x)
    xg = x.clone().requires_grad_()
    ours, theirs = libelu.torch.ELU(), torch.nn.ELU()
    own = libelu.Context("cpu") if device == "cpu" else libelu.Context(
        "cuda", device=torch.cuda.current_device())
    out = [("F.elu(x)", lambda: F.elu(x), True),
           ("nn.ELU()(x), no_grad", lambda: theirs(x), False),
           ("nn.ELU()(x), grad", lambda: theirs(xg), True),
           ("libelu.elu(x, out=y)", lambda: libelu.elu(x, out=y), True),
           ("libelu.elu(x, out=y, context=c)", lambda: libelu.elu(x, out=y, context=own), True),
           ("libelu.elu(x)", lambda: libelu.elu(x), True),
           ("ELU()(x), no_grad", lambda: ours(x), False),
           ("ELU()(x), grad", lambda: ours(xg), True)]
    op = getattr(getattr(torch.ops, "libelu", None), "elu", None)
    if op is not None:  # what the modules skip in eager calls: the dispatcher
        out += [("torch.ops.libelu.elu(x), no_grad", lambda: op(x), False),
                ("torch.ops.libelu.elu(x), grad", lambda: op(xg), True)]
    if device == "cpu":
        a = x.numpy().copy()
        b = np.empty_like(a)
        out.append(("NumPy libelu.elu(a, out=b)", lambda: libelu.elu(a, out=b), True))
    elif cupy is not None:
        c = cupy.asarray(x)
        d = cupy.empty_like(c)
        out += [("CuPy libelu.elu(c, out=d)", lambda: libelu.elu(c, out=d), True),
                ("CuPy libelu.elu(c)", lambda: libelu.elu(c), True)]
    return out


def table(device, sizes, repeats, budget, most):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = []
    for lg in sizes:
        n = 1 << lg
        runs = [(label, fn, grad, calls_for(fn, budget, most, sync, grad))
                for label, fn, grad in cases(device, n)]
        times = {label: [] for label, _, _, _ in runs}
        for _ in range(repeats):  # the cases interleaved, so that drift hits all alike
            for label, fn, grad, calls in runs:
                times[label].append(loop_us(fn, calls, sync, grad))
        rows.append((n, [(label, statistics.median(times[label]), calls)
                         for label, _, _, calls in runs]))
    labels = [label for label, _, _ in rows[0][1]]
    print(f"\n{device}: us per call (ratio to F.elu), median of {repeats}\n")
    print("| elements | calls | " + " | ".join(labels) + " |")
    print("| ---: | ---: |" + " ---: |" * len(labels))
    for n, measured in rows:
        base = measured[0][1]
        cells = [f"{us:.2f}" if label.startswith(("F.", "nn.")) else f"{us:.2f} ({us / base:.2f}x)"
                 for label, us, _ in measured]
        calls = min(c for _, _, c in measured)
        print(f"| 2^{n.bit_length() - 1} | {calls} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,16,20,22",
                        help="log2 of the element counts (default 10,16,20,22)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000, help="calls per loop, at most")
    parser.add_argument("--budget", type=float, default=0.5,
                        help="seconds one loop may take, which caps its calls")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    libelu.elu(torch.zeros(1))  # the package meets PyTorch
    path = "ctypes"
    if getattr(libelu, "_fast", None) is not None:
        path = "libelu._ext, tensors through " + (
            "libelu._torch_ext" if getattr(libelu, "_torch_ext", None) else "the Python C API")
    print(f"libelu {libelu.version()} ({path} path), torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads")
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    for device in devices:
        if device == "cuda" and not torch.cuda.is_available():
            print("\ncuda: no GPU, skipped")
            continue
        table(device, sizes, args.repeats, args.budget, args.calls)


if __name__ == "__main__":
    main()
