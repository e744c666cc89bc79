"""PyTorch's F.elu next to a copy of the same bytes, the yardstick elu-bench
uses: medians of CUDA-event timings, real (random) data, same sizes.
    python3 examples/python/bench_torch.py [log2 of the largest size]
"""
import statistics
import sys

import torch


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
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"{'dtype':5} {'n':6} {'copy GB/s':>10} {'elu GB/s':>10} {'elu/cp':>8} {'bwd GB/s':>10} {'bwd/cp':>8}")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for lg in range(16, top + 1, 4):
            n = 1 << lg
            x = (torch.rand(n, device="cuda", dtype=torch.float32) * 64 - 32).to(dtype)
            g = torch.randn(n, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            nbytes = x.element_size() * n
            copy = median_ms(lambda: out.copy_(x))
            fwd = median_ms(lambda: torch.ops.aten.elu.out(x, 1.0, 1.0, 1.0, out=out))
            bwd = median_ms(lambda: torch.ops.aten.elu_backward.grad_input(
                g, 1.0, 1.0, 1.0, False, x, grad_input=out))
            gb = lambda b, ms: b / ms / 1e6
            name = str(dtype).replace("torch.", "")
            print(f"{name:5} 2^{lg:<4} {gb(2 * nbytes, copy):10.1f} {gb(2 * nbytes, fwd):10.1f} "
                  f"{copy / fwd:8.3f} {gb(3 * nbytes, bwd):10.1f} {gb(3 * nbytes, bwd) / gb(2 * nbytes, copy):8.3f}")


if __name__ == "__main__":
    main()
