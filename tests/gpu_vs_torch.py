"""libelu's GPU results, bit for bit, on a CUDA machine with PyTorch, for
every dtype, ELU/SELU/CELU, random and special values: the backward (both
forms) against PyTorch's; the forward against libelu's CPU path, whose
results are exact (the half types correctly rounded, f32 and f64 within
1 ulp: tests/test_cpu_exhaustive.c) where PyTorch's are not, and
against the correctly rounded value for the half types. The forward's
differences from PyTorch are counted but allowed. Run by .ci/gpu-check;
prints one line per case and exits non-zero on any mismatch.
    python3 tests/gpu_vs_torch.py path/to/libelu.so
"""
import ctypes
import sys

import torch

DTYPES = [(0, torch.float32, torch.int32), (1, torch.float64, torch.int64),
          (2, torch.float16, torch.int16), (3, torch.bfloat16, torch.int16)]
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
CASES = [("elu(1)", 1.0, 1.0, 1.0), ("elu(0.3)", 0.3, 1.0, 1.0),
         ("selu", SELU_ALPHA, SELU_SCALE, 1.0), ("celu(0.6)", 0.6, 1.0, 1 / 0.6)]


class Params(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("alpha", ctypes.c_double),
                ("scale", ctypes.c_double), ("input_scale", ctypes.c_double)]


def inputs(dtype, n):
    x = torch.cat([torch.randn(n // 2, dtype=torch.float64) * 8,
                   torch.exp2(torch.rand(n - n // 2, dtype=torch.float64) * 50 - 40)
                   * torch.sign(torch.randn(n - n // 2, dtype=torch.float64))])
    specials = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0,
                             -1e-40, 1e-40, -1e-310, -100.0, -1e4, 1e4], dtype=torch.float64)
    return torch.cat([specials, x]).to(dtype).cuda()


def correctly_rounded(x, alpha, scale, iscale):
    """The forward of half-type x rounded once from a double-precision value
    (within 2^-52 of the exact one), with the constants rounded as the
    half types' arithmetic (float) rounds them."""
    f32 = lambda v: torch.tensor(v, dtype=torch.float32)
    neg, pos, nip = (f32(alpha) * f32(scale)).double(), f32(scale).double(), f32(iscale).double()
    x64 = x.double()
    v = torch.where(x64 > 0, x64 * pos, torch.expm1(x64 * nip) * neg)
    mant, emin = (10, -14) if x.dtype == torch.float16 else (7, -126)
    _, e = torch.frexp(v)
    quantum = torch.exp2((e - 1).clamp(min=emin).double() - mant)
    r = torch.where(torch.isfinite(v) & (v != 0), torch.round(v / quantum) * quantum, v)
    return r.to(x.dtype)  # exact: r is a value of the type (or beyond its range)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    ctx = ctypes.c_void_p()
    torch.zeros(1).cuda()  # the primary context, before libelu's
    if lib.elu_ctx_create(ctypes.byref(ctx), None) != 0:
        sys.exit("elu_ctx_create failed")
    lib.elu_ctx_last_error.restype = ctypes.c_char_p
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    bad = 0
    for code, dtype, itype in DTYPES:
        x, g = inputs(dtype, 1 << 20), torch.randn(1 << 20 | 11, dtype=dtype).cuda()
        for name, alpha, scale, iscale in CASES:
            p = Params(code, alpha, scale, iscale)
            y = torch.full_like(x, float("nan"))
            ref = torch.ops.aten.elu(x, alpha, scale, iscale)
            rc = lib.elu_run(ctx, ctypes.byref(p), ctypes.c_void_p(x.data_ptr()),
                             ctypes.c_void_p(y.data_ptr()), ctypes.c_size_t(x.numel()), stream)
            x_cpu, y_cpu = x.cpu(), torch.full(x.shape, float("nan"), dtype=dtype)
            rc_cpu = lib.elu_run(ctx, ctypes.byref(p), ctypes.c_void_p(x_cpu.data_ptr()),
                                 ctypes.c_void_p(y_cpu.data_ptr()), ctypes.c_size_t(x.numel()), None)
            results = [("forward", rc or rc_cpu, y, y_cpu.cuda())]
            if x.dtype in (torch.float16, torch.bfloat16):
                results.append(("forward (rounding)", rc, y, correctly_rounded(x, alpha, scale, iscale)))
            for is_result, saved in ((False, x), (True, ref)):
                dx = torch.full_like(x, float("nan"))
                ref_dx = torch.ops.aten.elu_backward(g, alpha, scale, iscale, is_result, saved)
                rc = lib.elu_run_backward(ctx, ctypes.byref(p), ctypes.c_void_p(g.data_ptr()),
                                          ctypes.c_void_p(saved.data_ptr()), ctypes.c_bool(is_result),
                                          ctypes.c_void_p(dx.data_ptr()),
                                          ctypes.c_size_t(x.numel()), stream)
                results.append(("backward(%s)" % ("output" if is_result else "input"), rc, dx, ref_dx))
            torch.cuda.synchronize()
            for what, rc, got, want in results:
                if rc != 0:
                    print(f"{dtype} {name} {what}: error {rc} {lib.elu_ctx_last_error(ctx)}")
                    bad += 1
                    continue
                both_nan = torch.isnan(got) & torch.isnan(want)
                differ = (got.view(itype) != want.view(itype)) & ~both_nan
                count = int(differ.sum())
                bad += count
                note = ""
                if what == "forward":
                    torch_differ = (got.view(itype) != ref.view(itype)) & ~(torch.isnan(got) & torch.isnan(ref))
                    note = f" from the CPU path's ({int(torch_differ.sum())} from PyTorch's)"
                print(f"{str(dtype):15} {name:10} {what:17} {count} of {x.numel()} differ{note}")
    lib.elu_ctx_destroy(ctx)
    print("bitwise equal: the forward to the CPU path's (and for the half types to the "
          "correctly rounded value), the backward to PyTorch's"
          if bad == 0 else f"{bad} differences")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
