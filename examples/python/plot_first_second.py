"""Charts the first second of a process from the JSON that first_second.py
writes: each ELU forward call's throughput as a share of a copy of the
same bytes, against the time since libelu's first call, libelu's calls and
PyTorch's in the same process; one row per cache state (cold, warm), one
column per dtype.
    python3 examples/python/plot_first_second.py first_second.json docs/first_second.png
Needs matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)


def main():
    report = json.load(open(sys.argv[1]))
    dtypes = list(dict.fromkeys(t["dtype"] for t in report))
    states = ["cold", "warm"]
    fig, axes = plt.subplots(len(states), len(dtypes), figsize=(6 * len(dtypes), 6.5),
                             sharex=True, sharey=True, squeeze=False)
    for t in report:
        ax = axes[states.index(t["cache"])][dtypes.index(t["dtype"])]
        for who, style in (("pytorch", dict(color="C1", s=3, label="PyTorch F.elu")),
                           ("libelu", dict(color="C0", s=3, label="libelu"))):
            calls = [c for c in t["calls"] if c["who"] == who]
            ax.scatter([c["t_s"] * 1e3 for c in calls], [c["share_of_copy"] for c in calls],
                       **style)
        ax.axhline(0.9, color="gray", linewidth=0.8, linestyle="--")
        ax.set_title(f"{t['dtype']}, {t['cache']} disk cache")
        ax.set_ylim(0, 1.1)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("ms since libelu's first call (2^24 elements a call)")
    for row in axes:
        row[0].set_ylabel("share of a copy of the same bytes")
    axes[0][0].legend(loc="lower right", markerscale=4)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
