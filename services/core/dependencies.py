"""Job dependencies: when a job that waits for others may be queued, must keep waiting, or can never run.

A job names the jobs it waits for and on what outcome (``succeeded``: the other job succeeded;
``failed``: it failed; ``finished``: it ended, whatever the outcome). It is queued once every
condition holds; it can never run once one condition can no longer hold (the other job ended with
another outcome). Dependencies form a directed graph that must stay acyclic: ``find_cycle`` names a
cycle among waiting jobs, which can then never start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

#: the outcomes a job can end with (the states after which it never runs again)
ENDED = frozenset({"succeeded", "failed", "cancelled", "rejected"})


class On(str, Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class After:
    """Wait for ``job_id`` to end with ``on``."""

    job_id: str
    on: On = On.SUCCEEDED


@dataclass(frozen=True, slots=True)
class Verdict:
    """``ready``: every condition holds. Otherwise ``broken`` names a condition that never will (the
    job, and why), or the job keeps waiting for ``waiting`` (of which ``unknown`` are not known yet)."""

    ready: bool
    waiting: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    broken: tuple[str, str] | None = None


def _holds(on: On, state: str) -> bool:
    return on is On.FINISHED or state == on.value


def verdict(after: Sequence[After], state_of: Mapping[str, str]) -> Verdict:
    """Judge a job's conditions against the states of the jobs it waits for (missing: not known)."""
    waiting: list[str] = []
    unknown: list[str] = []
    for cond in after:
        state = state_of.get(cond.job_id)
        if state is None:
            unknown.append(cond.job_id)
            waiting.append(cond.job_id)
        elif state not in ENDED:
            waiting.append(cond.job_id)
        elif not _holds(cond.on, state):
            return Verdict(False, broken=(cond.job_id, f"{cond.job_id} ended {state}, not {cond.on.value}"))
    if waiting:
        return Verdict(False, tuple(waiting), tuple(unknown))
    return Verdict(True)


def find_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of the graph ``job -> jobs it waits for`` (as a list of jobs, first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(edges):
        if state.get(root):
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                state[node] = 1
                path.append(node)
            nexts = edges.get(node, ())
            if i < len(nexts):
                stack.append((node, i + 1))
                nxt = nexts[i]
                seen = state.get(nxt)
                if seen == 1:
                    return [*path[path.index(nxt):], nxt]
                if not seen:
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                path.pop()
    return None
