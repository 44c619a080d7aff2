"""The progress display of the long commands (``muster sim``, ``muster bench``, ``muster chaos``): rich progress
bars with elapsed time and ETA, on stderr, only when stderr is a terminal and ``--no-progress`` was not given,
so what the commands print on stdout stays parseable.

The code that does the work never imports this: it takes a callback ``(description, done, total)`` (see
``ProgressCallback``) and the command hands in ``TerminalProgress.update``. Each new description starts a new
bar; the previous one is left complete.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

ProgressCallback = Callable[[str, float, float | None], None]
"""``(description, done, total)``: the work named ``description`` is ``done`` of ``total`` (None: unknown)."""


def progress_wanted(flag: bool, stream: TextIO | None = None) -> bool:
    """Whether to draw bars: asked for, on a terminal (not a pipe, not a file, not ``TERM=dumb``)."""
    stream = sys.stderr if stream is None else stream
    return flag and stream.isatty() and os.environ.get("TERM", "") != "dumb"


class TerminalProgress:
    """A context manager: rich bars on stderr when ``enabled``, otherwise nothing at all (``log`` then writes
    plain lines to stderr)."""

    def __init__(self, enabled: bool, *, console: Console | None = None) -> None:
        self.enabled = enabled
        self._console = console or Console(stderr=True, highlight=False)
        self._bars: Progress | None = None
        self._task: TaskID | None = None
        self._description = ""

    def __enter__(self) -> TerminalProgress:
        if self.enabled:
            self._bars = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("[progress.percentage]{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(), console=self._console, transient=False,
                refresh_per_second=4, redirect_stdout=False, redirect_stderr=False)
            self._bars.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def update(self, description: str, done: float, total: float | None) -> None:
        """The ``ProgressCallback``: move the bar of ``description`` (a new one when the description changed)."""
        bars = self._bars
        if bars is None:
            return
        if self._task is None or description != self._description:
            if self._task is not None:
                finished = bars.tasks[-1]
                bars.update(self._task, completed=finished.total or finished.completed)
            self._task = bars.add_task(description, total=total)
            self._description = description
        bars.update(self._task, completed=done, total=total)

    def log(self, message: str) -> None:
        """A line of commentary: above the bars while they are drawn, else plainly on stderr."""
        if self._bars is not None:
            self._bars.console.print(Text.from_ansi(message))
        else:
            print(message, file=sys.stderr, flush=True)
