"""Fair share: decayed usage history and weighted dominant-resource shares."""

from __future__ import annotations

import math
from collections.abc import Mapping

LN2 = math.log(2.0)


def decay_factor(dt: float, half_life_s: float) -> float:
    if half_life_s <= 0:
        return 0.0
    return float(0.5 ** (max(dt, 0.0) / half_life_s))


def integrate(value: float, as_of: float, rate: float, now: float, half_life_s: float) -> float:
    """Decayed GPU-seconds at ``now`` given ``value`` at ``as_of`` and a constant ``rate`` of GPUs since."""
    dt = max(now - as_of, 0.0)
    f = decay_factor(dt, half_life_s)
    if half_life_s <= 0:
        return 0.0
    return value * f + rate * (half_life_s / LN2) * (1.0 - f)


def history_share(decayed_gpu_seconds: float, total_gpus: int, half_life_s: float) -> float:
    """Decayed usage as a fraction of the cluster: equals the steady allocated fraction in the limit."""
    if total_gpus <= 0 or half_life_s <= 0:
        return 0.0
    return decayed_gpu_seconds * LN2 / (half_life_s * total_gpus)


def dominant_share(alloc: Mapping[str, int], totals: Mapping[str, int]) -> float:
    """Largest fraction of any resource the allocation holds."""
    best = 0.0
    for res, amount in alloc.items():
        total = totals.get(res, 0)
        if amount > 0 and total > 0:
            best = max(best, amount / total)
    return best


def weighted_share(alloc: Mapping[str, int], totals: Mapping[str, int], history: float, weight: float) -> float:
    """What fair-share ordering compares: (current dominant share + history share) / weight."""
    return (dominant_share(alloc, totals) + history) / max(weight, 1e-9)
