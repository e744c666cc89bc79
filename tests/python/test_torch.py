"""libelu.torch and the operators libelu::elu, elu_ and elu_backward:
torch.library's opcheck for every dtype, torch.compile without graph
breaks and with eager's bits, autograd as aten's (gradcheck, aten's
gradients from the same saved values, in place), autocast, views, the
paths past the dispatcher and through it; on the CPU, and on CUDA where
there is a GPU (the rest skip)."""
import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

import libelu  # noqa: E402
import libelu.torch as lt  # noqa: E402
from libelu.torch import CELU, ELU, SELU  # noqa: E402

HAVE_CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAVE_CUDA, reason="needs a CUDA device"))]
cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs a CUDA device")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SELU_CONSTANTS = (libelu.SELU_ALPHA, libelu.SELU_SCALE, 1.0)
CONSTANTS = [(1.0, 1.0, 1.0), (0.5, 1.0, 1.0), SELU_CONSTANTS, (0.6, 1.0, 1 / 0.6)]
OPS = torch.ops.libelu


def values(shape, dtype=torch.float32, device="cpu", seed=0, specials=True):
    """Normal values times 3, with -0.0, 0.0 and -inf first where
    `specials`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3
    if specials:
        flat = x.view(-1)
        flat[:3] = torch.tensor([-0.0, 0.0, -float("inf")])[:flat.numel()]
    return x.to(dtype=dtype, device=device)


def finite(shape, dtype=torch.float32, device="cpu", seed=0):
    """values() away from 0 (where elu has no derivative) and infinities,
    for the checks that compare gradients numerically."""
    x = values(shape, dtype, device, seed, specials=False)
    return torch.where(x.abs() < 0.05, torch.full_like(x, 0.25), x)


def bits(t):
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def assert_bitwise(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    same = (bits(got) == bits(want)) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), f"{int((~same).sum())} of {got.numel()} elements differ"


def aten_grad(grad, saved, constants, is_result):
    return torch.ops.aten.elu_backward(grad, *constants, is_result, saved)


def assert_aten_gradient(got, want):
    """A gradient against aten's from the same saved values. On CUDA
    libelu's backward is aten's, bit for bit. On the CPU it is computed in
    a wider type and rounded once, where aten's CPU kernel rounds each step
    in the type (and differs from aten's CUDA kernel): f32 and f64 within
    about 8 of the type's epsilons, relative, the half types an ulp."""
    if got.is_cuda:
        assert_bitwise(got, want)
        return
    eps = torch.finfo(got.dtype).eps
    rtol = 2 * eps if got.element_size() == 2 else 32 * eps
    torch.testing.assert_close(got, want, rtol=rtol, atol=torch.finfo(got.dtype).tiny,
                               equal_nan=True)


# ---- the operators, as torch.library checks them ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_opcheck(device, dtype):
    """Schema (what elu_ mutates), fake kernels, autograd registration and
    AOT dispatch, for each operator, on plain and strided inputs."""
    for x in (finite((6, 5), dtype, device), finite((5, 6), dtype, device).t()):
        x.requires_grad_()
        g = finite(x.shape, dtype, device, seed=1).requires_grad_()
        y = OPS.elu(x.detach(), 0.7, 1.1, 0.9).requires_grad_()
        torch.library.opcheck(OPS.elu.default, (x, 0.7, 1.1, 0.9))
        torch.library.opcheck(OPS.elu_backward.default, (g, x, 0.7, 1.1, 0.9, False))
        torch.library.opcheck(OPS.elu_backward.default, (g, y, 0.7, 1.1, 0.9, True))
        torch.library.opcheck(OPS.elu_.default, (x * 1, 0.7, 1.1, 0.9))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_operators_are_libelu_and_aten(device, dtype):
    """The operators are libelu's functions (the forward the CPU path's
    bits on the GPU too); the backward aten's elu_backward from the input
    and from the output (assert_aten_gradient)."""
    x = values((4096,), dtype, device)
    g = values((4096,), dtype, device, seed=1)
    for constants in CONSTANTS:
        y = OPS.elu(x, *constants)
        assert_bitwise(y.cpu(), libelu.elu(x.cpu(), *constants))
        for is_result, saved in ((False, x), (True, y)):
            got = OPS.elu_backward(g, saved, *constants, is_result)
            assert_bitwise(got, libelu.elu_backward(g, saved, *constants, is_result))
            assert_aten_gradient(got, aten_grad(g, saved, constants, is_result))
        z = x.clone()
        assert OPS.elu_(z, *constants) is None
        assert_bitwise(z, y)


def test_fake_kernels_refuse_what_the_kernels_refuse():
    with torch._subclasses.fake_tensor.FakeTensorMode():
        with pytest.raises(TypeError, match="^x has dtype int32"):
            OPS.elu(torch.zeros(3, dtype=torch.int32))
        with pytest.raises(ValueError, match="^saved .* does not match grad_output"):
            OPS.elu_backward(torch.zeros(3), torch.zeros(4))
        assert OPS.elu(torch.empty(5, 3).t()).stride() == (1, 3)


def test_kernels_are_cpp_where_torch_ext_loaded():
    """With libelu._torch_ext the CPU and CUDA kernels and the autograd of
    elu and elu_backward are its C++ ones, which run no Python per call;
    without it, the Python ones."""
    for name in ("elu", "elu_backward"):
        dump = torch._C._dispatch_dump(f"libelu::{name}").splitlines()
        for key in ("CPU", "CUDA", "Autograd[alias]"):
            (line,) = [entry for entry in dump if entry.startswith(key + ":")]
            assert ("torch_ops.cpp" in line) == (libelu._torch_ext is not None), line


@pytest.mark.parametrize("device", DEVICES)
def test_kernels_leave_the_rest_to_python(device):
    """What the library refuses comes back as the Python kernels word it,
    in Python's types (libelu.EluError for a view beyond its rank), also
    from a backward on autograd's threads, which run without the GIL. (A
    negative view the dispatcher resolves before any kernel.)"""
    x = values((64,), device=device)
    g = values((64,), device=device, seed=1)
    assert_bitwise(OPS.elu(x._neg_view(), 0.5), libelu.elu(-x, 0.5))
    with pytest.raises(TypeError, match="^x has dtype int32"):
        OPS.elu(torch.zeros(3, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="^saved .* does not match grad_output"):
        OPS.elu_backward(g, x[:3])
    with pytest.raises(ValueError, match="^alpha must be finite"):
        OPS.elu(x, float("nan"))
    with pytest.raises(libelu.EluError, match="rank 10"):
        OPS.elu(torch.zeros([2] * 10, device=device).transpose(0, 9))
    xg = x.clone().requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t[:3]):
        y = OPS.elu(xg, 0.5)
    with pytest.raises(ValueError, match="^saved .* does not match grad_output"):
        y.backward(g)


def test_forward_mode_ad_is_refused():
    """libelu's nodes have no forward-mode rule: a tangent is refused
    (NotImplementedError), not dropped, where libelu._torch_ext is built."""
    if lt._eager is None:
        pytest.skip("libelu._torch_ext is not built")
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # make_dual's first use of torch.jit
        x = fwad.make_dual(values((8,)), values((8,), seed=1))
        for call in (OPS.elu, lt.elu, ELU(),
                     lambda t: OPS.elu_backward(t, values((8,)))):
            with pytest.raises(NotImplementedError, match="forward-mode"):
                call(x)


# ---- autograd ----

@pytest.fixture(params=["C++", "Python"])
def each_autograd(request, monkeypatch):
    """Eager calls that need gradients through libelu._torch_ext's autograd
    node where not in place (skipped where it is not built), then through
    ELUFunction alone."""
    if request.param == "Python":
        monkeypatch.setattr(lt, "_eager", None)
    elif lt._eager is None:
        pytest.skip("libelu._torch_ext is not built")


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(each_autograd, device):
    x = finite((40,), torch.float64, device).requires_grad_()
    calls = {
        "op": lambda t: OPS.elu(t, 0.7, 1.05, 0.8),
        "elu": lambda t: lt.elu(t, 0.7, 1.05, 0.8),
        "elu in place": lambda t: lt.elu(t * 1, 0.7, 1.05, 0.8, inplace=True),
        "negative alpha": lambda t: lt.elu(t, -0.3, 1.05, 0.8),
        "ELU": ELU(0.5), "SELU": SELU(), "CELU": CELU(1.5),
        "ELU in place": lambda t: ELU(0.5, inplace=True)(t * 1),
    }
    for name, call in calls.items():
        assert torch.autograd.gradcheck(call, (x,)), name
        assert torch.autograd.gradgradcheck(call, (x,)), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradients_are_nn_modules(each_autograd, device, dtype):
    """From the same saved values the gradients are torch.nn's
    (assert_aten_gradient): the input (as nn.ELU, SELU and CELU save it),
    or in place the output (libelu's, which nn.ELU's in place would
    save)."""
    pairs = [(ELU(0.5), torch.nn.ELU(0.5)), (SELU(), torch.nn.SELU()),
             (CELU(1.5), torch.nn.CELU(1.5))]
    g = values((3000,), dtype, device, seed=1)
    for ours, theirs in pairs:
        a = values((3000,), dtype, device).requires_grad_()
        b = a.detach().clone().requires_grad_()
        ours(a).backward(g)
        theirs(b).backward(g)
        assert_aten_gradient(a.grad, b.grad)
    a = values((3000,), dtype, device).requires_grad_()
    y = ELU(0.7, inplace=True)(a * 1)
    y.backward(g)
    assert_bitwise(a.grad, libelu.elu_backward(g, y.detach(), 0.7, is_result=True))
    assert_aten_gradient(a.grad, aten_grad(g, y.detach(), (0.7, 1.0, 1.0), True))


def test_in_place(each_autograd):
    """x itself, its version bumped, autograd through the output; alpha < 0
    only without gradients; leaves that need gradients refused, as nn.ELU
    refuses them."""
    base = values((1000,))
    x = base.clone()
    version = x._version
    assert ELU(0.5, inplace=True)(x) is x
    assert x._version > version
    assert_bitwise(x, libelu.elu(base, 0.5))
    x = base.clone()
    version = x._version
    OPS.elu_(x, 0.5)
    assert x._version > version
    assert_bitwise(x, libelu.elu(base, 0.5))
    for negative in (ELU(-0.5, inplace=True), lambda t: lt.elu(t, -0.5, inplace=True)):
        with pytest.raises(ValueError, match="in-place ELU needs alpha >= 0"):
            negative(base.clone().requires_grad_() * 1)
        with torch.no_grad():
            x = base.clone().requires_grad_()
            negative(x)
        assert_bitwise(x.detach(), libelu.elu(base, -0.5))
    leaf = base.clone().requires_grad_()
    for call in (ELU(inplace=True), torch.nn.ELU(inplace=True), lambda t: OPS.elu_(t, 1.0)):
        for target in (leaf, leaf[:10]):  # refused before any write
            with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
                call(target)
    assert_bitwise(leaf.detach(), base)
    with torch.inference_mode():
        inference = base.clone()
    for module in (ELU(inplace=True), torch.nn.ELU(inplace=True), OPS.elu_):
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            module(inference)


def test_saved_output_changed_in_place_is_caught(each_autograd):
    """As with aten's ops: a tensor autograd saved, changed in place after,
    fails the backward rather than giving a wrong gradient."""
    x = values((100,)).requires_grad_()
    y = torch.exp(x)  # saves its output
    ELU(inplace=True)(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_views(each_autograd, device):
    """Transposes, steps, expanded and flipped inputs, and in place on a
    strided view: the values of the same elements in a plain tensor, and
    their gradients."""
    base = values((64, 48), torch.float32, device)
    views = [lambda t: t.t(), lambda t: t[::3, 1::2], lambda t: t[5].expand(7, 48),
             lambda t: t.flip(0), lambda t: t.reshape(8, 8, 48).permute(2, 0, 1)[:, ::2]]
    for view in views:
        a = base.clone().requires_grad_()
        y = ELU(0.6)(view(a))
        assert_bitwise(y, ELU(0.6)(view(base).contiguous()))
        g = values(y.shape, torch.float32, device, seed=2)
        y.backward(g)
        b = base.clone().requires_grad_()
        torch.nn.ELU(0.6)(view(b)).backward(g)
        assert_aten_gradient(a.grad, b.grad)
    x = base.clone()
    ELU(0.6, inplace=True)(x[:, ::2])
    assert_bitwise(x[:, ::2], libelu.elu(base[:, ::2].contiguous(), 0.6))
    assert_bitwise(x[:, 1::2], base[:, 1::2])


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_autograd_takes_any_gradient(device):
    """libelu._torch_ext's node: what it is, and the backward from
    gradients of any layout (sum()'s expanded one, a transpose), from a
    backward that is differentiated, and from tensors on a dispatch mode's
    watch: aten's gradients throughout."""
    if lt._eager is None:
        pytest.skip("libelu._torch_ext is not built")
    base = values((40, 30), torch.float64, device)
    a, b = base.clone().requires_grad_(), base.clone().requires_grad_()
    ours, theirs = ELU(0.6)(a), torch.nn.ELU(0.6)(b)
    assert "EluFunction" in ours.grad_fn.name()
    ours.sum().backward()
    theirs.sum().backward()
    assert_aten_gradient(a.grad, b.grad)
    g = values((30, 40), torch.float64, device, seed=4).t()
    (ga,) = torch.autograd.grad(ELU(0.6)(a), a, g, create_graph=True)
    (gb,) = torch.autograd.grad(torch.nn.ELU(0.6)(b), b, g, create_graph=True)
    assert_aten_gradient(ga, gb)
    assert_aten_gradient(torch.autograd.grad(ga.sum(), a)[0],
                         torch.autograd.grad(gb.sum(), b)[0])
    y = ELU(0.6)(a)
    with Recorder() as recorder:
        y.backward(g)
    assert "libelu.elu_backward.default" in recorder.seen


def test_in_place_with_gradients_holds_nothing(each_autograd):
    """In place on a view, with gradients and no backward, leaves no cycle
    that keeps the base alive; `inplace` is taken for its truth, as
    torch.nn.ELU takes it."""
    import weakref
    base = values((64, 64)).requires_grad_()
    h = base * 1
    ELU(inplace=1)(h[:, ::2])
    alive = weakref.ref(h)
    del h
    assert alive() is None
    for inplace in (0, None):
        assert ELU(inplace=inplace)(base) is not base


# ---- the two ways a call goes: straight to libelu, or through the operators ----

class Recorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Every operator call it sees, by name."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def test_modes_see_the_operators(each_autograd):
    """Under a dispatch mode (a profiler's, a tracer's) PyTorch sees each
    call as an operator; the results are those of eager calls."""
    x = values((500,)).requires_grad_()
    g = values((500,), seed=1)
    eager = SELU()(x)
    eager.backward(g)
    eager_grad = x.grad.clone()
    x.grad = None
    in_place = x.detach().clone().requires_grad_()
    ELU(0.7, inplace=True)(in_place * 1).backward(g)
    with Recorder() as recorder:
        y = SELU()(x)
        y.backward(g)
        z = x.detach().clone()
        ELU(inplace=True)(z)
        w = x.detach().clone().requires_grad_()
        ELU(0.7, inplace=True)(w * 1).backward(g)
    assert_bitwise(w.grad, in_place.grad)
    assert "libelu.elu.default" in recorder.seen
    assert "libelu.elu_backward.default" in recorder.seen
    assert "libelu.elu_.default" in recorder.seen
    assert_bitwise(y.detach(), eager.detach())
    assert_bitwise(x.grad, eager_grad)
    assert_bitwise(z, ELU()(x.detach()))


def test_operators_alone_give_the_same_results(monkeypatch):
    """Eager calls through the operators (as where direct() cannot be
    asked) and straight to libelu: the same outputs and gradients."""
    def run():
        x = values((300,)).requires_grad_()
        g = values((300,), seed=1)
        outs = []
        for module in (ELU(0.5), SELU(), CELU(1.5), ELU(0.7, inplace=True)):
            y = module(x * 1)
            (grad,) = torch.autograd.grad(y, x, g)
            outs += [y.detach(), grad]
        return outs
    straight = run()
    monkeypatch.setattr(lt._torch_ops, "direct", lt._torch_ops._never_direct)
    for a, b in zip(run(), straight):
        assert_bitwise(a, b)


def test_vmap():
    """torch.func.vmap through the operators' batching rules, batched along
    any dimension, in place too. (torch.func's gradient transforms do not
    take operators whose autograd is torch.library.register_autograd's;
    torch.autograd does.)"""
    x, g = values((6, 5), torch.float64), values((6, 5), torch.float64, seed=1)
    assert_bitwise(torch.func.vmap(ELU(0.5))(x), libelu.elu(x, 0.5))
    assert_bitwise(torch.func.vmap(SELU(), in_dims=1, out_dims=1)(x), libelu.selu(x))
    backward = torch.func.vmap(lambda a, b: OPS.elu_backward(a, b, 0.5), in_dims=(None, 1))
    assert_bitwise(backward(g[0], x.t().contiguous()),
                   libelu.elu_backward(g[0].expand(6, 5).contiguous(), x, 0.5))
    z = x.clone()
    torch.func.vmap(ELU(0.5, inplace=True), in_dims=1)(z)
    assert_bitwise(z, libelu.elu(x, 0.5))


def test_export_records_the_operators():
    program = torch.export.export(torch.nn.Sequential(ELU(0.5), CELU(2.0, inplace=True)),
                                  (values((4, 10)),))
    assert "libelu.elu.default" in str(program.graph)
    x = values((4, 10), seed=3)
    assert_bitwise(program.module()(x), libelu.celu(libelu.elu(x, 0.5), 2.0))


@pytest.mark.filterwarnings("ignore:`torch.jit.trace")
def test_jit_trace_records_the_operator():
    traced = torch.jit.trace(ELU(0.5), values((10,)))
    assert "libelu::elu" in str(traced.graph)
    x = values((10,), seed=3)
    assert_bitwise(traced(x), libelu.elu(x, 0.5))


def test_elu_function_and_elu_autograd_still_work():
    x = values((100,), torch.float64).requires_grad_()
    y = lt.ELUFunction.apply(x, 0.5, 1.0, 1.0, False)
    y.backward(torch.ones_like(y))
    assert_bitwise(y.detach(), libelu.elu(x.detach(), 0.5))
    assert_bitwise(x.grad, libelu.elu_backward(torch.ones_like(x), x.detach(), 0.5))
    assert_bitwise(lt.elu_autograd(x, 0.5), y)


# ---- torch.compile ----

class Transpose(torch.nn.Module):
    def forward(self, x):
        return x.t()


def activations(device):
    """The three modules, in place too, through a view: nothing computes
    but libelu, so compiled calls must give eager's bits."""
    return torch.nn.Sequential(ELU(0.7), Transpose(), SELU(), CELU(1.3),
                               ELU(0.5, inplace=True)).to(device)


def mlp(device):
    """An MLP through the three modules. Its matrix products are PyTorch's
    and its bias gradients sums over the batch, which inductor may lay out
    or order otherwise than eager calls do: close, not bit for bit."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), ELU(0.7), torch.nn.Linear(32, 32), SELU(),
        torch.nn.Linear(32, 16), CELU(1.3), ELU(0.5, inplace=True),
    ).to(device)


CONSTANTS_USED = ((0.7, 1.0, 1.0), SELU_CONSTANTS, (1.3, 1.0, 1 / 1.3), (0.5, 1.0, 1.0))


def run_model(net, x, g):
    """The output and every gradient, from x and the output's gradient g
    (copies: CUDA graphs reuse their outputs' memory)."""
    net.zero_grad()
    x = x.clone().requires_grad_()
    y = net(x)
    y.backward(g)
    return [t.detach().clone() for t in (y, x.grad, *(p.grad for p in net.parameters()))]


def check_compiled(net, shape, device, exact, runs=2, **options):
    """Compiled by inductor with fullgraph=True: one graph, no break, over
    `runs` calls; outputs and gradients eager's bits where `exact`, else
    close to them."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    fast = torch.compile(net, fullgraph=True, **options)
    make = values if exact else finite  # an MLP's products of infinities are NaN
    for seed in range(runs):
        x = make(shape, device=device, seed=10 + seed)
        g = make(net(x).shape, device=device, seed=20 + seed)
        for got, want in zip(run_model(fast, x, g), run_model(net, x, g)):
            if exact:
                assert_bitwise(got, want)
            else:
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    explained = torch._dynamo.explain(net)(make(shape, device=device))
    assert explained.graph_break_count == 0 and explained.graph_count == 1


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    check_compiled(activations(device), (64, 48), device, exact=True)
    check_compiled(mlp(device), (64, 16), device, exact=False)


@cuda
def test_compile_reduce_overhead():
    """CUDA graphs (mode="reduce-overhead"), the kernels loaded before
    capture (Context.prepare): replays give eager's bits."""
    context = libelu.default_context(torch.cuda.current_device())
    for constants in CONSTANTS_USED:
        context.prepare("float32", *constants)
    for net, shape, exact in ((activations("cuda"), (64, 48), True),
                              (mlp("cuda"), (64, 16), False)):
        check_compiled(net, shape, "cuda", exact, runs=4, mode="reduce-overhead")


# ---- autocast ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_runs_in_the_input_dtype(device, dtype):
    """As aten's elu, which autocast leaves in its input's dtype: after an
    autocast Linear (in `dtype`), and on float32 and float64 inputs."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 16).to(device)
    x = values((8, 16), device=device)
    for ours, theirs in ((ELU(0.5), torch.nn.ELU(0.5)), (SELU(), torch.nn.SELU())):
        with torch.autocast(device, dtype=dtype):
            h = linear(x)
            pairs = [(ours(h), theirs(h)), (ours(x), theirs(x)),
                     (ours(x.double()), theirs(x.double()))]
            mid = ours(h)
        for got, want in pairs:
            assert got.dtype == want.dtype
        assert mid.dtype == h.dtype == dtype
        assert_bitwise(mid, ours(h))  # as outside autocast


# ---- the DDP example ----

def test_ddp_example_matches_nn_elu():
    """examples/python/ddp_train.py under torchrun, two processes on the
    CPU (gloo): the loss curves with libelu.torch.ELU and torch.nn.ELU
    agree within its tolerance, or it exits non-zero."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                          "ddp_train.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         script, "--steps", "30", "--device", "cpu"],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loss curves agree" in done.stdout
