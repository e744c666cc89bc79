"""Charts the forward's throughput against the input's size for libelu,
PyTorch, Triton and CuPy, one column per dtype, from the numbers that
peers.py writes with --json.

Each program times its ELU against its own copy of the same bytes (eager
calls, the first table of peers.py's report). The top row puts those shares
on one scale: GB/s at the bandwidth of elu-bench's copy (cuMemcpyDtoDAsync)
of the same bytes, drawn dashed. The bottom row shows the shares themselves.
    python3 examples/python/plot_peers.py peers.json docs/bandwidth.png
        [--dtypes f32,f64,f16,bf16]
Needs matplotlib.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)

PROGRAMS = [("libelu_fwd", "libelu", dict(color="C0", linewidth=2.4, marker="o", zorder=3)),
            ("torch_fwd", "PyTorch", dict(color="C1", marker="s")),
            ("triton_fwd", "Triton", dict(color="C2", marker="^")),
            ("cupy_fwd", "CuPy", dict(color="C3", marker="v"))]


def column(rows, dtype):
    """(sizes, copy GB/s, {key: shares}) for one dtype, by size."""
    rows = sorted((r for r in rows if r["dtype"] == dtype), key=lambda r: r["log2"])
    sizes = [2 ** r["log2"] for r in rows]
    return sizes, [r["copy_gbs"] for r in rows], {k: [r[k] for r in rows] for k, _, _ in PROGRAMS}


def present(xs, ys):
    """The points where the program ran (CuPy has no bfloat16)."""
    pairs = [(x, y) for x, y in zip(xs, ys) if y is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="peers.py's --json output")
    ap.add_argument("png", help="the chart to write")
    ap.add_argument("--dtypes", default="f32,f64,f16,bf16")
    args = ap.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    dtypes = [d for d in args.dtypes.split(",") if any(r["dtype"] == d for r in report["eager"])]
    fig, axes = plt.subplots(2, len(dtypes), figsize=(4.2 * len(dtypes), 8), sharex=True,
                             squeeze=False)
    for col, dtype in enumerate(dtypes):
        sizes, copy, shares = column(report["eager"], dtype)
        top, bottom = axes[0][col], axes[1][col]
        top.plot(sizes, copy, color="0.6", linestyle="--", label="copy (elu-bench)")
        for key, name, style in PROGRAMS:
            xs, ys = present(sizes, [None if s is None else s * c
                                     for s, c in zip(shares[key], copy)])
            top.plot(xs, ys, label=name, **style)
            bottom.plot(*present(sizes, shares[key]), label=name, **style)
        top.set_title(f"{dtype} forward")
        top.set_yscale("log")
        top.set_ylabel("GB/s (read + written)")
        bottom.axhline(1.0, color="0.6", linestyle="--")
        bottom.set_ylim(0, 1.25)
        bottom.set_ylabel("share of the program's own copy")
        bottom.set_xlabel("elements")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes[::2])
            ax.set_xticklabels([f"$2^{{{s.bit_length() - 1}}}$" for s in sizes[::2]])
            ax.grid(True, which="major", alpha=0.3)
    axes[0][0].legend(loc="upper left", fontsize="small")
    fig.suptitle(f"ELU forward, eager calls, on {report['device']} (sm_{report['sm']}); "
                 f"PyTorch {report['torch']}", fontsize="large")
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)


if __name__ == "__main__":
    main()
