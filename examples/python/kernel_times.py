"""Each kernel's own time, libelu builds against PyTorch: the A/B of a
change, kernel against kernel (docs/DESIGN.md, "How the numbers are
taken"). Every build (NAME=path to its libelu.so, any number of them) and
PyTorch writing the same output buffer (aten::elu.out, or
elu_backward.grad_input) is captured as a CUDA graph of CALLS calls; the
graphs are replayed in a new random order each round under torch.profiler,
and each kernel's duration comes from CUPTI. The median over calls 2..CALLS
of every replay is printed, with PyTorch's median over the build's (above
1: the build is faster). Graph replays have no host costs, and one
kernel's time leaves out the gaps between kernels.
    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python \\
        python3 examples/python/kernel_times.py \\
        main=build/libelu.so other=/tmp/other/libelu.so \\
        [--dtypes f32,f64] [--sizes 22,24,26,28] [--rounds 8] [--backward]
        [--flush read|write]
--flush puts a read of 512 MB (a sum) or a write (a fill) before each call,
to start every kernel with other data in L2. CUPTI's times move in steps of
32 ns: at 2^22 elements and below, differences of a few steps say little.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

from libelu import _lib
from peers import GRAPH_CALLS as CALLS, captured, libelu_c

DTYPES = {"f32": (0, torch.float32), "f64": (1, torch.float64), "f16": (2, torch.float16),
          "bf16": (3, torch.bfloat16)}


def kernel_times(graphs, rounds):
    """{name: [us]}: the ELU kernels' durations, calls 2..CALLS of each
    replay (the first follows a synchronization)."""
    names, order = list(graphs), []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(rounds):
            random.shuffle(names)
            for name in names:
                graphs[name].replay()
                torch.cuda.synchronize()
                order.append(name)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and "elu" in e["name"]),
                     key=lambda e: e["ts"])
    if len(kernels) != len(order) * CALLS:
        raise RuntimeError(f"{len(kernels)} ELU kernels traced for {len(order)} replays")
    times = {name: [] for name in names}
    for i, name in enumerate(order):
        times[name] += [e["dur"] for e in kernels[i * CALLS + 1:(i + 1) * CALLS]]
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="+", metavar="NAME=LIBELU_SO")
    ap.add_argument("--dtypes", default="f32")
    ap.add_argument("--sizes", default="22,24,26,28", help="log2 of the element counts")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--flush", choices=["read", "write"])
    args = ap.parse_args()
    builds = {b.split("=", 1)[0]: libelu_c(b.split("=", 1)[1])[:2] for b in args.builds}
    spill = torch.ones(1 << 27, device="cuda") if args.flush else None
    flush = {None: None, "read": lambda: torch.sum(spill),
             "write": lambda: spill.fill_(1.0)}[args.flush]
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    way = "backward (from the input)" if args.backward else "forward"
    print(f"Kernel times on {torch.cuda.get_device_name()}, {way}: medians in us, "
          f"and PyTorch's over the build's\n")
    print("| dtype | n | " + " | ".join(builds) + " | PyTorch |")
    print("|---|---|" + "---|" * (len(builds) + 1))
    for dt in args.dtypes.split(","):
        code, t = DTYPES[dt]
        p = _lib.Params(code, 1.0, 1.0, 1.0)
        for c, ctx in builds.values():
            if c.elu_prepare(ctx, p) != 0:  # a capture keeps the kernels it finds
                raise RuntimeError("elu_prepare failed")
        for lg in (int(s) for s in args.sizes.split(",")):
            n = 1 << lg
            x = (torch.rand(n, device="cuda") * 64 - 32).to(t)
            g, y = torch.randn(n, device="cuda").to(t), torch.empty_like(x)
            if args.backward:
                run = lambda c, ctx: c.elu_run_backward(ctx, p, g.data_ptr(), x.data_ptr(),
                                                        False, y.data_ptr(), n, stream())
                torch_call = lambda: torch.ops.aten.elu_backward.grad_input(
                    g, 1.0, 1.0, 1.0, False, x, grad_input=y)
            else:
                run = lambda c, ctx: c.elu_run(ctx, p, x.data_ptr(), y.data_ptr(), n, stream())
                torch_call = lambda: torch.ops.aten.elu.out(x, 1.0, 1.0, 1.0, out=y)
            calls = {name: (lambda b=b: run(*b)) for name, b in builds.items()}
            calls["PyTorch"] = torch_call
            graphs = {name: captured(fn, flush) for name, fn in calls.items()}
            med = {k: statistics.median(v) for k, v in kernel_times(graphs, args.rounds).items()}
            cells = [f"{med[name]:.3f} ({med['PyTorch'] / med[name]:.4f})" for name in builds]
            print(f"| {dt} | 2^{lg} | " + " | ".join(cells) + f" | {med['PyTorch']:.3f} |",
                  flush=True)
            del graphs


if __name__ == "__main__":
    main()
