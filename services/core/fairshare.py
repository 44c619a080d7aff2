"""Fair share: decayed usage history and weighted dominant-resource shares."""

from __future__ import annotations

import math
from collections.abc import Mapping

from .model import Amount

LN2 = math.log(2.0)

# Decay. A GPU held at time ``s`` weighs ``2 ** (-(t - s) / half_life)`` at time ``t``, so ``g`` GPUs held
# over ``[a, b]`` are worth ``g * tau * (exp(-(t - b) / tau) - exp(-(t - a) / tau))`` GPU-seconds at ``t``,
# where ``tau = half_life / ln 2``. A half-life <= 0 keeps no history (everything decays at once). The
# scheduler's state and the quota accountant's ledger both use these functions.


def decay_factor(dt: float, half_life_s: float) -> float:
    """Weight left after ``dt`` seconds: 1 for ``dt <= 0``, 0 for a half-life <= 0."""
    if half_life_s <= 0:
        return 0.0
    if dt <= 0:
        return 1.0
    return math.exp(-dt * LN2 / half_life_s)


def integrate(value: float, as_of: float, rate: float, now: float, half_life_s: float) -> float:
    """Decayed GPU-seconds at ``now`` given ``value`` at ``as_of`` and a constant ``rate`` of GPUs since
    (``value`` unchanged when ``now <= as_of``)."""
    if half_life_s <= 0:
        return 0.0
    if now <= as_of:
        return value
    tau = half_life_s / LN2
    x = (now - as_of) / tau
    return value * math.exp(-x) + rate * tau * -math.expm1(-x)


def interval_value(rate: float, start: float, end: float, at: float, half_life_s: float) -> float:
    """Decayed value at ``at`` of ``rate`` GPUs held over ``[start, end]`` (the part after ``at`` is ignored)."""
    end = min(end, at)
    if rate <= 0 or end <= start:
        return 0.0
    return integrate(0.0, start, rate, end, half_life_s) * decay_factor(at - end, half_life_s)


def history_share(decayed_gpu_seconds: float, total_gpus: int, half_life_s: float) -> float:
    """Decayed usage as a fraction of the cluster: equals the steady allocated fraction in the limit."""
    if total_gpus <= 0 or half_life_s <= 0:
        return 0.0
    return decayed_gpu_seconds * LN2 / (half_life_s * total_gpus)


def dominant_share(alloc: Mapping[str, Amount], totals: Mapping[str, int]) -> float:
    """Largest fraction of any resource the allocation holds."""
    best = 0.0
    for res, amount in alloc.items():
        total = totals.get(res, 0)
        if amount > 0 and total > 0:
            best = max(best, float(amount) / total)
    return best


def weighted_share(alloc: Mapping[str, Amount], totals: Mapping[str, int], history: float, weight: float) -> float:
    """What fair-share ordering compares: (current dominant share + history share) / weight."""
    return (dominant_share(alloc, totals) + history) / max(weight, 1e-9)
