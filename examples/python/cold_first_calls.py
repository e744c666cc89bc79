"""Cold first calls: a new process with an empty cache, libelu's first
elu_run of 2^20 elements, synchronized (`elu-bench --first-call`, which
also makes the context), against CuPy's first call of an ELU
ElementwiseKernel on as many f32 elements, its own caches empty too. The
cases interleave, round after round, each in a process of its own; every
libelu case takes constants new to the machine. One or more builds, so
that two can be compared in the same run:
    python3 examples/python/cold_first_calls.py [--rounds N] BUILD_DIR...
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CUPY = """
import time, cupy
x = cupy.random.rand(1 << 20, dtype=cupy.float32); cupy.cuda.Device().synchronize()
k = cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = x > 0 ? x : 0.9f * expm1f(x)', 'elu_first')
t = time.perf_counter(); y = k(x); cupy.cuda.Device().synchronize()
print((time.perf_counter() - t) * 1e3)
"""
DTYPES = {"f32": 0, "f64": 1, "f16": 2, "bf16": 3}


def first_call(case, alpha, env):
    build, dtype = case
    if build is None:
        out = subprocess.run([sys.executable, "-c", CUPY], env=env, capture_output=True,
                             text=True, check=True)
        return float(out.stdout.split()[-1])
    cmd = [os.path.join(build, "bench", "elu-bench"), "--first-call", env["XDG_CACHE_HOME"],
           str(DTYPES[dtype]), "0", repr(alpha)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[1])  # ctx_ms run_ms compiles disk_hits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("builds", nargs="+")
    args = ap.parse_args()
    cases = [(b, d) for d in DTYPES for b in args.builds] + [(None, None)]
    times = {c: [] for c in cases}
    for r in range(args.rounds):
        for i, case in enumerate(cases):
            with tempfile.TemporaryDirectory() as d:
                env = dict(os.environ, CUDA_CACHE_PATH=os.path.join(d, "nv"), CUPY_CACHE_DIR=d,
                           XDG_CACHE_HOME=d)
                times[case].append(first_call(case, 0.5 + 0.001 * (r * len(cases) + i), env))
    cupy = statistics.median(times[(None, None)])
    print("cupy          %8.2f ms" % cupy)
    for case in cases[:-1]:
        m = statistics.median(times[case])
        print("%-8s %-4s %8.2f ms  %.3f of CuPy's  (all: %s)" % (
            case[0], case[1], m, m / cupy, " ".join("%.1f" % v for v in times[case])))


if __name__ == "__main__":
    main()
