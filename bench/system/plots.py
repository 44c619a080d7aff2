"""``muster bench ... --plot FILE``: one PNG of the measured scenarios (matplotlib, Agg backend).

Three panels: jobs decided over time per scenario (the slope is the admission rate; dashed, the pace offered),
submit -> decision latency over time (median and p99 per time slice: a queue building up shows as a rising
line where the table only has one percentile), and p50 / p95 / p99 per scenario side by side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bench.system.measure import percentile
from bench.system.observe import Series

SLICES = 40  # time slices of the latency-over-time panel


def _sliced(series: Series) -> tuple[list[float], list[float], list[float]]:
    """Per time slice of the submissions: its middle, and the p50 and p99 of its jobs' latencies (ms)."""
    pairs = [(s, (d - s) * 1000) for s, d in zip(series.submitted, series.decided, strict=True) if not math.isnan(d)]
    if not pairs:
        return [], [], []
    end = max(s for s, _ in pairs) or 1.0
    width = end / SLICES
    mids, p50, p99 = [], [], []
    for k in range(SLICES):
        lo, hi = k * width, (k + 1) * width
        chunk = [ms for s, ms in pairs if lo <= s < hi or (k == SLICES - 1 and s == end)]
        if chunk:
            mids.append((lo + hi) / 2)
            p50.append(percentile(chunk, 50))
            p99.append(percentile(chunk, 99))
    return mids, p50, p99


def write_plot(series: Sequence[Series], path: str | Path, title: str) -> None:
    """Write the three panels of ``series`` to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (decided_ax, latency_ax, spread_ax) = plt.subplots(3, 1, figsize=(11, 11))
    colors = [plt.get_cmap("tab10")(i % 10) for i in range(len(series))]
    for color, s in zip(colors, series, strict=True):
        times = sorted(d for d in s.decided if not math.isnan(d))
        if times:
            decided_ax.step(times, range(1, len(times) + 1), where="post", color=color,
                            label=f"{s.name} ({len(times):,} decided)")
        if s.offered_per_s and s.submitted:
            end = s.submitted[-1]
            decided_ax.plot([0, end], [0, end * s.offered_per_s], color=color, linestyle="--", linewidth=0.8)
        mids, p50, p99 = _sliced(s)
        # markers: a burst's submissions all fall in a few slices near 0, where a bare line would vanish
        latency_ax.plot(mids, p50, color=color, marker="o", markersize=3, label=f"{s.name} p50")
        latency_ax.plot(mids, p99, color=color, linestyle=":", marker="^", markersize=3, label=f"{s.name} p99")
    decided_ax.set_title(f"{title}: jobs decided since each scenario's first submission (dashed: offered pace)")
    decided_ax.set_xlabel("seconds since the scenario's first submission")
    decided_ax.set_ylabel("jobs decided")
    decided_ax.legend(loc="lower right", fontsize="small")
    latency_ax.set_title("submit -> decision latency over the scenario (per time slice of submissions)")
    latency_ax.set_xlabel("submitted at (seconds since the scenario's first submission)")
    latency_ax.set_ylabel("ms")
    latency_ax.set_yscale("log")
    latency_ax.legend(loc="upper left", fontsize="x-small", ncol=2)

    names = [s.name for s in series]
    width = 0.27
    for offset, (q, shade) in enumerate(((50, 0.35), (95, 0.6), (99, 0.85))):
        values = [percentile(s.latencies(), q) * 1000 if s.latencies() else 0.0 for s in series]
        spread_ax.bar([i + (offset - 1) * width for i in range(len(series))], values, width,
                      color=plt.get_cmap("Blues")(shade), label=f"p{q}")
    spread_ax.set_xticks(range(len(series)), names)
    spread_ax.set_title("submit -> decision latency per scenario")
    spread_ax.set_ylabel("ms")
    spread_ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
