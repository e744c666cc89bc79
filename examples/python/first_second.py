"""The first second of a process: ELU forward calls on 2^24 elements with
fixed constants, from libelu's first call (which makes its context) for a
second, libelu's and PyTorch's F.elu alternating in the same process, each
call timed on the GPU by CUDA events (the GPU kept busy meanwhile, so that
the host's part of a call stays out) and taken as a share of a copy of the
same bytes (the median of 50 copies after the loop). Each case runs in a
process of its own: with an empty disk cache (cold), then with the one the
cold process left (warm). Writes the calls as JSON, for plot_first_second.py.
    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python \\
        python3 examples/python/first_second.py OUT.json [dtype ...]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

SECONDS = 1.0
N = 1 << 24
HOST_SLACK_CYCLES = 200000  # about 0.1 ms


def median(values):
    return sorted(values)[len(values) // 2]


def child(dtype):
    """One process's timeline, as JSON on stdout."""
    import torch
    import torch.nn.functional as F
    x = (torch.rand(N, device="cuda", dtype=torch.float32) * 16 - 8).to(getattr(torch, dtype))
    y = torch.empty_like(x)
    F.elu(x)  # PyTorch's kernel loaded before the clock starts
    torch.cuda.synchronize()
    import libelu
    calls = []
    start = time.perf_counter()
    while time.perf_counter() - start < SECONDS:
        for who, run in (("libelu", lambda: libelu.elu(x, out=y)),
                         ("pytorch", lambda: F.elu(x))):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            at = time.perf_counter() - start
            # The GPU kept busy while the host makes the call, so that the
            # events time the kernel, not the host (but for a call that
            # compiles, which outlasts the wait).
            torch.cuda._sleep(HOST_SLACK_CYCLES)
            begin.record()
            run()
            end.record()
            end.synchronize()
            calls.append((who, at, begin.elapsed_time(end)))
    copies = []
    for _ in range(50):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(HOST_SLACK_CYCLES)
        begin.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        copies.append(begin.elapsed_time(end))
    copy_ms = sorted(copies)[len(copies) // 2]
    json.dump({"copy_ms": copy_ms,
               "calls": [{"who": w, "t_s": t, "share_of_copy": copy_ms / ms} for w, t, ms in calls]},
              sys.stdout)


def main():
    out = sys.argv[1]
    dtypes = sys.argv[2:] or ["float32", "float16"]
    report = []
    for dtype in dtypes:
        cache = tempfile.mkdtemp(prefix="elu-first-second-")
        for state in ("cold", "warm"):
            env = dict(os.environ, ELU_CACHE_DIR=cache,
                       CUDA_CACHE_PATH=os.path.join(cache, "nv"))
            result = subprocess.run([sys.executable, __file__, "--child", dtype], env=env,
                                    capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"{dtype} {state}: the child failed:\n{result.stderr}")
            timeline = json.loads(result.stdout)
            timeline.update(dtype=dtype, cache=state)
            report.append(timeline)
            mine = [c for c in timeline["calls"] if c["who"] == "libelu"]
            theirs = [c for c in timeline["calls"] if c["who"] == "pytorch"]
            rest = sorted(c["share_of_copy"] for c in mine[1:])
            slow = [c["t_s"] for c in mine[1:] if c["share_of_copy"] < 0.9]
            print(f"{dtype} {state}: {len(mine)} libelu calls in {SECONDS:.0f} s; after the "
                  f"first, the lowest {rest[0]:.3f} of a copy, the median {median(rest):.3f}, "
                  f"{len(slow)} below 0.9 (the last at {max(slow, default=0) * 1e3:.1f} ms); "
                  f"PyTorch's median {median([c['share_of_copy'] for c in theirs]):.3f}")
    with open(out, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
