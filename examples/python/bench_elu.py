"""The tutorial's benchmark done properly: libelu (through its Python
package) against PyTorch's native ELU and a copy of the same bytes, timed
with CUDA events (medians), on real data, for every dtype.
    LIBELU_LIBRARY=build/libelu.so PYTHONPATH=src/python \\
        python3 examples/python/bench_elu.py [log2 of the largest size]
Through Python each call also pays the DLPack exchange (a few microseconds),
so small sizes measure that; elu-bench measures the C API alone.
"""
import statistics
import sys

import torch

import libelu


def median_ms(fn, reps=15, batch=10):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 28
    print(f"torch {torch.__version__}, libelu {libelu.version()} on {torch.cuda.get_device_name()}")
    print(f"{'dtype':9} {'n':5} {'copy GB/s':>10} {'torch/cp':>9} {'libelu/cp':>10} "
          f"{'torch bwd/cp':>13} {'libelu bwd/cp':>14}")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for lg in range(16, top + 1, 4):
            n = 1 << lg
            x = (torch.rand(n, device="cuda") * 64 - 32).to(dtype)
            g = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            nbytes = x.element_size() * n
            copy = median_ms(lambda: out.copy_(x))
            torch_fwd = median_ms(lambda: torch.ops.aten.elu.out(x, 1.0, 1.0, 1.0, out=out))
            ours_fwd = median_ms(lambda: libelu.elu(x, out=out))
            torch_bwd = median_ms(lambda: torch.ops.aten.elu_backward.grad_input(
                g, 1.0, 1.0, 1.0, False, x, grad_input=out))
            ours_bwd = median_ms(lambda: libelu.elu_backward(g, x, out=out))
            name = str(dtype).replace("torch.", "")
            # Backward moves 3 streams to the copy's 2.
            print(f"{name:9} 2^{lg:<3} {2 * nbytes / copy / 1e6:10.1f} {copy / torch_fwd:9.3f} "
                  f"{copy / ours_fwd:10.3f} {1.5 * copy / torch_bwd:13.3f} {1.5 * copy / ours_bwd:14.3f}")


if __name__ == "__main__":
    main()
