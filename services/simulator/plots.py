"""Figures of simulation runs (matplotlib, Agg backend, written straight to a file).

One figure per call: a stacked GPU-allocation-over-time panel per queue for each run, then one panel
with the queueing-delay CDF and one with the job-completion-time (JCT) CDF of every run, so several
policies compare side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from services.simulator.engine import SimResult, queue_names
from services.simulator.report import completed, jct, queue_delays


def allocation_series(result: SimResult) -> tuple[list[float], dict[str, list[float]]]:
    """Step series of GPUs held per queue: sample times and, per queue, GPUs held from each time on."""
    queues = queue_names(result)
    held: dict[str, float] = dict.fromkeys(queues, 0)
    times: list[float] = []
    series: dict[str, list[float]] = {q: [] for q in queues}
    for at, queue, delta in sorted(result.timeline, key=lambda e: e[0]):
        held[queue] = held.get(queue, 0) + delta
        if times and times[-1] == at:
            for q in queues:
                series[q][-1] = held[q]
            continue
        times.append(at)
        for q in queues:
            series[q].append(held[q])
    return times, series


def write_plot(results: Sequence[SimResult], path: str | Path) -> None:
    """Write the allocation panels and the queueing-delay CDF of ``results`` to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(results) + 2
    fig, axes = plt.subplots(rows, 1, figsize=(11, 3.2 * rows), squeeze=False)
    for ax, result in zip(axes[:-2, 0], results, strict=True):
        times, series = allocation_series(result)
        if times:
            hours = np.asarray(times) / 3600.0
            colors = [plt.get_cmap("tab20")(i % 20) for i in range(len(series))]
            ax.stackplot(hours, *series.values(), labels=list(series), colors=colors, step="post")
        ax.axhline(result.capacity_gpus, color="black", linewidth=0.8, linestyle="--", label="capacity")
        ax.set_title(f"GPUs allocated per queue: {result.policy}")
        ax.set_xlabel("time (h)")
        ax.set_ylabel("GPUs")
        ax.legend(loc="upper right", fontsize="x-small", ncol=4)
    cdfs = (
        (axes[-2, 0], queue_delays, "Queueing delay CDF (delays under 1 s drawn at 1 s)", "queueing delay (s)"),
        (axes[-1, 0], lambda r: [jct(rec) for rec in completed(list(r.records.values()))],
         "Job completion time CDF, completed jobs (under 1 s drawn at 1 s)", "job completion time (s)"),
    )
    for cdf, values_of, title, label in cdfs:
        for result in results:
            values = np.sort(np.asarray(values_of(result), dtype=float))
            if values.size == 0:
                continue
            fraction = np.arange(1, values.size + 1) / values.size
            cdf.step(np.maximum(values, 1.0), fraction, where="post", label=result.policy)
        cdf.set_xscale("log")
        cdf.set_title(title)
        cdf.set_xlabel(label)
        cdf.set_ylabel("fraction of jobs")
        cdf.set_ylim(0.0, 1.0)
        cdf.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
