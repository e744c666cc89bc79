"""libelu against its peers on one GPU, in one run: elu-bench (the C API)
and, in this process, PyTorch's F.elu and elu_backward, a Triton ELU, a CuPy
ElementwiseKernel and a PyTorch jiterator kernel, each as a share of a
copy of the same bytes measured by the same program. Then the first call in
a new process, with an empty and with a warm compile cache, for each JIT
peer and for the bare first NVRTC compile of a tiny kernel (the floor: from
Python here, and in C between libelu's own cold calls by elu-bench).
Then libelu against PyTorch alone, paired in this process: CUDA graphs of
each (libelu through its C API on raw pointers) replayed in turn, in a new
random order each time, so that neither pays host costs and the machine's
slow moments weigh on both alike. Last, a loop of calls each with a new
alpha against one with a single alpha, for libelu, PyTorch, Triton and
CuPy (alpha a kernel argument in the last two). Prints a Markdown report.
    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python \
        python3 examples/python/peers.py build/bench/elu-bench [log2 of the largest size]
        [elu-bench's --json output, to use rather than run it again] [--json PATH]
--json also writes the report's numbers to PATH, for plot_peers.py. CuPy has
no bfloat16: its column says "-" there.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from bench_elu import median_ms  # CUDA-event medians, as bench_elu.py takes them

DTYPES = ["float32", "float64", "float16", "bfloat16"]
SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def triton_elu():
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import libdevice

    @triton.jit
    def kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        v = x.to(tl.float64) if x.dtype == tl.float64 else x.to(tl.float32)
        y = tl.where(v > 0, v, alpha * libdevice.expm1(v))
        tl.store(y_ptr + offs, y.to(x.dtype), mask=mask)

    def run(x, y, alpha=1.0):
        kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), alpha, BLOCK=1024)
    return run


def cupy_elu():
    import cupy
    import numpy
    kernels = {
        "float32": cupy.ElementwiseKernel("float32 x, float32 alpha", "float32 y",
                                          "y = x > 0 ? x : alpha * expm1f(x)", "elu_f32"),
        "float64": cupy.ElementwiseKernel("float64 x, float64 alpha", "float64 y",
                                          "y = x > 0 ? x : alpha * expm1(x)", "elu_f64"),
        "float16": cupy.ElementwiseKernel("float16 x, float32 alpha", "float16 y",
                                          "float v = x; y = v > 0 ? v : alpha * expm1f(v)",
                                          "elu_f16"),
    }
    scalar = {"float32": numpy.float32, "float64": numpy.float64, "float16": numpy.float32}

    def run(x, y, alpha=1.0):
        dtype = str(x.dtype).replace("torch.", "")
        k = kernels.get(dtype)
        if k is None:
            return False
        k(cupy.asarray(x), scalar[dtype](alpha), cupy.asarray(y))
        return True
    return run


def jiterator_elu():
    fn = torch.cuda.jiterator._create_jit_fn(
        "template <typename T> T elu(T x) { return x > T(0) ? x : T(expm1(float(x))); }")

    def run(x, y):
        fn(x)  # allocates its output, as F.elu does
    return run


def throughput(top):
    peers = {"triton": triton_elu(), "cupy": cupy_elu(), "jiterator": jiterator_elu()}
    rows = []
    for dtype in DTYPES:
        t = getattr(torch, dtype)
        for lg in range(10, top + 1, 2):
            n = 1 << lg
            x = (torch.rand(n, device="cuda") * 64 - 32).to(t)
            g, y = torch.randn(n, device="cuda").to(t), torch.empty_like(x)
            gb = lambda ms, k=2: k * n * x.element_size() / ms / 1e6
            row = {"dtype": SHORT[dtype], "log2": lg, "copy": gb(median_ms(lambda: y.copy_(x)))}
            row["torch"] = gb(median_ms(lambda: torch.nn.functional.elu(x)))
            row["torch_bwd"] = gb(median_ms(
                lambda: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x)), 3)
            for name, run in peers.items():
                try:
                    row[name] = gb(median_ms(lambda: run(x, y))) if run(x, y) is not False else None
                except Exception as e:  # a peer that cannot do this dtype
                    print(f"<!-- {name} {dtype}: {type(e).__name__} -->")
                    row[name] = None
            rows.append(row)
    return rows


GRAPH_CALLS = 20  # calls captured in each graph
PAIRED_REPS = 25
CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}  # elu_dtype


def libelu_c(path=None):
    """libelu's C API (the library at `path`, else the one the libelu
    package loads), a CUDA context of its own, and elu_run /
    elu_run_backward on raw device pointers: a graph captures the kernel
    launch alone."""
    from libelu import _lib
    c = _lib.load(path)
    params, ptr = ctypes.POINTER(_lib.Params), ctypes.c_void_p
    c.elu_prepare.argtypes = [ptr, params]
    c.elu_run.argtypes = [ptr, params, ptr, ptr, ctypes.c_size_t, ptr]
    c.elu_run_backward.argtypes = [ptr, params, ptr, ptr, ctypes.c_bool, ptr, ctypes.c_size_t,
                                   ptr]
    opts = _lib.Options()
    c.elu_options_default(opts)
    opts.backend = _lib.BACKEND_CUDA
    ctx = ctypes.c_void_p()
    if c.elu_ctx_create(ctypes.byref(ctx), opts) != 0:
        raise RuntimeError("elu_ctx_create failed: see ELU_DEBUG=1")
    return c, ctx, _lib.Params


def captured(fn, before=None):
    """A CUDA graph of GRAPH_CALLS calls of fn, each after before() if given
    (fn run once first, on a side stream, as PyTorch's graph capture
    wants)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            if before:
                before()
            fn()
    return graph


def replay_ms(graph):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / GRAPH_CALLS


def paired_times(graphs):
    """{name: [ms]}: PAIRED_REPS repetitions, each replaying every graph
    once in a new random order, so that the i-th times of two graphs are a
    pair."""
    names = list(graphs)
    times = {name: [] for name in names}
    for _ in range(PAIRED_REPS):
        random.shuffle(names)
        for name in names:
            times[name].append(replay_ms(graphs[name]))
    return times


def paired(top):
    """libelu against PyTorch, forward and backward, every dtype and size:
    rows of (dtype, log2 n, [libelu's GB/s, PyTorch's, the median over the
    pairs of PyTorch's time over libelu's, and the same median against
    PyTorch writing libelu's output buffer (its out= variant); the same four
    for the backward]). PyTorch's own call writes a new tensor, and where
    the output lies moves the time: on the H200, PyTorch writing libelu's
    `y` ran 0.994 of its own speed at 2^28 f32 elements. No copy here:
    captured in a graph, a copy of 512 MB or more ran at about two thirds
    of the eager copy's speed on the H200."""
    c, ctx, params = libelu_c()

    def ok(status):  # a failed call would leave its graph empty, and fast
        if status != 0:
            raise RuntimeError(c.elu_ctx_last_error(ctx).decode())
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    rows = []
    for dtype in DTYPES:
        t = getattr(torch, dtype)
        p = params(CODES[dtype], 1.0, 1.0, 1.0)
        ok(c.elu_prepare(ctx, p))  # a capture keeps the kernels it finds
        for lg in range(10, top + 1, 2):
            n = 1 << lg
            x = (torch.rand(n, device="cuda") * 64 - 32).to(t)
            g, y = torch.randn(n, device="cuda").to(t), torch.empty_like(x)
            graphs = {name: captured(fn) for name, fn in {
                "libelu": lambda: ok(c.elu_run(ctx, p, x.data_ptr(), y.data_ptr(), n, stream())),
                "torch": lambda: torch.nn.functional.elu(x),
                "torch_into_y": lambda: torch.ops.aten.elu.out(x, 1.0, 1.0, 1.0, out=y),
                "libelu_bwd": lambda: ok(c.elu_run_backward(ctx, p, g.data_ptr(), x.data_ptr(),
                                                            False, y.data_ptr(), n, stream())),
                "torch_bwd": lambda: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x),
                "torch_bwd_into_y": lambda: torch.ops.aten.elu_backward.grad_input(
                    g, 1.0, 1.0, 1.0, False, x, grad_input=y),
            }.items()}
            ms = paired_times(graphs)
            gbs = lambda name, k: k * n * x.element_size() / statistics.median(ms[name]) / 1e6
            ratio = lambda a, b: statistics.median(s / f for s, f in zip(ms[a], ms[b]))
            rows.append((SHORT[dtype], lg, [
                gbs("libelu", 2), gbs("torch", 2), ratio("torch", "libelu"),
                ratio("torch_into_y", "libelu"),
                gbs("libelu_bwd", 3), gbs("torch_bwd", 3), ratio("torch_bwd", "libelu_bwd"),
                ratio("torch_bwd_into_y", "libelu_bwd")]))
            del graphs
    return rows


FIRST_CALL = {
    "nvrtc floor (Python)": """
import ctypes, time
# CUDA initialized first, as in every peer's first call (NVRTC's first compile took three
# times as long on the H200 in a process that had not).
cu = ctypes.CDLL('libcuda.so.1')
ctx = ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
nv = ctypes.CDLL('libnvrtc.so')
# A constant of its own: NVRTC (CUDA 12.9+) returns a program it compiled before at once,
# a comment apart.
src = b'extern "C" __global__ void k(float *y) { y[threadIdx.x] = %d.0f; }' % (time.time_ns() % 10**9)
t = time.perf_counter()
p = ctypes.c_void_p()
nv.nvrtcCreateProgram(ctypes.byref(p), src, b'k.cu', 0, None, None)
opts = (ctypes.c_char_p * 1)(b'-arch=sm_90')
assert nv.nvrtcCompileProgram(p, 1, opts) == 0
print((time.perf_counter() - t) * 1e3)
""",
    "cupy": """
import time, cupy
x = cupy.random.rand(1 << 20, dtype=cupy.float32); cupy.cuda.Device().synchronize()
k = cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = x > 0 ? x : 0.9f * expm1f(x)', 'elu_first')
t = time.perf_counter(); y = k(x); cupy.cuda.Device().synchronize()
print((time.perf_counter() - t) * 1e3)
""",
    "jiterator": """
import time, torch
x = torch.rand(1 << 20, device='cuda'); torch.cuda.synchronize()
fn = torch.cuda.jiterator._create_jit_fn(
    'template <typename T> T elu_first(T x) { return x > T(0) ? x : T(0.9f * expm1(float(x))); }')
t = time.perf_counter(); y = fn(x); torch.cuda.synchronize()
print((time.perf_counter() - t) * 1e3)
""",
    "triton": """
import time, torch, triton, triton.language as tl
from triton.language.extra.cuda import libdevice
@triton.jit
def elu_first(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.9 * libdevice.expm1(x)), mask=offs < n)
x = torch.rand(1 << 20, device='cuda'); y = torch.empty_like(x); torch.cuda.synchronize()
t = time.perf_counter(); elu_first[(1024,)](x, y, x.numel(), BLOCK=1024); torch.cuda.synchronize()
print((time.perf_counter() - t) * 1e3)
""",
}


FIRST_REPS = 5


def first_calls():
    """{peer: (cold ms, warm ms)}: medians over FIRST_REPS pairs of new processes, each
    pair on a fresh cache."""
    samples = {name: [] for name in FIRST_CALL}
    for _ in range(FIRST_REPS):
        for name, times in first_call_pairs().items():
            samples[name].append(times)
    med = lambda v: None if None in v else statistics.median(v)
    return {name: tuple(med([s[k] for s in pairs]) for k in range(2))
            for name, pairs in samples.items()}


def first_call_pairs():
    """{peer: [cold ms, warm ms]}: two new processes on one fresh cache."""
    out = {}
    for name, code in FIRST_CALL.items():
        with tempfile.TemporaryDirectory() as cache:
            # CUDA_CACHE_PATH: NVRTC (CUDA 12.9+) keeps its programs in the driver's cache.
            env = dict(os.environ, CUPY_CACHE_DIR=cache, TRITON_CACHE_DIR=cache,
                       PYTORCH_KERNEL_CACHE_PATH=cache, XDG_CACHE_HOME=cache,
                       CUDA_CACHE_PATH=os.path.join(cache, "nv"))
            script = os.path.join(cache, "first_call.py")  # Triton needs a file
            with open(script, "w") as f:
                f.write(code)
            times = []
            for _ in range(2):
                r = subprocess.run([sys.executable, script], env=env, capture_output=True,
                                   text=True)
                times.append(float(r.stdout.split()[-1]) if r.returncode == 0 else None)
                if r.returncode:
                    print(f"<!-- {name}: {r.stderr.strip()[-300:]} -->")
            out[name] = times
    return out


NEW_ALPHA_CALLS = 200
NEW_ALPHA_ROUNDS = 5
NEW_ALPHA_DTYPES = ("float32", "float16")


def loop_us(run, x, y, alphas):
    """Wall time per call of run(x, y, alpha) over alphas, synchronized
    before and after the loop."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for alpha in alphas:
        run(x, y, alpha)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / len(alphas) * 1e6


def new_alpha():
    """Each program's ELU forward with a new alpha on every call, against
    the same loop with one alpha (for libelu prepared): NEW_ALPHA_CALLS
    calls a loop, the two loops interleaved, medians of NEW_ALPHA_ROUNDS.
    libelu through the package (libelu.elu into y), PyTorch's F.elu, Triton
    and CuPy with alpha as a kernel argument. The new alphas are never
    used twice in the run."""
    import libelu
    runners = {"libelu": lambda x, y, a: libelu.elu(x, a, out=y),
               "pytorch": lambda x, y, a: torch.nn.functional.elu(x, a),
               "triton": triton_elu(), "cupy": cupy_elu()}
    fresh = iter(range(1, 1 << 40))
    rows = []
    for dtype in NEW_ALPHA_DTYPES:
        libelu.default_context(torch.cuda.current_device()).prepare(dtype, 1.0)
        for lg in (16, 20, 24):
            x = (torch.rand(1 << lg, device="cuda") * 64 - 32).to(getattr(torch, dtype))
            y = torch.empty_like(x)
            for name, run in runners.items():
                run(x, y, 1.0)  # compiled and loaded before the clock
                fixed, new = [], []
                for _ in range(NEW_ALPHA_ROUNDS):
                    fixed.append(loop_us(run, x, y, [1.0] * NEW_ALPHA_CALLS))
                    new.append(loop_us(run, x, y, [0.5 + next(fresh) * 1e-7
                                                   for _ in range(NEW_ALPHA_CALLS)]))
                rows.append({"dtype": SHORT[dtype], "log2": lg, "program": name,
                             "new_us": statistics.median(new),
                             "fixed_us": statistics.median(fixed)})
    return rows


def share(v, copy):
    return None if v is None else v / copy


def collect(bench, top, bench_json):
    """Everything the report shows, as one JSON-ready dict: elu-bench's
    results (run now, or read from bench_json) and this process's."""
    if bench_json:
        with open(bench_json) as f:
            ours = json.load(f)
    else:
        ours = json.loads(subprocess.run([bench, "--json", str(top)], capture_output=True,
                                         text=True, check=True).stdout)
    theirs = {(r["dtype"], r["log2"]): r for r in throughput(top)}
    eager = []
    for r in ours["throughput"]:
        t = theirs[(r["dtype"], r["log2"])]
        c = t["copy"]
        eager.append({"dtype": r["dtype"], "log2": r["log2"], "copy_gbs": r["copy_gbs"],
                      "peers_copy_gbs": c, "libelu_fwd": r["fwd_ratio"],
                      "torch_fwd": share(t["torch"], c), "triton_fwd": share(t["triton"], c),
                      "cupy_fwd": share(t["cupy"], c), "jiterator_fwd": share(t["jiterator"], c),
                      "libelu_bwd": r["bwd_ratio"], "torch_bwd": share(t["torch_bwd"], c)})
    peers_first = first_calls()
    graphs = [{"dtype": dtype, "log2": lg, "libelu_fwd_gbs": r[0], "torch_fwd_gbs": r[1],
               "fwd_speedup": r[2], "fwd_speedup_into_y": r[3], "libelu_bwd_gbs": r[4],
               "torch_bwd_gbs": r[5], "bwd_speedup": r[6], "bwd_speedup_into_y": r[7]}
              for dtype, lg, r in paired(top)]
    return {"device": ours["device"], "sm": ours["sm"], "torch": torch.__version__,
            "eager": eager,
            "misaligned": [{"dtype": r["dtype"], "log2": r["log2"],
                            "fwd": r["fwd_misaligned_vs_aligned"],
                            "bwd": r["bwd_misaligned_vs_aligned"]}
                           for r in ours["throughput"] if r["log2"] >= 20],
            "new_specialization_ms": ours["new_specialization_ms"],
            "host_cost": ours["host_cost"],
            "first_call": ours["first_call"],
            "peers_first_call_ms": {name: {"cold": cold, "warm": warm}
                                    for name, (cold, warm) in peers_first.items()},
            "graphs": graphs, "new_alpha": new_alpha()}


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


def markdown(r):
    """The report, in Markdown."""
    out = [f"# libelu and its peers on {r['device']} (sm_{r['sm']}), torch {r['torch']}\n",
           "Forward and backward throughput as a share of a copy of the same bytes (each "
           "program measures its own copy; medians of 15 batches of 10 calls).\n",
           "| dtype | n | libelu fwd | PyTorch fwd | Triton fwd | CuPy fwd | jiterator fwd "
           "| libelu bwd | PyTorch bwd |",
           "|---|---|---|---|---|---|---|---|---|"]
    for e in r["eager"]:
        out.append(f"| {e['dtype']} | 2^{e['log2']} | " + " | ".join(fmt(e[k]) for k in (
            "libelu_fwd", "torch_fwd", "triton_fwd", "cupy_fwd", "jiterator_fwd",
            "libelu_bwd", "torch_bwd")) + " |")
    out += ["\nMisaligned (every pointer one element off, n - 1 elements) against aligned, "
            "libelu:\n", "| dtype | n | forward | backward |", "|---|---|---|---|"]
    out += [f"| {m['dtype']} | 2^{m['log2']} | {m['fwd']:.3f} | {m['bwd']:.3f} |"
            for m in r["misaligned"]]
    out += ["\nA new specialization in a running process, libelu (ms, medians of 5): the "
            "first elu_run of new constants (2^20, synchronized), which the generic kernels "
            "serve while the specialized ones compile in the background; and elu_prepare, "
            "which compiles them first:\n",
            "| dtype | first elu_run | elu_prepare | without a disk cache | compile and store "
            "| load |", "|---|---|---|---|---|---|"]
    out += [f"| {c['dtype']} | {c['first_run']:.3f} | {c['prepare']:.2f} "
            f"| {c['prepare_in_memory']:.2f} | {c['compile']:.2f} | {c['load']:.2f} |"
            for c in r["new_specialization_ms"]]
    h = r["host_cost"]
    out.append(f"\nHost cost of one elu_run (f32, n={h['n']}): {h['elu_run_us']:.2f} us "
               f"against {h['raw_launch_us']:.2f} us for a raw cuLaunchKernel: "
               f"{h['ratio']:.3f} x. A captured graph of 1000 such calls replays at "
               f"{h['graph_us_per_elu']:.3f} us per ELU.\n")
    out += [f"First call in a new process (ms; libelu's medians of 9 rounds, the peers' of "
            f"{FIRST_REPS}; cold: empty cache, warm: the cache the cold run left; over the "
            "floor: a cold elu_run less the floor and NVRTC's load of its own round, the "
            "median of those differences):\n", "| | cold | warm | over the floor |",
            "|---|---|---|---|"]
    calls = r["first_call"]
    for f in calls:
        if f["dtype"] == "nvrtc floor":
            out.append(f"| nvrtc floor, in elu-bench (C; libelu's NVRTC, between its cold "
                       f"calls) | {f['run_ms']:.2f} | | |")
            out.append(f"| nvrtc floor plus loading NVRTC (sum of the medians), as libelu's "
                       f"cold call pays both | {f['run_ms'] + f['ctx_ms']:.2f} | | |")
        elif f["cache"] == "cold" and not f["prewarm"]:
            warm = next(w for w in calls if w["dtype"] == f["dtype"] and w["cache"] == "warm")
            out.append(f"| libelu {f['dtype']} (elu_run 2^20, synchronized) | "
                       f"{f['run_ms']:.2f} | {warm['run_ms']:.2f} | "
                       f"{f['over_floor_ms']:+.2f} |")
        elif f["prewarm"]:
            out.append(f"| libelu {f['dtype']}, ELU_PREWARM at context creation, 200 ms "
                       f"before | {f['run_ms']:.2f} | | |")
    show = lambda v: "-" if v is None else f"{v:.2f}"
    out += [f"| {name} | {show(t['cold'])} | {show(t['warm'])} | |"
            for name, t in r["peers_first_call_ms"].items()]
    out += [f"\nlibelu against PyTorch, paired in one process: CUDA graphs of {GRAPH_CALLS} "
            f"calls each, replayed {PAIRED_REPS} times, in a new random order each time; "
            "GB/s from the medians, and the median over the pairs of libelu's speed over "
            "PyTorch's (device time only: a graph replays without the host's costs); "
            "\"into y\": PyTorch writing the same output buffer as libelu (out=), rather "
            "than a new tensor:\n",
            "| dtype | n | libelu fwd GB/s | PyTorch fwd GB/s | libelu / PyTorch | into y "
            "| libelu bwd GB/s | PyTorch bwd GB/s | libelu / PyTorch | into y |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {g['dtype']} | 2^{g['log2']} | {g['libelu_fwd_gbs']:.1f} "
            f"| {g['torch_fwd_gbs']:.1f} | {g['fwd_speedup']:.3f} "
            f"| {g['fwd_speedup_into_y']:.3f} | {g['libelu_bwd_gbs']:.1f} "
            f"| {g['torch_bwd_gbs']:.1f} | {g['bwd_speedup']:.3f} "
            f"| {g['bwd_speedup_into_y']:.3f} |" for g in r["graphs"]]
    out += [f"\nA new alpha on every call: {NEW_ALPHA_CALLS} forward calls each with an "
            f"alpha of its own, against {NEW_ALPHA_CALLS} with one alpha (libelu's prepared), "
            "wall time per call in microseconds, synchronized at the end of each loop, "
            f"medians of {NEW_ALPHA_ROUNDS} rounds; libelu through the package into y, "
            "Triton and CuPy with alpha as a kernel argument:\n",
            "| dtype | n | program | new alpha, us | one alpha, us | new / one |",
            "|---|---|---|---|---|---|"]
    out += [f"| {a['dtype']} | 2^{a['log2']} | {a['program']} | {a['new_us']:.2f} "
            f"| {a['fixed_us']:.2f} | {a['new_us'] / a['fixed_us']:.3f} |"
            for a in r["new_alpha"]]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", help="elu-bench")
    ap.add_argument("top", nargs="?", type=int, default=28,
                    help="log2 of the largest size (default 28)")
    ap.add_argument("bench_json", nargs="?",
                    help="elu-bench's --json output, to use rather than run it again")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the report's numbers there, as JSON (plot_peers.py "
                         "charts them)")
    args = ap.parse_args()
    report = collect(args.bench, args.top, args.bench_json)
    print(markdown(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
